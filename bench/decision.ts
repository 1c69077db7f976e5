/**
 * Decision throughput over HTTP (on demand: `npm run bench:decision`).
 *
 * Builds the project, starts `node dist/cli.js serve` with GATEHOUSE_WORKERS = cores on a temp
 * database, registers an autonomous agent, and measures with autocannon at 10 and 50 connections:
 *   - authorize alone (transaction tokens bound beforehand; they live 60 s, so each run rebinds),
 *   - the transaction-token + authorize pair (the second request uses the first one's token),
 *   - a bare Express handler returning the same JSON, same worker count (the framework's ceiling).
 * Runs alternate (bare, authorize, pair) for BENCH_ROUNDS rounds of BENCH_SECONDS; medians are printed.
 * Then limits over time: the same decisions at 50 connections by an agent whose capability also
 * has a budget (`amount sum`) and a rate (`count`), against the agent without them, in the
 * same run and alternating; every decision has its own transaction token, so each allow
 * consumes (the maximums are high enough that all are allowed).
 * Prints the table (markdown) for docs/agents.md and docs/budgets.md.
 *
 * `npm run bench:decision -- usage` (or BENCH_MODE=usage) runs only the limits-over-time
 * comparison, and says whether it meets its targets: at least 60% of the throughput without
 * limits over time, p99 under 25 ms.
 */
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { adminClient, autocannon, freePort, start, startGatehouse, stop, waitReady, type CannonResult } from './harness.js';

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (req: CannonRequest, context: Record<string, unknown>) => CannonRequest;
  onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
}

const DURATION = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WORKERS = Number(process.env.GATEHOUSE_WORKERS ?? availableParallelism());
const ADMIN = 'bench-admin-token-0123456789abcdef';
/** `all`, or `usage`: only decisions with a budget and a rate against the same without. */
const MODE = process.argv[2] ?? process.env.BENCH_MODE ?? 'all';
if (MODE !== 'all' && MODE !== 'usage') throw new Error(`unknown mode ${MODE} (all or usage)`);
/** The targets of limits over time against none. */
const USAGE_RATIO_TARGET = 0.6;
const USAGE_P99_TARGET_MS = 25;



const BARE = `
const cluster = require('node:cluster');
const express = require('express');
const workers = Number(process.env.WORKERS);
if (cluster.isPrimary && workers > 1) { for (let i = 0; i < workers; i++) cluster.fork(); }
else {
  const app = express();
  app.use(express.json());
  app.get('/healthz', (_q, r) => r.json({ status: 'ok' }));
  app.post('/apis/regional/v1/agents/authorize', (_q, r) => r.json({ data: { decision: 'allow', reason: 'allowed', policy_version: 'v' } }));
  app.listen(Number(process.env.PORT));
}`;

