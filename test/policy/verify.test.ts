// Invariants: the counterexamples `verify` gives really break the invariant (decided afresh), and
// an invariant it proves is not broken by any request tried; plus the cases a reviewer asks about.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, type DecisionRequest } from '../../src/policy/index.js';
import type { Expr, InvariantNode, Item, PolicyFileNode } from '../../src/policy/ast.js';
import { compileCondition } from '../../src/policy/compile.js';
import { completeRequest } from '../../src/policy/explain.js';
import { formatFile } from '../../src/policy/format.js';
import { matchTyped, parseTypedPattern } from '../../src/policy/patterns.js';
import { envOf } from '../../src/policy/values.js';
import { breaks as breaksInvariant, invariantsOf, verifyInvariants, type InvariantResult } from '../../src/policy/verify.js';
import { MemoryIndex } from '../../src/policy/relations/index.js';
import { arbExpr, arbPolicyFileWith, arbRequest, setOf } from './helpers.js';
import { gatehouse, workDir } from '../cli/helpers.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const DECISION = { allow: 'allow', deny: 'deny', approval_required: 'approval_required' } as const;

/** Does the request break the invariant: its action and object are the invariant's, the condition holds, the decision is the one ruled out. */
function breaks(text: string, inv: InvariantNode, zone: string, req: DecisionRequest): boolean {
  const set = setOf(text, 'r.policy');
  if (!inv.relations.some((r) => matchTyped(parseTypedPattern(r)!, req.action)) || !matchTyped(parseTypedPattern(inv.object)!, req.resource)) return false;
  if (inv.when && compileCondition(inv.when, zone)(envOf(req)) !== 1) return false;
  return decide(req, set).decision === DECISION[inv.never as keyof typeof DECISION];
}

/** The counterexample as `policy explain --request` reads it, with the clock it names: `null` is a
 * request without a clock (a policy test without `now`), on which a rule reading `time.*` fails
 * closed; a counterexample without `now` holds at any time, so any fixed one does. */
function asRequest(r: InvariantResult): DecisionRequest {
  const { request } = completeRequest(r.counterexample);
  const now = r.counterexample!.now;
  request.now = typeof now === 'string' ? Date.parse(now) : now === null ? NaN : Date.parse('2026-01-05T12:00:00Z');
  if (r.counterexample!.usage) request.usage = r.counterexample!.usage;
  return request;
}

const arbInvariant: fc.Arbitrary<{ never: string; relation: string; object: string; when?: Expr }> = fc.record({
  never: fc.constantFrom('allow', 'deny', 'approval_required'),
  relation: fc.constantFrom('create:refunds', 'create:*', '*:refunds'),
  object: fc.constantFrom('*:*', 'refund:*'),
  when: fc.option(arbExpr, { nil: undefined }),
});

function withInvariant(file: PolicyFileNode, inv: { never: string; relation: string; object: string; when?: Expr }): string {
  const node: InvariantNode = { kind: 'invariant', name: 'i', never: inv.never, relations: [inv.relation], object: inv.object, ...(inv.when ? { when: inv.when } : {}) };
  return formatFile({ ...file, items: [...file.items, node] as Item[] });
}

describe('verify: random sets and invariants (random seed, printed by fast-check on failure)', () => {
  it('every counterexample breaks its invariant; a proven invariant is broken by no request tried', () => {
    let proven = 0, broken = 0;
    fc.assert(fc.property(arbPolicyFileWith({ rules: 3, limits: 1, usage: 1 }), arbInvariant, fc.array(arbRequest, { minLength: 40, maxLength: 40 }), (file, inv, reqs) => {
      const text = withInvariant(file, inv);
      const set = setOf(text, 'r.policy');
      const [{ inv: node, zone }] = invariantsOf(set);
      const [r] = verifyInvariants(set);
      if (r!.error) { fc.pre(false); return; }
      if (!r!.holds) {
        broken++;
        expect(breaks(text, node!, zone!, asRequest(r!)), JSON.stringify(r!.counterexample)).toBe(true);
        return;
      }
      proven++;
      // Requests as invariants speak of them: without a prior approval.
      for (const req of reqs) expect(breaks(text, node!, zone!, { ...req, approved: false }), JSON.stringify(req)).toBe(false);
    }), { numRuns: 60, interruptAfterTimeLimit: 120_000 });
    expect(proven).toBeGreaterThan(0);
    expect(broken).toBeGreaterThan(0);
  }, 300_000);
});

