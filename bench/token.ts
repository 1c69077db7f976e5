/**
 * client_credentials throughput over HTTP (on demand: `npm run bench:token`).
 *
 * Builds the project, starts `node dist/cli.js serve` with GATEHOUSE_WORKERS = cores on a temp
 * database, registers an m2m application, and measures tokens/s and p99 with autocannon at 10
 * and 50 connections; then the same against oidc-provider (dev dependency, one process, the
 * client_credentials grant with RS256 JWT access tokens). Before both, the raw RS256 signing
 * ceiling, no HTTP, on one core and on all cores (worker threads), two ways: jose's SignJWT (how a
 * typical Node service signs) and node:crypto's one-shot sign (the fastest this machine does).
 * Prints a markdown table for docs/sign-in.md.
 */
import { execSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { generateKeyPairSync } from 'node:crypto';
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
      for (const c of [10, 50]) {
        process.stderr.write(`gatehouse, ${c} connections...\n`);
        const r = await cannon(`${base}/oauth/token`, c, headers, 'grant_type=client_credentials');
        results[`g${c}`] = r.requests.average;
        rows.push([`Gatehouse (${WORKERS} workers), ${c} connections`, String(r.non2xx + r.errors), fmt(r.requests.average), `${r.latency.p99} ms`]);
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
    '| What | non-2xx | tokens/s | p99 |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    `Gatehouse / oidc-provider at 50 connections: ${(results.g50! / results.o50!).toFixed(2)}× (target ≥ 1.4×)`,
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
