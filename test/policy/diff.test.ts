import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, type DecisionRequest, type PersonFacts, type SubjectFacts } from '../../src/policy/index.js';
import { DIFF_STEPS, DiffTooLarge, diffPolicySets, diffText, inRegion, type Change, type DiffResult } from '../../src/policy/diff.js';
import type { Expr, Item, PolicyFileNode } from '../../src/policy/ast.js';
import type { PolicySet } from '../../src/policy/compile.js';
import { completeRequest } from '../../src/policy/explain.js';
import { arbPolicyAndAtom, arbPolicyPair, arbRequest, cmp, REFUNDS_EXAMPLE, L, normalize, NOWS, P, setFromAst, setOf } from './helpers.js';
import { formatFile } from '../../src/policy/format.js';
import { parsePolicy } from '../../src/policy/parser.js';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';
import { loadPolicySet, readPolicyDir } from '../../src/policy/load.js';
import { readPath, type ValueType } from '../../src/policy/values.js';
import { fitsType } from '../../src/policy/declared.js';
import { MEMBERSHIP_CONDITIONS, membershipPolicy, membershipRequests } from './membership-cases.js';

// The random diff properties run on a new seed every time (fast-check prints it with a
// counterexample; GATEHOUSE_TEST_SEED=<seed> replays one), each bounded in time so that a slow
// machine checks fewer pairs rather than failing. A diff spends a bounded number of steps, so a
// pair too large to compare exactly is skipped; the properties hold for every diff that answers.
const RANDOM = { interruptAfterTimeLimit: 60_000 };

