/**
 * client_credentials throughput over HTTP (on demand: `npm run bench:token`).
 *
 * Builds the project, starts `node dist/cli.js serve` with GATEHOUSE_WORKERS = cores on a temp
 * database, registers an m2m application, and measures tokens/s and p99 with autocannon at 10
 * and 50 connections; then the same against oidc-provider (dev dependency, one process, the
 * client_credentials grant with RS256 JWT access tokens). DPoP in the same run, against the same
 * server: DPoP-bound client_credentials tokens (a fresh ES256 proof per request) beside bearer
 * ones (also with the DPoP run's per-request setup in autocannon, without the proof), and an
 * MCP `tools/call` through the gateway with a DPoP-bound agent token (a proof per request)
 * beside one with a bearer token (the test upstream, in this process). Before both, the raw RS256 signing
 * ceiling, no HTTP, on one core and on all cores (worker threads), two ways: jose's SignJWT (how a
 * typical Node service signs) and node:crypto's one-shot sign (the fastest this machine does).
 * Prints a markdown table for docs/sign-in.md.
 */
import { execSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { createHash, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { startUpstream } from '../test/mcp/upstream.js';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { autocannon, freePort, start, startGatehouse, stop, waitReady, type CannonResult } from './harness.js';


const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CORES = availableParallelism();
const WORKERS = Number(process.env.GATEHOUSE_WORKERS ?? CORES);
const ADMIN = 'bench-admin-token-0123456789abcdef';
const BENCH_SECRET = 'bench-client-secret-0123456789abcdef-0123';



// RS256 signing in a loop for `seconds`, in this thread or a worker: signatures per second.
const SIGN_LOOP = `
const { parentPort, workerData } = require('node:worker_threads');
const { createPrivateKey, randomUUID, sign } = require('node:crypto');
const key = createPrivateKey(workerData.pem);
const claims = () => { const iat = Math.floor(Date.now() / 1000); return { iss: 'http://localhost', sub: 'bench', aud: 'bench', exp: iat + 900, iat, jti: randomUUID(), client_id: 'bench' }; };
const end = Date.now() + workerData.seconds * 1000;
let n = 0;
(async () => {
  if (workerData.how === 'jose') {
    // jose's SignJWT, as a typical Node service signs (WebCrypto underneath)
    const { SignJWT } = await import('jose');
    while (Date.now() < end) {
      await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', kid: 'k', typ: 'at+jwt' }).sign(key);
      n++;
    }
  } else {
    // node:crypto's one-shot sign on this thread: the fastest RS256 this machine does
    const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const header = b64({ alg: 'RS256', kid: 'k', typ: 'at+jwt' });
    while (Date.now() < end) {
      const input = header + '.' + b64(claims());
      sign('sha256', Buffer.from(input), key).toString('base64url');
      n++;
    }
  }
  parentPort.postMessage(n / workerData.seconds);
})();`;

async function signingCeiling(how: 'jose' | 'node', threads: number, seconds: number): Promise<number> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const rates = await Promise.all(
    Array.from({ length: threads }, () =>
      new Promise<number>((resolve, reject) => {
        const w = new Worker(SIGN_LOOP, { eval: true, workerData: { pem, seconds, how } });
        w.once('message', (n: number) => {
          resolve(n);
          void w.terminate();
        });
        w.once('error', reject);
      }),
    ),
  );
  return rates.reduce((a, b) => a + b, 0);
}

// oidc-provider with the client_credentials grant and RS256 JWT access tokens, one process.
const OIDC_PROVIDER = `
import Provider from 'oidc-provider';
import { generateKeyPairSync } from 'node:crypto';
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'bench', alg: 'RS256', use: 'sig' };
const port = Number(process.env.PORT);
const provider = new Provider('http://localhost:' + port, {
  clients: [{ client_id: 'bench', client_secret: process.env.SECRET, grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic' }],
  jwks: { keys: [jwk] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => 'urn:bench:api',
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: 'read', audience: 'urn:bench:api', accessTokenTTL: 900, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } }),
    },
  },
});
provider.listen(port);
`;

async function cannon(url: string, connections: number, headers: Record<string, string>, body: string): Promise<CannonResult> {
  return autocannon({ url, method: 'POST', connections, duration: DURATION, headers, body });
}

/** A client's DPoP key and a proof maker: synchronous (node:crypto), so autocannon adds one to each request. */
function dpopSigner(): (htm: string, htu: string, accessToken?: string) => string {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const header = b64({ typ: 'dpop+jwt', alg: 'ES256', jwk: { kty, crv, x, y } });
  const key: KeyObject = privateKey;
  return (htm, htu, accessToken) => {
    const claims = {
      htm,
      htu,
      iat: Math.floor(Date.now() / 1000),
      jti: randomUUID(),
      ...(accessToken ? { ath: createHash('sha256').update(accessToken).digest('base64url') } : {}),
    };
    const input = `${header}.${b64(claims)}`;
    return `${input}.${sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
  };
}

/** How many proofs to make ahead of a run: more than the fastest server answers in it. */
const PROOFS_AHEAD = Number(process.env.BENCH_PROOFS ?? DURATION * 8000);

/**
 * Like `cannon`, with a fresh DPoP proof (from `proof`) in each request. The proofs are made
 * before the run (each with its own jti, all well inside the server's iat window), so that the
 * load generator, which shares the machine's cores with the server, spends no signature per
 * request: the comparison with bearer tokens weighs the server's added work only. Past the
 * pool, proofs are made as the requests go. Without `proof`, the same per-request setup with
 * no header added: autocannon then rebuilds each request as it does for the DPoP run (a cost
 * of the load generator's, on the same cores), so that a bearer run made this way differs from
 * the DPoP one only in the proof.
 */
async function cannonWithProofs(url: string, connections: number, headers: Record<string, string>, body: string, proof?: () => string): Promise<CannonResult> {
  const u = new URL(url);
  const pool = proof ? Array.from({ length: PROOFS_AHEAD }, proof) : [];
  let next = 0;
  const take = () => (next < pool.length ? pool[next++]! : proof!());
  type Setup = { headers: Record<string, string> };
  const setupRequest = proof ? (req: Setup) => ({ ...req, headers: { ...req.headers, dpop: take() } }) : (req: Setup) => ({ ...req, headers: { ...req.headers } });
  return autocannon({
    url: u.origin,
    connections,
    duration: DURATION,
    requests: [{ method: 'POST', path: u.pathname, headers, body, setupRequest }],
  });
}

/** An agent's token at the agent token endpoint: bound when `proof` is given. */
async function agentTokenAt(base: string, agentId: string, privateKey: CryptoKey, proof?: string): Promise<{ access_token: string; token_type: string }> {
  const t = Math.floor(Date.now() / 1000);
  const assertion = await new SignJWT({ iss: agentId, sub: agentId, aud: base, iat: t, exp: t + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(privateKey);
  const res = await fetch(`${base}/apis/regional/v1/ai/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(proof ? { dpop: proof } : {}) },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }),
  });
  if (res.status !== 200) throw new Error(`agent token: ${res.status} ${await res.text()}`);
  return (await res.json()) as { access_token: string; token_type: string };
}

