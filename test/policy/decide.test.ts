import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, loadPolicySet, renderReason, type DecisionRequest, type PersonFacts, type SubjectFacts } from '../../src/policy/index.js';
import type { Item, LimitsNode, PolicyFileNode, RuleNode } from '../../src/policy/ast.js';
import { arbExpr, arbPolicyFile, arbRequest, REFUNDS_EXAMPLE, reference, RUNS, setFromAst, setOf, SUBJECT_PATTERNS } from './helpers.js';

const BILLING = 'spiffe://localhost/agent/billing';
const set = setOf(REFUNDS_EXAMPLE, 'refunds.policy');
const NOW = Date.parse('2026-03-30T10:00:00Z');

function req(context: Record<string, unknown>, over: Partial<DecisionRequest> = {}, agentOver: Partial<SubjectFacts> = {}): DecisionRequest {
  return {
    subject: { type: 'agent', id: BILLING, mode: 'autonomous', roles: [], groups: [], attributes: {}, permissions: ['create:refunds'], capabilities: [{ name: 'create:refunds' }], ...agentOver },
    action: 'create:refunds', resource: 'refund:r1', context, now: NOW, ...over,
  };
}
const personOf = (id: string, permissions: string[], over: Partial<PersonFacts> = {}): PersonFacts => ({ id, permissions, roles: [], groups: [], attributes: {}, ...over });
const ok = { amount: 100, currency: 'EUR', channel: 'api' };

