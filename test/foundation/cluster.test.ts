import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { get as httpGet } from 'node:http';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { basic, discover, postForm, signInAndExchange, type Fixture } from '../oauth/helpers.js';
import { dropTestDatabase, testDatabase, testServerUrl } from '../helpers/database.js';
import { parseMetrics } from '../pipeline/metrics-text.js';

// `gatehouse serve` as `npm start` runs it: a primary and two worker processes over one
// database (the SQLite file, or PostgreSQL with GATEHOUSE_TEST_DATABASE_URL). Requests land
// on either worker, so every flow here crosses processes.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cluster-'));
mkdirSync(join(dir, 'policies'));
const ADMIN = 'cluster-admin-token-0123456789abcdef';
let child: ChildProcess;
let base: string;

async function admin(method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  const tsx = pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  child = spawn(process.execPath, ['--import', tsx, join(projectRoot, 'src/cli.ts'), 'serve'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      GATEHOUSE_DB: join(dir, 'gh.db'),
      GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
      GATEHOUSE_ADMIN_TOKEN: ADMIN,
      GATEHOUSE_WORKERS: '2',
      // on PostgreSQL too, when the suite runs there
      ...(testServerUrl() ? { GATEHOUSE_DATABASE_URL: await testDatabase(dir), GATEHOUSE_SECRET: 'cluster-secret-0123456789abcdef0123456789' } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const ports = new Set<number>();
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('workers did not start')), 30_000);
    let buf = '';
    child.stdout!.on('data', (b: Buffer) => {
      buf += b.toString();
      for (const line of buf.split('\n')) {
        try {
          const j = JSON.parse(line);
          if (j.msg === 'listening') ports.add(j.port);
        } catch {
          /* partial line */
        }
      }
      // Two workers said so, on the same port.
      if ((buf.match(/"msg":"listening"/g) ?? []).length >= 2) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  expect(ports.size).toBe(1);
  base = `http://localhost:${[...ports][0]}`;
});

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
  if (testServerUrl()) await dropTestDatabase(dir);
});

