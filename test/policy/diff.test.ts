import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, type DecisionRequest, type PersonFacts, type SubjectFacts } from '../../src/policy/index.js';
import { diffPolicySets, inRegion, type Change } from '../../src/policy/diff.js';
import type { Expr, Item, PolicyFileNode } from '../../src/policy/ast.js';
import type { PolicySet } from '../../src/policy/compile.js';
import { completeRequest } from '../../src/policy/explain.js';
import { arbPolicyAndAtom, arbPolicyPair, arbRequest, cmp, CONTRACT_EXAMPLE, L, normalize, NOWS, P, setFromAst, setOf } from './helpers.js';
import { formatFile } from '../../src/policy/format.js';
import { parsePolicy } from '../../src/policy/parser.js';

/** A request as diff regions speak of it: the capability of the action held, no prior approval. */
function inSpace(r: DecisionRequest): DecisionRequest {
  const out: DecisionRequest = { ...r, approved: false };
  if (r.subject.type === 'agent') out.subject = { ...r.subject, capabilities: [{ name: r.action }] };
  return out;
}

/** Every request changes decision exactly when it lies in one reported region, with that region's before and after. */
function expectExact(changes: Change[], a: PolicySet, b: PolicySet, requests: Iterable<DecisionRequest>): number {
  let changed = 0;
  for (const r of requests) {
    const before = decide(r, a).decision, after = decide(r, b).decision;
    const hits = changes.filter((c) => inRegion(c, r));
    if (before === after) {
      if (hits.length) throw new Error(`unchanged request in a region:\n${JSON.stringify(r)}\n${JSON.stringify(hits[0])}`);
    } else {
      changed++;
      if (hits.length !== 1) throw new Error(`changed request (${before} -> ${after}) in ${hits.length} regions:\n${JSON.stringify(r)}\n${JSON.stringify(hits)}`);
      expect([hits[0]!.before, hits[0]!.after]).toEqual([before, after]);
    }
  }
  return changed;
}

/** Each example lies in its region, changes as reported, and explains the same from its JSON. */
function expectExamples(changes: Change[], a: PolicySet, b: PolicySet): void {
  for (const c of changes) {
    const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => NaN);
    expect(inRegion(c, request), JSON.stringify(c)).toBe(true);
    expect([decide(request, a).decision, decide(request, b).decision]).toEqual([c.before, c.after]);
  }
}