/** The diff of two sets, or null (the run skipped) when they are too large to compare exactly. */
function diffOrSkip(a: PolicySet, b: PolicySet): DiffResult {
  try {
    return diffPolicySets(a, b);
  } catch (e) {
    if (!(e instanceof DiffTooLarge)) throw e;
    fc.pre(false);
    throw e;
  }
}

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
  const old = setOf(REFUNDS_EXAMPLE, 'old.policy');

  it('a reformatted and reordered policy set reports no change', () => {
    const reordered = REFUNDS_EXAMPLE.replace(/\n\n/g, '\n').replace('amount max 500 min 1', 'amount min 1   max 500')
      .replace('when amount >= 1000 and currency == "USD"', 'when (currency == "USD") and amount >= 1000');
    const file = parsePolicy('new.policy', reordered).file!;
    const items = [file.items[2]!, file.items[0]!, file.items[1]!];
    const shuffled = setOf(formatFile({ ...file, items }).replace('version 3', 'version 4'), 'new.policy');
    expect(diffPolicySets(old, shuffled).changes).toEqual([]);
  });

  it('spends a counted number of steps: the same answer for the same input, DiffTooLarge one step short', () => {
    const next = setOf(REFUNDS_EXAMPLE.replace('amount > 10000', 'amount > 5000'), 'new.policy');
    const spent = { steps: 0 };
    const full = diffPolicySets(old, next, { spent });
    expect(spent.steps).toBeGreaterThan(0);
    expect(spent.steps).toBeLessThanOrEqual(DIFF_STEPS);
    // exactly the steps it needs: the same regions
    expect(diffPolicySets(old, next, { steps: spent.steps })).toEqual(full);
    // one fewer: no partial answer, but the reason and where it ran out
    expect(() => diffPolicySets(old, next, { steps: spent.steps - 1 })).toThrow(DiffTooLarge);
    expect(() => diffPolicySets(old, next, { steps: spent.steps - 1 }))
      .toThrow(new RegExp(`^too large to compare exactly: .*\\(more than ${spent.steps - 1} steps\\), on create:refunds on refund:`));
  });

  it('one attribute name, a value on documents and an object on customers: exact on both kinds', () => {
    const sets = (team: string) => setOf(`policy "o" version 1

rule "doc" {
  effect permit
  subjects "agent:*"
  relation "update:documents"
  object "document:*"
  when resource.owner == "ada"
}

rule "cust" {
  effect permit
  subjects "agent:*"
  relation "update:customers"
  object "customer:*"
  when resource.owner.team == "${team}"
}
`);
    const a = sets('sales'), b = sets('support');
    const { changes } = diffPolicySets(a, b);
    expect(new Set(changes.map((c) => `${c.relation} on ${c.object}: ${JSON.stringify(c.region['resource.owner.team'])} ${c.before} -> ${c.after}`))).toEqual(new Set([
      'update:customers on customer:*: {"in":["sales"]} allow -> deny',
      'update:customers on customer:*: {"in":["support"]} deny -> allow',
    ]));
    expectExamples(changes, a, b);
    const requests: DecisionRequest[] = [];
    for (const [action, resource] of [['update:documents', 'document:d1'], ['update:customers', 'customer:c1']]) {
      for (const owner of ['ada', 'bob', { team: 'sales' }, { team: 'support' }, { team: 'ops' }, undefined]) {
        const subject: SubjectFacts = { type: 'agent', id: 'a', mode: 'autonomous', roles: [], groups: [], permissions: [], attributes: {}, capabilities: [{ name: action! }] };
        requests.push({ subject, action: action!, resource: resource!, context: {}, now: NOWS[0]!, ...(owner === undefined ? {} : { resourceAttributes: { owner } }) });
      }
    }
    expect(expectExact(changes, a, b, requests)).toBe(2);
  });

  it('reports a changed threshold as a region with an example', () => {
    const next = setOf(REFUNDS_EXAMPLE.replace('amount > 10000', 'amount > 5000'), 'new.policy');
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
    // compared as strings: an owner of another type is as good as a missing one
    expect(rel!.region['resource.owner vs person.email']).toEqual({ not: { op: '==' }, of: ['string'] });
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
      const { changes } = diffOrSkip(sa, sb);
      expectExact(changes, sa, sb, reqs.map(inSpace));
      expectExamples(changes, sa, sb);
    }), { numRuns: 30, ...RANDOM });
  }, 300_000);

  it('is exact for a set against itself with one rule changed (sampled requests)', () => {
    fc.assert(fc.property(arbPolicyAndAtom, fc.array(arbRequest, { minLength: 40, maxLength: 40 }), ([a, atom], reqs) => {
      const rules = a.items.filter((i) => i.kind === 'rule');
      if (!rules.length) return;
      const target = rules[0]!;
      const b: PolicyFileNode = { ...a, items: a.items.map((i) => (i === target ? { ...target, when: normalize(target.when ? { type: 'and', items: [target.when, atom] } : atom) } : i)) as Item[] };
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffOrSkip(sa, sb);
      expectExact(changes, sa, sb, reqs.map(inSpace));
    }), { numRuns: 30, ...RANDOM });
  }, 300_000);

  it('reports no change between a set and itself with items reordered (random)', () => {
    fc.assert(fc.property(arbPolicyPair, ([a]) => {
      const rules = a.items.filter((i) => i.kind === 'rule');
      const rest = a.items.filter((i) => i.kind !== 'rule');
      // reordering limits blocks never changes a decision
      const b: PolicyFileNode = { ...a, items: [...rest.reverse(), ...rules] as Item[] };
      expect(diffOrSkip(setFromAst(a), setFromAst(b)).changes).toEqual([]);
    }), { numRuns: 30, ...RANDOM });
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
      const { changes } = diffOrSkip(sa, sb);
      expectExact(changes, sa, sb, all);
      expectExamples(changes, sa, sb);
    }), { numRuns: 12, ...RANDOM });
  }, 600_000);

  it('finds the changes of a known pair across the daylight-saving change', () => {
    const a = setFromAst({ path: 's.policy', items: [{ kind: 'timezone', name: 'Europe/Berlin' }, { kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'update:todos', object: 'todo:*', when: cmp('time.hour', 'lt', L(2)) }] });
    const b = setFromAst({ path: 's.policy', items: [{ kind: 'timezone', name: 'Europe/Berlin' }, { kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'update:todos', object: 'todo:*', when: cmp('time.hour', 'lt', L(3)) }] });
    const { changes } = diffPolicySets(a, b);
    const n = expectExact(changes, a, b, all);
    expect(n).toBeGreaterThan(0); // 2026-10-25T00:30Z is 02:30 CEST, the first of the two 02:30s that day
    expect(changes.every((c) => JSON.stringify(c.region['time.hour']) === '{"eq":2}')).toBe(true);
  }, 120_000);

  it('two zones read together: the regions pair their hours by the offsets of every season', () => {
    // Berlin is one hour ahead of UTC in winter and two in summer: 19:00 in Berlin is 17:00 UTC in July.
    const rule = (name: string, when: Expr | undefined) => ({ kind: 'rule' as const, name, effect: 'deny' as const, subjects: ['agent:*'], relation: 'update:todos', object: 'todo:*', ...(when ? { when } : {}) });
    const a = setFromAst({ path: 'a.policy', items: [rule('always', undefined), rule('utc', cmp('time.hour', 'lt', L(18)))] });
    const b = setFromAst({ path: 'b.policy', items: [{ kind: 'timezone', name: 'Europe/Berlin' }, rule('utc', cmp('time.hour', 'lt', L(8))), rule('berlin', cmp('time.hour', 'lt', L(18)))] });
    const a2 = setFromAst({ path: 'b.policy', items: [rule('utc', cmp('time.hour', 'lt', L(18)))] });
    const request = (now: number): DecisionRequest => ({
      subject: { type: 'agent', id: 'a', mode: 'autonomous', roles: [], groups: [], permissions: ['update:todos'], attributes: {}, capabilities: [{ name: 'update:todos' }] },
      action: 'update:todos', resource: 'todo:1', context: {}, now,
    });
    const hours: DecisionRequest[] = [];
    for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 3_600_000 * 7) hours.push(request(t));
    hours.push(request(Date.parse('2026-07-01T17:00:00Z')), request(Date.parse('2026-03-30T17:00:00Z')));
    for (const [x, y] of [[a, b], [b, a], [a2, b]] as const) {
      const { changes } = diffPolicySets(x, y);
      expect(expectExact(changes, x, y, hours)).toBeGreaterThan(0);
      expectExamples(changes, x, y);
    }
  }, 120_000);
});


