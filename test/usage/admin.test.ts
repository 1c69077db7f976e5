import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bindAndDecide, newKeyPair, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

let server: TestServer;
let agent: TestAgent;
const path = (id: string) => `/agents/${encodeURIComponent(id)}/usage`;

beforeAll(async () => {
  server = await startTestServer();
  await putRole(server, 'refunder', ['create:refunds']);
  agent = await registerAgent(server, {
    name: 'billing',
    mode: 'autonomous',
    roles: ['refunder'],
    capabilities: [{
      name: 'create:refunds',
      limits: { amount: { max: 500, sum: { max: 2000, per: '24h' } }, count: [{ max: 20, per: '1h' }, { max: 3, per: '10m', scope: 'resource' }] },
    }],
  });
});
afterAll(() => server?.stop());

describe('GET /admin/v1/agents/{agent_id}/usage', () => {
  it('lists every counter of the agent, the scoped ones once they hold usage', async () => {
    const token = await accessTokenFor(server, agent);
    for (const amount of [100, 250]) {
      const r = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-1', { amount });
      expect(r.decision?.decision).toBe('allow');
    }
    const res = await server.admin('GET', path(agent.id));
    expect(res.status).toBe(200);
    const byKind = (kind: string, scope = 'agent') => res.body.data.filter((c: { kind: string; scope: string }) => c.kind === kind && c.scope === scope);
    expect(byKind('sum')).toEqual([
      { id: expect.any(String), capability: 'create:refunds', kind: 'sum', field: 'amount', per: '24h', scope: 'agent', max: 2000, used: 350, remaining: 1650 },
    ]);
    expect(byKind('count')).toEqual([
      { id: expect.any(String), capability: 'create:refunds', kind: 'count', per: '1h', scope: 'agent', max: 20, used: 2, remaining: 18 },
    ]);
    expect(byKind('count', 'resource')).toEqual([
      { id: expect.any(String), capability: 'create:refunds', kind: 'count', per: '10m', scope: 'resource', key: 'refund:r-1', max: 3, used: 2, remaining: 1 },
    ]);

    // The decision's audit record carries every counter before and after it, by the ids listed here.
    const audit = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.id)}&limit=1`);
    const ids = Object.fromEntries(res.body.data.map((c: { id: string; kind: string; scope: string }) => [`${c.kind}/${c.scope}`, c.id]));
    expect(audit.body.data[0].decision).toBe('allow');
    expect(new Set(audit.body.data[0].usage)).toEqual(new Set([
      { id: ids['sum/agent'], counter: 'amount sum per 1d', max: 2000, before: 100, after: 350 },
      { id: ids['count/agent'], counter: 'count per 1h', max: 20, before: 1, after: 2 },
      { id: ids['count/resource'], counter: 'count per 10m per resource', key: 'refund:r-1', max: 3, before: 1, after: 2 },
    ]));
  });

  it('404 for an unknown agent', async () => {
    const res = await server.admin('GET', path('spiffe://localhost/agent/nobody'));
    expect([res.status, res.body.error]).toEqual([404, 'not_found']);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await fetch(`${server.url}/admin/v1/openapi.json`).then((r) => r.json())) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths['/agents/{agent_id}/usage']!)).toContain('get');
    expect(Object.keys(doc.paths['/agents/{agent_id}/usage/{id}']!)).toContain('delete');
  });
});

describe('DELETE /admin/v1/agents/{agent_id}/usage/{id}', () => {
  it('resets the counter, and the reset is in the audit trail', async () => {
    const before = (await server.admin('GET', path(agent.id))).body.data;
    const sum = before.find((c: { kind: string }) => c.kind === 'sum');
    expect(sum.used).toBeGreaterThan(0);
    const res = await server.admin('DELETE', `${path(agent.id)}/${sum.id}`);
    expect(res.status).toBe(204);
    const after = (await server.admin('GET', path(agent.id))).body.data;
    expect(after.find((c: { id: string }) => c.id === sum.id)).toMatchObject({ used: 0, remaining: 2000 });
    // The other counters are untouched.
    expect(after.find((c: { kind: string; scope: string }) => c.kind === 'count' && c.scope === 'agent').used).toBe(2);
    const audit = await server.admin('GET', `/audit?kind=usage&agent_id=${encodeURIComponent(agent.id)}`);
    expect(audit.body.data[0]).toMatchObject({ kind: 'usage', action: 'create:refunds', decision: 'reset', reason: 'usage reset: amount sum per 24h (used 350)' });
  });

  it('404 for an unknown counter or agent', async () => {
    expect((await server.admin('DELETE', `${path(agent.id)}/no-such-counter`)).status).toBe(404);
    expect((await server.admin('DELETE', `${path('spiffe://localhost/agent/nobody')}/x`)).status).toBe(404);
  });
});

describe('limits over time in the management API', () => {
  it('a bad limit is a 400 naming the field', async () => {
    const res = await server.admin('PUT', `/agents/${encodeURIComponent(agent.id)}/capabilities/create:refunds`, {
      limits: { count: [{ max: 20, per: '1w' }] },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_description).toContain('count[0].per: unknown window unit "w" in "1w" (use s, m, h or d)');
    const sum = await server.admin('PUT', `/agents/${encodeURIComponent(agent.id)}/capabilities/create:refunds`, {
      limits: { currency: { in: ['USD'], sum: { max: 5, per: '1h' } } },
    });
    expect(sum.status).toBe(400);
    expect(sum.body.error_description).toContain('currency.sum: currency is compared with strings (in), and a sum needs a number');
    const long = await server.admin('PUT', `/agents/${encodeURIComponent(agent.id)}/capabilities/create:refunds`, {
      limits: { amount: { sum: { max: 5, per: '32d' } } },
    });
    expect(long.body.error_description).toContain('amount.sum.per: window "32d" is longer than 31 days');
  });

  it('POST and PATCH /agents check the capabilities\' limits over time the same way, and store the good ones as given', async () => {
    const bad = { count: [{ max: 2, per: '3y' }], amount: { sum: [{ max: 5, per: '1d' }, { max: 9, per: '744h1' }] }, note: { eq: 'x' }, currency: { in: ['USD'], sum: { max: 1, per: '1h' } } };
    const { publicJwk } = await newKeyPair();
    const created = await server.admin('POST', '/agents', { name: 'checked', mode: 'autonomous', public_jwk: publicJwk, capabilities: [{ name: 'create:refunds', limits: bad }] });
    expect(created.status).toBe(400);
    const messages = created.body.issues.map((i: { path: string; message: string }) => `${i.path}: ${i.message}`);
    expect(messages).toEqual(expect.arrayContaining([
      'capabilities.0.limits: count[0].per: unknown window unit "y" in "3y" (use s, m, h or d)',
      expect.stringMatching(/^capabilities\.0\.limits: amount\.sum\[1\]\.per: /),
      'capabilities.0.limits: currency.sum: currency is compared with strings (in), and a sum needs a number',
    ]));
    const limits = { amount: { max: 500, sum: [{ max: 2000, per: '24h' }, { max: 300, per: '1h', scope: 'person' }] }, count: [{ max: 20, per: '1h' }, { max: 3, per: '10m', scope: 'resource' }] };
    const good = await server.admin('POST', '/agents', { name: 'checked', mode: 'autonomous', public_jwk: publicJwk, capabilities: [{ name: 'create:refunds', limits }] });
    expect(good.status).toBe(201);
    expect(good.body.capabilities).toEqual([{ name: 'create:refunds', limits }]);
    const id = encodeURIComponent(good.body.agent_id);
    const patched = await server.admin('PATCH', `/agents/${id}`, { capabilities: [{ name: 'create:refunds', limits: { amount: { sum: { max: 100, per: '32d' } } } }] });
    expect([patched.status, patched.body.issues?.[0]?.message]).toEqual([400, 'amount.sum.per: window "32d" is longer than 31 days']);
    // The refused change left the agent as it was: its counters are those of the stored limits.
    const listed = (await server.admin('GET', `/agents/${id}/usage`)).body.data.map((c: { kind: string; per: string; max: number }) => `${c.kind} ${c.per} ${c.max}`);
    expect(listed).toEqual(['sum 24h 2000', 'count 1h 20']);
  });
});
