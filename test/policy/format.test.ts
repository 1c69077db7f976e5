import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parsePolicy } from '../../src/policy/parser.js';
import { formatFile } from '../../src/policy/format.js';
import type { Expr, Item, Operand, PathNode, PolicyFileNode } from '../../src/policy/ast.js';
import { arbExpr, arbLimits, arbRule, REFUNDS_EXAMPLE, normalize, RUNS, strip } from './helpers.js';

const arbName = fc.string({ maxLength: 12 });
const arbNumber = fc.oneof(fc.integer({ min: -1e9, max: 1e9 }), fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e12, max: 1e12 }).filter((n) => !Object.is(n, -0)));
const arbField = fc.oneof(fc.constantFrom('amount', 'currency', 'a_b', 'x-y', '_f', 'notes', 'inner', 'orx'), fc.stringMatching(/^[a-z][a-z0-9_]{0,6}$/).filter((s) => !['and', 'or', 'not', 'in', 'like', 'contains', 'true', 'false'].includes(s)));

const arbSeg = fc.oneof(fc.constantFrom('owner', 'team', 'in', 'max_amount', 'x-y'), fc.stringMatching(/^[a-z_][a-z0-9_-]{0,5}$/));
const arbPath: fc.Arbitrary<PathNode> = fc.oneof(
  arbField.map((f): PathNode => ({ type: 'path', root: 'context', segs: [f], bare: true })),
  fc.tuple(fc.constantFrom('context', 'subject', 'person', 'resource') as fc.Arbitrary<PathNode['root']>, fc.array(arbSeg, { minLength: 1, maxLength: 3 }))
    .map(([root, segs]): PathNode => ({ type: 'path', root, segs })),
  fc.constantFrom('hour', 'minute', 'weekday', 'date', 'epoch').map((f): PathNode => ({ type: 'path', root: 'time', segs: [f] })),
);
const arbScalar = fc.oneof(arbNumber, arbName, fc.boolean());
const arbOperand: fc.Arbitrary<Operand> = fc.oneof(
  arbPath,
  arbScalar.map((value): Operand => ({ type: 'lit', value })),
  fc.array(fc.oneof(arbNumber, arbName), { minLength: 1, maxLength: 3 }).map((value): Operand => ({ type: 'lit', value })),
);

const arbAnyExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small' },
    fc.record({ type: fc.constant('cmp' as const), left: arbOperand, op: fc.constantFrom('gte', 'gt', 'lte', 'lt', 'eq', 'ne' as const), right: arbOperand }),
    fc.record({ type: fc.constant('in' as const), left: arbOperand, negated: fc.boolean(), right: arbOperand }),
    fc.record({ type: fc.constant('contains' as const), left: arbOperand, mode: fc.constantFrom('one', 'any', 'all' as const), right: arbOperand }),
    fc.record({ type: fc.constant('like' as const), left: arbOperand, negated: fc.boolean(), right: arbOperand }),
    fc.record({ type: fc.constant('not' as const), expr: tie('e') }),
    fc.record({ type: fc.constantFrom('and' as const, 'or' as const), items: fc.array(tie('e'), { minLength: 2, maxLength: 3 }) }),
  ) as fc.Arbitrary<Expr>,
})).e.map(normalize);

const arbStrings = fc.array(arbName, { maxLength: 2 });
const arbFacts = fc.record({
  roles: fc.option(arbStrings, { nil: undefined }), groups: fc.option(arbStrings, { nil: undefined }),
  email: fc.option(arbName, { nil: undefined }), attributes: fc.option(fc.dictionary(arbField, fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v))), { maxKeys: 2 }), { nil: undefined }),
}).map((f) => Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined)));

const arbUsage = fc.record({
  kind: fc.constantFrom('sum', 'count') as fc.Arbitrary<'sum' | 'count'>,
  field: arbField, max: fc.nat(5000), per: fc.constantFrom('1h', '24h', '10m', '30s', '7d'),
  scope: fc.option(fc.constantFrom('resource', 'person'), { nil: undefined }),
}).map(({ kind, field, scope, ...u }) => ({ kind, field: kind === 'sum' ? field : null, ...u, ...(scope ? { scope } : {}) }));

