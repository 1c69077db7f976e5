/**
 * Scale-out throughput (on demand: `npm run bench:scale`).
 *
 * Token (client_credentials, RS256) and decision (authorize with a bound transaction token,
 * an audit record each) throughput on: one instance on SQLite, one on PostgreSQL, two on
 * PostgreSQL. Every instance is `node dist/cli.js serve` with one process (GATEHOUSE_WORKERS=1);
 * two instances share one issuer, one admin token and one secret, and the load is split
 * between them. Because the instances, PostgreSQL and autocannon share the machine's cores,
 * each run also reports requests per CPU-second of the Gatehouse processes (and of
 * Gatehouse plus PostgreSQL when the bench started the server itself): the per-core figure.
 *
 * PostgreSQL: BENCH_DATABASE_URL (a server URL whose user may create databases), else a
 * throwaway cluster in a temporary directory (initdb/pg_ctl on PATH or Debian's
 * /usr/lib/postgresql/<v>/bin; as root it runs as the `postgres` user, or BENCH_PG_USER). Its durability
 * matches the SQLite default's: WAL flushed in the background (synchronous_commit=off),
 * fsync on.
 */
import { execFileSync, execSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import pg from 'pg';
import { adminClient, autocannon, freePort, startGatehouse, stop, waitReady, type CannonResult } from './harness.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ADMIN = 'bench-admin-token-0123456789abcdef';
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const TICKS = 100; // USER_HZ on Linux

// ---- CPU time of processes (Linux /proc)
const cpuSeconds = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS;
  } catch {
    return 0;
  }
};
const childrenOf = (ppid: number): number[] =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(ppid);
      } catch {
        return false;
      }
    })
    .map(Number);

// ---- PostgreSQL
interface Postgres { url: string; cpu(): number; stop(): void }