describe('diff', () => {
  const old = setOf(CONTRACT_EXAMPLE, 'old.policy');

  it('a reformatted and reordered policy set reports no change', () => {
    const reordered = CONTRACT_EXAMPLE.replace(/\n\n/g, '\n').replace('amount max 500 min 1', 'amount min 1   max 500')
      .replace('when amount >= 1000 and currency == "USD"', 'when (currency == "USD") and amount >= 1000');
    const file = parsePolicy('new.policy', reordered).file!;
    const items = [file.items[2]!, file.items[0]!, file.items[1]!];
    const shuffled = setOf(formatFile({ ...file, items }).replace('version 3', 'version 4'), 'new.policy');
    expect(diffPolicySets(old, shuffled).changes).toEqual([]);
  });

  it('reports a changed threshold as a region with an example', () => {
    const next = setOf(CONTRACT_EXAMPLE.replace('amount > 10000', 'amount > 5000'), 'new.policy');
    const { changes } = diffPolicySets(old, next);
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) {
      expect(c.before).not.toBe(c.after);
      expect(c.after).toBe('deny');
      expect(c.region.amount).toBeDefined();
    }
    expectExamples(changes, old, next);
    const main = changes.find((c) => c.subjects.length === 1 && c.subjects[0] === 'agent:*' && c.object === 'refund:*')!;
    expect(main).toMatchObject({ relation: 'create:refunds', before: 'approval_required', after: 'deny', region: { amount: { gt: 5000, lte: 10000 } } });
    expect(main.no_person).toBeUndefined(); // with or without a person
    expect(main.except).toEqual({ subjects: ['agent:spiffe://localhost/agent/billing'] });
  });

  const todos = (when: string, effect = 'permit', subjects = '"role:editor"') => `timezone "Europe/Berlin"\n\nrule "own" {\n  effect ${effect}\n  subjects ${subjects}\n  relation "update:todos"\n  object "todo:*"\n  when ${when}\n}\n`;

  it('prints a relation between two values, with an example carrying the attributes it needs', () => {
    const a = setOf(todos('resource.owner == person.email and resource.tags contains "open"'));
    const b = setOf(todos('resource.tags contains "open"'));
    const { changes } = diffPolicySets(a, b);
    expect(changes.length).toBeGreaterThan(0);
    const rel = changes.find((c) => c.region['resource.owner vs person.email']);
    expect(rel, JSON.stringify(changes, null, 1)).toBeDefined();
    expect(rel!.region['resource.owner vs person.email']).toEqual({ not: { op: '==' } });
    expect(rel!.example.resource_attributes).toBeDefined();
    expect(rel!.example.person).toBeDefined();
    expectExamples(changes, a, b);
  });

  it('time regions carry the zone and an example instant', () => {
    const a = setOf(todos('time.hour >= 8', 'deny', '"agent:*"'));
    const b = setOf(todos('time.hour >= 9', 'deny', '"agent:*"'));
    const { changes } = diffPolicySets(a, b);
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) {
      expect(c.timezone).toBe('Europe/Berlin');
      expect(c.region['time.hour']).toEqual({ eq: 8 });
      expect(typeof c.example.now).toBe('string');
    }
    expectExamples(changes, a, b);
  });

  it('is exact over random policy pairs (sampled requests)', () => {
    fc.assert(fc.property(arbPolicyPair, fc.array(arbRequest, { minLength: 30, maxLength: 30 }), ([a, b], reqs) => {
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffPolicySets(sa, sb);
      expectExact(changes, sa, sb, reqs.map(inSpace));
      expectExamples(changes, sa, sb);
    }), { numRuns: 30 });
  }, 300_000);

  it('is exact for a set against itself with one rule changed (sampled requests)', () => {
    fc.assert(fc.property(arbPolicyAndAtom, fc.array(arbRequest, { minLength: 40, maxLength: 40 }), ([a, atom], reqs) => {
      const rules = a.items.filter((i) => i.kind === 'rule');
      if (!rules.length) return;
      const target = rules[0]!;
      const b: PolicyFileNode = { ...a, items: a.items.map((i) => (i === target ? { ...target, when: normalize(target.when ? { type: 'and', items: [target.when, atom] } : atom) } : i)) as Item[] };
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffPolicySets(sa, sb);
      expectExact(changes, sa, sb, reqs.map(inSpace));
    }), { numRuns: 30 });
  }, 300_000);

  it('reports no change between a set and itself with items reordered (random)', () => {
    fc.assert(fc.property(arbPolicyPair, ([a]) => {
      const rules = a.items.filter((i) => i.kind === 'rule');
      const rest = a.items.filter((i) => i.kind !== 'rule');
      // reordering limits blocks never changes a decision
      const b: PolicyFileNode = { ...a, items: [...rest.reverse(), ...rules] as Item[] };
      expect(diffPolicySets(setFromAst(a), setFromAst(b)).changes).toEqual([]);
    }), { numRuns: 30 });
  }, 300_000);
});

// ---- brute force over small domains --------------------------------------------------------

function* product<T extends Record<string, unknown[]>>(dims: T): Generator<{ [K in keyof T]: T[K][number] }> {
  const keys = Object.keys(dims) as (keyof T)[];
  const idx = keys.map(() => 0);
  for (;;) {
    yield Object.fromEntries(keys.map((k, i) => [k, dims[k]![idx[i]!]])) as { [K in keyof T]: T[K][number] };
    let i = keys.length - 1;
    for (; i >= 0; i--) { if (++idx[i]! < dims[keys[i]!]!.length) break; idx[i] = 0; }
    if (i < 0) return;
  }
}

/** Small domains: every combination of who acts, roles, grants, a few attribute values, and a few instants. */
function* smallRequests(): Generator<DecisionRequest> {
  for (const g of product({
    who: ['auto', 'deleg', 'user'],
    roles: [[], ['editor']],
    granted: [true, false],
    personGranted: [true, false],
    email: ['ada@x.com', undefined],
    owner: ['ada@x.com', 'bob@y.com', 7, undefined],
    tags: [['vip'], [], ['x'], 'vip'],
    amount: [0, 5, 7, 10, 50, 'x', undefined],
    now: [NOWS[0]!, NOWS[3]!, NOWS[6]!, NaN],
  })) {
    if (g.who !== 'deleg' && !g.personGranted) continue;
    const perms = (ok: boolean) => (ok ? ['update:todos'] : ['read:todos']);
    const subject: SubjectFacts = {
      type: g.who === 'user' ? 'user' : 'agent', id: g.who === 'user' ? 'u1' : 'a', roles: g.roles, groups: [], permissions: perms(g.granted),
      attributes: { max_amount: 10 },
    };
    if (g.who !== 'user') { subject.mode = g.who === 'deleg' ? 'delegated' : 'autonomous'; subject.capabilities = [{ name: 'update:todos' }]; }
    if (g.who === 'user' && g.email) subject.email = g.email;
    const r: DecisionRequest = { subject, action: 'update:todos', resource: 'todo:1', context: {}, now: g.now, resourceAttributes: {} };
    if (g.amount !== undefined) r.context.amount = g.amount;
    if (g.owner !== undefined) r.resourceAttributes!.owner = g.owner;
    if (g.tags !== undefined) r.resourceAttributes!.tags = g.tags;
    if (g.who === 'deleg') {
      const p: PersonFacts = { id: 'u1', roles: g.roles, groups: [], permissions: perms(g.personGranted), attributes: {} };
      if (g.email) p.email = g.email;
      r.person = p;
    }
    yield r;
  }
}

