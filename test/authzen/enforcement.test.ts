// Who may act on an agent through AuthZEN: only the application named as the agent's
// enforcement point in its grant spends the agent's limits and approvals; anyone else's
// evaluation, and every search, only reads. Searches are scoped by the grant and bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { newCaller, pdpPost, putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

const POLICY = `
policy "enforcement-points" version 1

rule "wires-need-a-person" {
  effect require_approval
  subjects "agent:*"
  relation "wire:payments"
  object "payment:*"
}
`;

let f: AuthzenFixture;
let agent: TestAgent;
/** an application whose grant names the agent as one it enforces for */
let enforcer: { client_id: string; token: string };

const grantTerms = (clientId: string, body: Record<string, unknown>) =>
  f.server.admin('PUT', `/applications/${clientId}/grants/${encodeURIComponent(f.api)}`, body);
const asks = (token: string, path: string, body: unknown) => pdpPost(f.base, path, body, { authorization: `Bearer ${token}` });

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'enforcement.policy': POLICY }, env: { GATEHOUSE_AUTHZEN_SEARCH_MAX_CANDIDATES: '2' } });
  await putRole(f.server, 'payer', ['pay:invoices', 'wire:payments']);
  await putRole(f.server, 'reader', ['read:documents']);
  agent = await registerAgent(f.server, {
    name: 'payer-bot',
    mode: 'autonomous',
    roles: ['payer'],
    capabilities: [{ name: 'pay:invoices', limits: { count: [{ max: 2, per: '1h' }] } }, { name: 'wire:payments' }],
  });
  enforcer = await newCaller(f.server);
  expect((await grantTerms(enforcer.client_id, { enforcement_point_for: [agent.id] })).status).toBe(204);
  for (const who of ['ann', 'bob', 'cy']) await putUser(f.server, { id: `${who}@example.com`, email: `${who}@example.com`, roles: ['reader'] });
}, 30_000);

afterAll(async () => {
  await f?.server.close();
});

