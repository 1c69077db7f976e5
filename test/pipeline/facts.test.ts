import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCache } from '../../src/authz/agent-cache.js';
import { evaluate } from '../../src/authz/core.js';
import { loadFacts } from '../../src/authz/facts.js';
import { loadPolicySet } from '../../src/policy/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

// The facts a decision is fed come from the management API's current state, and the core
// decides on facts alone.
let s: TestServer;
let agent: TestAgent;

beforeAll(async () => {
  s = await startTestServer();
  await putRole(s, 'support', ['read:customers']);
  agent = await registerAgent(s, { name: 'helper', mode: 'delegated', roles: ['support'], capabilities: [{ name: 'read:customers' }] });
});
afterAll(() => s?.stop());

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('the facts of a decision', () => {
  it('are the agent, its person and the stored entity, as the management API last left them', async () => {
    expect((await s.admin('PATCH', `/agents/${encodeURIComponent(agent.id)}`, { attributes: { max_amount: 200, team: { name: 'eu' } } })).status).toBe(200);
    const user = await s.admin('POST', '/users', { email: 'pat@example.com', password: 'correct horse battery', name: 'Pat', roles: ['support'], groups: ['finance'], attributes: { region: 'eu' } });
    expect(user.status).toBe(201);
    expect((await s.admin('PUT', '/entities/customer/c1', { attributes: { owner: 'pat@example.com', tags: ['vip'] } })).status).toBe(201);
    await nextTurn();

    const state = (await agentCache(s.ctx).active(agent.id))!;
    const facts = await loadFacts(s.ctx, state, user.body.id, 'customer:c1');
    expect(facts.subject).toMatchObject({
      type: 'agent',
      id: agent.id,
      mode: 'delegated',
      roles: ['support'],
      groups: ['finance'],
      permissions: ['read:customers'],
      attributes: { max_amount: 200, team: { name: 'eu' } },
    });
    expect(facts.person).toMatchObject({ id: user.body.id, email: 'pat@example.com', groups: ['finance'], permissions: ['read:customers'], attributes: { region: 'eu' } });
    expect(facts.resourceAttributes).toEqual({ owner: 'pat@example.com', tags: ['vip'] });

    // A change applies to the next decision.
    expect((await s.admin('PUT', '/entities/customer/c1', { attributes: { owner: 'sam@example.com' } })).status).toBe(200);
    await nextTurn();
    expect((await loadFacts(s.ctx, state, user.body.id, 'customer:c1')).resourceAttributes).toEqual({ owner: 'sam@example.com' });
    expect((await s.admin('DELETE', '/entities/customer/c1')).status).toBe(204);
    await nextTurn();
    expect((await loadFacts(s.ctx, state, user.body.id, 'customer:c1')).resourceAttributes).toEqual({});
  });

  it('of a delegated agent acting for nobody grant nothing through the person', async () => {
    const state = (await agentCache(s.ctx).active(agent.id))!;
    const facts = await loadFacts(s.ctx, state, null, 'customer:c2');
    expect(facts.person).toEqual({ id: '', roles: [], groups: [], permissions: [], attributes: {} });
  });
});

describe('the core decides on facts alone', () => {
  it('without a store: facts in, the decision and its audit record out', () => {
    const { policySet } = loadPolicySet({
      files: [{ path: 'p.policy', text: 'policy "p" version 1\n\nrule "big" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when amount > 100\n}\n' }],
    });
    const subject = { type: 'agent' as const, id: 'a1', mode: 'autonomous' as const, roles: [], groups: [], permissions: ['create:refunds'], attributes: {}, capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }] };
    const request = { subject, action: 'create:refunds', resource: 'refund:1', context: { amount: 300 }, now: Date.UTC(2026, 0, 5, 12) };
    const denied = evaluate(request, policySet);
    expect(denied.decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: big', cause: { code: 'rule_denied', rule: 'big' } });
    expect(denied.audit).toMatchObject({ kind: 'decision', agent_id: 'a1', user_id: null, decision: 'deny', reason: 'rule_denied: big', time: Date.UTC(2026, 0, 5, 12) / 1000 });

    const over = evaluate({ ...request, context: { amount: 900 } }, policySet);
    expect(over.decision).toMatchObject({ decision: 'deny', reason: 'constraint_violated: amount max', cause: { code: 'constraint_violated', field: 'amount', operator: 'max' } });
    expect(evaluate({ ...request, context: { amount: 5 } }, policySet).decision).toMatchObject({ decision: 'allow', cause: { code: 'allowed' } });
    expect(evaluate(request, null).decision).toMatchObject({ decision: 'deny', reason: 'policy_unavailable', cause: { code: 'policy_unavailable' } });
  });
});
