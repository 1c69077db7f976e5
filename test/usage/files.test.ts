import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatehouse, workDir } from '../cli/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bind, bindAndDecide, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

// Limits over time written in policy files: the command line reads, checks, tests and explains
// them; a server enforces them, lists their counters and resets them.

const AGENT = 'spiffe://localhost/agent/filed';
const POLICY = `policy "budgets" version 1

limits "create:refunds" for "${AGENT}" {
  amount max 500
  amount sum max 1000 per 24h        # a budget
  count max 3 per 1h                 # a rate
  count max 2 per 10m per resource   # ... on one object
}
`;

const dirs: string[] = [];
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
const dir = async (files: Record<string, string>) => { const d = await workDir(files); dirs.push(d); return d; };

describe('the command line', () => {
  it('policy check names each bad limit over time at its line', async () => {
    const d = await dir({
      'policies/bad.policy': `policy "bad" version 1

limits "create:refunds" for "${AGENT}" {
  currency in ["USD", "EUR"]
  currency sum max 10 per 1h
  count max 20 per 1w
  amount sum max 5 per 32d
  count max 3 per 10m per team
}
`,
    });
    const r = await gatehouse(['policy', 'check', 'policies'], d);
    expect(r.code).toBe(1);
    const lines = r.stderr.split('\n');
    const at = (line: number, text: string) => expect(lines.some((l) => l.includes(`bad.policy:${line}:`) && l.includes(text))).toBe(true);
    at(5, 'currency sum: currency is compared with strings (in) in this block, and a sum needs a number');
    at(6, 'count: unknown window unit "w" in "1w" (use s, m, h or d)');
    at(7, 'amount sum: window "32d" is longer than 31 days');
    at(8, 'count: unknown scope "per team" (use per resource or per person)');
  });

  it('policy check accepts the forms of the language', async () => {
    const d = await dir({ 'policies/budgets.policy': POLICY });
    const r = await gatehouse(['policy', 'check', 'policies'], d);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('error');
  });

  it('policy test states prior usage; a wrong expectation fails', async () => {
    const test = (name: string, used: string, context: string, expect: string) => `test "${name}" {
  agent "${AGENT}" autonomous
  permissions "create:refunds"
  capability "create:refunds"
  action "create:refunds"
  resource "refund:r-1"
  context ${context}
  ${used}
  expect ${expect}
}
`;
    const d = await dir({
      'policies/budgets.policy': POLICY,
      'policies/budgets.tests': [
        test('fits the budget', 'used amount 600 in 24h', '{ amount: 400 }', 'allow "allowed"'),
        test('passes the budget', 'used amount 601 in 1d', '{ amount: 400 }', 'deny "constraint_violated: amount sum"'),
        test('the rate is spent', 'used count 3 in 60m', '{ amount: 1 }', 'deny "constraint_violated: count"'),
        test('the object is spent', 'used count 2 in 10m per resource', '{ amount: 1 }', 'deny "constraint_violated: count"'),
        test('another window is another counter', 'used count 3 in 2h', '{ amount: 1 }', 'allow "allowed"'),
        test('wrongly expected', 'used count 3 in 1h', '{ amount: 1 }', 'allow "allowed"'),
      ].join('\n'),
    });
    const r = await gatehouse(['policy', 'test', 'policies', '--format', 'json'], d);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { passed: number; failed: number; results: { name: string; pass: boolean; actual: { reason: string } }[] };
    expect(out.results.map((x) => [x.name, x.pass])).toEqual([
      ['fits the budget', true],
      ['passes the budget', true],
      ['the rate is spent', true],
      ['the object is spent', true],
      ['another window is another counter', true],
      ['wrongly expected', false],
    ]);
    expect(out.results.at(-1)!.actual.reason).toBe('constraint_violated: count');
  });

  it('policy explain shows the counters it read', async () => {
    const d = await dir({ 'policies/budgets.policy': POLICY });
    const request = { agent_id: AGENT, action: 'create:refunds', resource: 'refund:r-1', context: { amount: 300 }, usage: { 'amount sum per 24h': 800, 'count per 1h': 1 } };
    const r = await gatehouse(['policy', 'explain', 'policies', '--request', JSON.stringify(request), '--json'], d);
    expect(r.code).toBe(3);
    const out = JSON.parse(r.stdout) as { reason: string; trace: { step: string; check: string; outcome: string; reads?: { path: string; value: unknown }[] }[] };
    expect(out.reason).toBe('constraint_violated: amount sum');
    const step = out.trace.find((s) => s.step === 'limits' && s.outcome === 'fail')!;
    expect(step.check).toBe('amount sum max 1000 per 24h (used 800, this adds 300)');
    expect(step.reads).toContainEqual({ path: 'usage.amount sum per 1d', value: 800, present: true });
    // The text form names the counter read too.
    const text = await gatehouse(['policy', 'explain', 'policies', '--request', JSON.stringify(request)], d);
    expect(text.stdout).toContain('read: usage.amount sum per 1d = 800, context.amount = 300');
  });
});

describe('a server enforcing limits from its policy files', () => {
  let server: TestServer;
  let agent: TestAgent;
  beforeAll(async () => {
    server = await startTestServer({ policies: { 'budgets.policy': POLICY } });
    await putRole(server, 'refunder', ['create:refunds']);
    agent = await registerAgent(server, { name: 'filed', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds' }] });
    expect(agent.id).toBe(AGENT);
  });
  afterAll(() => server?.stop());
  const usage = async () => (await server.admin('GET', `/agents/${encodeURIComponent(AGENT)}/usage`)).body.data as { id: string; kind: string; per: string; scope: string; key?: string; max: number; used: number }[];

  it('counts, refuses with the limit reason, lists and resets the counters of the file', async () => {
    const token = await accessTokenFor(server, agent);
    const refund = (resource: string, amount: number) => bindAndDecide(server, agent, token, 'create:refunds', resource, { amount });
    expect((await refund('refund:a', 400)).decision!.decision).toBe('allow');
    expect((await refund('refund:a', 400)).decision!.decision).toBe('allow');
    // Two on refund:a in ten minutes: the object is spent (the transaction-token call refuses it).
    expect((await refund('refund:a', 10)).bindStatus).toBe(403);
    // 800 of 1000 used: 300 more does not fit.
    expect((await refund('refund:b', 300)).bindStatus).toBe(403);
    expect((await refund('refund:b', 200)).decision!.decision).toBe('allow');
    expect((await refund('refund:c', 1)).bindStatus).toBe(403);

    const listed = await usage();
    expect(listed.map((c) => [c.kind, c.per, c.scope, c.key, c.max, c.used]).sort()).toEqual([
      ['count', '10m', 'resource', 'refund:a', 2, 2],
      ['count', '10m', 'resource', 'refund:b', 2, 1],
      ['count', '1h', 'agent', undefined, 3, 3],
      ['sum', '24h', 'agent', undefined, 1000, 1000],
    ].sort());

    const rate = listed.find((c) => c.kind === 'count' && c.scope === 'agent')!;
    expect((await server.admin('DELETE', `/agents/${encodeURIComponent(AGENT)}/usage/${rate.id}`)).status).toBe(204);
    expect((await usage()).find((c) => c.id === rate.id)!.used).toBe(0);
    // The rate is free again; the budget is still spent.
    const after = await bind(server, token, 'create:refunds', 'refund:c', { amount: 1 });
    expect([after.status, after.body.error_description, after.body.reason]).toEqual([403, 'constraint_violated', 'constraint_violated: amount sum']);
    expect((await refund('refund:c', 0)).decision).toMatchObject({ decision: 'allow' });
  });
});