describe('two worker processes over one database', () => {
  it('signs people in, refreshes, and rotates keys consistently whichever worker answers', async () => {
    const redirectUri = 'http://localhost:9/callback';
    const app = (await admin('POST', '/applications', { name: 'web', type: 'web', redirect_uris: [redirectUri] })).body;
    const password = 'correct horse battery staple';
    const user = (await admin('POST', '/users', { email: 'ada@example.com', password, name: 'Ada' })).body;
    expect((await admin('PUT', `/applications/${app.client_id}/assignments/${user.id}`)).status).toBe(204);
    const f = { issuer: base, redirectUri } as Fixture;
    const config = await discover(f, app);

    // Several sign-ins: the pages, the pending request and the code cross workers.
    for (let i = 0; i < 3; i++) {
      const { tokens } = await signInAndExchange(config, f, { email: 'ada@example.com', password });
      expect(tokens.access_token).toBeTruthy();
      // The refresh token rotates once; the replay is refused by whichever worker sees it.
      const auth = { authorization: basic(app.client_id, app.client_secret) };
      const next = await postForm(`${base}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
      expect(next.status).toBe(200);
      const replay = await postForm(`${base}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
      expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    }

    // After a rotation no worker signs with the old key.
    const m2m = (await admin('POST', '/applications', { name: 'svc', type: 'm2m' })).body;
    const rotated = await admin('POST', '/keys/rotate', { alg: 'RS256' });
    expect(rotated.status).toBe(200);
    const newKid = rotated.body.keys[0].kid;
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 8; i++) {
      const t = await postForm(`${base}/oauth/token`, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret) });
      expect(t.status).toBe(200);
      expect(decodeProtectedHeader(t.body.access_token).kid).toBe(newKid);
    }
  });

  it('answers /metrics for the whole deployment: the primary adds up both workers', async () => {
    // Requests on fresh connections spread over both workers (the primary deals connections out
    // in turn), so each worker alone has seen about half of them.
    const path = '/.well-known/agent-configuration';
    const n = 24;
    for (let i = 0; i < n; i++) {
      const status = await new Promise<number>((resolve, reject) => {
        httpGet(`${base}${path}`, { agent: false }, (r) => {
          r.resume();
          r.on('end', () => resolve(r.statusCode ?? 0));
        }).on('error', reject);
      });
      expect(status).toBe(200);
    }
    const counts: number[] = [];
    let processes = 0;
    for (let i = 0; i < 4; i++) {
      const res = await new Promise<string>((resolve, reject) => {
        httpGet(`${base}/metrics`, { agent: false }, (r) => {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => resolve(text));
        }).on('error', reject);
      });
      const m = parseMetrics(res);
      counts.push(m.sum('gatehouse_http_request_duration_seconds_count', { route: path }));
      processes = m.value('gatehouse_processes')!;
    }
    // Whichever worker answers the scrape, it reports every worker's requests.
    expect(counts).toEqual([n, n, n, n]);
    expect(processes).toBe(3);
  });

  it('verifies a transaction token once per instance: one bound on either worker is known to both', async () => {
    // Every request on a fresh connection, so bindings and decisions land on both workers.
    const fresh = (path: string, headers: Record<string, string>, body: string) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = httpRequest(`${base}${path}`, { method: 'POST', agent: false, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (r) => {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const scrape = () =>
      new Promise<string>((resolve, reject) => {
        httpGet(`${base}/metrics`, { agent: false }, (r) => {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => resolve(text));
        }).on('error', reject);
      });

    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    expect((await admin('PUT', '/roles/cluster-refunder', { permissions: ['create:refunds'] })).status).toBe(200);
    const agent = await admin('POST', '/agents', {
      name: 'cluster-agent', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['cluster-refunder'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }],
    });
    expect(agent.status).toBe(201);
    const agentId = agent.body.agent_id as string;
    const t = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ iss: agentId, sub: agentId, aud: base, iat: t, exp: t + 60, jti: randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA' })
      .sign(privateKey);
    const tokenRes = await fresh('/apis/regional/v1/ai/auth/token', { 'content-type': 'application/x-www-form-urlencoded' }, new URLSearchParams({
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    }).toString());
    expect(tokenRes.status).toBe(200);
    const bearer = { authorization: `Bearer ${tokenRes.body.access_token}`, 'content-type': 'application/json' };

    const before = parseMetrics(await scrape());
    // An odd number: the primary deals connections out in turn, so with an even one each token
    // could be presented to the worker that bound it.
    const n = 13;
    const bound: string[] = [];
    for (let i = 0; i < n; i++) {
      const action = { action: 'create:refunds', resource: `refund:c${i}`, context: { amount: 10 + i } };
      const res = await fresh('/apis/regional/v1/ai/auth/transaction-token', bearer, JSON.stringify(action));
      expect(res.status).toBe(200);
      bound.push(JSON.stringify({ agent_id: agentId, transaction_token: res.body.data.transaction_token, ...action }));
    }
    // The workers tell each other through the primary, a message per event-loop turn.
    await new Promise((r) => setTimeout(r, 300));
    for (const body of bound) {
      const res = await fresh('/apis/regional/v1/agents/authorize', { 'content-type': 'application/json' }, body);
      expect(res.status).toBe(200);
      expect(res.body.data.decision).toBe('allow');
    }
    const after = parseMetrics(await scrape());
    const delta = (result: string) =>
      after.sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result }) - before.sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result });
    // About half the decisions came to the worker that did not sign the token: without the
    // workers sharing what they signed, those would be misses.
    expect(delta('hit')).toBe(n);
    expect(delta('miss')).toBe(0);

    // A token changed by one character is not the one remembered: verified, and refused.
    const forged = JSON.parse(bound[0]!) as { transaction_token: string };
    const parts = forged.transaction_token.split('.');
    const sig = parts[2]!;
    parts[2] = (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);
    const res = await fresh('/apis/regional/v1/agents/authorize', { 'content-type': 'application/json' }, JSON.stringify({ ...forged, transaction_token: parts.join('.') }));
    expect(res.body.data.decision).toBe('deny');
    expect(res.body.data.reason).toMatch(/^invalid_transaction_token/);
  });

  it('stops cleanly on SIGTERM', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
