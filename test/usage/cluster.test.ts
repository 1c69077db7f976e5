import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessToken, admin, bind, decide, dropCluster, registerAgent, startCluster, type ActionRequest, type Agent, type Cluster } from '../helpers/cluster.js';

// Rates and budgets on `npm start`'s cluster: a primary and two worker processes over one
// SQLite file. Requests land on either worker; the counters must hold across both.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-usage-cluster-'));
let cluster: Cluster;
let base: string;

beforeAll(async () => {
  cluster = await startCluster(dir);
  base = cluster.base;
  expect((await admin(base, 'PUT', '/roles/refunder', { permissions: ['create:refunds', 'send:emails'] })).status).toBeLessThan(300);
});
afterAll(async () => {
  await cluster?.stop();
  await dropCluster(dir);
  rmSync(dir, { recursive: true, force: true });
});

/** Binds `n` actions (each its own transaction token), then asks all the decisions at once. */
async function bindAll(agent: Agent, requests: ActionRequest[]): Promise<string[]> {
  const token = await accessToken(base, agent);
  const tokens: string[] = [];
  for (const r of requests) {
    const b = await bind(base, token, r);
    expect(b.status).toBe(200);
    tokens.push(b.body.data.transaction_token);
  }
  return tokens;
}

const usageOf = async (agent: Agent) => {
  const res = await admin(base, 'GET', `/agents/${encodeURIComponent(agent.id)}/usage`);
  expect(res.status).toBe(200);
  return res.body.data as { id: string; kind: string; field?: string; per: string; scope: string; key?: string; max: number; used: number; remaining: number }[];
};

describe('limits over time across worker processes', () => {
  it('50 concurrent decisions against 10 remaining: exactly 10 allow', async () => {
    const agent = await registerAgent(base, 'rate', [{ name: 'send:emails', limits: { count: [{ max: 15, per: '1h' }] } }], ['refunder']);
    // Use 5 first, one at a time: 10 remain.
    const first = Array.from({ length: 5 }, (_, i) => ({ action: 'send:emails', resource: `email:${i}`, context: {} }));
    for (const [i, t] of (await bindAll(agent, first)).entries()) expect((await decide(base, agent, t, first[i]!)).body.data.decision).toBe('allow');
    expect((await usageOf(agent))[0]).toMatchObject({ kind: 'count', per: '1h', max: 15, used: 5, remaining: 10 });

    const requests = Array.from({ length: 50 }, (_, i) => ({ action: 'send:emails', resource: `email:n${i}`, context: {} }));
    const tokens = await bindAll(agent, requests);
    const answers = await Promise.all(tokens.map((t, i) => decide(base, agent, t, requests[i]!)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const decisions = answers.map((a) => a.body.data);
    expect(decisions.filter((d) => d.decision === 'allow')).toHaveLength(10);
    expect(new Set(decisions.filter((d) => d.decision !== 'allow').map((d) => d.reason))).toEqual(new Set(['constraint_violated: count']));
    expect((await usageOf(agent))[0]).toMatchObject({ used: 15, remaining: 0 });
  });

  it('amounts that fit only in some orders: the total allowed never passes the budget', async () => {
    const agent = await registerAgent(base, 'budget', [{ name: 'create:refunds', limits: { amount: { max: 500, sum: { max: 1000, per: '24h' } } } }], ['refunder']);
    const amounts = [400, 350, 300, 250, 200, 150, 100, 450, 50, 375, 275, 125, 425, 325, 225, 175, 75, 25, 480, 10];
    const requests = amounts.map((amount, i) => ({ action: 'create:refunds', resource: `refund:${i}`, context: { amount } }));
    const tokens = await bindAll(agent, requests);
    const answers = await Promise.all(tokens.map((t, i) => decide(base, agent, t, requests[i]!)));
    const allowed = amounts.filter((_, i) => answers[i]!.body.data.decision === 'allow');
    const total = allowed.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(1000);
    // Whatever the order, every refused amount was refused because it no longer fitted.
    const smallestRefused = Math.min(...amounts.filter((_, i) => answers[i]!.body.data.decision !== 'allow'));
    expect(total + smallestRefused).toBeGreaterThan(1000);
    for (const a of answers) if (a.body.data.decision !== 'allow') expect(a.body.data.reason).toBe('constraint_violated: amount sum');
    expect((await usageOf(agent))[0]).toMatchObject({ kind: 'sum', field: 'amount', per: '24h', max: 1000, used: total, remaining: 1000 - total });
  });

  it('the same transaction token asked again, on any worker, consumes once', async () => {
    const agent = await registerAgent(base, 'repeat', [{ name: 'create:refunds', limits: { amount: { sum: { max: 100, per: '1h' } }, count: [{ max: 5, per: '1h' }] } }], ['refunder']);
    const request = { action: 'create:refunds', resource: 'refund:r', context: { amount: 60 } };
    const [token] = await bindAll(agent, [request]);
    const answers = await Promise.all(Array.from({ length: 20 }, () => decide(base, agent, token!, request)));
    expect(answers.map((a) => a.body.data.decision)).toEqual(Array(20).fill('allow'));
    const usage = await usageOf(agent);
    expect(usage.find((u) => u.kind === 'sum')).toMatchObject({ used: 60 });
    expect(usage.find((u) => u.kind === 'count')).toMatchObject({ used: 1 });
    // A new token for the same action would consume: 60 + 60 passes 100, so it is not even bound.
    const second = await bind(base, await accessToken(base, agent), request);
    expect([second.status, second.body.error_description]).toEqual([403, 'constraint_violated']);
  });

  it('the transaction-token call checks without consuming', async () => {
    const agent = await registerAgent(base, 'binder', [{ name: 'send:emails', limits: { count: [{ max: 1, per: '1h' }] } }], ['refunder']);
    const request = { action: 'send:emails', resource: 'email:b', context: {} };
    const [t1, t2] = await bindAll(agent, [request, request]);
    expect((await usageOf(agent))[0]).toMatchObject({ used: 0 });
    expect((await decide(base, agent, t1!, request)).body.data.decision).toBe('allow');
    expect((await decide(base, agent, t2!, request)).body.data).toMatchObject({ decision: 'deny', reason: 'constraint_violated: count' });
    const refused = await bind(base, await accessToken(base, agent), request);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'invalid_body', error_description: 'constraint_violated' });
  });

  it('the counters hold across a restart', async () => {
    const agent = await registerAgent(base, 'restart', [{ name: 'send:emails', limits: { count: [{ max: 3, per: '1h' }] } }], ['refunder']);
    const requests = Array.from({ length: 3 }, (_, i) => ({ action: 'send:emails', resource: `email:r${i}`, context: {} }));
    for (const [i, t] of (await bindAll(agent, requests)).entries()) expect((await decide(base, agent, t, requests[i]!)).body.data.decision).toBe('allow');
    expect(await cluster.stop()).toBe(0);
    cluster = await startCluster(dir);
    base = cluster.base;
    expect((await usageOf(agent))[0]).toMatchObject({ used: 3, remaining: 0 });
    const refused = await bind(base, await accessToken(base, agent), { action: 'send:emails', resource: 'email:after', context: {} });
    expect([refused.status, refused.body.error_description]).toEqual([403, 'constraint_violated']);
  }, 120_000); // two cluster starts (each worker compiles the sources)
});
