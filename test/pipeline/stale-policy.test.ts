import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { accessTokenFor, bind, postJson, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import type { TestServer } from '../helpers/server.js';
import { parseMetrics } from './metrics-text.js';

// Never fail open: when the stored policy files and live rules stop compiling together, the
// last policy that compiled stays in force (and says so); with none at all, everything is denied.
const POLICY = `policy "refunds" version 1

rule "no-big-refunds" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 1000
}
`;
const ADMIN = 'stale-admin-token-0123456789abcdef';
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-stale-'));
mkdirSync(join(dir, 'policies'));
writeFileSync(join(dir, 'policies', 'refunds.policy'), POLICY);

const logLines: Record<string, unknown>[] = [];
const memoryLog = pino(
  { level: 'info' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  }),
);

let issuer = '';
const config = (env: Record<string, string> = {}) =>
  loadConfig({
    PORT: '0',
    GATEHOUSE_ISSUER: issuer,
    GATEHOUSE_DB: join(dir, 'gh.db'),
    GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
    GATEHOUSE_ADMIN_TOKEN: ADMIN,
    GATEHOUSE_SECRET: 'stale-secret-0123456789abcdef-0123456789',
    LOG_LEVEL: 'info',
    ...env,
  });

let primary: RunningServer;
let agent: TestAgent;
let token: string;

/** Enough of the test helpers' server for the agent helpers: its URL, context and admin calls. */
const asTest = (r: RunningServer) =>
  ({
    ...r,
    admin: async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${r.url}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
    },
  }) as unknown as TestServer;

/** A port free right now: the primary listens there, and the worker shares its issuer. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, r));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

beforeAll(async () => {
  const port = await freePort();
  issuer = `http://localhost:${port}`;
  primary = await startServer(config({ PORT: String(port) }), { logger: memoryLog });
  const s = asTest(primary);
  await putRole(s, 'refunder', ['create:refunds']);
  agent = await registerAgent(s, { name: 'refunds', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds' }] });
  token = await accessTokenFor(s, agent);
});
afterAll(async () => {
  await primary?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function decide(server: RunningServer, context: Record<string, unknown>) {
  const s = asTest(server);
  // The binding is made at the primary: a worker without a policy refuses to bind.
  const b = await bind(asTest(primary), token, 'create:refunds', 'refund:1', context);
  expect(b.status, JSON.stringify(b.body)).toBe(200);
  const d = await postJson(`${s.url}/apis/regional/v1/agents/authorize`, {
    agent_id: agent.id,
    transaction_token: b.body.data.transaction_token,
    action: 'create:refunds',
    resource: 'refund:1',
    context,
  });
  expect(d.status).toBe(200);
  return d.body.data as { decision: string; reason: string; policy_version: string };
}

const healthz = async (r: RunningServer) => {
  const res = await fetch(`${r.url}/healthz`);
  return { status: res.status, body: await res.json() };
};
const policyStatus = async (r: RunningServer) => {
  const m = parseMetrics(await (await fetch(`${r.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text());
  return ['ok', 'stale', 'unavailable'].find((st) => m.value('gatehouse_policy_status', { status: st }) === 1);
};

/** What another process (an instance of another version, say) may leave in the database: files that no longer compile. */
async function breakStoredPolicy(): Promise<void> {
  await primary.ctx.store.transaction(async (tx) => {
    await tx.settings.set('policy_files', JSON.stringify([{ path: join(dir, 'policies', 'refunds.policy'), text: 'policy "refunds" version 2\nrule "half {' }]));
    await tx.settings.bump('policy');
  });
}

describe('a stored policy that no longer compiles', () => {
  let v1: string;
  let worker: RunningServer | undefined;
  afterAll(async () => worker?.close());

  it('leaves the last policy that compiled in force, and says so in /healthz, the log and a metric', async () => {
    const before = await decide(primary, { amount: 2000 });
    expect(before).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-big-refunds' });
    v1 = before.policy_version;
    expect(await healthz(primary)).toEqual({ status: 200, body: { status: 'ok' } });

    await breakStoredPolicy();
    // The deny rule still applies: nothing was silently left out.
    expect(await decide(primary, { amount: 2000 })).toEqual({ decision: 'deny', reason: 'rule_denied: no-big-refunds', policy_version: v1 });
    expect(await decide(primary, { amount: 20 })).toMatchObject({ decision: 'allow', policy_version: v1 });
    expect(await healthz(primary)).toEqual({
      status: 200,
      body: { status: 'degraded', database: 'ok', policy: 'stale', policy_version: v1 },
    });
    expect(await policyStatus(primary)).toBe('stale');
    const logged = logLines.find((l) => l.policy_status === 'stale');
    expect(logged).toMatchObject({ level: 50, policy_version: v1 });
    expect(String((logged!.problems as string[])[0])).toMatch(/refunds\.policy:\d+:\d+: /);
  });

  it('with no policy ever compiled in a process, every decision is deny policy_unavailable', async () => {
    // A worker process starting now finds only the broken set.
    worker = await startServer(config(), { logger: memoryLog, role: 'worker' });
    expect(await decide(worker, { amount: 20 })).toEqual({ decision: 'deny', reason: 'policy_unavailable', policy_version: '' });
    expect(await healthz(worker)).toEqual({
      status: 503,
      body: { status: 'unavailable', database: 'ok', policy: 'unavailable', policy_version: null },
    });
    expect(await policyStatus(worker)).toBe('unavailable');
    // Binding there is refused too (nothing to check the limits against).
    const b = await postJson(`${worker.url}/apis/regional/v1/ai/auth/transaction-token`, { action: 'create:refunds', resource: 'refund:1', context: {} }, { authorization: `Bearer ${token}` });
    expect([b.status, b.body.error, b.body.reason]).toEqual([503, 'temporarily_unavailable', 'policy_unavailable']);
  });

  it('recovers in every process once the files compile again (a reload)', async () => {
    const reload = await asTest(primary).admin('POST', '/policy/reload');
    expect(reload.status).toBe(200);
    expect(await healthz(primary)).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await healthz(worker!)).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await decide(worker!, { amount: 2000 })).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-big-refunds' });
    expect(await policyStatus(primary)).toBe('ok');
    expect(logLines.some((l) => l.msg === 'policy compiles again')).toBe(true);
  });
});