async function startPostgres(): Promise<Postgres> {
  const external = process.env.BENCH_DATABASE_URL;
  if (external) return { url: external, cpu: () => NaN, stop: () => undefined };
  const which = (bin: string) => {
    try {
      return execSync(`command -v ${bin}`, { encoding: 'utf8' }).trim();
    } catch {
      const v = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort().at(-1) : undefined;
      if (v) return `/usr/lib/postgresql/${v}/bin/${bin}`;
      throw new Error('PostgreSQL is not installed (set BENCH_DATABASE_URL, or install initdb and pg_ctl)');
    }
  };
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-pg-'));
  const asRoot = userInfo().uid === 0;
  // PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (Debian's package makes it).
  const pgUser = process.env.BENCH_PG_USER ?? 'postgres';
  const idOf = (flag: string) => {
    try {
      return Number(execFileSync('id', [flag, pgUser], { encoding: 'utf8' }));
    } catch {
      throw new Error(`as root the throwaway cluster runs as the user ${pgUser}, which does not exist (set BENCH_PG_USER, BENCH_DATABASE_URL, or run as another user)`);
    }
  };
  const run = (bin: string, args: string[]) =>
    execFileSync(asRoot ? 'runuser' : which(bin), asRoot ? ['-u', pgUser, '--', which(bin), ...args] : args, { stdio: 'ignore', cwd: dir });
  if (asRoot) chownSync(dir, idOf('-u'), idOf('-g'));
  const port = await freePort();
  run('initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
  run('pg_ctl', ['-D', join(dir, 'data'), '-l', join(dir, 'log'), '-w', 'start', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c synchronous_commit=off`]);
  const postmaster = Number(readFileSync(join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    cpu: () => [postmaster, ...childrenOf(postmaster)].reduce((s, p) => s + cpuSeconds(p), 0),
    stop: () => {
      try {
        run('pg_ctl', ['-D', join(dir, 'data'), '-m', 'fast', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

async function freshDatabase(serverUrl: string): Promise<string> {
  const name = `gh_bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

// ---- one setup: instances, an m2m application, an agent with bound transaction tokens
interface Setup { bases: string[]; children: ChildProcess[]; tokenAuth: string; decisions: string[] }

async function prepare(dir: string, instances: number, databaseUrl: string | undefined): Promise<Setup> {
  mkdirSync(join(dir, 'policies'), { recursive: true });
  const port = await freePort();
  const issuer = `http://localhost:${port}`;
  const started = [];
  for (let i = 0; i < instances; i++) {
    // The first instance migrates; the issuer is shared (a load balancer would sit there).
    const s = await startGatehouse(dir, {
      GATEHOUSE_ADMIN_TOKEN: ADMIN,
      GATEHOUSE_SECRET: SECRET,
      GATEHOUSE_WORKERS: '1',
      GATEHOUSE_ISSUER: issuer,
      // (empty: SQLite, whatever the bench's own environment says)
      GATEHOUSE_DATABASE_URL: databaseUrl ?? '',
    });
    await waitReady(`${s.base}/healthz`);
    started.push(s);
  }
  const base = started[0]!.base;
  const admin = adminClient(base, ADMIN);
  const app = (await admin('POST', '/applications', { name: 'service', type: 'm2m', redirect_uris: [] })) as { client_id: string; client_secret: string };
  const tokenAuth = `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}`;

  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  await admin('PUT', '/roles/refunder', { permissions: ['create:refunds'] });
  const agent = (await admin('POST', '/agents', {
    name: 'bench', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['refunder'],
    capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }],
  })) as { agent_id: string };
  const t = Math.floor(Date.now() / 1000);
  const assertion = await new SignJWT({ iss: agent.agent_id, sub: agent.agent_id, aud: issuer, iat: t, exp: t + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(privateKey);
  const tokenRes = await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }),
  });
  const accessToken = ((await tokenRes.json()) as { access_token: string }).access_token;
  const decisions = await Promise.all(
    Array.from({ length: 64 }, async (_, i) => {
      const a = { action: 'create:refunds', resource: `refund:${i}`, context: { amount: 100 + i } };
      const r = await fetch(`${base}/apis/regional/v1/ai/auth/transaction-token`, {
        method: 'POST', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' }, body: JSON.stringify(a),
      });
      const token = ((await r.json()) as { data: { transaction_token: string } }).data.transaction_token;
      return JSON.stringify({ agent_id: agent.agent_id, transaction_token: token, ...a });
    }),
  );
  const probe = await fetch(`${started.at(-1)!.base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: decisions[0] });
  const decided = (await probe.json()) as { data?: { decision?: string } };
  if (decided.data?.decision !== 'allow') throw new Error(`expected allow on every instance, got ${JSON.stringify(decided)}`);
  return { bases: started.map((s) => s.base), children: started.map((s) => s.child), tokenAuth, decisions };
}

interface Measured { rps: number; p99: number; errors: number; gatehouseCpu: number; postgresCpu: number }

/** The load split over the instances (connections shared out), run together; CPU time measured around it. */
async function measure(setup: Setup, postgres: Postgres | undefined, request: (base: string) => Record<string, unknown>): Promise<Measured> {
  const pids = setup.children.map((c) => c.pid!);
  const cpu0 = pids.reduce((s, p) => s + cpuSeconds(p), 0);
  const pg0 = postgres?.cpu() ?? NaN;
  const per = Math.max(1, Math.round(CONNECTIONS / setup.bases.length));
  const results: CannonResult[] = await Promise.all(
    setup.bases.map((base) => autocannon({ url: base, connections: per, duration: DURATION, headers: { 'content-type': 'application/json' }, ...request(base) })),
  );
  const cpu = pids.reduce((s, p) => s + cpuSeconds(p), 0) - cpu0;
  return {
    rps: results.reduce((s, r) => s + r.requests.average, 0),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    errors: results.reduce((s, r) => s + r.non2xx + r.errors, 0),
    gatehouseCpu: cpu,
    postgresCpu: (postgres?.cpu() ?? NaN) - pg0,
  };
}

async function main(): Promise<void> {
  process.stderr.write('building...\n');
  execSync('npm run build --silent', { stdio: 'inherit' });
  const postgres = await startPostgres();
  const scenarios = [
    { name: 'SQLite, 1 instance', instances: 1, pg: false },
    { name: 'PostgreSQL, 1 instance', instances: 1, pg: true },
    { name: 'PostgreSQL, 2 instances', instances: 2, pg: true },
  ];
  const rows: { name: string; token: Measured; decision: Measured }[] = [];
  try {
    for (const s of scenarios) {
      const dir = mkdtempSync(join(tmpdir(), 'gatehouse-scale-'));
      process.stderr.write(`${s.name}...\n`);
      const setup = await prepare(dir, s.instances, s.pg ? await freshDatabase(postgres.url) : undefined);
      try {
        // warm-up, then the measured runs
        const tokenRequest = () => ({
          requests: [{ method: 'POST', path: '/oauth/token', headers: { authorization: setup.tokenAuth, 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials' }],
        });
        const decisionRequest = () => ({ requests: setup.decisions.map((body) => ({ method: 'POST', path: '/apis/regional/v1/agents/authorize', body })) });
        await measure(setup, undefined, () => ({ ...tokenRequest(), duration: 1 }));
        await measure(setup, undefined, () => ({ ...decisionRequest(), duration: 1 }));
        const token = await measure(setup, s.pg ? postgres : undefined, tokenRequest);
        const decision = await measure(setup, s.pg ? postgres : undefined, decisionRequest);
        rows.push({ name: s.name, token, decision });
        process.stderr.write(`  token ${Math.round(token.rps)}/s, decision ${Math.round(decision.rps)}/s\n`);
      } finally {
        for (const c of setup.children) stop(c);
        await new Promise((r) => setTimeout(r, 500));
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    postgres.stop();
  }

  const f = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : 'n/a');
  const perCpu = (m: Measured) => (m.rps * DURATION) / m.gatehouseCpu;
  const perAllCpu = (m: Measured) => (m.rps * DURATION) / (m.gatehouseCpu + m.postgresCpu);
  const table = rows
    .map((r) =>
      ['token', 'decision']
        .map((k) => {
          const m = r[k as 'token' | 'decision'];
          return `| ${r.name} | ${k} | ${f(m.rps)} | ${m.p99} ms | ${m.errors} | ${f(perCpu(m))} | ${f(perAllCpu(m))} |`;
        })
        .join('\n'),
    )
    .join('\n');
  const [sqlite, pg1, pg2] = rows;
  const ratio = (a: number, b: number) => `${Math.round((a / b) * 100)}%`;
  process.stdout.write(
    `\n${DURATION} s per run, ${CONNECTIONS} connections split over the instances, ${availableParallelism()} cores shared by everything (node ${process.version})\n\n` +
      `| setup | endpoint | req/s | p99 | non-2xx/errors | req per Gatehouse CPU-second | req per CPU-second with PostgreSQL |\n|---|---|---|---|---|---|---|\n${table}\n\n` +
      (sqlite && pg1 && pg2
        ? `PostgreSQL / SQLite, one instance: token ${ratio(pg1.token.rps, sqlite.token.rps)}, decision ${ratio(pg1.decision.rps, sqlite.decision.rps)} (per Gatehouse CPU-second: ${ratio(perCpu(pg1.token), perCpu(sqlite.token))}, ${ratio(perCpu(pg1.decision), perCpu(sqlite.decision))})\n` +
          `two / one PostgreSQL instances: token ${ratio(pg2.token.rps, pg1.token.rps)}, decision ${ratio(pg2.decision.rps, pg1.decision.rps)}\n`
        : ''),
  );
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