// ---- limits over time: prior usage is part of the request space ------------------------------

const refunds = (limits: string, rules = '') => `policy "budget" version 1\n\nlimits "create:refunds" for "*" {\n${limits}\n}\n${rules}`;

/** A request for create:refunds by an agent holding the capability, with the usage it states. */
function refundRequest(amount: unknown, usage: Record<string, number> | undefined, extra: Partial<DecisionRequest> = {}): DecisionRequest {
  const r: DecisionRequest = {
    subject: { type: 'agent', id: 'a', mode: 'autonomous', roles: [], groups: [], permissions: ['create:refunds'], attributes: {}, capabilities: [{ name: 'create:refunds' }] },
    action: 'create:refunds', resource: 'refund:1', context: amount === undefined ? {} : { amount }, now: NOWS[3]!, ...extra,
  };
  if (usage) r.usage = usage;
  return r;
}

describe('diff: limits over time', () => {
  it('a count lowered from 5 to 3 per hour changes exactly the requests with prior usage above 2 and at most 4', () => {
    const a = setOf(refunds('  count max 5 per 1h'));
    const b = setOf(refunds('  count max 3 per 60m').replace('version 1', 'version 2'));
    const { changes } = diffPolicySets(a, b);
    expect(changes).toHaveLength(1);
    const c = changes[0]!;
    expect(c).toMatchObject({ relation: 'create:refunds', before: 'allow', after: 'deny', region: { 'used count per 1h': { gt: 2, lte: 4 } } });
    const used = c.example.usage!['count per 1h']!;
    expect(used > 2 && used <= 4).toBe(true);
    expectExamples(changes, a, b);
    // a request states usage by its canonical key (`count per 1h` also for a limit written `per 60m`)
    const requests = [0, 1, 2, 2.5, 3, 4, 4.5, 5, 9].map((n) => refundRequest(1, { 'count per 1h': n }));
    requests.push(refundRequest(1, undefined), refundRequest('x', { 'count per 1h': 3 }));
    expect(expectExact(changes, a, b, requests)).toBe(4); // 2.5, 3, 4, and 3 with any amount
  });

  it('prints the usage in words, and the example states it', () => {
    const a = setOf(refunds('  count max 5 per 1h'));
    const b = setOf(refunds('  count max 3 per 1h'));
    const text = diffText(diffPolicySets(a, b));
    expect(text).toContain('when used count per 1h > 2 and used count per 1h <= 4 and permissions cover the action: allow -> deny');
    expect(text).toMatch(/"usage":\{"count per 1h":3\}/);
  });

  it('a budget lowered from 2000 to 1500 a day: the total of usage and amount between them', () => {
    const a = setOf(refunds('  amount max 500\n  amount sum max 2000 per 24h'));
    const b = setOf(refunds('  amount max 500\n  amount sum max 1500 per 1d'));
    const { changes } = diffPolicySets(a, b);
    expect(changes).toHaveLength(1);
    const c = changes[0]!;
    expect(c.region['used amount sum per 1d + amount']).toEqual({ gt: 1500, lte: 2000 });
    const ex = c.example;
    expect(ex.usage!['amount sum per 1d']! + (ex.context.amount as number)).toBeGreaterThan(1500);
    expect(ex.usage!['amount sum per 1d']! + (ex.context.amount as number)).toBeLessThanOrEqual(2000);
    expectExamples(changes, a, b);
    const requests: DecisionRequest[] = [];
    for (const amount of [0, 1, 100, 499.5, 500, 501, -1, 'x', undefined]) {
      for (const used of [0, 1000, 1001, 1400, 1500, 1500.5, 1750, 1999, 2000, 2001]) requests.push(refundRequest(amount, { 'amount sum per 1d': used }));
    }
    expect(expectExact(changes, a, b, requests)).toBeGreaterThan(10);
  });

  it('a new rate next to a rule on the amount: regions relate usage, amount and the rule', () => {
    const rule = '\nrule "big" {\n  effect require_approval\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when amount > 100\n}\n';
    const a = setOf(refunds('  amount max 500', rule));
    const b = setOf(refunds('  amount max 500\n  count max 2 per 10m per resource', rule));
    const { changes } = diffPolicySets(a, b);
    expect(changes.map((c) => [c.before, c.after]).sort()).toEqual([['allow', 'deny'], ['approval_required', 'deny']]);
    for (const c of changes) expect(c.region['used count per 10m per resource']).toEqual({ gt: 1 });
    expectExamples(changes, a, b);
  });
});

