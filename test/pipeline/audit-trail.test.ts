import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { flushRefusalSummary } from '../../src/agents/refusal-summary.js';
import {
  accessTokenFor,
  agentToken,
  assertion,
  authorize,
  bind,
  JWT_BEARER,
  newKeyPair,
  postForm,
  putRole,
  registerAgent,
  type TestAgent,
} from '../agents/helpers.js';

// Every refusal on the way to a decision leaves a record, and every decision exactly one.
let s: TestServer;
let bot: TestAgent;
let token: string;

beforeAll(async () => {
  s = await startTestServer();
  await putRole(s, 'refunder', ['create:refunds']);
  bot = await registerAgent(s, {
    name: 'refund-bot',
    mode: 'autonomous',
    roles: ['refunder'],
    capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }, { name: 'read:invoices' }],
  });
  token = await accessTokenFor(s, bot);
});
afterAll(() => s?.stop());

/** The newest records of every kind for one agent. */
async function trail(agentId: string): Promise<Record<string, unknown>[]> {
  const res = await s.admin('GET', `/audit?kind=all&agent_id=${encodeURIComponent(agentId)}&limit=100`);
  expect(res.status).toBe(200);
  return res.body.data;
}

const signIn = async (fields: Record<string, string>) =>
  postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, ...fields });

describe('refused agent sign-ins are in the audit trail', () => {
  it('a bad assertion (another key), a replayed jti, a revoked agent, an unknown agent', async () => {
    const impostor = await newKeyPair();
    const forged = await signIn({ client_assertion: await assertion(s, bot, { key: impostor.privateKey }) });
    expect(forged.status).toBe(401);

    const once = await assertion(s, bot);
    expect((await signIn({ client_assertion: once })).status).toBe(200);
    expect((await signIn({ client_assertion: once })).status).toBe(401);

    const records = await trail(bot.id);
    const refusals = records.filter((r) => r.decision === 'refused');
    expect(refusals.map((r) => [r.kind, r.action, r.reason])).toEqual([
      ['token', 'token:client_credentials', 'invalid_client: the client assertion was already used'],
      ['token', 'token:client_credentials', 'invalid_client: the client assertion is not valid (signature, audience or time)'],
    ]);

    const gone = await registerAgent(s, { name: 'gone', mode: 'autonomous', capabilities: [{ name: 'read:invoices' }] });
    expect((await s.admin('POST', `/agents/${encodeURIComponent(gone.id)}/revoke`)).status).toBe(204);
    expect((await agentToken(s, gone)).status).toBe(401);
    expect((await trail(gone.id))[0]).toMatchObject({ kind: 'token', decision: 'refused', reason: 'invalid_client: unknown or revoked agent' });

    // An agent that does not exist: counted, and summed up in one record without an agent.
    const stranger = { ...gone, id: 'spiffe://localhost/agent/nobody' };
    expect((await agentToken(s, stranger)).status).toBe(401);
    expect(await trail(stranger.id)).toEqual([]);
    await flushRefusalSummary(s.ctx);
    const summary = (await s.ctx.store.audit.list({ kind: 'token', limit: 50 })).find((r) => r.reason?.startsWith('unknown_agent: '));
    expect(summary).toMatchObject({ agent_id: null, decision: 'refused', reason: 'unknown_agent: 1 refused sign-in for agents that do not exist', context: { count: 1, claimed: [stranger.id] } });
  });

  it('a refusal after the assertion (a scope the agent does not hold)', async () => {
    const res = await agentToken(s, bot, { scope: 'delete:everything' });
    expect(res.body.error).toBe('invalid_scope');
    expect((await trail(bot.id))[0]).toMatchObject({ kind: 'token', action: 'token:client_credentials', decision: 'refused', reason: expect.stringMatching(/^invalid_scope: /) });
  });
});

describe('refused bindings are in the audit trail, naming the field and operator', () => {
  it('a limit broken at binding: 403 with the reason, one record', async () => {
    const before = (await trail(bot.id)).length;
    const res = await bind(s, token, 'create:refunds', 'refund:9', { amount: 900 });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'invalid_body', error_description: 'constraint_violated', reason: 'constraint_violated: amount max' });
    const records = await trail(bot.id);
    expect(records.length).toBe(before + 1);
    expect(records[0]).toMatchObject({
      kind: 'token',
      action: 'create:refunds',
      resource: 'refund:9',
      context: { amount: 900 },
      decision: 'refused',
      reason: 'constraint_violated: amount max',
    });
    expect(records[0]!.policy_version).toMatch(/\S/);
  });

  it('an action outside the token: 403 insufficient_scope, recorded', async () => {
    const narrow = await accessTokenFor(s, bot, { scope: 'read:invoices' });
    const res = await bind(s, narrow, 'create:refunds', 'refund:10', { amount: 5 });
    expect([res.status, res.body.error, res.body.reason]).toEqual([403, 'insufficient_scope', 'not_granted: create:refunds (capability)']);
    expect((await trail(bot.id))[0]).toMatchObject({ kind: 'token', action: 'create:refunds', decision: 'refused', reason: 'not_granted: create:refunds (capability)' });
  });

  it('an issued binding is one record too, naming its transaction', async () => {
    const res = await bind(s, token, 'create:refunds', 'refund:11', { amount: 5 });
    expect(res.status).toBe(200);
    const txn = JSON.parse(Buffer.from(res.body.data.transaction_token.split('.')[1], 'base64url').toString()).txn;
    expect((await trail(bot.id))[0]).toMatchObject({ kind: 'token', action: 'create:refunds', decision: 'issued', reason: `transaction token ${txn}` });
  });
});

describe('each decision writes exactly one record', () => {
  it('allow, a limit lowered after binding, an invalid transaction token', async () => {
    const ctx = { amount: 300 };
    const bound = await bind(s, token, 'create:refunds', 'refund:12', ctx);
    const ask = () => authorize(s, { agent_id: bot.id, transaction_token: bound.body.data.transaction_token, action: 'create:refunds', resource: 'refund:12', context: ctx });
    const decisions = async () => (await s.admin('GET', `/audit?agent_id=${encodeURIComponent(bot.id)}&limit=100`)).body.data as Record<string, unknown>[];

    const n0 = (await decisions()).length;
    expect((await ask()).body.data).toMatchObject({ decision: 'allow', reason: 'allowed' });
    expect((await decisions()).length).toBe(n0 + 1);

    expect((await s.admin('PUT', `/agents/${encodeURIComponent(bot.id)}/capabilities/create:refunds`, { limits: { amount: { max: 100 } } })).status).toBe(200);
    expect((await ask()).body.data).toMatchObject({ decision: 'deny', reason: 'constraint_violated: amount max' });
    const after = await decisions();
    expect(after.length).toBe(n0 + 2);
    expect(after[0]).toMatchObject({ kind: 'decision', decision: 'deny', reason: 'constraint_violated: amount max', context: ctx });

    const wrong = await authorize(s, { agent_id: bot.id, transaction_token: bound.body.data.transaction_token, action: 'create:refunds', resource: 'refund:13', context: ctx });
    expect(wrong.body.data).toMatchObject({ decision: 'deny', reason: 'invalid_transaction_token: bound to another resource' });
    const last = await decisions();
    expect(last.length).toBe(n0 + 3);
    expect(last[0]).toMatchObject({ resource: 'refund:13', decision: 'deny', reason: 'invalid_transaction_token: bound to another resource' });
  });
});
