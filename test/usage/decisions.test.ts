import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, assertion, bindAndDecide, CIBA_GRANT, createRule, JWT_BEARER, postForm, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

// What consumes and what does not, through the real endpoints of one server.
let server: TestServer;
const usage = async (agent: TestAgent) => (await server.admin('GET', `/agents/${encodeURIComponent(agent.id)}/usage`)).body.data as {
  kind: string; scope: string; key?: string; used: number;
}[];

beforeAll(async () => {
  server = await startTestServer();
  await putRole(server, 'payer', ['pay:invoices', 'send:emails']);
});
afterAll(() => server?.stop());

describe('what consumes', () => {
  it('a deny and an approval_required consume nothing; the approved retry consumes when it is allowed', async () => {
    await createRule(server, { name: 'big-payments', effect: 'require_approval', subjects: ['agent:*'], relation: 'pay:invoices', object: 'invoice:*', condition: { field: 'amount', op: 'gte', value: 1000 } });
    await createRule(server, { name: 'no-test-invoices', effect: 'deny', subjects: ['agent:*'], relation: 'pay:invoices', object: 'invoice:*', condition: { field: 'test', op: 'eq', value: true } });
    const agent = await registerAgent(server, { name: 'payer', mode: 'autonomous', roles: ['payer'], capabilities: [{ name: 'pay:invoices', limits: { amount: { sum: { max: 3000, per: '1d' } }, count: [{ max: 5, per: '1h' }] } }] });
    const token = await accessTokenFor(server, agent);
    const pay = (resource: string, context: Record<string, unknown>) => bindAndDecide(server, agent, token, 'pay:invoices', resource, { test: false, ...context });

    expect((await pay('invoice:1', { amount: 10, test: true })).decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-test-invoices' });
    const waiting = await pay('invoice:2', { amount: 2000 });
    expect(waiting.decision!.decision).toBe('approval_required');
    expect((await usage(agent)).map((u) => u.used)).toEqual([0, 0]);

    expect((await server.admin('POST', `/approvals/${waiting.decision!.approval_id}/approve`)).status).toBe(200);
    expect((await pay('invoice:2', { amount: 2000 })).decision).toMatchObject({ decision: 'allow', reason: 'allowed: approved big-payments' });
    expect((await usage(agent)).map((u) => [u.kind, u.used])).toEqual([['sum', 2000], ['count', 1]]);

    // The budget now has 1000 left: a second approved 2000 is refused at the limits, before any approval.
    const over = await pay('invoice:3', { amount: 2000 });
    expect(over.bindStatus).toBe(403);
    expect((await pay('invoice:4', { amount: 999 })).decision!.decision).toBe('allow');
    expect((await usage(agent)).map((u) => [u.kind, u.used])).toEqual([['sum', 2999], ['count', 2]]);
  });

  it('per resource: one counter per object', async () => {
    const agent = await registerAgent(server, { name: 'mailer', mode: 'autonomous', roles: ['payer'], capabilities: [{ name: 'send:emails', limits: { count: [{ max: 2, per: '10m', scope: 'resource' }] } }] });
    const token = await accessTokenFor(server, agent);
    const send = (resource: string) => bindAndDecide(server, agent, token, 'send:emails', resource, {});
    expect((await send('email:a')).decision!.decision).toBe('allow');
    expect((await send('email:a')).decision!.decision).toBe('allow');
    expect((await send('email:a')).bindStatus).toBe(403);
    expect((await send('email:b')).decision!.decision).toBe('allow');
    const counters = await usage(agent);
    expect(counters.map((c) => [c.scope, c.key, c.used]).sort()).toEqual([['resource', 'email:a', 2], ['resource', 'email:b', 1]]);
  });

  it('per person: a delegated agent has one counter for each person it acts for', async () => {
    await putRole(server, 'mailer', ['send:emails']);
    const agent = await registerAgent(server, { name: 'secretary', mode: 'delegated', roles: ['mailer'], capabilities: [{ name: 'send:emails', limits: { count: [{ max: 1, per: '1h', scope: 'person' }] } }] });
    /** The agent's token for a person, through CIBA: ask, the person's approval, poll. */
    const tokenFor = async (email: string): Promise<{ token: string; userId: string }> => {
      const user = await server.admin('POST', '/users', { email, password: 'correct horse battery staple', name: email, roles: ['mailer'] });
      expect(user.status).toBe(201);
      const asked = await postForm(server.ctx.urls.backchannelAuthorize, { client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, agent), scope: 'send:emails', login_hint: email, binding_message: 'mail' });
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      const pending = (await server.admin('GET', '/approvals?state=pending')).body.data.find((a: { auth_req_id?: string }) => a.auth_req_id === asked.body.auth_req_id);
      expect((await server.admin('POST', `/approvals/${pending.id}/approve`)).status).toBeLessThan(300);
      await new Promise((r) => setTimeout(r, asked.body.interval * 1000 + 100));
      const token = await postForm(server.ctx.urls.agentToken, { client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, agent), grant_type: CIBA_GRANT, auth_req_id: asked.body.auth_req_id });
      expect(token.status, JSON.stringify(token.body)).toBe(200);
      return { token: token.body.access_token, userId: user.body.id };
    };
    const pat = await tokenFor('pat@example.com');
    const sam = await tokenFor('sam@example.com');
    const send = (token: string, resource: string) => bindAndDecide(server, agent, token, 'send:emails', resource, {});
    expect((await send(pat.token, 'email:1')).decision!.decision).toBe('allow');
    expect((await send(pat.token, 'email:2')).bindStatus).toBe(403);
    expect((await send(sam.token, 'email:3')).decision!.decision).toBe('allow');
    const counters = await usage(agent);
    expect(counters.map((c) => [c.scope, c.key, c.used]).sort()).toEqual([['person', pat.userId, 1], ['person', sam.userId, 1]].sort());
  }, 60_000);
});
