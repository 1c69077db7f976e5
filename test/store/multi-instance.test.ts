import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { Receiver } from '../ssf/receiver.js';
import { Browser, followSignIn } from '../oauth/helpers.js';
import { dropTestDatabase, testDatabase, testServerUrl } from '../helpers/database.js';

// Three `gatehouse serve` processes on one PostgreSQL database, behind a round-robin load
// balancer (the issuer). Runs when GATEHOUSE_TEST_DATABASE_URL names a server.
const ADMIN = 'multi-instance-admin-token-0123456789abcdef';
const SECRET = 'multi-instance-secret-0123456789abcdef0123';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const REDIRECT = 'http://localhost:9/callback';
const PASSWORD = 'correct horse battery staple';

interface Instance { name: string; child: ChildProcess; base: string; lines: string[]; exited: Promise<number | null> }

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-multi-'));
let dbUrl: string;
let issuer: string;
let lb: Server;
const backends: string[] = [];
const instances: Instance[] = [];

const tsx = () => pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
const env = () => ({
  PATH: process.env.PATH ?? '',
  PORT: '0',
  GATEHOUSE_DATABASE_URL: dbUrl,
  GATEHOUSE_SECRET: SECRET,
  GATEHOUSE_ADMIN_TOKEN: ADMIN,
  GATEHOUSE_ISSUER: issuer,
  GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
  GATEHOUSE_WORKERS: '1',
  GATEHOUSE_SSF_POLL_MS: '50',
  GATEHOUSE_SSF_RETRY_BASE_MS: '50',
  // a stream's delivery lease outlives a push by ten seconds: a short push time-out keeps the takeover test short
  GATEHOUSE_SSF_TIMEOUT_MS: '3000',
  // the test's receivers listen on loopback
  GATEHOUSE_OUTBOUND_ALLOW_HOSTS: '127.0.0.1',
  LOG_LEVEL: 'info',
});

