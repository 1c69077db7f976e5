import { mkdtemp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bindAndDecide, createRule, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
// The refunds example policy, verbatim.
import { REFUNDS_EXAMPLE } from '../policy/helpers.js';

/** Black-box: the policy files as a user writes them, the CLI as a user runs it. */


let work: string;

async function run(args: string[]) {
  let out = '', err = '';
  const code = await runPolicyCommand(args, { stdout: (s) => { out += s; }, stderr: (s) => { err += s; }, cwd: work });
  return { code, out, err };
}

/** A directory under the work dir holding one refunds.policy (and optional other files). */
async function policyDir(name: string, text: string, extra: Record<string, string> = {}): Promise<string> {
  await mkdir(join(work, name), { recursive: true });
  await writeFile(join(work, name, 'refunds.policy'), text);
  for (const [f, t] of Object.entries(extra)) await writeFile(join(work, name, f), t);
  return name;
}

async function explainJson(dir: string, request: unknown) {
  const r = await run(['explain', dir, '--json', '--request', JSON.stringify(request)]);
  const j = JSON.parse(r.out) as { decision: 'allow' | 'deny' | 'approval_required'; reason: string; trace: unknown[] };
  expect(r.code, r.err).toBe({ allow: 0, deny: 3, approval_required: 4 }[j.decision]); // explain's exit code is the decision
  return j;
}

interface Change { subjects: string[]; relation: string; object: string; region: Record<string, any>; before: string; after: string; example: any }

/** Runs diff --json; checks every change's shape and that its example really has its decisions. */
async function diffJson(oldT: string, newT: string): Promise<{ code: number; changes: Change[] }> {
  const r = await run(['diff', oldT, newT, '--json']);
  expect([0, 1], r.err).toContain(r.code);
  const j = JSON.parse(r.out);
  expect(Array.isArray(j.changes)).toBe(true);
  expect(r.code).toBe(j.changes.length ? 1 : 0);
  for (const c of j.changes as Change[]) {
    expect(Object.keys(c)).toEqual(expect.arrayContaining(['subjects', 'relation', 'object', 'region', 'before', 'after', 'example']));
    expect(Array.isArray(c.subjects)).toBe(true);
    expect(typeof c.region).toBe('object');
    expect(c.before).not.toBe(c.after);
    for (const d of [c.before, c.after]) expect(['allow', 'deny', 'approval_required']).toContain(d);
    // the example is a request the user can explain against each side
    expect((await explainJson(oldT, c.example)).decision).toBe(c.before);
    expect((await explainJson(newT, c.example)).decision).toBe(c.after);
  }
  return { code: r.code, changes: j.changes };
}

const billingMain = (cs: Change[]) => cs.filter((c) => c.relation === 'create:refunds' && c.object === 'refund:*');

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gh-contract-policy-'));
  await policyDir('v3', REFUNDS_EXAMPLE);
});

