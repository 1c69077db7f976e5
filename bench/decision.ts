/**
 * Decision throughput over HTTP (on demand: `npm run bench:decision`).
 *
 * Builds the project, starts `node dist/cli.js serve` with GATEHOUSE_WORKERS = cores on a temp
 * database, registers an autonomous agent, and measures with autocannon at 10 and 50 connections:
 *   - authorize alone (transaction tokens bound beforehand; they live 60 s, so each run rebinds),
 *   - the transaction-token + authorize pair (the second request uses the first one's token),
 *   - a bare `node:http` handler (the runtime's ceiling) and a bare Express handler (the
 *     framework's), each a cluster of the same worker count that reads the body, JSON.parses it
 *     and answers the same JSON as a decision does,
 *   - authorize with every decision a fresh transaction token (bound beforehand, one per
 *     request, so every allow consumes its token and nothing is served from a repeat); autocannon
 *     picks each body as the request goes out, which costs it more than a fixed list, so the bare
 *     node:http handler is also fed that way and this run is compared with that one.
 * Runs alternate (node:http, Express, authorize, fresh, pair) for BENCH_ROUNDS rounds of
 * BENCH_SECONDS; medians are printed, and the decision endpoint's ratio to bare node:http is
 * the median of each round's ratio (the two runs of a round back to back).
 * Then limits over time: the same decisions at 50 connections by an agent whose capability also
 * has a budget (`amount sum`) and a rate (`count`), against the agent without them, in the
 * same run and alternating; every decision has its own transaction token, so each allow
 * consumes (the maximums are high enough that all are allowed).
 * Prints the table (markdown) for docs/agents.md and docs/budgets.md.
 *
 * `npm run bench:decision -- http` (or BENCH_MODE=http) runs only the comparison with the bare
 * handlers at 10 and 50 connections, and says whether the decision endpoint meets its target:
 * at least 70% of bare node:http, with tokens bound beforehand and with a fresh token each.
 *
 * `npm run bench:decision -- usage` (or BENCH_MODE=usage) runs only the limits-over-time
 * comparison, and says whether it meets its targets: at least 60% of the throughput without
 * limits over time, p99 under 25 ms.
 *
 * `npm run bench:decision -- chain` (or BENCH_MODE=chain) runs only the delegation chains: a
 * person signs in through the pages (openid-client), lets an agent act for them, and the agent
 * hands work to a sub-agent and it to a third. In the same run, alternating: decisions of the
 * third agent (a 3-deep chain, every agent decided) against decisions of the first (one hop),
 * each with its own transaction token; then token exchanges (person → first agent) against an
 * autonomous agent's client_credentials sign-ins, each with its own fresh assertion. Targets: a
 * 3-deep decision and a token exchange each at least 80% of the rate of the other.
 */
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
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
/** `all`; `http`: only the bare handlers against the decision endpoint; `usage`: only decisions with a budget and a rate against the same without; `chain`. */
const MODE = process.argv[2] ?? process.env.BENCH_MODE ?? 'all';
if (MODE !== 'all' && MODE !== 'http' && MODE !== 'usage' && MODE !== 'chain') throw new Error(`unknown mode ${MODE} (all, http, usage or chain)`);
/** The decision endpoint against bare node:http, same run. */
const HTTP_RATIO_TARGET = 0.7;
/** The delegation chain's targets: a 3-deep decision against one hop, a token exchange against a sign-in. */
const CHAIN_RATIO_TARGET = 0.8;
/** The targets of limits over time against none. */
const USAGE_RATIO_TARGET = 0.6;
const USAGE_P99_TARGET_MS = 25;