const arbItem: fc.Arbitrary<Item> = fc.oneof(
  fc.tuple(arbRule(0), arbName, arbAnyExpr).map(([r, name, e]) => ({ ...r, name, when: e })),
  arbLimits,
  fc.tuple(arbLimits, fc.array(arbUsage, { minLength: 1, maxLength: 3 })).map(([l, usage]) => ({ ...l, usage })),
  fc.record({ kind: fc.constant('kind' as const), plural: fc.constantFrom('people', 'data'), singular: fc.constantFrom('person', 'datum') }),
  fc.record({ kind: fc.constant('timezone' as const), name: fc.constantFrom('UTC', 'Europe/Berlin', 'Asia/Kolkata') }),
  fc.record({
    kind: fc.constant('schema' as const),
    entries: fc.array(fc.record({ path: arbPath, type: fc.record({ base: fc.constantFrom('number', 'string', 'boolean'), list: fc.boolean() }) }), { maxLength: 3 }),
  }),
  fc.record({
    kind: fc.constant('test' as const), name: arbName,
    subject: fc.oneof(
      fc.record({ agent: fc.record({ id: arbName, mode: fc.constantFrom('delegated', 'autonomous') }) }),
      fc.record({ user: fc.record({ id: arbName }) }),
    ),
    facts: fc.option(arbFacts, { nil: undefined }),
    permissions: fc.array(fc.constantFrom('a:b', 'create:refunds'), { maxLength: 2 }),
    capabilities: fc.array(fc.record({ name: fc.constantFrom('create:refunds') }), { maxLength: 1 }),
    person: fc.option(fc.tuple(arbName, fc.array(fc.constantFrom('a:b'), { maxLength: 1 }), arbFacts).map(([id, permissions, f]) => ({ id, permissions, ...f })), { nil: undefined }),
    action: arbName, resource: arbName,
    resourceAttributes: fc.option(fc.dictionary(arbField, fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v))), { maxKeys: 2 }), { nil: undefined }),
    context: fc.dictionary(fc.oneof(arbField, arbName), fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v))), { maxKeys: 3 }),
    now: fc.option(fc.constantFrom('2026-03-29T01:30:00+01:00', '2026-10-25T00:30:00Z'), { nil: undefined }),
    used: fc.option(fc.array(fc.record({ what: fc.constantFrom('count', 'amount'), amount: fc.nat(100), per: fc.constantFrom('1h', '24h'), scope: fc.constantFrom(undefined, 'resource', 'person') })
      .map(({ scope, ...u }) => ({ ...u, ...(scope ? { scope } : {}) })), { minLength: 1, maxLength: 2 }), { nil: undefined }),
    approved: fc.boolean(),
    expect: fc.record({ decision: fc.constantFrom('allow', 'deny'), reason: arbName }),
  }).map(({ subject, facts, person, resourceAttributes, now, used, ...t }) => ({
    ...t, ...subject, ...(used ? { used } : {}),
    ...(facts && Object.keys(facts).length ? { facts } : {}),
    ...(person ? { person } : {}), ...(resourceAttributes ? { resourceAttributes } : {}), ...(now ? { now } : {}),
  })),
);

const arbFile: fc.Arbitrary<PolicyFileNode> = fc.record({
  header: fc.option(fc.record({ name: arbName, version: fc.nat(1000) }), { nil: undefined }),
  items: fc.array(arbItem, { maxLength: 4 }),
}).map(({ header, items }) => ({ path: 'f.policy', ...(header ? { header } : {}), items }));