/** Small domains with usage: amounts and prior usage around every maximum the limits below use. */
function* smallUsageRequests(): Generator<DecisionRequest> {
  for (const g of product({
    who: ['auto', 'deleg'],
    roles: [[], ['editor']],
    amount: [0, 3, 5, 7, 10, 12, 'x', -1, undefined],
    count: [undefined, 0, 1, 1.5, 2, 3],
    sum: [undefined, 0, 2, 3, 5, 8, 10],
    perResource: [undefined, 1, 2],
  })) {
    const subject: SubjectFacts = {
      type: 'agent', id: 'a', mode: g.who === 'deleg' ? 'delegated' : 'autonomous', roles: g.roles, groups: [], permissions: ['update:todos'],
      attributes: { max_amount: 10 }, capabilities: [{ name: 'update:todos' }],
    };
    const r: DecisionRequest = { subject, action: 'update:todos', resource: 'todo:1', context: {}, now: NOWS[3]!, resourceAttributes: {} };
    if (g.amount !== undefined) r.context.amount = g.amount;
    const usage: Record<string, number> = {};
    if (g.count !== undefined) usage['count per 1h'] = g.count;
    if (g.sum !== undefined) usage['amount sum per 1d'] = g.sum;
    if (g.perResource !== undefined) usage['count per 1h per resource'] = g.perResource;
    if (Object.keys(usage).length) r.usage = usage;
    if (g.who === 'deleg') r.person = { id: 'u1', roles: g.roles, groups: [], permissions: ['update:todos'], attributes: {} };
    yield r;
  }
}