describe('policy files and CLI', () => {
  it('the contract example parses exactly as written, is in canonical layout, and has no tests', async () => {
    const c = await run(['check', 'v3']);
    expect(c.code, c.err).toBe(0);
    expect(c.out).toMatch(/2 rules/);
    expect((await run(['fmt', 'v3', '--check'])).code).toBe(0);
    expect((await run(['test', 'v3'])).code).toBe(0);
  });

  it('check prints every error as file:line:col: message and exits 1', async () => {
    const broken = REFUNDS_EXAMPLE.replace('effect deny', 'effect forbid').replace('amount max 500 min 1', 'amount most 500');
    await policyDir('broken', broken, { 'other.policy': 'rule "x" {\n  effect deny\n  subjects "robot:*"\n  relation "create:refunds"\n  object "refund:*"\n  when amount > "5"\n}\n' });
    const r = await run(['check', 'broken']);
    expect(r.code).toBe(1);
    const lines = r.err.split('\n').filter((l) => /^broken\//.test(l));
    for (const l of lines) expect(l).toMatch(/^broken\/[a-z]+\.policy:\d+:\d+: \S/);
    expect(lines.filter((l) => l.startsWith('broken/refunds.policy:')).length).toBeGreaterThanOrEqual(2);
    expect(lines.some((l) => l.startsWith('broken/refunds.policy:4:'))).toBe(true); // effect forbid, line 4
    expect(lines.filter((l) => l.startsWith('broken/other.policy:')).length).toBeGreaterThanOrEqual(2); // robot:*, amount > "5"
  });

  it('fmt --check flags a messy file (exit 1), fmt prints and fmt --write rewrites it to the canonical layout', async () => {
    const messy = REFUNDS_EXAMPLE.replace(/\n  /g, '\n      ').replace('amount max 500 min 1', 'amount   max 500   min 1');
    const d = await policyDir('messy', messy);
    const chk = await run(['fmt', d, '--check']);
    expect(chk.code).toBe(1);
    expect(chk.out).toContain('messy/refunds.policy');
    expect(await readFile(join(work, d, 'refunds.policy'), 'utf8')).toBe(messy); // --check writes nothing
    const printed = await run(['fmt', d]);
    expect(printed.code).toBe(0);
    expect(printed.out).toBe(REFUNDS_EXAMPLE);
    expect(await readFile(join(work, d, 'refunds.policy'), 'utf8')).toBe(messy); // printing writes nothing
    expect((await run(['fmt', d, '--write'])).code).toBe(0);
    expect(await readFile(join(work, d, 'refunds.policy'), 'utf8')).toBe(REFUNDS_EXAMPLE);
  });

  it('test runs the cases kept beside the policies: pass 0, a failing case 1', async () => {
    const good = `test "medium USD refund waits" {\n  agent "spiffe://localhost/agent/ops" autonomous\n  permissions "create:refunds"\n  capability "create:refunds"\n  action "create:refunds"\n  resource "refund:r1"\n  context { amount: 2000, currency: "USD" }\n  expect approval_required\n}\n`;
    await policyDir('tested', REFUNDS_EXAMPLE, { 'refunds.tests': good });
    const ok = await run(['test', 'tested']);
    expect(ok.code, ok.out + ok.err).toBe(0);
    expect(ok.out).toMatch(/1 passed, 0 failed/);
    await policyDir('tested-bad', REFUNDS_EXAMPLE, { 'refunds.tests': good.replace('expect approval_required', 'expect allow') });
    expect((await run(['test', 'tested-bad'])).code).toBe(1);
  });

  it('diff: reformatting and reordering gives no change (exit 0), file against directory', async () => {
    const blocks = REFUNDS_EXAMPLE.split('\n\n');
    const reordered = [blocks[0], blocks[3], blocks[2], blocks[1]].join('\n\n').replace(/\n  /g, '\n    ')
      .replace('amount max 500 min 1', 'amount min 1 max 500')
      .replace('currency in ["USD", "EUR"]', 'currency in ["EUR", "USD"]')
      .replace('when amount >= 1000 and currency == "USD"', 'when (currency == "USD" and amount >= 1000)');
    const d = await policyDir('reordered', reordered + '\n# a comment\n');
    const r = await diffJson('v3/refunds.policy', d);
    expect(r.code).toBe(0);
    expect(r.changes).toEqual([]);
    const plain = await run(['diff', 'v3', 'reordered/refunds.policy']);
    expect(plain.code).toBe(0);
  });

  it('diff: a lowered max is allow → deny on the amounts between', async () => {
    const d = await policyDir('lower-max', REFUNDS_EXAMPLE.replace('amount max 500', 'amount max 300'));
    const r = await diffJson('v3', d);
    expect(r.code).toBe(1);
    const main = billingMain(r.changes);
    expect(main).toHaveLength(1);
    expect(main[0]).toMatchObject({ subjects: ['agent:spiffe://localhost/agent/billing'], before: 'allow', after: 'deny' });
    expect(main[0]!.region.amount).toEqual({ gt: 300, lte: 500 });
    expect(main[0]!.example.context.amount).toBeGreaterThan(300);
    expect(main[0]!.example.context.amount).toBeLessThanOrEqual(500);
    expect(main[0]!.example.resource).toMatch(/^refund:/);
  });

  it('diff: a new deny rule turns its region to deny', async () => {
    const rule = `\nrule "no-refunds-to-XY" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when country == "XY"\n}\n`;
    const d = await policyDir('new-deny', REFUNDS_EXAMPLE + rule);
    const r = await diffJson('v3', d);
    expect(r.code).toBe(1);
    expect(r.changes.length).toBeGreaterThan(0);
    for (const c of r.changes) {
      expect(c.after).toBe('deny');
      expect(c.example.context.country).toBe('XY');
    }
    expect(r.changes.some((c) => c.before === 'allow')).toBe(true);
    expect(r.changes.some((c) => c.before === 'approval_required')).toBe(true);
  });

  it('diff: a rule on any kind of an action (create:*) gives examples an agent could be granted', async () => {
    const rule = `\nrule "freeze" {\n  effect deny\n  subjects "agent:*"\n  relation "create:*"\n  object "refund:*"\n}\n`;
    const r = await diffJson('v3', await policyDir('wild', REFUNDS_EXAMPLE + rule));
    expect(r.changes.length).toBeGreaterThan(0);
    for (const c of r.changes) expect(c.example.action).toMatch(/^create:refunds?$/); // create:refund covers refund:* too
  });

  it('diff: a changed in list names the value that moved', async () => {
    const d = await policyDir('in-list', REFUNDS_EXAMPLE.replace('currency in ["USD", "EUR"]', 'currency in ["USD"]'));
    const r = await diffJson('v3', d);
    const main = billingMain(r.changes);
    expect(main).toHaveLength(1);
    expect(main[0]).toMatchObject({ before: 'allow', after: 'deny' });
    expect(main[0]!.example.context.currency).toBe('EUR');
    expect(JSON.stringify(main[0]!.region.currency)).toContain('EUR');
    expect(JSON.stringify(main[0]!.region.currency)).not.toContain('USD');
  });

  it('diff: a changed approval threshold is allow → approval_required between the thresholds', async () => {
    const d = await policyDir('threshold', REFUNDS_EXAMPLE.replace('amount >= 1000 and', 'amount >= 500 and'));
    const r = await diffJson('v3', d);
    const main = r.changes.filter((c) => c.subjects[0] === 'agent:*' && c.object === 'refund:*');
    expect(main).toHaveLength(1);
    expect(main[0]).toMatchObject({ relation: 'create:refunds', before: 'allow', after: 'approval_required' });
    expect(main[0]!.region.amount).toEqual({ gte: 500, lt: 1000 });
    expect(main[0]!.region.currency).toEqual({ in: ['USD'] });
  });

  it('diff: exit 2 on an error (a missing side, a broken file, a missing argument)', async () => {
    expect((await run(['diff', 'v3', 'nope'])).code).toBe(2);
    expect((await run(['diff', 'v3', 'broken'])).code).toBe(2);
    expect((await run(['diff', 'v3'])).code).toBe(2);
  });

  it('explain gives the decision and every check that led to it', async () => {
    const req = { agent_id: 'spiffe://localhost/agent/billing', action: 'create:refunds', resource: 'refund:r1', context: { amount: 700, currency: 'USD', channel: 'api' } };
    const j = await explainJson('v3', req);
    expect(j).toMatchObject({ decision: 'deny', reason: 'constraint_violated: amount max' });
    expect(j.trace.length).toBeGreaterThan(1);
    // Nothing is assumed granted: the agent's permissions are stated, as the server's roles would give them.
    const text = await run(['explain', 'v3', '--request', JSON.stringify({ agent: { id: 'spiffe://localhost/agent/ops', permissions: ['create:refunds'] }, action: req.action, resource: req.resource, context: { amount: 2000, currency: 'USD' } })]);
    expect(text.code).toBe(4);
    expect(text.out).toContain('decision: approval_required');
    expect(text.out).toContain('approval_required: approve-medium-refunds');
    expect(text.out).toMatch(/deny_rules/);
  });
});

describe('policy in the server: files and management API alike', () => {
  let s: TestServer;
  let fileAgent: TestAgent;
  let fileToken: string;
  const FILE_POLICY = `policy "shipping" version 1

kind "people" singular "person"

rule "big-refunds-wait" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >= 1000
}

rule "no-xx-refunds" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when region == "XX"
}

limits "create:refunds" for "spiffe://localhost/agent/both-limits" {
  currency in ["USD"]
}
`;

  beforeAll(async () => {
    s = await startTestServer({ policies: { 'shipping.policy': FILE_POLICY } });
    await putRole(s, 'worker', ['create:refunds', 'create:payouts', 'pack:boxes', 'read:policies', 'greet:people']);
    // the same two rules as the file, through the management API, on payouts
    await createRule(s, { name: 'big-payouts-wait', effect: 'require_approval', subjects: ['agent:*'], relation: 'create:payouts', object: 'payout:*', condition: { field: 'amount', op: 'gte', value: 1000 } });
    await createRule(s, { name: 'no-xx-payouts', effect: 'deny', subjects: ['agent:*'], relation: 'create:payouts', object: 'payout:*', condition: { field: 'region', op: 'eq', value: 'XX' } });
    fileAgent = await registerAgent(s, {
      name: 'both-limits', mode: 'autonomous', roles: ['worker'],
      capabilities: [
        { name: 'create:refunds', limits: { amount: { max: 5000 } } },
        { name: 'create:payouts' }, { name: 'pack:boxes' }, { name: 'read:policies' }, { name: 'greet:people' },
      ],
    });
    fileToken = await accessTokenFor(s, fileAgent);
  });
  afterAll(() => s.stop());

  it('the agent ID is the SPIFFE ID the file names', () => {
    expect(fileAgent.id).toBe('spiffe://localhost/agent/both-limits');
  });

  it('a rule through the API (JSON shape) decides as the same rule in a file', async () => {
    const contexts: Record<string, unknown>[] = [
      { amount: 999, currency: 'USD' }, { amount: 1000, currency: 'USD' }, { amount: 4000, currency: 'USD', region: 'XX' },
      { amount: 10, currency: 'USD', region: 'EU' }, { currency: 'USD' } /* missing field: fails closed */, { amount: '1000', currency: 'USD' },
    ];
    for (const context of contexts) {
      const file = await bindAndDecide(s, fileAgent, fileToken, 'create:refunds', 'refund:r1', context);
      const api = await bindAndDecide(s, fileAgent, fileToken, 'create:payouts', 'payout:p1', context);
      if (file.bindStatus !== 200) continue; // a limit refused binding: not a rule question
      expect(api.decision!.decision, JSON.stringify(context)).toBe(file.decision!.decision);
      const code = (r: string) => r.replace(/refund|payout/g, 'x');
      expect(code(api.decision!.reason)).toBe(code(file.decision!.reason));
    }
    const missing = await bindAndDecide(s, fileAgent, fileToken, 'create:payouts', 'payout:p1', { currency: 'USD' });
    expect(missing.decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-xx-payouts' });
  });

  it('limits from a file and from the API on the same capability both apply', async () => {
    const both = await bindAndDecide(s, fileAgent, fileToken, 'create:refunds', 'refund:r2', { amount: 10, currency: 'USD', region: 'EU' });
    expect(both.decision).toMatchObject({ decision: 'allow', reason: 'allowed' });
    const overApi = await bindAndDecide(s, fileAgent, fileToken, 'create:refunds', 'refund:r2', { amount: 6000, currency: 'USD', region: 'EU' });
    expect(overApi.bindStatus).toBe(403);
    const overFile = await bindAndDecide(s, fileAgent, fileToken, 'create:refunds', 'refund:r2', { amount: 10, currency: 'EUR', region: 'EU' });
    expect(overFile.bindStatus).toBe(403);
  });

  it('a permission covers the singular kind: boxes → box, policies → policy, and a declared singular', async () => {
    expect((await bindAndDecide(s, fileAgent, fileToken, 'pack:boxes', 'box:b1', {})).decision).toMatchObject({ decision: 'allow' });
    expect((await bindAndDecide(s, fileAgent, fileToken, 'pack:boxes', 'boxe:b1', {})).decision).toMatchObject({ decision: 'deny', reason: expect.stringMatching(/^not_granted: /) });
    expect((await bindAndDecide(s, fileAgent, fileToken, 'read:policies', 'policy:p1', {})).decision).toMatchObject({ decision: 'allow' });
    expect((await bindAndDecide(s, fileAgent, fileToken, 'read:policies', 'policie:p1', {})).decision).toMatchObject({ decision: 'deny' });
    expect((await bindAndDecide(s, fileAgent, fileToken, 'greet:people', 'person:ada', {})).decision).toMatchObject({ decision: 'allow' });
    expect((await bindAndDecide(s, fileAgent, fileToken, 'greet:people', 'people:ada', {})).decision).toMatchObject({ decision: 'deny' });
  });
});