describe('fmt', () => {
  it('prints the contract example unchanged (it is canonical)', () => {
    expect(formatFile(parsePolicy('r.policy', REFUNDS_EXAMPLE).file!)).toBe(REFUNDS_EXAMPLE);
  });

  it('canonicalizes layout, list syntax, operator order and spacing', () => {
    const messy = 'policy "p"   version 2\nrule "r"{effect deny subjects ["agent:a","agent:b"] relation "a:b" object "b:*" when (x==1) and (y>2 or z<3)}\nlimits "a:b" for "*" { amount min 1 max 5 c = "x" }';
    expect(formatFile(parsePolicy('m.policy', messy).file!)).toBe(`policy "p" version 2

rule "r" {
  effect deny
  subjects "agent:a", "agent:b"
  relation "a:b"
  object "b:*"
  when x == 1 and (y > 2 or z < 3)
}

limits "a:b" for "*" {
  amount max 5 min 1
  c = "x"
}
`);
  });

  it('parse(fmt(x)) equals x, for random ASTs', () => {
    fc.assert(fc.property(arbFile, (file) => {
      const text = formatFile(file);
      const r = parsePolicy('f.policy', text);
      expect(r.diagnostics).toEqual([]);
      expect(strip(r.file)).toEqual(strip(file));
    }), RUNS);
  });

  it('is idempotent', () => {
    fc.assert(fc.property(arbFile, (file) => {
      const once = formatFile(file);
      const twice = formatFile(parsePolicy('f.policy', once).file!);
      expect(twice).toBe(once);
    }), RUNS);
  });

  it('prints every new form in the canonical layout', () => {
    const messy = `timezone "Europe/Berlin"
schema { context.amount: number  resource.tags: [string]
  subject.max_amount : number }
rule "r" { effect permit subjects "role:editor", "group:eng" relation "update:todos" object "todo:*"
  when resource.owner==person.email and not(resource.tags contains "vip") or "x" in resource.tags and resource.tags contains any ["a","b"]
   and subject.groups contains all resource.groups and context.to not like "*@example.com" and time.hour>=18 }
test "t" { user "u1" roles "editor" email "ada@example.com" attributes { max_amount: 5 } resource "todo:1" { owner: "ada@example.com" }
  action "update:todos" now "2026-03-29T01:30:00+01:00" person "p" { roles "x" } expect allow }
`;
    expect(formatFile(parsePolicy('m.policy', messy).file!)).toBe(`timezone "Europe/Berlin"

schema {
  context.amount: number
  resource.tags: [string]
  subject.max_amount: number
}

rule "r" {
  effect permit
  subjects "role:editor", "group:eng"
  relation "update:todos"
  object "todo:*"
  when resource.owner == person.email and not (resource.tags contains "vip") or "x" in resource.tags and resource.tags contains any ["a", "b"] and subject.groups contains all resource.groups and context.to not like "*@example.com" and time.hour >= 18
}

test "t" {
  user "u1"
  roles "editor"
  email "ada@example.com"
  attributes { max_amount: 5 }
  person "p" {
    roles "x"
  }
  action "update:todos"
  resource "todo:1" { owner: "ada@example.com" }
  now "2026-03-29T01:30:00+01:00"
  expect allow
}
`);
  });

  it('conditions keep their meaning through fmt (random expressions)', () => {
    fc.assert(fc.property(arbExpr, (e) => {
      const file: PolicyFileNode = { path: 'e.policy', items: [{ kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'a:b', object: 'b:*', when: e }] };
      const back = parsePolicy('e.policy', formatFile(file)).file!;
      expect(strip(back.items[0])).toEqual(strip(file.items[0]));
    }), RUNS);
  });

  it('keeps the comments of the capability and person blocks of a test on their lines', () => {
    const text = [
      'test "t" {',
      '  agent "x" delegated',
      '  capability "a:bs" { # with limits',
      '    # the most one request may ask for',
      '    n max 1 # a plain limit',
      '    count max 3 per 1h # a limit over time',
      '  } # end of the capability',
      '  person "p" { # the person',
      '    permissions "a:bs" # what the person may do',
      '    groups "g"',
      '  }',
      '  action "a:bs"',
      '  resource "b:1"',
      '  expect deny',
      '}',
      '',
    ].join('\n');
    expect(formatFile(parsePolicy('t.tests', text).file!)).toBe(text);
  });
});