const smallUsageFile = fc.tuple(
  fc.uniqueArray(fc.oneof(
    fc.record({ max: fc.constantFrom(0, 1, 2, 3), per: fc.constantFrom('1h', '60m'), scope: fc.constantFrom(undefined, 'resource') })
      .map((u) => ({ kind: 'count' as const, field: null, max: u.max, per: u.per, ...(u.scope ? { scope: u.scope } : {}) })),
    fc.record({ max: fc.constantFrom(5, 10, 12), per: fc.constantFrom('24h', '1d') }).map((u) => ({ kind: 'sum' as const, field: 'amount', max: u.max, per: u.per })),
  ), { maxLength: 2, selector: (u) => `${u.kind}${'scope' in u ? u.scope : ''}` }),
  fc.option(fc.constantFrom(5, 10), { nil: undefined }),
  fc.array(fc.record({
    effect: fc.constantFrom('deny', 'require_approval', 'permit'),
    subjects: fc.constantFrom(['agent:*'], ['role:editor']),
    when: fc.option(fc.oneof(
      fc.tuple(fc.constantFrom('gt', 'lte', 'eq' as const), fc.constantFrom(5, 10)).map(([o, v]) => cmp('amount', o, L(v))),
      fc.constantFrom('gt', 'lte' as const).map((o) => cmp('amount', o, 'subject.max_amount')),
    ), { nil: undefined }),
  }), { maxLength: 2 }),
).map(([usage, max, rules]): PolicyFileNode => ({
  path: 'u.policy',
  items: [
    ...(usage.length || max !== undefined ? [{ kind: 'limits' as const, capability: 'update:todos', forAgent: '*', fields: max !== undefined ? [{ field: 'amount', max }] : [], usage }] : []),
    ...rules.map((r, i) => ({ kind: 'rule' as const, name: `r${i}`, effect: r.effect, subjects: r.subjects, relation: 'update:todos', object: 'todo:*', ...(r.when ? { when: r.when } : {}) })),
  ] as Item[],
}));

describe('diff: brute force over small domains with prior usage', () => {
  const all = [...smallUsageRequests()];

  it('every changed request lies in exactly one region, and no unchanged one in any', () => {
    let changed = 0;
    fc.assert(fc.property(smallUsageFile, smallUsageFile, (a, b) => {
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffOrSkip(sa, sb);
      changed += expectExact(changes, sa, sb, all);
      expectExamples(changes, sa, sb);
    }), { numRuns: 25, ...RANDOM });
    expect(changed).toBeGreaterThan(0);
  }, 600_000);
});

// ---- ordered comparisons against == over strings, booleans and missing values ----------------

describe('diff: an ordered comparison and == of the same two values', () => {
  const rule = (effect: string, when: string) => setOf(`rule "r" {\n  effect ${effect}\n  subjects "agent:*"\n  relation "read:docs"\n  object "doc:*"\n  when ${when}\n}\n`);
  const requests = function* (): Generator<DecisionRequest> {
    const values = [1, 2, 'x', 'y', true, false, undefined];
    for (const a of values) for (const b of values) {
      const subject: SubjectFacts = { type: 'agent', id: 'a', mode: 'autonomous', roles: [], groups: [], permissions: [], attributes: {}, capabilities: [{ name: 'read:docs' }] };
      for (const granted of [true, false]) {
        const r: DecisionRequest = { subject: { ...subject, permissions: granted ? ['read:docs'] : [] }, action: 'read:docs', resource: 'doc:1', context: {}, now: NOWS[0]!, resourceAttributes: {}, approved: false };
        if (a !== undefined) r.context.a = a;
        if (b !== undefined) r.context.b = b;
        yield r;
      }
    }
  };

  it('deny: `a >= b and a <= b` fails closed on two unequal strings where `a == b` does not', () => {
    const x = rule('deny', 'context.a >= context.b and context.a <= context.b'), y = rule('deny', 'context.a == context.b');
    const { changes } = diffPolicySets(x, y);
    expect(expectExact(changes, x, y, requests())).toBeGreaterThan(0);
    expectExamples(changes, x, y);
  });

  it('permit: the same pair grants equal strings and booleans only under ==', () => {
    const x = rule('permit', 'context.a >= context.b and context.a <= context.b'), y = rule('permit', 'context.a == context.b');
    const { changes } = diffPolicySets(x, y);
    expect(expectExact(changes, x, y, requests())).toBeGreaterThan(0);
    expectExamples(changes, x, y);
  });

  const atom = fc.constantFrom('context.a >= context.b', 'context.a <= context.b', 'context.a > context.b', 'context.a == context.b', 'context.a != context.b',
    'context.a == "x"', 'context.a == true', 'context.a > 1', 'context.b has c', 'context has a');
  const when = fc.oneof(atom, fc.tuple(atom, atom).map(([p, q]) => `${p} and ${q}`), fc.tuple(atom, atom).map(([p, q]) => `not (${p}) or ${q}`));
  it('brute force: every changed request lies in exactly one region (random pairs)', () => {
    const all = [...requests()];
    fc.assert(fc.property(fc.constantFrom('deny', 'permit', 'require_approval'), when, fc.constantFrom('deny', 'permit', 'require_approval'), when, (e1, w1, e2, w2) => {
      let x: PolicySet, y: PolicySet;
      // a rule that compares one value with two types does not load: no pair to compare
      try { x = rule(e1, w1); y = rule(e2, w2); } catch { fc.pre(false); return; }
      const { changes } = diffOrSkip(x, y);
      expectExact(changes, x, y, all);
      expectExamples(changes, x, y);
    }), { numRuns: 40, ...RANDOM });
  }, 600_000);
});