describe('evaluations about an agent', () => {
  const pay = () => ({ subject: { type: 'agent', id: agent.id }, action: { name: 'pay' }, resource: { type: 'invoice', id: 'i-1' } });

  it('by an application that is not its enforcement point spend nothing of its budget; the named one does', async () => {
    // Two evaluations by an application holding the AuthZEN grant but not named for this agent: both answered, nothing spent.
    expect((await f.post('/access/v1/evaluation', pay())).body).toEqual({ decision: true });
    expect((await f.post('/access/v1/evaluation', pay())).body).toEqual({ decision: true });
    // The enforcement point still has the whole budget of 2.
    expect((await asks(enforcer.token, '/access/v1/evaluation', pay())).body).toEqual({ decision: true });
    expect((await asks(enforcer.token, '/access/v1/evaluation', pay())).body).toEqual({ decision: true });
    expect((await asks(enforcer.token, '/access/v1/evaluation', pay())).body).toEqual({ decision: false, context: { reason: 'constraint_violated: count' } });
    // The observer reads the limits as they stand.
    expect((await f.post('/access/v1/evaluation', pay())).body).toEqual({ decision: false, context: { reason: 'constraint_violated: count' } });
    // Observing is still recorded, under the application that asked.
    const audit = await f.server.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.id)}&caller=${encodeURIComponent(f.caller.client_id)}&limit=5`);
    expect(audit.body.data.map((r: { decision: string }) => r.decision)).toEqual(['deny', 'allow', 'allow']);
  });

  it('by an application that is not its enforcement point create no approval; the named one does', async () => {
    const wire = { subject: { type: 'agent', id: agent.id }, action: { name: 'wire' }, resource: { type: 'payment', id: 'p-1' } };
    const observed = await f.post('/access/v1/evaluation', wire);
    expect(observed.body).toEqual({ decision: false, context: { reason: 'approval_required: wires-need-a-person' } });
    expect((await f.server.admin('GET', '/approvals?state=pending')).body.data).toEqual([]);
    const enforced = await asks(enforcer.token, '/access/v1/evaluation', wire);
    expect(enforced.body.context).toEqual({ reason: 'approval_required: wires-need-a-person', approval_id: expect.any(String) });
    const approvalId = enforced.body.context.approval_id;
    expect((await f.server.admin('POST', `/approvals/${approvalId}/approve`, {})).status).toBeLessThan(300);
    // The one-time approval is not the observer's to consume: it is left for the enforcement point.
    expect((await f.post('/access/v1/evaluation', wire)).body.decision).toBe(false);
    expect((await asks(enforcer.token, '/access/v1/evaluation', wire)).body).toEqual({ decision: true });
  });

  it('`*` names every agent', async () => {
    const all = await newCaller(f.server);
    expect((await grantTerms(all.client_id, { enforcement_point_for: '*' })).status).toBe(204);
    const other = await registerAgent(f.server, { name: 'other-bot', mode: 'autonomous', roles: ['payer'], capabilities: [{ name: 'pay:invoices', limits: { count: [{ max: 1, per: '1h' }] } }] });
    const q = { subject: { type: 'agent', id: other.id }, action: { name: 'pay' }, resource: { type: 'invoice', id: 'i-2' } };
    expect((await asks(all.token, '/access/v1/evaluation', q)).body).toEqual({ decision: true });
    expect((await asks(all.token, '/access/v1/evaluation', q)).body).toEqual({ decision: false, context: { reason: 'constraint_violated: count' } });
  });
});

describe('the grant', () => {
  it('shows its AuthZEN terms and refuses them on a grant on another API', async () => {
    const app = await f.server.admin('GET', `/applications/${enforcer.client_id}`);
    expect(app.body.grants).toEqual([{ api_client_id: f.api, scopes: [], enforcement_point_for: [agent.id] }]);
    const api = await f.server.admin('POST', '/applications', { name: 'other-api', type: 'api', client_id: 'other-api' });
    expect(api.status).toBe(201);
    const res = await f.server.admin('PUT', `/applications/${enforcer.client_id}/grants/${'other-api'}`, { enforcement_point_for: '*' });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/^enforcement_point_for: /);
  });
});

describe('searches', () => {
  const readers = { subject: { type: 'user' }, action: { name: 'read' }, resource: { type: 'document', id: 'd-1' } };

  it('are scoped to the subject and resource types the grant lists', async () => {
    const scoped = await newCaller(f.server);
    expect((await grantTerms(scoped.client_id, { search_subject_types: ['user'], search_resource_types: ['document'] })).status).toBe(204);
    expect((await asks(scoped.token, '/access/v1/search/subject', readers)).status).toBe(200);
    const agents = await asks(scoped.token, '/access/v1/search/subject', { ...readers, subject: { type: 'agent' } });
    expect(agents.status).toBe(403);
    expect(agents.body.error_description).toMatch(/^subject\.type: /);
    const invoices = await asks(scoped.token, '/access/v1/search/resource', { subject: { type: 'user', id: 'ann@example.com' }, action: { name: 'read' }, resource: { type: 'invoice' } });
    expect(invoices.status).toBe(403);
    expect(invoices.body.error_description).toMatch(/^resource\.type: /);
  });

  it('examine a bounded number of candidates per request and page on from where they stopped', async () => {
    const first = await f.post('/access/v1/search/subject', readers);
    expect(first.status).toBe(200);
    // Bound of 2 candidates: a page of at most 2, with a token to go on.
    expect(first.body.results.length).toBeLessThanOrEqual(2);
    expect(first.body.page.next_token).not.toBe('');
    const found = [...first.body.results];
    let token: string = first.body.page.next_token;
    for (let i = 0; token && i < 10; i++) {
      const next = await f.post('/access/v1/search/subject', { ...readers, page: { token } });
      expect(next.status).toBe(200);
      found.push(...next.body.results);
      token = next.body.page.next_token;
    }
    expect(token).toBe('');
    expect(found.map((s: { id: string }) => s.id).sort()).toEqual(['ann@example.com', 'bob@example.com', 'cy@example.com']);
  });
});