describe('decide: the decision order and reasons', () => {
  it('allows when every check passes, and carries the policy version', () => {
    const d = decide(req(ok), set);
    expect(d).toMatchObject({ decision: 'allow', reason: 'allowed', policyVersion: set.version });
    expect(set.version).toMatch(/^refunds@3#[0-9a-f]{12}$/);
    expect(d.trace.map((t) => t.step)).toEqual(['limits', 'limits', 'limits', 'limits', 'deny_rules', 'grants', 'grants', 'approval_rules', 'allow']);
    expect(d.trace[0]).toEqual({ step: 'limits', check: 'amount max 500 min 1', outcome: 'pass', source: 'refunds.policy:20' });
  });
  it('limits: max, min, in, not_in, eq and required', () => {
    expect(decide(req({ ...ok, amount: 501 }), set).reason).toBe('constraint_violated: amount max');
    expect(decide(req({ ...ok, amount: 0 }), set).reason).toBe('constraint_violated: amount min');
    expect(decide(req({ ...ok, amount: '100' }), set).reason).toBe('constraint_violated: amount max');
    expect(decide(req({ ...ok, currency: 'GBP' }), set).reason).toBe('constraint_violated: currency in');
    expect(decide(req({ ...ok, region: 'XX' }), set).reason).toBe('constraint_violated: region not_in');
    expect(decide(req({ ...ok, region: 'DE' }), set).decision).toBe('allow');
    expect(decide(req({ ...ok, channel: 'web' }), set).reason).toBe('constraint_violated: channel eq');
    const { channel: _c, ...noChannel } = ok;
    expect(decide(req(noChannel), set).reason).toBe('constraint_violated: channel required');
    const { amount: _a, ...noAmount } = ok;
    expect(decide(req(noAmount), set).reason).toBe('constraint_violated: amount required');
  });
  it('file limits apply only to the agent they are for; API limits apply too', () => {
    expect(decide(req({ amount: 5000 }, {}, { id: 'spiffe://localhost/agent/other' }), set).decision).toBe('approval_required');
    const api = (limits: Record<string, unknown>, context = ok) => decide(req(context, {}, { capabilities: [{ name: 'create:refunds', limits }] }), set);
    expect(api({ amount: { max: 50 } }).reason).toBe('constraint_violated: amount max');
    expect(api({ amount: { max: 5000 } }).reason).toBe('allowed');
    expect(api({ channel: 'api', extra: { not_in: [1] } }).reason).toBe('allowed');
    expect(api({ tier: 'gold' }).reason).toBe('constraint_violated: tier required');
    expect(api({ amount: { most: 1 } }).reason).toBe('constraint_violated: amount most');
  });
  it('a deny rule denies before grants and approval rules; missing or mistyped fields fail closed', () => {
    const other = { id: 'spiffe://localhost/agent/other', permissions: [] as string[] };
    expect(decide(req({ amount: 20000 }, {}, other), set)).toMatchObject({ decision: 'deny', reason: 'rule_denied: block-large-refunds', rule: 'block-large-refunds' });
    expect(decide(req({}, {}, other), set).reason).toBe('rule_denied: block-large-refunds');
    expect(decide(req({ amount: 'lots' }, {}, other), set).reason).toBe('rule_denied: block-large-refunds');
  });
  it('grants: capability, agent permission, and for a delegated agent the person', () => {
    const o = { id: 'spiffe://localhost/agent/other' };
    expect(decide(req({ amount: 5 }, {}, { ...o, capabilities: [] }), set).reason).toBe('not_granted: create:refunds (capability)');
    expect(decide(req({ amount: 5 }, {}, { ...o, permissions: ['read:refunds'] }), set).reason).toBe('not_granted: create:refunds');
    expect(decide(req({ amount: 5 }, { resource: 'deployment:1' }, o), set).reason).toBe('not_granted: create:refunds');
    const person = personOf('u1', ['read:refunds']);
    expect(decide(req({ amount: 5 }, { person }, { ...o, mode: 'delegated' }), set).reason).toBe('not_granted: create:refunds (person)');
    expect(decide(req({ amount: 5, currency: 'EUR' }, { person: personOf('u1', ['create:refunds']) }, { ...o, mode: 'delegated' }), set).reason).toBe('allowed');
    // a delegated agent acting for nobody (or without a person at all) is not granted
    expect(decide(req({ amount: 5 }, { person: personOf('', ['*:*']) }, { ...o, mode: 'delegated' }), set).reason).toBe('not_granted: create:refunds (person)');
    expect(decide(req({ amount: 5 }, { person: null }, { ...o, mode: 'delegated' }), set).reason).toBe('not_granted: create:refunds (person)');
  });
  it('approval rules, and an approved action', () => {
    const o = { id: 'spiffe://localhost/agent/other' };
    expect(decide(req({ amount: 5000, currency: 'USD' }, {}, o), set)).toMatchObject({ decision: 'approval_required', reason: 'approval_required: approve-medium-refunds', rule: 'approve-medium-refunds' });
    expect(decide(req({ amount: 5000, currency: 'EUR' }, {}, o), set).decision).toBe('allow');
    expect(decide(req({ amount: 5000, currency: 'USD' }, { approved: true }, o), set)).toMatchObject({ decision: 'allow', reason: 'allowed: approved approve-medium-refunds' });
  });
  it('API rules compile like file rules and are traced as api:rule/<id>', () => {
    const r = loadPolicySet({ files: [{ path: 'refunds.policy', text: REFUNDS_EXAMPLE }], rules: [{ id: 'r7', name: 'no-weekends', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'weekend', op: 'eq', value: true } }] });
    const d = decide(req({ ...ok, weekend: true }), r.policySet!);
    expect(d.reason).toBe('rule_denied: no-weekends');
    expect(d.trace.find((t) => t.step === 'deny_rules' && t.outcome === 'fail')!.source).toBe('api:rule/r7');
    expect(r.policySet!.version).not.toBe(set.version);
  });
  it('kind singulars declared in a file are used by grants', () => {
    const s = setOf('kind "people" singular "person"\n');
    const r: DecisionRequest = req({}, { action: 'invite:people', resource: 'person:p1' }, { id: 'a', permissions: ['invite:people'], capabilities: [{ name: 'invite:people' }] });
    expect(decide(r, s).decision).toBe('allow');
  });
  it('never throws, on any input', () => {
    fc.assert(fc.property(fc.anything(), fc.anything(), fc.anything(), fc.anything(), (subject, context, resource, now) => {
      const d = decide({ subject, action: 'create:refunds', resource, context, now } as unknown as DecisionRequest, set);
      expect(['deny', 'allow', 'approval_required']).toContain(d.decision);
      if (d.reason.startsWith('error:')) expect(d.decision).toBe('deny');
    }), RUNS);
    expect(decide(null as unknown as DecisionRequest, set).reason).toMatch(/^error: /);
    expect(decide(req(ok), null as never).decision).toBe('deny');
  });
  it('costs the same with many unrelated rules (indexed by relation and kind)', () => {
    let text = REFUNDS_EXAMPLE;
    for (let i = 0; i < 300; i++) text += `rule "other-${i}" {\n  effect deny\n  subjects "agent:*"\n  relation "create:things${i}"\n  object "thing${i}:*"\n}\n`;
    const big = setOf(text, 'refunds.policy');
    const d = decide(req(ok), big);
    expect(d.decision).toBe('allow');
    expect(d.trace.length).toBe(decide(req(ok), set).trace.length);
  });
});

