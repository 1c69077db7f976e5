import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parsePolicy } from '../../src/policy/parser.js';
import { formatFile } from '../../src/policy/format.js';
import type { Expr, Item, PolicyFileNode } from '../../src/policy/ast.js';
import { arbExpr, arbLimits, arbRule, CONTRACT_EXAMPLE, normalize, RUNS, strip } from './helpers.js';

const arbName = fc.string({ maxLength: 12 });
const arbNumber = fc.oneof(fc.integer({ min: -1e9, max: 1e9 }), fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e12, max: 1e12 }).filter((n) => !Object.is(n, -0)));
const arbField = fc.oneof(fc.constantFrom('amount', 'currency', 'a_b', 'x-y', '_f', 'notes', 'inner', 'orx'), fc.stringMatching(/^[a-z][a-z0-9_]{0,6}$/).filter((s) => !['and', 'or', 'not', 'in', 'true', 'false'].includes(s)));

const arbAnyExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small' },
    fc.record({ type: fc.constant('cmp' as const), field: arbField, op: fc.constantFrom('gte', 'gt', 'lte', 'lt', 'eq', 'ne' as const), value: fc.oneof(arbNumber, arbName, fc.boolean()) }),
    fc.record({ type: fc.constant('in' as const), field: arbField, negated: fc.boolean(), values: fc.array(fc.oneof(arbNumber, arbName), { minLength: 1, maxLength: 3 }) }),
    fc.record({ type: fc.constant('not' as const), expr: tie('e') }),
    fc.record({ type: fc.constantFrom('and' as const, 'or' as const), items: fc.array(tie('e'), { minLength: 2, maxLength: 3 }) }),
  ) as fc.Arbitrary<Expr>,
})).e.map(normalize);

const arbItem: fc.Arbitrary<Item> = fc.oneof(
  fc.tuple(arbRule(0), arbName, arbAnyExpr).map(([r, name, e]) => ({ ...r, name, when: e })),
  arbLimits,
  fc.record({ kind: fc.constant('kind' as const), plural: fc.constantFrom('people', 'data'), singular: fc.constantFrom('person', 'datum') }),
  fc.record({
    kind: fc.constant('test' as const), name: arbName,
    agent: fc.record({ id: arbName, mode: fc.constantFrom('delegated', 'autonomous') }),
    permissions: fc.array(fc.constantFrom('a:b', 'create:refunds'), { maxLength: 2 }),
    capabilities: fc.array(fc.record({ name: fc.constantFrom('create:refunds') }), { maxLength: 1 }),
    action: arbName, resource: arbName,
    context: fc.dictionary(fc.oneof(arbField, arbName), fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v))), { maxKeys: 3 }),
    approved: fc.boolean(),
    expect: fc.record({ decision: fc.constantFrom('allow', 'deny'), reason: arbName }),
  }),
);

const arbFile: fc.Arbitrary<PolicyFileNode> = fc.record({
  header: fc.option(fc.record({ name: arbName, version: fc.nat(1000) }), { nil: undefined }),
  items: fc.array(arbItem, { maxLength: 4 }),
}).map(({ header, items }) => ({ path: 'f.policy', ...(header ? { header } : {}), items }));

describe('fmt', () => {
  it('prints the contract example unchanged (it is canonical)', () => {
    expect(formatFile(parsePolicy('r.policy', CONTRACT_EXAMPLE).file!)).toBe(CONTRACT_EXAMPLE);
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

  it('conditions keep their meaning through fmt (random expressions)', () => {
    fc.assert(fc.property(arbExpr, (e) => {
      const file: PolicyFileNode = { path: 'e.policy', items: [{ kind: 'rule', name: 'r', effect: 'deny', subjects: ['agent:*'], relation: 'a:b', object: 'b:*', when: e }] };
      const back = parsePolicy('e.policy', formatFile(file)).file!;
      expect(strip(back.items[0])).toEqual(strip(file.items[0]));
    }), RUNS);
  });
});