async function main(): Promise<void> {
  process.stderr.write('building...\n');
  execSync('npm run build --silent', { stdio: 'inherit' });

  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-'));
  mkdirSync(join(dir, 'policies'));
  const { base, child: server } = await startGatehouse(dir, { GATEHOUSE_ADMIN_TOKEN: ADMIN, GATEHOUSE_WORKERS: String(WORKERS) });
  const barePort = await freePort();
  writeFileSync(join(dir, 'bare.cjs'), BARE);
  const bare = start([join(dir, 'bare.cjs')], { PORT: String(barePort), WORKERS: String(WORKERS), NODE_PATH: join(process.cwd(), 'node_modules') });

  try {
    await Promise.all([waitReady(`${base}/healthz`), waitReady(`http://localhost:${barePort}/healthz`)]);
    const admin = adminClient(base, ADMIN);

    // The agent, as a real one: its own Ed25519 key, a signed assertion, a token.
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    await admin('PUT', '/roles/refunder', { permissions: ['create:refunds'] });
    const agent = (await admin('POST', '/agents', {
      name: 'bench',
      mode: 'autonomous',
      public_jwk: await exportJWK(publicKey),
      roles: ['refunder'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 }, currency: { in: ['USD', 'EUR'] } } }],
    })) as { agent_id: string };
    const tokenFor = async (agentId: string): Promise<string> => {
      const t = Math.floor(Date.now() / 1000);
      const clientAssertion = await new SignJWT({ iss: agentId, sub: agentId, aud: base, iat: t, exp: t + 60, jti: randomUUID() })
        .setProtectedHeader({ alg: 'EdDSA' })
        .sign(privateKey);
      const tokenRes = await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          client_assertion: clientAssertion,
        }),
      });
      return ((await tokenRes.json()) as { access_token: string }).access_token;
    };
    const accessToken = await tokenFor(agent.agent_id);
    const bearer = { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' };

    const action = (i: number) => ({ action: 'create:refunds', resource: `refund:${i}`, context: { amount: 100 + (i % 300), currency: 'USD' } });
    const bindAll = async (n: number) =>
      Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const a = action(i);
          const r = await fetch(`${base}/apis/regional/v1/ai/auth/transaction-token`, { method: 'POST', headers: bearer, body: JSON.stringify(a) });
          const token = ((await r.json()) as { data: { transaction_token: string } }).data.transaction_token;
          return JSON.stringify({ agent_id: agent.agent_id, transaction_token: token, ...a });
        }),
      );

    const run = async (url: string, connections: number, requests: CannonRequest[]) =>
      autocannon({ url, connections, duration: DURATION, requests, headers: { 'content-type': 'application/json' } });

    const rows: string[] = [];
    const row = (name: string, c: number, r: CannonResult, perOp = 1) => {
      const line = `| ${name} | ${c} | ${Math.round(r.requests.average / perOp)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors} |`;
      rows.push(line);
      process.stderr.write(`${line}\n`);
    };

    // The machine is shared: bare and authorize runs alternate, and the median round is reported.
    const median = (runs: CannonResult[]) => [...runs].sort((a, b) => a.requests.average - b.requests.average)[Math.floor(runs.length / 2)]!;
    for (const c of MODE === 'all' ? [10, 50] : []) {
      const bareRuns: CannonResult[] = [];
      const aloneRuns: CannonResult[] = [];
      const pairRuns: CannonResult[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        bareRuns.push(
          await run(`http://localhost:${barePort}`, c, [
            { method: 'POST', path: '/apis/regional/v1/agents/authorize', body: JSON.stringify({ agent_id: 'x' }) },
          ]),
        );
        const bodies = await bindAll(64);
        // A benchmark of denials would flatter us: the bound requests must be allowed.
        const probe = await fetch(`${base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodies[0] });
        const probed = (await probe.json()) as { data?: { decision?: string; reason?: string } };
        if (probed.data?.decision !== 'allow') throw new Error(`expected allow, got ${JSON.stringify(probed)}`);
        aloneRuns.push(await run(base, c, bodies.map((body) => ({ method: 'POST', path: '/apis/regional/v1/agents/authorize', body }))));
        let n = 0;
        pairRuns.push(
          await run(base, c, [
            {
              method: 'POST',
              path: '/apis/regional/v1/ai/auth/transaction-token',
              headers: bearer,
              setupRequest: (req, context) => {
                context.action = action(n++);
                return { ...req, body: JSON.stringify(context.action) };
              },
              onResponse: (_status, body, context) => {
                context.txn = (JSON.parse(body) as { data?: { transaction_token?: string } }).data?.transaction_token ?? 'none';
              },
            },
            {
              method: 'POST',
              path: '/apis/regional/v1/agents/authorize',
              setupRequest: (req, context) => ({
                ...req,
                body: JSON.stringify({ agent_id: agent.agent_id, transaction_token: context.txn, ...(context.action as object) }),
              }),
            },
          ]),
        );
        process.stderr.write(`  c=${c} round ${round + 1}: bare ${Math.round(bareRuns.at(-1)!.requests.average)}, authorize ${Math.round(aloneRuns.at(-1)!.requests.average)}, pairs ${Math.round(pairRuns.at(-1)!.requests.average / 2)}\n`);
      }
      const bareRes = median(bareRuns);
      const alone = median(aloneRuns);
      row('bare Express (same JSON)', c, bareRes);
      row('authorize alone', c, alone);
      rows.push(`| authorize / bare | ${c} | ${Math.round((alone.requests.average / bareRes.requests.average) * 100)}% | | | |`);
      row('transaction-token + authorize (pairs/s)', c, median(pairRuns), 2);
    }

    // ---- limits over time: a budget and a rate, against none ----
    const budgeted = (await admin('POST', '/agents', {
      name: 'bench-budgeted',
      mode: 'autonomous',
      public_jwk: await exportJWK(publicKey),
      roles: ['refunder'],
      capabilities: [{
        name: 'create:refunds',
        limits: { amount: { max: 500, sum: { max: 1e12, per: '24h' } }, currency: { in: ['USD', 'EUR'] }, count: [{ max: 1e9, per: '1h' }] },
      }],
    })) as { agent_id: string };
    const budgetedToken = await tokenFor(budgeted.agent_id);
    const plainBearer = bearer;
    const budgetBearer = { authorization: `Bearer ${budgetedToken}`, 'content-type': 'application/json' };
    /** `n` transaction tokens, bound 50 at a time: each decision of a run gets its own. */
    const pool = async (agentId: string, headers: Record<string, string>, n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i += 50) {
        out.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, async (_, j) => {
          const a = action(i + j);
          const r = await fetch(`${base}/apis/regional/v1/ai/auth/transaction-token`, { method: 'POST', headers, body: JSON.stringify(a) });
          const token = ((await r.json()) as { data: { transaction_token: string } }).data.transaction_token;
          return JSON.stringify({ agent_id: agentId, transaction_token: token, ...a });
        }))));
      }
      return out;
    };
    const fresh = (bodies: string[]): CannonRequest[] => {
      let next = 0;
      return [{ method: 'POST', path: '/apis/regional/v1/agents/authorize', setupRequest: (req) => ({ ...req, body: bodies[next++ % bodies.length] }) }];
    };
    const pairs = (agentId: string, headers: Record<string, string>): CannonRequest[] => {
      let n = 0;
      return [
        {
          method: 'POST', path: '/apis/regional/v1/ai/auth/transaction-token', headers,
          setupRequest: (req, context) => { context.action = action(n++); return { ...req, body: JSON.stringify(context.action) }; },
          onResponse: (_status, body, context) => { context.txn = (JSON.parse(body) as { data?: { transaction_token?: string } }).data?.transaction_token ?? 'none'; },
        },
        {
          method: 'POST', path: '/apis/regional/v1/agents/authorize',
          setupRequest: (req, context) => ({ ...req, body: JSON.stringify({ agent_id: agentId, transaction_token: context.txn, ...(context.action as object) }) }),
        },
      ];
    };
    const c = 50;
    const plainRuns: CannonResult[] = [];
    const budgetRuns: CannonResult[] = [];
    const plainPairRuns: CannonResult[] = [];
    const budgetPairRuns: CannonResult[] = [];
    let poolSize = 4000;
    for (let round = 0; round < ROUNDS; round++) {
      const plainPool = await pool(agent.agent_id, plainBearer, poolSize);
      const budgetPool = await pool(budgeted.agent_id, budgetBearer, poolSize);
      const probe = await fetch(`${base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: budgetPool.pop() });
      const probed = (await probe.json()) as { data?: { decision?: string } };
      if (probed.data?.decision !== 'allow') throw new Error(`expected allow, got ${JSON.stringify(probed)}`);
      plainRuns.push(await run(base, c, fresh(plainPool)));
      budgetRuns.push(await run(base, c, fresh(budgetPool)));
      plainPairRuns.push(await run(base, c, pairs(agent.agent_id, plainBearer)));
      budgetPairRuns.push(await run(base, c, pairs(budgeted.agent_id, budgetBearer)));
      // Enough tokens that no decision of the next round repeats one (a repeat consumes nothing).
      poolSize = Math.min(60_000, Math.ceil(Math.max(plainRuns.at(-1)!.requests.total, budgetRuns.at(-1)!.requests.total) * 1.2));
      process.stderr.write(`  limits over time, round ${round + 1}: none ${Math.round(plainRuns.at(-1)!.requests.average)}, budget+rate ${Math.round(budgetRuns.at(-1)!.requests.average)}; pairs none ${Math.round(plainPairRuns.at(-1)!.requests.average / 2)}, budget+rate ${Math.round(budgetPairRuns.at(-1)!.requests.average / 2)}\n`);
    }
    const plainMed = median(plainRuns);
    const budgetMed = median(budgetRuns);
    row('authorize, no budget (fresh tokens)', c, plainMed);
    row('authorize, budget + rate (fresh tokens)', c, budgetMed);
    rows.push(`| budget + rate / no budget | ${c} | ${Math.round((budgetMed.requests.average / plainMed.requests.average) * 100)}% | | | |`);
    const plainPairMed = median(plainPairRuns);
    const budgetPairMed = median(budgetPairRuns);
    row('token + authorize, no budget (pairs/s)', c, plainPairMed, 2);
    row('token + authorize, budget + rate (pairs/s)', c, budgetPairMed, 2);
    rows.push(`| budget + rate / no budget (pairs) | ${c} | ${Math.round((budgetPairMed.requests.average / plainPairMed.requests.average) * 100)}% | | | |`);
    // On a shared machine the load moves between rounds: each round's two runs, back to back,
    // are compared with each other, and the median of those ratios is the one judged.
    const ratios = budgetRuns.map((b, i) => b.requests.average / plainRuns[i]!.requests.average).sort((a, b) => a - b);
    const ratio = ratios[Math.floor(ratios.length / 2)]!;
    const p99s = budgetRuns.map((b) => b.latency.p99).sort((a, b) => a - b);
    const p99 = p99s[Math.floor(p99s.length / 2)]!;
    rows.push(`| budget + rate / no budget, per round | ${c} | ${ratios.map((r) => `${Math.round(r * 100)}%`).join(', ')} | | | |`);
    const targets =
      `limits over time: ${Math.round(ratio * 100)}% of the throughput without, median of the rounds (target ≥ ${USAGE_RATIO_TARGET * 100}%: ${ratio >= USAGE_RATIO_TARGET ? 'met' : 'NOT met'}), ` +
      `p99 ${p99} ms, median of the rounds (target < ${USAGE_P99_TARGET_MS} ms: ${p99 < USAGE_P99_TARGET_MS ? 'met' : 'NOT met'})`;

    process.stdout.write(
      `\nworkers: ${WORKERS}, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, ${availableParallelism()} cores (autocannon shares them)\n\n` +
        `| run | connections | req/s | p50 ms | p99 ms | non-2xx/errors |\n|---|---|---|---|---|---|\n${rows.join('\n')}\n\n${targets}\n`,
    );
  } finally {
    for (const child of [server, bare]) stop(child);
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