describe('decide: properties', () => {
  it('the compiled evaluator agrees with the reference interpreter', () => {
    fc.assert(fc.property(arbPolicyFile, arbRequest, (file, r) => {
      const d = decide(r, setFromAst(file));
      expect({ decision: d.decision, reason: d.reason }).toEqual(reference(file, r));
    }), { numRuns: 400 });
  });

  it('each step of the decision order dominates the later ones', () => {
    const everything = (effect: string, i: number) => ({ kind: 'rule' as const, name: `zz-${effect}-${i}`, effect, subjects: ['agent:*'], relation: '*:*', object: '*:*' });
    fc.assert(fc.property(arbPolicyFile, arbRequest, (file, r) => {
      const d = decide(r, setFromAst(file));
      const ungranted: DecisionRequest = { ...r, subject: { ...r.subject, permissions: [] } };
      const withApproval: PolicyFileNode = { ...file, items: [...file.items, everything('require_approval', 1)] };
      const withDeny: PolicyFileNode = { ...file, items: [...file.items, everything('deny', 2), everything('require_approval', 3)] };
      if (d.reason.startsWith('constraint_violated:')) {
        // limits win over deny rules, grants and approval rules
        expect(decide(ungranted, setFromAst(withDeny)).reason).toBe(d.reason);
      } else if (d.reason.startsWith('rule_denied:')) {
        expect(decide({ ...ungranted, approved: true }, setFromAst(withDeny)).reason).toBe(d.reason);
      } else if (d.reason.startsWith('not_granted:')) {
        expect(decide(r, setFromAst(withApproval)).reason).toBe(d.reason);
      } else if (d.decision === 'approval_required') {
        expect(decide(r, setFromAst(withApproval)).reason).toBe(d.reason);
      }
      // and a deny from an earlier step is never undone by a later one
      if (d.decision === 'deny') expect(decide({ ...r, approved: true }, setFromAst(withApproval)).decision).toBe('deny');
    }), RUNS);
  });

  it('lowering a max never turns a deny into an allow (file and API limits)', () => {
    fc.assert(fc.property(arbPolicyFile, arbRequest, fc.integer({ min: 1, max: 200 }), (file, r, by) => {
      const before = decide(r, setFromAst(file));
      const lowered: PolicyFileNode = {
        ...file,
        items: file.items.map((i) => (i.kind === 'limits'
          ? ({ ...i, fields: i.fields.map((f) => (typeof f.max === 'number' ? { ...f, max: f.max - by, ...(typeof f.min === 'number' ? { min: Math.min(f.min, f.max - by) } : {}) } : f)) } as LimitsNode)
          : i)),
      };
      const caps = r.subject.capabilities?.map((c) => {
        const l = c.limits as Record<string, { max?: number; min?: number }> | undefined;
        if (!l?.amount || typeof l.amount.max !== 'number') return c;
        return { ...c, limits: { ...l, amount: { ...l.amount, max: l.amount.max - by } } };
      });
      const after = decide({ ...r, subject: { ...r.subject, ...(caps ? { capabilities: caps } : {}) } }, setFromAst(lowered));
      if (before.decision === 'deny') expect(after.decision).toBe('deny');
      if (after.decision === 'allow') expect(before.decision).toBe('allow');
    }), RUNS);
  });

  const RANK = { deny: 0, approval_required: 1, allow: 2 } as const;
  const arbExtraRule = (effect: string) => fc.record({
    subjects: fc.uniqueArray(fc.constantFrom(...SUBJECT_PATTERNS), { minLength: 1, maxLength: 2 }),
    relation: fc.constantFrom('create:refunds', 'create:*', '*:*', 'delete:refunds'),
    object: fc.constantFrom('refund:*', '*:*', 'deployment:*'),
    when: fc.option(arbExpr, { nil: undefined }),
  }).map((r): RuleNode => ({ kind: 'rule', name: `extra-${effect}`, effect, subjects: r.subjects, relation: r.relation, object: r.object, ...(r.when ? { when: r.when } : {}) }));
  const withRule = (file: PolicyFileNode, rule: RuleNode): PolicyFileNode => ({ ...file, items: [...file.items, rule] as Item[] });

  it('a permit rule only widens: what was allowed stays allowed', () => {
    fc.assert(fc.property(arbPolicyFile, arbExtraRule('permit'), arbRequest, (file, rule, r) => {
      const before = decide(r, setFromAst(file)), after = decide(r, setFromAst(withRule(file, rule)));
      expect(RANK[after.decision]).toBeGreaterThanOrEqual(RANK[before.decision]);
      if (before.decision !== 'deny' || !before.reason.startsWith('not_granted:')) expect(after.reason).toBe(before.reason);
    }), RUNS);
  });

  it('a deny rule only narrows: nothing becomes more allowed', () => {
    fc.assert(fc.property(arbPolicyFile, arbExtraRule('deny'), arbRequest, (file, rule, r) => {
      const before = decide(r, setFromAst(file)), after = decide(r, setFromAst(withRule(file, rule)));
      expect(RANK[after.decision]).toBeLessThanOrEqual(RANK[before.decision]);
      if (after.decision !== before.decision) expect(after.reason).toBe('rule_denied: extra-deny');
    }), RUNS);
  });

  it('more prior usage never makes a decision more allowed', () => {
    const more = (u: Record<string, number> | undefined, by: number): Record<string, number> =>
      Object.fromEntries(['count per 1h', 'count per 1h per resource', 'amount sum per 1d', 'amount sum per 1d per resource'].map((k) => [k, (u?.[k] ?? 0) + by]));
    fc.assert(fc.property(arbPolicyFile, arbRequest, fc.constantFrom(0.5, 1, 60), (file, r, by) => {
      const s = setFromAst(file);
      const before = decide(r, s), after = decide({ ...r, usage: more(r.usage, by) }, s);
      expect(RANK[after.decision]).toBeLessThanOrEqual(RANK[before.decision]);
      if (after.decision !== before.decision) expect(after.reason).toMatch(/^constraint_violated: (count|amount sum)$/);
    }), RUNS);
  });

  it('a missing attribute never turns a deny into an allow (nor anything into something more allowed)', () => {
    const removals: ((r: DecisionRequest) => DecisionRequest)[] = [
      (r) => ({ ...r, context: {} }),
      (r) => ({ ...r, resourceAttributes: {} }),
      (r) => ({ ...r, subject: { ...r.subject, attributes: {} } }),
      (r) => { const { email: _e, ...subject } = r.subject; return { ...r, subject }; },
      (r) => (r.person ? { ...r, person: { ...r.person, email: undefined } } : r),
      (r) => ({ ...r, now: NaN }),
      (r) => { const { owner: _o, ...rest } = r.resourceAttributes ?? {}; return { ...r, resourceAttributes: rest }; },
      (r) => { const { amount: _a, ...rest } = r.context; return { ...r, context: rest }; },
    ];
    // Rules and the attributes they read. (A limit `not_in` alone on a context field lets a missing
    // field through, as it always has: limits are left out here.)
    fc.assert(fc.property(arbPolicyFile, arbRequest, fc.nat(removals.length - 1), (file0, r0, i) => {
      const file = { ...file0, items: file0.items.filter((x) => x.kind !== 'limits') };
      const r = r0.subject.capabilities ? { ...r0, subject: { ...r0.subject, capabilities: r0.subject.capabilities.map((c) => ({ name: c.name })) } } : r0;
      const s = setFromAst(file);
      const before = decide(r, s), after = decide(removals[i]!(r), s);
      expect(RANK[after.decision]).toBeLessThanOrEqual(RANK[before.decision]);
    }), { numRuns: 400 });
  });

  it('the reason is rendered from the cause', () => {
    fc.assert(fc.property(arbPolicyFile, arbRequest, (file, r) => {
      const d = decide(r, setFromAst(file));
      expect(d.reason).toBe(renderReason(d.cause));
    }), RUNS);
    expect(renderReason({ code: 'constraint_violated', field: null, operator: 'count' })).toBe('constraint_violated: count');
    expect(renderReason({ code: 'not_granted', action: 'a:b', missing: 'subject' })).toBe('not_granted: a:b');
    expect(renderReason({ code: 'error', message: 'x' })).toBe('error: x');
  });
});