describe('diff: membership in empty and mistyped lists', () => {
  const all = [...membershipRequests()];
  const set = (effect: string, when: string, schema: boolean) => setOf(membershipPolicy(effect, when, schema), 'm.policy');

  it('a schema that declares the list\'s items changes exactly the mistyped requests against an empty list', () => {
    const x = set('permit', 'not (context.code in resource.codes)', false), y = set('permit', 'not (context.code in resource.codes)', true);
    const { changes } = diffPolicySets(x, y);
    expect(expectExact(changes, x, y, all)).toBeGreaterThan(0);
    expectExamples(changes, x, y);
  });

  it('pairs the brute force once found inexact: lists of booleans that a membership and contains all constrain together', () => {
    const pairs: [string, string, boolean, string, string, boolean][] = [
      ['permit', 'not (resource.codes contains all context.labels) and context.code in resource.codes', false, 'deny', 'context.code == resource.name and context.code not in resource.codes', true],
      ['deny', 'not (context.code in resource.codes)', true, 'permit', 'not (resource.codes contains all context.labels) and context.code in subject.roles', false],
      ['deny', 'not (context has code) or context.code != "x"', false, 'deny', 'context.code in resource.codes and resource.codes contains any context.labels', false],
      ['permit', 'not (context has code) or context.code != "x" and context.code in resource.codes', true, 'permit', 'not (resource.codes contains all context.labels)', true],
      ['deny', 'not (resource.codes contains all context.labels) and context.code in resource.codes', true, 'deny', 'resource.codes contains any context.labels', false],
    ];
    for (const [e1, w1, s1, e2, w2, s2] of pairs) {
      const x = set(e1, w1, s1), y = set(e2, w2, s2);
      const { changes } = diffPolicySets(x, y);
      expect(expectExact(changes, x, y, all)).toBeGreaterThan(0);
      expectExamples(changes, x, y);
    }
  });

  it('brute force: every changed request lies in exactly one region (random pairs, with and without a schema)', () => {
    const when = fc.oneof(
      fc.constantFrom(...MEMBERSHIP_CONDITIONS),
      fc.tuple(fc.constantFrom(...MEMBERSHIP_CONDITIONS), fc.constantFrom(...MEMBERSHIP_CONDITIONS)).map(([p, q]) => `${p} and ${q}`),
    );
    const side = fc.tuple(fc.constantFrom('deny', 'permit', 'require_approval'), when, fc.boolean());
    fc.assert(fc.property(side, side, ([e1, w1, s1], [e2, w2, s2]) => {
      const x = set(e1, w1, s1), y = set(e2, w2, s2);
      const { changes } = diffOrSkip(x, y);
      expectExact(changes, x, y, all);
      expectExamples(changes, x, y);
    }), { numRuns: 40, ...RANDOM });
  }, 600_000);
});

// ---- examples keep to the schema ---------------------------------------------------------------