async function main(): Promise<void> {
  const rows: string[][] = [];
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

  process.stderr.write(`raw RS256 signing, ${DURATION}s each...\n`);
  const joseOne = await signingCeiling('jose', 1, DURATION);
  const joseAll = await signingCeiling('jose', CORES, DURATION);
  const oneCore = await signingCeiling('node', 1, DURATION);
  const allCores = await signingCeiling('node', CORES, DURATION);
  rows.push(['raw RS256 signing (jose SignJWT), 1 core', '-', fmt(joseOne), '-']);
  rows.push([`raw RS256 signing (jose SignJWT), ${CORES} cores`, '-', fmt(joseAll), '-']);
  rows.push(['raw RS256 signing (node:crypto one-shot), 1 core', '-', fmt(oneCore), '-']);
  rows.push([`raw RS256 signing (node:crypto one-shot), ${CORES} cores`, '-', fmt(allCores), '-']);

  process.stderr.write('building...\n');
  execSync('npm run build --silent', { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-token-'));
  mkdirSync(join(dir, 'policies'));
  const results: Record<string, number> = {};
  try {
    // Gatehouse
    const { base, child: server } = await startGatehouse(dir, { GATEHOUSE_ADMIN_TOKEN: ADMIN, GATEHOUSE_WORKERS: String(WORKERS) });
    try {
      await waitReady(`${base}/healthz`);
      const created = await fetch(`${base}/admin/v1/applications`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'bench', type: 'm2m', client_id: 'bench', client_secret: BENCH_SECRET, redirect_uris: [] }),
      });
      if (created.status !== 201) throw new Error(`create application: ${created.status} ${await created.text()}`);
      const headers = {
        authorization: `Basic ${Buffer.from(`bench:${BENCH_SECRET}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      };
      const check = await fetch(`${base}/oauth/token`, { method: 'POST', headers, body: 'grant_type=client_credentials' });
      if (check.status !== 200) throw new Error(`gatehouse token: ${check.status} ${await check.text()}`);
      const proof = dpopSigner();
      const bound = await fetch(`${base}/oauth/token`, { method: 'POST', headers: { ...headers, dpop: proof('POST', `${base}/oauth/token`) }, body: 'grant_type=client_credentials' });
      const boundBody = (await bound.json()) as { token_type?: string };
      if (bound.status !== 200 || boundBody.token_type !== 'DPoP') throw new Error(`gatehouse DPoP token: ${bound.status} ${JSON.stringify(boundBody)}`);
      // bearer and DPoP-bound runs alternate, so that both see the same machine
      for (const c of [10, 50]) {
        process.stderr.write(`gatehouse, ${c} connections...\n`);
        const r = await cannon(`${base}/oauth/token`, c, headers, 'grant_type=client_credentials');
        results[`g${c}`] = r.requests.average;
        rows.push([`Gatehouse (${WORKERS} workers), ${c} connections`, String(r.non2xx + r.errors), fmt(r.requests.average), `${r.latency.p99} ms`]);
        process.stderr.write(`gatehouse DPoP-bound, ${c} connections...\n`);
        const d = await cannonWithProofs(`${base}/oauth/token`, c, headers, 'grant_type=client_credentials', () => proof('POST', `${base}/oauth/token`));
        results[`d${c}`] = d.requests.average;
        rows.push([`Gatehouse DPoP-bound (a proof per request), ${c} connections`, String(d.non2xx + d.errors), fmt(d.requests.average), `${d.latency.p99} ms`]);
        process.stderr.write(`gatehouse bearer, the DPoP run's request setup, ${c} connections...\n`);
        const s = await cannonWithProofs(`${base}/oauth/token`, c, headers, 'grant_type=client_credentials');
        results[`s${c}`] = s.requests.average;
        rows.push([`Gatehouse bearer, requests set up as the DPoP run's, ${c} connections`, String(s.non2xx + s.errors), fmt(s.requests.average), `${s.latency.p99} ms`]);
      }

      // An MCP tools/call through the gateway: bearer agent token, then DPoP-bound with a proof per request
      const upstream = await startUpstream();
      try {
        const admin = async (method: string, path: string, body: unknown) => {
          const res = await fetch(`${base}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
          if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
          return res.json() as Promise<Record<string, unknown>>;
        };
        await admin('POST', '/roles', { name: 'bench-tools', permissions: ['invoke:tools'] });
        await admin('POST', '/mcp/upstreams', { name: 'up', url: upstream.url });
        const agentKeys = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
        const agent = await admin('POST', '/agents', {
          name: 'bench-bot', mode: 'autonomous', public_jwk: await exportJWK(agentKeys.publicKey), roles: ['bench-tools'], capabilities: [{ name: 'invoke:tools' }],
        });
        const agentId = agent.agent_id as string;
        const bearerToken = (await agentTokenAt(base, agentId, agentKeys.privateKey)).access_token;
        const mcpProof = dpopSigner();
        const boundAgent = await agentTokenAt(base, agentId, agentKeys.privateKey, mcpProof('POST', `${base}/apis/regional/v1/ai/auth/token`));
        if (boundAgent.token_type !== 'DPoP') throw new Error(`agent DPoP token: ${JSON.stringify(boundAgent)}`);
        const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
        const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'up.echo', arguments: { text: 'hi' } } });
        const mcpUrl = `${base}/mcp`;
        const mcpRuns: [string, string, () => Promise<CannonResult>][] = [
          ['MCP tools/call, bearer agent token, 10 connections', 'm', () => cannon(mcpUrl, 10, { ...mcpHeaders, authorization: `Bearer ${bearerToken}` }, call)],
          [
            'MCP tools/call, DPoP-bound agent token (a proof per request), 10 connections',
            'md',
            () => cannonWithProofs(mcpUrl, 10, { ...mcpHeaders, authorization: `DPoP ${boundAgent.access_token}` }, call, () => mcpProof('POST', mcpUrl, boundAgent.access_token)),
          ],
        ];
        for (const [label, key, run] of mcpRuns) {
          process.stderr.write(`${label}...\n`);
          const r = await run();
          results[key] = r.requests.average;
          rows.push([label, String(r.non2xx + r.errors), fmt(r.requests.average), `${r.latency.p99} ms`]);
        }
      } finally {
        await upstream.close();
      }
    } finally {
      stop(server);
    }

    // oidc-provider
    const opPort = await freePort();
    const opFile = join(dir, 'oidc-provider.mjs');
    writeFileSync(opFile, OIDC_PROVIDER.replace("from 'oidc-provider'", `from '${createRequire(import.meta.url).resolve('oidc-provider').replace(/\\/g, '/')}'`));
    const op = start([opFile], { PORT: String(opPort), SECRET: BENCH_SECRET, NODE_ENV: 'production' });
    try {
      const opBase = `http://localhost:${opPort}`;
      await waitReady(`${opBase}/.well-known/openid-configuration`);
      const headers = {
        authorization: `Basic ${Buffer.from(`bench:${BENCH_SECRET}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      };
      const check = await fetch(`${opBase}/token`, { method: 'POST', headers, body: 'grant_type=client_credentials' });
      const checkBody = await check.text();
      if (check.status !== 200 || !/"access_token":"ey/.test(checkBody)) throw new Error(`oidc-provider token: ${check.status} ${checkBody}`);
      for (const c of [10, 50]) {
        process.stderr.write(`oidc-provider, ${c} connections...\n`);
        const r = await cannon(`${opBase}/token`, c, headers, 'grant_type=client_credentials');
        results[`o${c}`] = r.requests.average;
        rows.push([`oidc-provider (1 process), ${c} connections`, String(r.non2xx + r.errors), fmt(r.requests.average), `${r.latency.p99} ms`]);
      }
    } finally {
      stop(op);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const lines = [
    `client_credentials, ${DURATION}s per run, ${CORES} cores (${new Date().toISOString().slice(0, 10)}, node ${process.version})`,
    '',
    '| What | non-2xx | requests/s | p99 |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    `Gatehouse / oidc-provider at 50 connections: ${(results.g50! / results.o50!).toFixed(2)}× (target ≥ 1.5×)`,
    `DPoP-bound / bearer client_credentials: ${((100 * results.d10!) / results.g10!).toFixed(0)}% at 10 connections, ${((100 * results.d50!) / results.g50!).toFixed(0)}% at 50; against bearer requests set up as the DPoP run's: ${((100 * results.d10!) / results.s10!).toFixed(0)}% and ${((100 * results.d50!) / results.s50!).toFixed(0)}% (target ≥ 85%)`,
    `DPoP-protected / bearer MCP tools/call: ${((100 * results.md!) / results.m!).toFixed(0)}% (target ≥ 85%)`,
    `Gatehouse at 50 connections / all-cores signing ceiling: ${((100 * results.g50!) / joseAll).toFixed(0)}% of jose SignJWT's, ${((100 * results.g50!) / allCores).toFixed(0)}% of node:crypto one-shot's (target ≥ 70%)`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