/** The same JSON, the same body work, on bare node:http: what the runtime itself costs. */
const BARE_HTTP = `
const cluster = require('node:cluster');
const http = require('node:http');
const workers = Number(process.env.WORKERS);
if (cluster.isPrimary && workers > 1) { for (let i = 0; i < workers; i++) cluster.fork(); }
else {
  const answer = (res, status, body) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') return answer(res, 200, { status: 'ok' });
    if (req.method !== 'POST' || req.url !== '/apis/regional/v1/agents/authorize') return answer(res, 404, { error: 'not_found' });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body;
      try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch { return answer(res, 400, { error: 'invalid_request' }); }
      if (typeof body !== 'object' || body === null || typeof body.agent_id !== 'string') return answer(res, 400, { error: 'invalid_request' });
      answer(res, 200, { data: { decision: 'allow', reason: 'allowed', policy_version: 'v' } });
    });
  }).listen(Number(process.env.PORT));
}`;

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
  const bareHttpPort = await freePort();
  writeFileSync(join(dir, 'bare-http.cjs'), BARE_HTTP);
  const bareHttp = start([join(dir, 'bare-http.cjs')], { PORT: String(bareHttpPort), WORKERS: String(WORKERS) });

  try {
    await Promise.all([waitReady(`${base}/healthz`), waitReady(`http://localhost:${barePort}/healthz`), waitReady(`http://localhost:${bareHttpPort}/healthz`)]);
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
    if (MODE === 'chain') {
      await chainBench(base, admin, privateKey, await exportJWK(publicKey));
      return;
    }
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
    // The machine is shared: bare and authorize runs alternate, and the median round is reported.
    const median = (runs: CannonResult[]) => [...runs].sort((a, b) => a.requests.average - b.requests.average)[Math.floor(runs.length / 2)]!;
    const ratioRows: string[] = [];
    const verdicts: string[] = [];
    let freshSize = 4000;
    for (const c of MODE === 'all' || MODE === 'http' ? [10, 50] : []) {
      const httpRuns: CannonResult[] = [];
      /** bare node:http fed as the fresh-token runs are: a body chosen per request (autocannon's own cost grows alike) */
      const httpFreshRuns: CannonResult[] = [];
      const bareRuns: CannonResult[] = [];
      const aloneRuns: CannonResult[] = [];
      const freshRuns: CannonResult[] = [];
      const pairRuns: CannonResult[] = [];
      const bareBody = JSON.stringify({ agent_id: agent.agent_id, transaction_token: 'x'.repeat(600), ...action(0) });
      for (let round = 0; round < ROUNDS; round++) {
        httpRuns.push(await run(`http://localhost:${bareHttpPort}`, c, [{ method: 'POST', path: '/apis/regional/v1/agents/authorize', body: bareBody }]));
        bareRuns.push(await run(`http://localhost:${barePort}`, c, [{ method: 'POST', path: '/apis/regional/v1/agents/authorize', body: bareBody }]));
        const bodies = await bindAll(64);
        // A benchmark of denials would flatter us: the bound requests must be allowed.
        const probe = await fetch(`${base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodies[0] });
        const probed = (await probe.json()) as { data?: { decision?: string; reason?: string } };
        if (probed.data?.decision !== 'allow') throw new Error(`expected allow, got ${JSON.stringify(probed)}`);
        aloneRuns.push(await run(base, c, bodies.map((body) => ({ method: 'POST', path: '/apis/regional/v1/agents/authorize', body }))));
        const freshPool = await pool(agent.agent_id, bearer, freshSize);
        httpFreshRuns.push(await run(`http://localhost:${bareHttpPort}`, c, fresh(freshPool)));
        freshRuns.push(await run(base, c, fresh(freshPool)));
        // Enough tokens that no decision of the next round repeats one (a repeat consumes nothing).
        freshSize = Math.min(60_000, Math.ceil(Math.max(freshSize, freshRuns.at(-1)!.requests.total) * 1.2));
        if (MODE === 'all') {
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
        }
        const last = (runs: CannonResult[], perOp = 1) => (runs.length ? Math.round(runs.at(-1)!.requests.average / perOp) : '-');
        process.stderr.write(`  c=${c} round ${round + 1}: node:http ${last(httpRuns)} (fed per request ${last(httpFreshRuns)}), express ${last(bareRuns)}, authorize ${last(aloneRuns)}, fresh ${last(freshRuns)}, pairs ${last(pairRuns, 2)}\n`);
      }
      row('bare node:http (same JSON)', c, median(httpRuns));
      row('bare node:http, a body chosen per request', c, median(httpFreshRuns));
      row('bare Express (same JSON)', c, median(bareRuns));
      row('authorize alone', c, median(aloneRuns));
      row('authorize, every decision a fresh token', c, median(freshRuns));
      if (pairRuns.length) row('transaction-token + authorize (pairs/s)', c, median(pairRuns), 2);
      const ratio = (xs: CannonResult[], ys: CannonResult[]) => {
        const per = xs.map((x, k) => x.requests.average / ys[k]!.requests.average).sort((a, b) => a - b);
        return { per, mid: per[Math.floor(per.length / 2)]! };
      };
      for (const [name, xs, ys] of [
        ['authorize / node:http', aloneRuns, httpRuns],
        ['fresh token / node:http', freshRuns, httpFreshRuns],
        ['authorize / Express', aloneRuns, bareRuns],
      ] as const) {
        const r = ratio(xs, ys);
        ratioRows.push(`| ${name}, per round (median) | ${c} | ${r.per.map((x) => `${Math.round(x * 100)}%`).join(', ')} (${Math.round(r.mid * 100)}%) | | | |`);
        if (name.endsWith('node:http')) verdicts.push(`${name} at ${c} connections: ${Math.round(r.mid * 100)}% (target ≥ ${HTTP_RATIO_TARGET * 100}%: ${r.mid >= HTTP_RATIO_TARGET ? 'met' : 'NOT met'})`);
      }
    }
    rows.push(...ratioRows);
    if (MODE === 'http') {
      process.stdout.write(
        `\nworkers: ${WORKERS}, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, ${availableParallelism()} cores (autocannon shares them)\n\n` +
          `| run | connections | req/s | p50 ms | p99 ms | non-2xx/errors |\n|---|---|---|---|---|---|\n${rows.join('\n')}\n\n${verdicts.join('\n')}\n`,
      );
      return;
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
        `| run | connections | req/s | p50 ms | p99 ms | non-2xx/errors |\n|---|---|---|---|---|---|\n${rows.join('\n')}\n\n${[...verdicts, targets].join('\n')}\n`,
    );
  } finally {
    for (const child of [server, bare, bareHttp]) stop(child);
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The delegation chain comparisons (`chain` mode): see the header. */
async function chainBench(base: string, admin: ReturnType<typeof adminClient>, privateKey: CryptoKey, publicJwk: JWK): Promise<void> {
  const { Browser, followSignIn } = await import('../test/oauth/helpers.js');
  const client = await import('openid-client');
  await admin('PUT', '/roles/docs', { permissions: ['read:docs'] });
  const password = 'correct horse battery staple';
  const user = (await admin('POST', '/users', { email: 'bench@example.com', password, name: 'Bench', roles: ['docs'] })) as { id: string };
  const redirectUri = 'http://localhost:9/callback';
  const app = (await admin('POST', '/applications', { name: 'bench-web', type: 'web', redirect_uris: [redirectUri] })) as { client_id: string; client_secret: string };
  await admin('PUT', `/applications/${encodeURIComponent(app.client_id)}/assignments/${user.id}`);
  const caps = [{ name: 'read:docs' }];
  const register = async (name: string, mode: string) => ((await admin('POST', '/agents', { name, mode, public_jwk: publicJwk, roles: ['docs'], capabilities: caps })) as { agent_id: string }).agent_id;
  const [first, second, third, robot] = [await register('chain-1', 'delegated'), await register('chain-2', 'delegated'), await register('chain-3', 'delegated'), await register('signs-in', 'autonomous')];
  await admin('PATCH', `/agents/${encodeURIComponent(first)}`, { sub_agents: [second] });
  await admin('PATCH', `/agents/${encodeURIComponent(second)}`, { sub_agents: [third] });
  await admin('PUT', `/users/${user.id}/delegations/${encodeURIComponent(first)}`, { capabilities: ['read:docs'] });

  // The person signs in through the pages; openid-client redeems the code.
  const config = await client.discovery(new URL(base), app.client_id, app.client_secret, client.ClientSecretBasic(app.client_secret), { execute: [client.allowInsecureRequests] });
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(config, { redirect_uri: redirectUri, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state });
  const callback = await followSignIn(new Browser(base), url.toString(), { email: 'bench@example.com', password });
  const personToken = (await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state })).access_token;

  const assertionOf = async (agentId: string) => {
    const t = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: agentId, sub: agentId, aud: base, iat: t, exp: t + 300, jti: randomUUID() }).setProtectedHeader({ alg: 'EdDSA' }).sign(privateKey);
  };
  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const exchangeBody = async (agentId: string, subjectToken: string) => form({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await assertionOf(agentId),
    subject_token: subjectToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  });
  const signInBody = async (agentId: string) => form({
    grant_type: 'client_credentials',
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await assertionOf(agentId),
  });
  const tokenEndpoint = `${base}/apis/regional/v1/ai/auth/token`;
  const exchangeOnce = async (agentId: string, subjectToken: string) => {
    const r = await fetch(tokenEndpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: await exchangeBody(agentId, subjectToken) });
    const body = (await r.json()) as { access_token?: string };
    if (!body.access_token) throw new Error(`exchange failed: ${JSON.stringify(body)}`);
    return body.access_token;
  };
  const oneHop = await exchangeOnce(first, personToken);
  const threeDeep = await exchangeOnce(third, await exchangeOnce(second, oneHop));

  const pool = async (agentId: string, token: string, n: number) => {
    const out: string[] = [];
    for (let i = 0; i < n; i += 50) {
      out.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, async (_, j) => {
        const a = { action: 'read:docs', resource: `doc:${i + j}`, context: {} };
        const r = await fetch(`${base}/apis/regional/v1/ai/auth/transaction-token`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(a) });
        const txn = ((await r.json()) as { data: { transaction_token: string } }).data.transaction_token;
        return JSON.stringify({ agent_id: agentId, transaction_token: txn, ...a });
      }))));
    }
    return out;
  };
  const cycle = (path: string, bodies: string[], contentType: string) => {
    let next = 0;
    return [{ method: 'POST', path, headers: { 'content-type': contentType }, setupRequest: (req: CannonRequest) => ({ ...req, body: bodies[next++ % bodies.length] }) }];
  };
  const c = 50;
  const run = (requests: CannonRequest[]) => autocannon({ url: base, connections: c, duration: DURATION, requests });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const rows: string[] = [];
  const verdicts: string[] = [];
  const compare = (name: string, baseName: string, pairs: [CannonResult, CannonResult][]) => {
    const ratio = median(pairs.map(([x, b]) => x.requests.average / b.requests.average));
    const mid = (i: 0 | 1) => median(pairs.map((p) => p[i].requests.average));
    const p99 = (i: 0 | 1) => median(pairs.map((p) => p[i].latency.p99));
    const errs = (i: 0 | 1) => pairs.reduce((n, p) => n + p[i].non2xx + p[i].errors, 0);
    rows.push(`| ${baseName} | ${c} | ${Math.round(mid(1))} | ${p99(1)} | ${errs(1)} |`, `| ${name} | ${c} | ${Math.round(mid(0))} | ${p99(0)} | ${errs(0)} |`);
    verdicts.push(`${name}: ${Math.round(ratio * 100)}% of ${baseName}, median of the rounds' ratios (target ≥ ${CHAIN_RATIO_TARGET * 100}%: ${ratio >= CHAIN_RATIO_TARGET ? 'met' : 'NOT met'})`);
  };

  // Decisions: each with its own transaction token (bound beforehand), so each is a full decision.
  const decisionPairs: [CannonResult, CannonResult][] = [];
  let size = 4000;
  for (let round = 0; round < ROUNDS; round++) {
    const one = await pool(first, oneHop, size);
    const deep = await pool(third, threeDeep, size);
    const probe = (await (await fetch(`${base}/apis/regional/v1/agents/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep[0] })).json()) as { data?: { decision?: string } };
    if (probe.data?.decision !== 'allow') throw new Error(`expected allow, got ${JSON.stringify(probe)}`);
    const b = await run(cycle('/apis/regional/v1/agents/authorize', one, 'application/json'));
    const x = await run(cycle('/apis/regional/v1/agents/authorize', deep, 'application/json'));
    decisionPairs.push([x, b]);
    size = Math.min(60_000, Math.ceil(Math.max(b.requests.total, x.requests.total) * 1.2));
    process.stderr.write(`  decisions, round ${round + 1}: one hop ${Math.round(b.requests.average)}, 3-deep ${Math.round(x.requests.average)}\n`);
  }
  compare('authorize, 3-deep chain', 'authorize, one hop (token exchange)', decisionPairs);

  // Token endpoint: each request with its own assertion (an assertion is single use).
  const tokenPairs: [CannonResult, CannonResult][] = [];
  size = 3000;
  for (let round = 0; round < ROUNDS; round++) {
    const signIns = await Promise.all(Array.from({ length: size }, () => signInBody(robot)));
    const exchanges = await Promise.all(Array.from({ length: size }, () => exchangeBody(first, personToken)));
    const b = await run(cycle('/apis/regional/v1/ai/auth/token', signIns, 'application/x-www-form-urlencoded'));
    const x = await run(cycle('/apis/regional/v1/ai/auth/token', exchanges, 'application/x-www-form-urlencoded'));
    tokenPairs.push([x, b]);
    size = Math.min(60_000, Math.ceil(Math.max(b.requests.total, x.requests.total) * 1.2));
    process.stderr.write(`  token endpoint, round ${round + 1}: client_credentials ${Math.round(b.requests.average)}, token exchange ${Math.round(x.requests.average)}\n`);
  }
  compare('token exchange (person → agent)', "agent client_credentials sign-in", tokenPairs);

  process.stdout.write(
    `\nworkers: ${WORKERS}, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, ${availableParallelism()} cores (autocannon shares them)\n\n` +
      `| run | connections | req/s | p99 ms | non-2xx/errors (all rounds) |\n|---|---|---|---|---|\n${rows.join('\n')}\n\n${verdicts.join('\n')}\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
