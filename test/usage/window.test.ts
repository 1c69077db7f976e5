import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { authorize, bind, JWT_BEARER, postForm, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

// Sliding windows on a fixed clock: the server reads only this clock, so the test moves time.
let now = Math.floor(Date.now() / 1000) * 1000;
const clock = { now: () => now };
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ clock });
  await putRole(server, 'refunder', ['create:refunds']);
});
afterAll(() => server?.stop());

/** An access token as of the clock (the assertion's times are the clock's). */
async function tokenNow(agent: TestAgent): Promise<string> {
  const t = Math.floor(now / 1000);
  const clientAssertion = await new SignJWT({ iss: agent.id, sub: agent.id, aud: server.ctx.urls.agentToken, iat: t, exp: t + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(agent.privateKey);
  const res = await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: clientAssertion });
  expect(res.status).toBe(200);
  return res.body.access_token;
}

/** Binds and decides at the clock's time: the decision, or the binding's refusal. */
async function ask(agent: TestAgent, context: Record<string, unknown>): Promise<string> {
  const a = { action: 'create:refunds', resource: 'refund:w', context };
  const b = await bind(server, await tokenNow(agent), a.action, a.resource, a.context);
  if (b.status !== 200) return `${b.status} ${b.body.reason}`;
  const d = await authorize(server, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, ...a });
  return `${d.body.data.decision} ${d.body.data.reason}`;
}

describe('sliding windows on a fixed clock', () => {
  it('a count leaves its window to the second', async () => {
    const agent = await registerAgent(server, { name: 'counted', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { count: [{ max: 1, per: '10m' }] } }] });
    const start = now;
    expect(await ask(agent, {})).toBe('allow allowed');
    now = start + 599_999;
    expect(await ask(agent, {})).toBe('403 constraint_violated: count');
    now = start + 600_000;
    expect(await ask(agent, {})).toBe('allow allowed');
    expect(await ask(agent, {})).toBe('403 constraint_violated: count');
  });

  it('a sum leaves its window to the second, one amount at a time', async () => {
    const agent = await registerAgent(server, { name: 'summed', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { amount: { sum: { max: 100, per: '1h' } } } }] });
    const start = now;
    expect(await ask(agent, { amount: 60 })).toBe('allow allowed');
    now = start + 1_800_000;
    expect(await ask(agent, { amount: 40 })).toBe('allow allowed');
    now = start + 3_599_000;
    expect(await ask(agent, { amount: 1 })).toBe('403 constraint_violated: amount sum');
    // The first 60 leaves; the 40 from half an hour later stays.
    now = start + 3_600_000;
    expect(await ask(agent, { amount: 61 })).toBe('403 constraint_violated: amount sum');
    expect(await ask(agent, { amount: 60 })).toBe('allow allowed');
    now = start + 5_400_000;
    expect(await ask(agent, { amount: 40 })).toBe('allow allowed');
    const usage = (await server.admin('GET', `/agents/${encodeURIComponent(agent.id)}/usage`)).body.data;
    expect(usage).toEqual([expect.objectContaining({ kind: 'sum', used: 100, remaining: 0 })]);
  });
});