const REFUNDS = `rule "big refunds wait" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 100000
}
`;

describe('verify: the cases a reviewer asks about', () => {
  it('no agent is allowed a refund above 100000 without an approval; a person acting directly is, and is the counterexample', () => {
    const inv = `invariant "no large refund without a person" {
  never allow "create:refunds" on "refund:*" when amount > 100000
}
`;
    const [r] = verifyInvariants(setOf(REFUNDS + inv));
    expect(r).toMatchObject({ name: 'no large refund without a person', holds: false, line: 8 });
    expect(r!.counterexample).toMatchObject({ subject: { type: 'user' }, action: 'create:refunds' });
    expect((r!.counterexample!.context as { amount: number }).amount).toBeGreaterThan(100000);
    expect(decide(asRequest(r!), setOf(REFUNDS + inv)).decision).toBe('allow');
    const agentsOnly = inv.replace('when amount', 'when subject.type == "agent" and amount');
    expect(verifyInvariants(setOf(REFUNDS + agentsOnly))).toMatchObject([{ holds: true, counterexample: null }]);
  });

  it('nothing on a customer tagged vip is allowed to an agent without the vip-support role', () => {
    const rule = `rule "vip needs vip-support" {
  effect deny
  subjects "agent:*"
  relation "read:customers", "update:customers"
  object "customer:*"
  when resource.tags contains "vip" and not (subject.roles contains "vip-support")
}
`;
    const inv = `invariant "vip customers" {
  never allow "read:customers", "update:customers" on "customer:*" when subject.type == "agent" and resource.tags contains "vip" and not (subject.roles contains "vip-support")
}
`;
    expect(verifyInvariants(setOf(rule + inv))).toMatchObject([{ holds: true }]);
    // With the rule on reads only, an update breaks it.
    const weaker = rule.replace('relation "read:customers", "update:customers"', 'relation "read:customers"');
    const [r] = verifyInvariants(setOf(weaker + inv));
    expect(r).toMatchObject({ holds: false, counterexample: { action: 'update:customers', resource_attributes: { tags: expect.arrayContaining(['vip']) } } });
    expect(decide(asRequest(r!), setOf(weaker + inv)).decision).toBe('allow');
  });

  it('a delegated agent never reads a document its person cannot: relationship questions are walked, the counterexample carries its graph', () => {
    const text = `type user
type document {
  relation viewer: [user]
}

invariant "delegation stays within the person" {
  never allow "read:documents" on "document:*" when subject.type == "agent" and not (person has viewer on resource)
}
`;
    // Roles alone can grant the read, so the invariant does not hold: an agent whose person does not view the document.
    const [r] = verifyInvariants(setOf(text));
    expect(r!.holds).toBe(false);
    expect(r!.counterexample!.relationships).toEqual([]);
    const req = { ...asRequest(r!), relationships: new MemoryIndex() };
    expect(breaksInvariant(setOf(text), invariantsOf(setOf(text))[0]!.inv, 'UTC', req)).toBe(true);
    // A deny rule asking the same question makes it hold.
    const guarded = text + `
rule "only what the person views" {
  effect deny
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
  when not (person has viewer on resource)
}
`;
    expect(verifyInvariants(setOf(guarded))[0]).toMatchObject({ holds: true });
    // About an object read from a path: refused, not guessed.
    const [p] = verifyInvariants(setOf(text.replace('not (person has viewer on resource)', 'not (person has viewer on resource.doc)')));
    expect(p!.error).toMatch(/about an object read from a path/);
  });

  it('a request without a clock is a request too: an approval rule reading time.* applies to it, and the counterexample says now null', () => {
    const text = `rule "night refunds outside the euro wait" {
  effect require_approval
  subjects "group:eng"
  relation "create:refunds"
  object "refund:*"
  when time.hour < 8 and currency != "EUR"
}
invariant "euro refunds never wait" {
  never approval_required "create:refunds" on "refund:*" when currency == "EUR"
}
`;
    const [r] = verifyInvariants(setOf(text));
    expect(r).toMatchObject({ holds: false, counterexample: { now: null, context: { currency: 'EUR' } } });
    expect(decide(asRequest(r!), setOf(text)).decision).toBe('approval_required');
    // The same request at any hour of a clock is allowed: the condition is false, not unknown.
    expect(decide({ ...asRequest(r!), now: Date.parse('2026-01-05T03:00:00Z') }, setOf(text)).decision).not.toBe('approval_required');
    // Without the clock in the rule, nothing fails closed and the invariant holds.
    expect(verifyInvariants(setOf(text.replace('when time.hour < 8 and', 'when')))).toMatchObject([{ holds: true }]);
  });

  it('never deny: an agent without its capability is a counterexample', () => {
    const text = `rule "anyone refunds" {
  effect permit
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
}

invariant "refunds are never denied" {
  never deny "create:refunds" on "refund:*"
}
`;
    const [r] = verifyInvariants(setOf(text));
    expect(r!.holds).toBe(false);
    expect(decide(asRequest(r!), setOf(text)).decision).toBe('deny');
  });
});