async function startInstance(name: string): Promise<Instance> {
  const child = spawn(process.execPath, ['--import', tsx(), join(projectRoot, 'src/cli.ts'), 'serve'], { cwd: dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const collect = (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    for (const l of lines) {
      try {
        const j = JSON.parse(l);
        if (j.msg === 'listening') return { name, child, base: `http://127.0.0.1:${j.port}`, lines, exited };
      } catch {
        /* not a log line */
      }
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Any load balancer: each request to the next instance in turn. */
function startBalancer(): Promise<Server> {
  let next = 0;
  const server = createServer((req, res) => {
    const target = new URL(req.url ?? '/', backends[next++ % backends.length]);
    const up = request(target, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function call(base: string, method: string, path: string, opts: { json?: unknown; form?: Record<string, string>; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(opts.form).toString();
  }
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
const admin = (base: string, method: string, path: string, json?: unknown) =>
  call(base, method, `/admin/v1${path}`, { json, headers: { authorization: `Bearer ${ADMIN}` } });
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
const at = (i: number) => instances[i % instances.length]!.base;

let web: { client_id: string; client_secret: string };
let m2m: { client_id: string; client_secret: string };
let user: { id: string; email: string };
let agent: { id: string; key: CryptoKey };

async function clientAssertion(who: { id: string; key: CryptoKey } = agent): Promise<string> {
  const t = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: who.id, sub: who.id, aud: `${issuer}/apis/regional/v1/ai/auth/token`, exp: t + 60, iat: t, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(who.key);
}
const agentToken = (base: string, assertion: string) =>
  call(base, 'POST', '/apis/regional/v1/ai/auth/token', { form: { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: assertion } });

async function newAgent(name: string, capabilities: { name: string; limits?: unknown }[], roles: string[]): Promise<{ id: string; key: CryptoKey }> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const a = await admin(issuer, 'POST', '/agents', { name, mode: 'autonomous', public_jwk: await exportJWK(publicKey), capabilities, roles });
  expect(a.status).toBe(201);
  return { id: a.body.agent_id, key: privateKey };
}

interface Action { action: string; resource: string; context: Record<string, unknown> }
/** Binds the action on one instance (a transaction token) and asks the decision on another. */
async function decideVia(bindAt: string, decideAt: string, who: { id: string; key: CryptoKey }, a: Action) {
  const token = await agentToken(bindAt, await clientAssertion(who));
  expect(token.status).toBe(200);
  const bound = await call(bindAt, 'POST', '/apis/regional/v1/ai/auth/transaction-token', { json: a, headers: { authorization: `Bearer ${token.body.access_token}` } });
  if (bound.status !== 200) return { status: bound.status, decision: 'deny', reason: bound.body?.error as string };
  const r = await call(decideAt, 'POST', '/apis/regional/v1/agents/authorize', { json: { agent_id: who.id, transaction_token: bound.body.data.transaction_token, ...a } });
  return { status: r.status, decision: r.body?.data?.decision as string, reason: r.body?.data?.reason as string };
}

/** A code for the web application, through a sign-in whose requests are spread over the instances. */
async function code(): Promise<{ code: string; verifier: string }> {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const q = new URLSearchParams({
    response_type: 'code', client_id: web.client_id, redirect_uri: REDIRECT, scope: 'openid offline_access',
    state: randomUUID(), code_challenge: challenge, code_challenge_method: 'S256',
  });
  const back = await followSignIn(new Browser(issuer), `${issuer}/oauth/authorize?${q}`, { email: user.email, password: PASSWORD });
  const c = back.searchParams.get('code');
  if (!c) throw new Error(`no code: ${back}`);
  return { code: c, verifier };
}
const exchange = (base: string, c: { code: string; verifier: string }) =>
  call(base, 'POST', '/oauth/token', {
    form: { grant_type: 'authorization_code', code: c.code, redirect_uri: REDIRECT, code_verifier: c.verifier },
    headers: { authorization: basic(web.client_id, web.client_secret) },
  });

describe.skipIf(!testServerUrl())('three instances on one PostgreSQL database', () => {
  beforeAll(async () => {
    mkdirSync(join(dir, 'policies'));
    dbUrl = await testDatabase(dir);
    lb = await startBalancer();
    issuer = `http://127.0.0.1:${(lb.address() as AddressInfo).port}`;
    // started together: they migrate one after another (a lock), each finding the schema current
    instances.push(...(await Promise.all(['a', 'b', 'c'].map(startInstance))));
    backends.push(...instances.map((i) => i.base));

    const w = await admin(issuer, 'POST', '/applications', { name: 'web', type: 'web', redirect_uris: [REDIRECT] });
    web = { client_id: w.body.client_id, client_secret: w.body.client_secret };
    const m = await admin(issuer, 'POST', '/applications', { name: 'service', type: 'm2m', redirect_uris: [] });
    m2m = { client_id: m.body.client_id, client_secret: m.body.client_secret };
    const u = await admin(issuer, 'POST', '/users', { email: 'ada@example.com', password: PASSWORD, name: 'Ada' });
    user = { id: u.body.id, email: 'ada@example.com' };
    expect((await admin(issuer, 'PUT', `/applications/${web.client_id}/assignments/${user.id}`)).status).toBe(204);
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const a = await admin(issuer, 'POST', '/agents', { name: 'worker', mode: 'autonomous', public_jwk: await exportJWK(publicKey), capabilities: [{ name: 'read:reports' }] });
    expect(a.status).toBe(201);
    agent = { id: a.body.agent_id, key: privateKey };
  }, 180_000);

  afterAll(async () => {
    for (const i of instances) i.child.kill('SIGTERM');
    await Promise.all(instances.map((i) => i.exited));
    await new Promise((r) => lb?.close(r));
    if (dbUrl) await dropTestDatabase(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  it('one code exchanged on two instances at once: one token response', async () => {
    for (let round = 0; round < 3; round++) {
      const c = await code();
      const results = await Promise.all([exchange(at(round), c), exchange(at(round + 1), c)]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
      expect(results.find((r) => r.status === 400)!.body.error).toBe('invalid_grant');
    }
  });

  it('concurrent refreshes with one token on every instance: one winner', async () => {
    const tokens = (await exchange(at(0), await code())).body;
    expect(tokens.refresh_token).toBeTruthy();
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(at(i), 'POST', '/oauth/token', {
          form: { grant_type: 'refresh_token', refresh_token: tokens.refresh_token },
          headers: { authorization: basic(web.client_id, web.client_secret) },
        }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400 && r.body.error === 'invalid_grant')).toHaveLength(11);
  });

  it('one client assertion replayed on every instance: used once', async () => {
    const assertion = await clientAssertion();
    const results = await Promise.all(instances.flatMap((i) => [agentToken(i.base, assertion), agentToken(i.base, assertion)]));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 401 && r.body.error === 'invalid_client')).toHaveLength(5);
  });

  it('failed client authentications count on every instance together', async () => {
    const bad = (i: number) =>
      call(at(i), 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' }, headers: { authorization: basic(m2m.client_id, 'wrong') } });
    for (let i = 0; i < 10; i++) expect((await bad(i)).status).toBe(401);
    // the right secret is refused too now, whichever instance is asked
    for (let i = 0; i < 3; i++) {
      const r = await call(at(i), 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' }, headers: { authorization: basic(m2m.client_id, m2m.client_secret) } });
      expect(r.status).toBe(429);
    }
  });

  it('a key rotated on one instance: its tokens verify at once on another, which signs with it within a second', async () => {
    const service = await admin(issuer, 'POST', '/applications', { name: 'service-2', type: 'm2m', redirect_uris: [] });
    const auth = { authorization: basic(service.body.client_id, service.body.client_secret) };
    const rotated = await admin(at(0), 'POST', '/keys/rotate', { alg: 'RS256' });
    expect(rotated.status).toBe(200);
    const kid = rotated.body.keys.find((k: { alg: string }) => k.alg === 'RS256').kid;
    const token = (await call(at(0), 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' }, headers: auth })).body.access_token;
    expect(decodeProtectedHeader(token).kid).toBe(kid);
    const seen = await call(at(1), 'POST', '/oauth/token/introspect', { form: { token }, headers: auth });
    expect(seen.body.active).toBe(true);
    await new Promise((r) => setTimeout(r, 1000));
    const fromOther = (await call(at(2), 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' }, headers: auth })).body.access_token;
    expect(decodeProtectedHeader(fromOther).kid).toBe(kid);
  });

  it('an agent revoked on one instance is refused by the others within a second', async () => {
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const created = await admin(at(0), 'POST', '/agents', { name: 'short-lived', mode: 'autonomous', public_jwk: await exportJWK(publicKey), capabilities: [{ name: 'read:reports' }] });
    const saved = agent;
    agent = { id: created.body.agent_id, key: privateKey };
    try {
      // every instance has it cached
      for (let i = 0; i < 3; i++) expect((await agentToken(at(i), await clientAssertion())).status).toBe(200);
      expect((await admin(at(0), 'POST', `/agents/${encodeURIComponent(agent.id)}/revoke`)).status).toBe(204);
      await new Promise((r) => setTimeout(r, 1000));
      for (let i = 1; i < 3; i++) expect((await agentToken(at(i), await clientAssertion())).status).toBe(401);
    } finally {
      agent = saved;
    }
  });

  it('an application deleted on one instance is refused by the others within a second', async () => {
    const created = await admin(at(0), 'POST', '/applications', { name: 'short-lived-service', type: 'm2m', redirect_uris: [] });
    const auth = { authorization: basic(created.body.client_id, created.body.client_secret) };
    const token = (i: number) => call(at(i), 'POST', '/oauth/token', { form: { grant_type: 'client_credentials' }, headers: auth });
    // every instance has it cached
    for (let i = 0; i < 3; i++) expect((await token(i)).status).toBe(200);
    expect((await admin(at(0), 'DELETE', `/applications/${encodeURIComponent(created.body.client_id)}`)).status).toBe(204);
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 1; i < 3; i++) expect(await token(i)).toMatchObject({ status: 401, body: { error: 'invalid_client' } });
  });

  it('a budget hammered from all three instances at once is never exceeded', async () => {
    expect((await admin(at(0), 'PUT', '/roles/refunder', { permissions: ['create:refunds'] })).status).toBeLessThan(300);
    const spender = await newAgent('spender', [{ name: 'create:refunds', limits: { amount: { max: 500, sum: { max: 1000, per: '24h' } }, count: [{ max: 12, per: '1h' }] } }], ['refunder']);
    const token = (await agentToken(at(0), await clientAssertion(spender))).body.access_token;
    // 30 refunds of 100 against 1000 (each bound on one instance, decided on another): 10 fit
    const requests = Array.from({ length: 30 }, (_, i) => ({ action: 'create:refunds', resource: `refund:${i}`, context: { amount: 100 } }));
    const bound: string[] = [];
    for (const [i, r] of requests.entries()) {
      const b = await call(at(i), 'POST', '/apis/regional/v1/ai/auth/transaction-token', { json: r, headers: { authorization: `Bearer ${token}` } });
      expect(b.status).toBe(200);
      bound.push(b.body.data.transaction_token);
    }
    const answers = await Promise.all(
      requests.map((r, i) => call(at(i + 1), 'POST', '/apis/regional/v1/agents/authorize', { json: { agent_id: spender.id, transaction_token: bound[i], ...r } })),
    );
    expect(answers.map((a) => a.status)).toEqual(requests.map(() => 200));
    const decisions = answers.map((a) => a.body.data as { decision: string; reason?: string });
    expect(decisions.filter((d) => d.decision === 'allow')).toHaveLength(10);
    expect(new Set(decisions.filter((d) => d.decision !== 'allow').map((d) => d.reason))).toEqual(new Set(['constraint_violated: amount sum']));
    // every instance reads the same counters
    for (let i = 0; i < 3; i++) {
      const usage = await admin(at(i), 'GET', `/agents/${encodeURIComponent(spender.id)}/usage`);
      expect(usage.body.data.find((u: { kind: string }) => u.kind === 'sum')).toMatchObject({ used: 1000, remaining: 0 });
      expect(usage.body.data.find((u: { kind: string }) => u.kind === 'count')).toMatchObject({ used: 10, remaining: 2 });
    }
  });

  it('rules, roles and policy files changed on one instance are in force on the others within a second', async () => {
    expect((await admin(at(0), 'PUT', '/roles/exporter', { permissions: ['create:exports', 'archive:reports'] })).status).toBeLessThan(300);
    const exporter = await newAgent('exporter', [{ name: 'create:exports' }, { name: 'archive:reports' }], ['exporter']);
    const big = { action: 'create:exports', resource: 'export:1', context: { rows: 5000 } };
    const archive = { action: 'archive:reports', resource: 'report:1', context: { size: 50 } };
    // every instance has compiled the policy and cached the agent and its roles
    for (let i = 0; i < 3; i++) {
      expect((await decideVia(at(i), at(i), exporter, big)).decision).toBe('allow');
      expect((await decideVia(at(i), at(i), exporter, archive)).decision).toBe('allow');
    }
    const policyVersion = async (i: number) => (await admin(at(i), 'GET', '/policy')).body.version as string;

    // a rule goes live on instance a
    const rule = await admin(at(0), 'POST', '/rules', {
      name: 'cap-exports', effect: 'deny', subjects: ['agent:*'], relation: 'create:exports', object: 'export:*', condition: { field: 'rows', op: 'gt', value: 1000 },
    });
    expect(rule.status).toBe(201);
    expect((await admin(at(0), 'POST', `/rules/${rule.body.id}/validate`)).body.valid).toBe(true);
    expect((await admin(at(0), 'POST', `/rules/${rule.body.id}/enable`)).body.state).toBe('live');
    await new Promise((r) => setTimeout(r, 1000));
    expect(new Set(await Promise.all([0, 1, 2].map(policyVersion))).size).toBe(1);
    for (let i = 1; i < 3; i++) expect((await decideVia(at(i), at(i), exporter, big)).decision).toBe('deny');

    // ... and is taken out of force there again
    expect((await admin(at(0), 'POST', `/rules/${rule.body.id}/disable`)).body.state).toBe('disabled');
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 1; i < 3; i++) expect((await decideVia(at(i), at(i), exporter, big)).decision).toBe('allow');

    // a policy file reloaded on instance a (the directory is the instances' shared configuration)
    const before = await policyVersion(1);
    writeFileSync(
      join(dir, 'policies', 'archive.policy'),
      'policy "archive" version 1\n\nrule "small-archives-only" {\n  effect deny\n  subjects "agent:*"\n  relation "archive:reports"\n  object "report:*"\n  when size > 10\n}\n',
    );
    const reloaded = await admin(at(0), 'POST', '/policy/reload');
    expect(reloaded.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1000));
    const versions = await Promise.all([0, 1, 2].map(policyVersion));
    expect(versions[1]).not.toBe(before);
    expect(new Set(versions).size).toBe(1);
    for (let i = 1; i < 3; i++) expect((await decideVia(at(i), at(i), exporter, archive)).decision).toBe('deny');

    // a role loses a permission on instance a
    expect((await admin(at(0), 'PUT', '/roles/exporter', { permissions: ['archive:reports'] })).status).toBeLessThan(300);
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 1; i < 3; i++) {
      const d = await decideVia(at(i), at(i), exporter, { ...big, context: { rows: 10 } });
      expect(d.decision).toBe('deny');
    }
  });

  it('Shared Signals events are delivered exactly once with every instance delivering', async () => {
    const receiver = await new Receiver().start();
    try {
      const stream = await call(issuer, 'POST', '/v1/ssf/streams', {
        json: { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url }, events_requested: ['https://schemas.openid.net/secevent/risc/event-type/credential-compromise'] },
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      expect(stream.status).toBe(201);
      const n = 12;
      await Promise.all(
        Array.from({ length: n }, (_, i) => admin(at(i), 'POST', `/users/${user.id}/credential-compromise`, { credential_type: 'password', reason: `r${i}` })),
      );
      await receiver.waitFor((r) => r.accepted.length >= n);
      // time for a duplicate to show up, were there one
      await new Promise((r) => setTimeout(r, 1500));
      const jtis = receiver.accepted.map((p) => decodeJwt(p.body).jti);
      expect(jtis).toHaveLength(n);
      expect(new Set(jtis).size).toBe(n);
    } finally {
      await receiver.stop();
    }
  });

  it('an instance killed with SIGKILL under load loses nothing it acknowledged; restarted, it serves it all', async () => {
    expect((await admin(at(0), 'PUT', '/roles/reader', { permissions: ['read:reports'] })).status).toBeLessThan(300);
    const reader = await newAgent('reader', [{ name: 'read:reports' }], ['reader']);
    const readerToken = (await agentToken(at(0), await clientAssertion(reader))).body.access_token;
    const tokens: string[] = [];
    const decided: string[] = [];
    const roles: string[] = [];
    let stop = false;
    const victim = instances[2]!;
    const load = async (worker: number) => {
      for (let i = 0; !stop; i++) {
        const base = instances[(worker + i) % 3]!.base;
        try {
          if (i % 3 === 0) {
            const r = await agentToken(base, await clientAssertion());
            if (r.status === 200) tokens.push(decodeJwt(r.body.access_token).jti!);
          } else if (i % 3 === 1) {
            const resource = `report:${worker}-${i}`;
            const a = { action: 'read:reports', resource, context: {} };
            const b = await call(base, 'POST', '/apis/regional/v1/ai/auth/transaction-token', { json: a, headers: { authorization: `Bearer ${readerToken}` } });
            if (b.status !== 200) continue;
            const r = await call(base, 'POST', '/apis/regional/v1/agents/authorize', { json: { agent_id: reader.id, transaction_token: b.body.data.transaction_token, ...a } });
            if (r.status === 200 && r.body.data.decision === 'allow') decided.push(resource);
          } else {
            const name = `load-${worker}-${i}`;
            const r = await admin(base, 'PUT', `/roles/${name}`, { permissions: ['read:reports'] });
            if (r.status === 200 || r.status === 201) roles.push(name);
          }
        } catch {
          /* the killed instance drops its connections: not acknowledged */
        }
      }
    };
    const workers = Array.from({ length: 6 }, (_, w) => load(w));
    await new Promise((r) => setTimeout(r, 1500));
    victim.child.kill('SIGKILL');
    await victim.exited;
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    await Promise.all(workers);
    // the same instance started again, in the load balancer's rotation where it was
    const restarted = await startInstance('c2');
    instances[2] = restarted;
    backends[2] = restarted.base;
    expect(tokens.length).toBeGreaterThan(5);
    expect(decided.length).toBeGreaterThan(5);

    const audited = async (base: string, query: string, pick: (r: { resource: string | null; context: { jti?: string } | null }) => string | undefined) => {
      const found = new Set<string>();
      for (let before: number | null | undefined; before !== null; ) {
        const page = await admin(base, 'GET', `/audit?${query}&limit=500${before ? `&before=${before}` : ''}`);
        expect(page.status).toBe(200);
        for (const r of page.body.data) {
          const v = pick(r);
          if (v) found.add(v);
        }
        before = page.body.next_before;
      }
      return found;
    };
    for (const base of [at(0), restarted.base]) {
      const issued = await audited(base, `kind=token&agent_id=${encodeURIComponent(agent.id)}`, (r) => r.context?.jti);
      expect(tokens.filter((jti) => !issued.has(jti))).toEqual([]);
      const answered = await audited(base, `kind=decision&decision=allow&agent_id=${encodeURIComponent(reader.id)}`, (r) => r.resource ?? undefined);
      expect(decided.filter((resource) => !answered.has(resource))).toEqual([]);
      const stored = new Set((await admin(base, 'GET', '/roles')).body.data.map((r: { name: string }) => r.name));
      expect(roles.filter((r) => !stored.has(r))).toEqual([]);
    }
    // and it serves: a token from it, a decision on it
    expect((await agentToken(restarted.base, await clientAssertion())).status).toBe(200);
    expect((await decideVia(restarted.base, restarted.base, reader, { action: 'read:reports', resource: 'report:after', context: {} })).decision).toBe('allow');
  }, 120_000);

  it('every instance killed while one of them pushes a Shared Signals event: the restarted ones deliver it, once', async () => {
    const delivered: string[] = [];
    const held: { jti: string; res: ServerResponse }[] = [];
    let hold = true;
    let arrived!: () => void;
    const firstPush = new Promise<void>((r) => (arrived = r));
    // a receiver that leaves the first push unanswered, so its instance dies in the middle of it
    const rx = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (hold) {
          held.push({ jti: decodeJwt(body).jti!, res });
          arrived();
          return;
        }
        delivered.push(decodeJwt(body).jti!);
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
    try {
      const stream = await call(issuer, 'POST', '/v1/ssf/streams', {
        json: { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: `http://127.0.0.1:${(rx.address() as AddressInfo).port}/events` }, events_requested: ['https://schemas.openid.net/secevent/risc/event-type/credential-compromise'] },
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      expect(stream.status).toBe(201);
      expect((await admin(at(1), 'POST', `/users/${user.id}/credential-compromise`, { credential_type: 'password', reason: 'takeover' })).status).toBeLessThan(300);
      await firstPush;
      hold = false;
      // whichever instance holds the stream's lease dies with it
      for (const i of instances) i.child.kill('SIGKILL');
      await Promise.all(instances.map((i) => i.exited));
      const restarted = await Promise.all(['a2', 'b2', 'c3'].map(startInstance));
      instances.splice(0, instances.length, ...restarted);
      backends.splice(0, backends.length, ...restarted.map((i) => i.base));
      const deadline = Date.now() + 40_000;
      while (delivered.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      // time for a duplicate to show up, were there one
      await new Promise((r) => setTimeout(r, 1500));
      expect(held).toHaveLength(1);
      expect(delivered).toEqual([held[0]!.jti]);
    } finally {
      await new Promise((r) => {
        rx.close(r);
        rx.closeAllConnections();
      });
    }
  }, 90_000);

  it('gatehouse audit verify finds the chain unbroken after all of it', async () => {
    const child = spawn(process.execPath, ['--import', tsx(), join(projectRoot, 'src/cli.ts'), 'audit', 'verify'], { cwd: dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect([code, out]).toEqual([0, expect.stringMatching(/^ok: \d+ records\n$/)]);
    expect(Number(/ok: (\d+)/.exec(out)![1])).toBeGreaterThan(20);
  }, 60_000);
});