const smallAtom: fc.Arbitrary<Expr> = fc.oneof(
  fc.tuple(fc.constantFrom('gt', 'lte', 'eq', 'ne' as const), fc.constantFrom(5, 10)).map(([o, v]) => cmp('amount', o, L(v))),
  fc.constantFrom('gt', 'lte' as const).map((o) => cmp('amount', o, 'subject.max_amount')),
  fc.constantFrom('eq', 'ne' as const).map((o) => cmp('resource.owner', o, 'person.email')),
  fc.constant(cmp('resource.owner', 'eq', L('ada@x.com'))),
  fc.constant<Expr>({ type: 'contains', left: P('resource.tags'), mode: 'one', right: L('vip') }),
  fc.constant<Expr>({ type: 'in', left: P('person.email'), negated: false, right: P('resource.tags') }),
  fc.constant<Expr>({ type: 'like', left: P('person.email'), negated: false, right: L('*@x.com') }),
  fc.constantFrom('lt', 'gte' as const).map((o) => cmp('time.hour', o, L(9))),
  fc.constant<Expr>({ type: 'in', left: P('time.weekday'), negated: false, right: L(['sat', 'sun']) }),
);
const smallExpr: fc.Arbitrary<Expr> = fc.oneof(
  smallAtom,
  fc.tuple(smallAtom, smallAtom).map(([x, y]): Expr => normalize({ type: 'and', items: [x, y] })),
  fc.tuple(smallAtom, smallAtom).map(([x, y]): Expr => normalize({ type: 'or', items: [x, { type: 'not', expr: y }] })),
);
const smallFile = fc.tuple(
  fc.array(fc.record({
    effect: fc.constantFrom('deny', 'require_approval', 'permit'),
    subjects: fc.constantFrom(['agent:*'], ['user:*'], ['role:editor'], ['agent:a', 'user:u1']),
    when: fc.option(smallExpr, { nil: undefined }),
  }), { maxLength: 3 }),
  fc.constantFrom('UTC', 'Europe/Berlin'),
).map(([rules, zone]): PolicyFileNode => ({
  path: 's.policy',
  items: [
    ...(zone === 'UTC' ? [] : [{ kind: 'timezone' as const, name: zone }]),
    ...rules.map((r, i) => ({ kind: 'rule' as const, name: `r${i}`, effect: r.effect, subjects: r.subjects, relation: 'update:todos', object: 'todo:*', ...(r.when ? { when: r.when } : {}) })),
  ] as Item[],
}));

describe('diff: brute force over small domains', () => {
  const all = [...smallRequests()];

  it('every changed request lies in exactly one region, and no unchanged one in any', () => {
    fc.assert(fc.property(smallFile, smallFile, (a, b) => {
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffPolicySets(sa, sb);
      expectExact(changes, sa, sb, all);
      expectExamples(changes, sa, sb);
    }), { numRuns: 12 });
  }, 600_000);

  it('finds the changes of a known pair across the daylight-saving change', () => {
    const a = setFromAst({ path: 's.policy', items: [{ kind: 'timezone', name: 'Europe/Berlin' }, { kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'update:todos', object: 'todo:*', when: cmp('time.hour', 'lt', L(2)) }] });
    const b = setFromAst({ path: 's.policy', items: [{ kind: 'timezone', name: 'Europe/Berlin' }, { kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'update:todos', object: 'todo:*', when: cmp('time.hour', 'lt', L(3)) }] });
    const { changes } = diffPolicySets(a, b);
    const n = expectExact(changes, a, b, all);
    expect(n).toBeGreaterThan(0); // 2026-10-25T00:30Z is 02:30 CEST, the first of the two 02:30s that day
    expect(changes.every((c) => JSON.stringify(c.region['time.hour']) === '{"eq":2}')).toBe(true);
  }, 120_000);
});