describe('policy verify and policy check (CLI)', () => {
  it('prints the JSON shape, exits 1 on a broken invariant and 0 when all hold; check reports it as an error', async () => {
    const dir = await workDir();
    writeFileSync(join(dir, 'r.policy'), REFUNDS + `
invariant "no large refund without a person" {
  never allow "create:refunds" on "refund:*" when amount > 100000
}
`);
    const r = await gatehouse(['policy', 'verify', '--json', dir], dir);
    expect(r.code).toBe(1);
    const j = JSON.parse(r.stdout) as { invariants: InvariantResult[] };
    expect(j.invariants).toHaveLength(1);
    expect(Object.keys(j.invariants[0]!).sort()).toEqual(['counterexample', 'file', 'holds', 'line', 'name']);
    expect(j.invariants[0]).toMatchObject({ name: 'no large refund without a person', line: 9, holds: false });
    const c = await gatehouse(['policy', 'check', dir], dir);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/invariant "no large refund without a person" does not hold/);
    writeFileSync(join(dir, 'r.policy'), REFUNDS.replace('"agent:*"', '"agent:*", "user:*"') + `
invariant "no large refund without a person" {
  never allow "create:refunds" on "refund:*" when amount > 100000
}
`);
    const ok = await gatehouse(['policy', 'verify', dir], dir);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^holds/);
  }, 60_000);

  it('exits 2 when an invariant cannot be proven', async () => {
    const dir = await workDir();
    writeFileSync(join(dir, 'r.policy'), `type user
type document {
  relation viewer: [user]
}

invariant "x" {
  never allow "read:documents" on "document:*" when person has viewer on resource.folder
}
`);
    const r = await gatehouse(['policy', 'verify', dir], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/about an object read from a path/);
  }, 60_000);
});

describe('the invariants the docs and examples state', () => {
  it('hold: every policy block of docs/policy-language.md, and policies/examples', async () => {
    const { readFileSync } = await import('node:fs');
    const { projectRoot } = await import('../../src/paths.js');
    const guide = readFileSync(join(projectRoot, 'docs', 'policy-language.md'), 'utf8');
    const blocks = [...guide.matchAll(/^```policy\n([\s\S]*?)^```$/gm)].map((m) => m[1]!).filter((t) => /^invariant /m.test(t));
    expect(blocks.length).toBeGreaterThan(0);
    for (const text of blocks) expect(verifyInvariants(setOf(text)).map((r) => [r.name, r.holds])).toEqual(verifyInvariants(setOf(text)).map((r) => [r.name, true]));
    const r = await gatehouse(['policy', 'verify', '--json', join(projectRoot, 'policies', 'examples')], projectRoot);
    const j = JSON.parse(r.stdout) as { invariants: InvariantResult[] };
    expect(j.invariants.length).toBe(10);
    expect(j.invariants.filter((i) => !i.holds)).toEqual([]);
    expect(r.code).toBe(0);
  }, 60_000);
});
