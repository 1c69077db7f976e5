/**
 * AuthZEN throughput and batch latency over HTTP (on demand: `npm run bench:authzen`).
 *
 * Builds the project, starts `node dist/cli.js serve` (GATEHOUSE_WORKERS = cores) on a temp
 * database, and measures with autocannon, in the same run:
 *   - the agents' decision endpoint (transaction tokens bound beforehand, checked to be allowed),
 *   - single AuthZEN evaluations (`POST /access/v1/evaluation`, a person as the subject),
 *   - a 100-item `POST /access/v1/evaluations` batch, at 1 and at 50 connections.
 * Decision and evaluation runs alternate for BENCH_ROUNDS rounds of BENCH_SECONDS; medians are
 * printed as a markdown table. Targets: evaluations ≥ 80% of the decision endpoint's rate at 50
 * connections; the 100-item batch under 10 ms p99.
 */
import { execSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { adminClient, autocannon, startGatehouse, stop, waitReady, type CannonResult } from './harness.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WORKERS = Number(process.env.GATEHOUSE_WORKERS ?? availableParallelism());
const CONNECTIONS = 50;
const BATCH = 100;
const ADMIN = 'bench-admin-token-0123456789abcdef';

const POLICY = `policy "bench" version 1

rule "archived-documents-are-read-only" {
  effect deny
  subjects "user:*"
  relation "write:documents"
  object "document:*"
  when archived == true
}
`;

async function main(): Promise<void> {
  process.stderr.write('building...\n');
  execSync('npm run build --silent', { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  mkdirSync(join(dir, 'policies'));
  writeFileSync(join(dir, 'policies', 'bench.policy'), POLICY);
  const { base, child } = await startGatehouse(dir, { GATEHOUSE_ADMIN_TOKEN: ADMIN, GATEHOUSE_WORKERS: String(WORKERS) });
  try {
    await waitReady(`${base}/healthz`);
    const admin = adminClient(base, ADMIN);

    // The AuthZEN caller: an m2m application with a grant on the API, its client_credentials token.
    const api = `${base}/access/v1`;
    await admin('PUT', '/roles/reader', { permissions: ['read:documents', 'create:refunds'] });
    await admin('POST', '/users', { id: 'reader-1', email: 'reader@example.com', password: 'bench password', name: 'Reader', roles: ['reader'] });
    const pep = (await admin('POST', '/applications', { name: 'pep', type: 'm2m' })) as { client_id: string; client_secret: string };
    await admin('PUT', `/applications/${pep.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] });
    const tokenRes = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${pep.client_id}:${pep.client_secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource: api }),
    });
    const pepToken = ((await tokenRes.json()) as { access_token: string }).access_token;
    const pdpHeaders = { authorization: `Bearer ${pepToken}`, 'content-type': 'application/json' };

    // The agents' decision endpoint, as bench/decision.ts drives it.
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const agent = (await admin('POST', '/agents', {
      name: 'bench', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['reader'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }],
    })) as { agent_id: string };
    const t = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ iss: agent.agent_id, sub: agent.agent_id, aud: base, iat: t, exp: t + 60, jti: randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA' }).sign(privateKey);
    const agentToken = ((await (await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }),
    })).json()) as { access_token: string }).access_token;
    const bindAll = (n: number) =>
      Promise.all(Array.from({ length: n }, async (_, i) => {
        const a = { action: 'create:refunds', resource: `refund:${i}`, context: { amount: 100 + (i % 300) } };
        const r = await fetch(`${base}/apis/regional/v1/ai/auth/transaction-token`, {
          method: 'POST', headers: { authorization: `Bearer ${agentToken}`, 'content-type': 'application/json' }, body: JSON.stringify(a),
        });
        const txn = ((await r.json()) as { data: { transaction_token: string } }).data.transaction_token;
        return JSON.stringify({ agent_id: agent.agent_id, transaction_token: txn, ...a });
      }));

    const evaluation = (i: number) => JSON.stringify({
      subject: { type: 'user', id: 'reader-1' },
      action: { name: 'read' },
      resource: { type: 'document', id: String(i), properties: { archived: i % 2 === 0 } },
      context: { channel: 'api' },
    });
    const batch = JSON.stringify({
      subject: { type: 'user', id: 'reader-1' },
      action: { name: 'read' },
      evaluations: Array.from({ length: BATCH }, (_, i) => ({ resource: { type: 'document', id: String(i), properties: { archived: false } } })),
    });

    // A benchmark of denials or errors would flatter us: check the answers first.
    const probe = await (await fetch(`${base}/access/v1/evaluation`, { method: 'POST', headers: pdpHeaders, body: evaluation(1) })).json();
    if ((probe as { decision?: boolean }).decision !== true) throw new Error(`expected an allow, got ${JSON.stringify(probe)}`);
    const probeBatch = (await (await fetch(`${base}/access/v1/evaluations`, { method: 'POST', headers: pdpHeaders, body: batch })).json()) as { evaluations: { decision: boolean }[] };
    if (probeBatch.evaluations.length !== BATCH || !probeBatch.evaluations.every((e) => e.decision)) throw new Error('the batch is not all allowed');
    const bodies = await bindAll(64);
    const probeDecision = (await (await fetch(`${base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodies[0] })).json()) as { data?: { decision?: string } };
    if (probeDecision.data?.decision !== 'allow') throw new Error(`expected allow, got ${JSON.stringify(probeDecision)}`);

    const run = (connections: number, requests: Record<string, unknown>[]) =>
      autocannon({ url: base, connections, duration: DURATION, requests, headers: { 'content-type': 'application/json' } });
    const median = (runs: CannonResult[]) => [...runs].sort((a, b) => a.requests.average - b.requests.average)[Math.floor(runs.length / 2)]!;
    const decisions: CannonResult[] = [];
    const singles: CannonResult[] = [];
    const batches50: CannonResult[] = [];
    const batches1: CannonResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const bound = round === 0 ? bodies : await bindAll(64); // transaction tokens live 60 s
      decisions.push(await run(CONNECTIONS, bound.map((body) => ({ method: 'POST', path: '/apis/regional/v1/agents/authorize', body }))));
      singles.push(await run(CONNECTIONS, Array.from({ length: 64 }, (_, i) => ({ method: 'POST', path: '/access/v1/evaluation', headers: pdpHeaders, body: evaluation(i) }))));
      batches50.push(await run(CONNECTIONS, [{ method: 'POST', path: '/access/v1/evaluations', headers: pdpHeaders, body: batch }]));
      batches1.push(await run(1, [{ method: 'POST', path: '/access/v1/evaluations', headers: pdpHeaders, body: batch }]));
      process.stderr.write(
        `  round ${round + 1}: decision ${Math.round(decisions.at(-1)!.requests.average)}/s, evaluation ${Math.round(singles.at(-1)!.requests.average)}/s, ` +
          `batch@50 p99 ${batches50.at(-1)!.latency.p99} ms, batch@1 p99 ${batches1.at(-1)!.latency.p99} ms\n`,
      );
    }
    const d = median(decisions);
    const s = median(singles);
    const b50 = median(batches50);
    const b1 = median(batches1);
    const row = (name: string, c: number, r: CannonResult, extra = '') =>
      `| ${name} | ${c} | ${Math.round(r.requests.average)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors} | ${extra} |`;
    process.stdout.write(
      `\nworkers: ${WORKERS}, ${DURATION} s per run, median of ${ROUNDS} rounds, ${availableParallelism()} cores (autocannon shares them)\n\n` +
        '| run | connections | req/s | p50 ms | p99 ms | non-2xx/errors | |\n|---|---|---|---|---|---|---|\n' +
        [
          row('agents decision endpoint', CONNECTIONS, d),
          row('AuthZEN evaluation', CONNECTIONS, s, `${Math.round((s.requests.average / d.requests.average) * 100)}% of the decision endpoint`),
          row(`AuthZEN evaluations, ${BATCH} items`, CONNECTIONS, b50, `${Math.round(b50.requests.average * BATCH)} decisions/s`),
          row(`AuthZEN evaluations, ${BATCH} items`, 1, b1, `${Math.round(b1.requests.average * BATCH)} decisions/s`),
        ].join('\n') +
        '\n',
    );
  } finally {
    stop(child);
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