/** The types of every path the random policies read (helpers.ts), as a schema would declare them. */
const RANDOM_SCHEMA: [string, string][] = [
  ['context.amount', 'number'], ['context.currency', 'string'], ['context.flag', 'boolean'], ['context.to', 'string'], ['context.code', 'string'],
  ['subject.max_amount', 'number'], ['resource.owner', 'string'], ['resource.tags', '[string]'], ['resource.editors', '[string]'], ['resource.groups', '[string]'],
];

function withSchema(file: PolicyFileNode): PolicyFileNode {
  const entries = RANDOM_SCHEMA.map(([path, t]) => ({ path: P(path), type: { base: t.replace(/[[\]]/g, ''), list: t.startsWith('[') } }));
  return { ...file, items: [{ kind: 'schema', entries }, ...file.items] as Item[] };
}

/** Every value an example gives a declared path has the declared type. */
function expectExamplesTyped(changes: Change[], schema: [string, string][]): void {
  for (const c of changes) {
    const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => NaN);
    for (const [path, t] of schema) {
      const got = readPath(request, P(path));
      if (got.present) expect(fitsType(got.value, t as ValueType), `${path} is declared ${t}: ${JSON.stringify(c.example)}`).toBe(true);
    }
  }
}

describe('diff: examples respect the schema', () => {
  it('random pairs with a schema on either side: exact, and where both declare a path, every example keeps to its type', () => {
    const where = fc.constantFrom('both', 'both', 'before', 'after', 'none');
    fc.assert(fc.property(arbPolicyPair, where, fc.array(arbRequest, { minLength: 30, maxLength: 30 }), ([a0, b0], w, reqs) => {
      const a = w === 'both' || w === 'before' ? withSchema(a0) : a0;
      const b = w === 'both' || w === 'after' ? withSchema(b0) : b0;
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffOrSkip(sa, sb);
      expectExact(changes, sa, sb, reqs.map(inSpace));
      expectExamples(changes, sa, sb);
      if (w === 'both') expectExamplesTyped(changes, RANDOM_SCHEMA);
    }), { numRuns: 40, ...RANDOM });
  }, 600_000);

  it('a path the schema declares as a reference: the example names a stored entity, whose attributes it gives', () => {
    const text = (when: string) => `schema {\n  resource.customer: entity customer\n  resource.customer.fraud: boolean\n  resource.customer.tier: string\n}\n\nrule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when ${when}\n}\n`;
    const a = setOf(text('resource.customer.fraud == true'), 'r.policy');
    const b = setOf(text('resource.customer.fraud == true or resource.customer.tier == "gold"'), 'r.policy');
    const { changes } = diffPolicySets(a, b);
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) {
      expect(c.example.resource_attributes?.customer).toEqual({ type: 'customer', id: 'example-customer' });
      expect(c.example.entities?.['customer:example-customer']).toMatchObject({ tier: 'gold' });
    }
    expectExamples(changes, a, b);
  });

  it('the example policies: examples of a change keep to policies/examples/schema.policy', async () => {
    const dir = join(projectRoot, 'policies', 'examples');
    const files = await readPolicyDir(dir);
    const before = loadPolicySet({ files });
    // Widen a few comparisons, so that the diff has regions over many declared paths.
    const changed = files.map((f) => ({ ...f, text: f.text.replace(/>= (\d+)/g, (_m, n: string) => `>= ${Number(n) + 1}`).replace(/== "([a-z]+)"/g, '!= "$1"') }));
    const after = loadPolicySet({ files: changed });
    expect(before.diagnostics).toEqual([]);
    expect(after.diagnostics).toEqual([]);
    const { changes } = diffPolicySets(before.policySet!, after.policySet!);
    expect(changes.length).toBeGreaterThan(0);
    const schema: [string, string][] = [];
    for (const item of parsePolicy('schema.policy', files.find((f) => f.path.endsWith('schema.policy'))!.text).file!.items) {
      if (item.kind === 'schema') for (const e of item.entries) if (e.type.entity === undefined) schema.push([[e.path.root, ...e.path.segs].join('.'), e.type.list ? `[${e.type.base}]` : e.type.base]);
    }
    expect(schema.length).toBeGreaterThan(10);
    expectExamplesTyped(changes, schema);
    expectExamples(changes, before.policySet!, after.policySet!);
  }, 300_000);
});
