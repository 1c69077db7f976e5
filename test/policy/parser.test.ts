import { describe, expect, it } from 'vitest';
import { parsePolicy, parseExpr } from '../../src/policy/parser.js';
import { formatFile } from '../../src/policy/format.js';
import { formatDiagnostic } from '../../src/policy/index.js';
import { REFUNDS_EXAMPLE, L, P, strip } from './helpers.js';


describe('parser', () => {
  it('parses the contract example into an AST with locations', () => {
    const r = parsePolicy('refunds.policy', REFUNDS_EXAMPLE);
    expect(r.diagnostics).toEqual([]);
    const f = r.file!;
    expect(f.header).toMatchObject({ name: 'refunds', version: 3, loc: { line: 1, col: 1 } });
    expect(f.items.map((i) => i.kind)).toEqual(['rule', 'rule', 'limits']);
    const rule = f.items[1]!;
    expect(rule).toMatchObject({ kind: 'rule', name: 'approve-medium-refunds', effect: 'require_approval', subjects: ['agent:*'], loc: { file: 'refunds.policy', line: 11, col: 1 } });
    expect(strip(rule.kind === 'rule' && rule.when)).toEqual({
      type: 'and', items: [
        { type: 'cmp', left: P('amount'), op: 'gte', right: L(1000) },
        { type: 'cmp', left: P('currency'), op: 'eq', right: L('USD') },
      ],
    });
    const lim = f.items[2]!;
    expect(strip(lim)).toEqual({
      kind: 'limits', capability: 'create:refunds', forAgent: 'spiffe://localhost/agent/billing',
      fields: [
        { field: 'amount', max: 500, min: 1 },
        { field: 'currency', in: ['USD', 'EUR'] },
        { field: 'region', not_in: ['XX'] },
        { field: 'channel', eq: 'api' },
      ],
    });
    expect(lim.kind === 'limits' && lim.fields[1]!.loc).toEqual({ file: 'refunds.policy', line: 21, col: 3 });
  });

  it('gives or lower precedence than and, and not the highest', () => {
    const e = parseExpr('a == 1 or b == 2 and not c == 3').expr!;
    expect(strip(e)).toEqual({ type: 'or', items: [
      { type: 'cmp', left: P('a'), op: 'eq', right: L(1) },
      { type: 'and', items: [{ type: 'cmp', left: P('b'), op: 'eq', right: L(2) }, { type: 'not', expr: { type: 'cmp', left: P('c'), op: 'eq', right: L(3) } }] },
    ] });
    expect(strip(parseExpr('(a == 1 or b == 2) and x not in ["q"]').expr)).toMatchObject({ type: 'and', items: [{ type: 'or' }, { type: 'in', negated: true, right: L(['q']) }] });
  });

  it('decodes literals: negative and decimal numbers, escapes, booleans, lists', () => {
    expect(strip(parseExpr('x in [-1.5, 2e3]').expr)).toMatchObject({ right: L([-1.5, 2000]) });
    expect(strip(parseExpr('x == "a\\"b\\n\\u0041"').expr)).toMatchObject({ right: L('a"b\nA') });
    expect(strip(parseExpr('x != false').expr)).toMatchObject({ op: 'ne', right: L(false) });
  });

  it('parses kind declarations and tests', () => {
    const r = parsePolicy('t.tests', `kind "people" singular "person"
test "t" {
  agent "spiffe://x/agent/a" delegated
  permissions "create:refunds", "read:refunds"
  capability "create:refunds" {
    amount max 5
  }
  person "u1" permissions "create:refunds"
  action "create:refunds"
  resource "refund:1"
  context { amount: 3, "odd key": { nested: [1, null] } }
  approved
  expect allow "allowed"
}`);
    expect(r.diagnostics).toEqual([]);
    expect(strip(r.file!.items)).toEqual([
      { kind: 'kind', plural: 'people', singular: 'person' },
      {
        kind: 'test', name: 't', agent: { id: 'spiffe://x/agent/a', mode: 'delegated' }, permissions: ['create:refunds', 'read:refunds'],
        capabilities: [{ name: 'create:refunds', limits: [{ field: 'amount', max: 5 }] }], person: { id: 'u1', permissions: ['create:refunds'] },
        action: 'create:refunds', resource: 'refund:1', context: { amount: 3, 'odd key': { nested: [1, null] } }, approved: true,
        expect: { decision: 'allow', reason: 'allowed' },
      },
    ]);
  });

  it('reports a parse error as file:line:col with what was expected', () => {
    const r = parsePolicy('bad.policy', 'rule "x" {\n  effect deny\n  when amount >\n}\n');
    expect(r.file).toBeNull();
    expect(r.diagnostics).toHaveLength(1);
    const text = formatDiagnostic(r.diagnostics[0]!);
    expect(text).toMatch(/^bad\.policy:4:1: expected /);
    expect(text).toContain('a digit');
  });

  it('reports every broken block, not only the first', () => {
    const r = parsePolicy('bad.policy', 'rule "x" {\n  effect deny\n  when amount >\n}\n\nrule "y" {\n  subjects agent\n}\n\nlimits "a:b" for "c" {\n  amount max 1\n}\n');
    expect(r.diagnostics.map((d) => [d.line, d.col])).toEqual([[4, 1], [7, 12]]);
  });

  it('keeps comments through fmt', () => {
    const text = `# top of file

policy "p" version 1

# about the rule
rule "r" { # trailing
  effect deny
  // inside
  subjects "agent:*"
  relation "a:b"
  object "b:*"
}

limits "a:b" for "*" {
  amount max 5 # cents
}
# the end
`;
    const f = parsePolicy('c.policy', text).file!;
    const out = formatFile(f);
    expect(out).toBe(`# top of file

policy "p" version 1

# about the rule
rule "r" { # trailing
  effect deny
  // inside
  subjects "agent:*"
  relation "a:b"
  object "b:*"
}

limits "a:b" for "*" {
  amount max 5 # cents
}

# the end
`);
    expect(formatFile(parsePolicy('c.policy', out).file!)).toBe(out);
  });

  it('parses paths, comparisons of two paths, lists, like, and literals on either side', () => {
    const x = (t: string) => strip(parseExpr(t).expr);
    expect(x('resource.owner == person.email')).toEqual({ type: 'cmp', left: P('resource.owner'), op: 'eq', right: P('person.email') });
    expect(x('context.amount > subject.max_amount')).toEqual({ type: 'cmp', left: P('context.amount'), op: 'gt', right: P('subject.max_amount') });
    expect(x('resource.owner.team == "ops"')).toEqual({ type: 'cmp', left: { type: 'path', root: 'resource', segs: ['owner', 'team'] }, op: 'eq', right: L('ops') });
    expect(x('10 < amount')).toEqual({ type: 'cmp', left: L(10), op: 'lt', right: P('amount') });
    expect(x('resource.tags contains "vip"')).toEqual({ type: 'contains', left: P('resource.tags'), mode: 'one', right: L('vip') });
    expect(x('resource.tags contains any ["a", "b"]')).toEqual({ type: 'contains', left: P('resource.tags'), mode: 'any', right: L(['a', 'b']) });
    expect(x('subject.groups contains all resource.groups')).toEqual({ type: 'contains', left: P('subject.groups'), mode: 'all', right: P('resource.groups') });
    expect(x('"vip" in resource.tags')).toEqual({ type: 'in', left: L('vip'), negated: false, right: P('resource.tags') });
    expect(x('subject.id not in resource.editors')).toEqual({ type: 'in', left: P('subject.id'), negated: true, right: P('resource.editors') });
    expect(x('context.to not like "*@example.com"')).toEqual({ type: 'like', left: P('context.to'), negated: true, right: L('*@example.com') });
    expect(x('time.weekday in ["sat", "sun"]')).toEqual({ type: 'in', left: P('time.weekday'), negated: false, right: L(['sat', 'sun']) });
    // `any` and `all` are words only after contains: a context field may be named so
    expect(x('tags contains any')).toEqual({ type: 'contains', left: P('tags'), mode: 'one', right: P('any') });
    expect(parseExpr('x like').expr).toBeNull();
    expect(parseExpr('resource . owner == 1').expr).toBeNull();
  });

  it('every node carries its location', () => {
    const r = parsePolicy('l.policy', 'timezone "UTC"\nschema {\n  resource.tags: [string]\n}\nrule "r" {\n  effect permit\n  subjects "role:a"\n  relation "a:bs"\n  object "b:*"\n  when resource.tags contains "x" and  not (1 < amount)\n}\n');
    expect(r.diagnostics).toEqual([]);
    const [tz, schema, rule] = r.file!.items as any[];
    expect(tz.loc).toEqual({ file: 'l.policy', line: 1, col: 1 });
    expect(schema.entries[0].loc).toEqual({ file: 'l.policy', line: 3, col: 3 });
    expect(schema.entries[0].path.loc).toEqual({ file: 'l.policy', line: 3, col: 3 });
    expect(schema.entries[0].type.loc).toEqual({ file: 'l.policy', line: 3, col: 18 });
    const when = rule.when;
    expect(when.loc).toEqual({ file: 'l.policy', line: 10, col: 8 });
    expect(when.items[0].left.loc).toEqual({ file: 'l.policy', line: 10, col: 8 });
    expect(when.items[0].right.loc).toEqual({ file: 'l.policy', line: 10, col: 31 });
    expect(when.items[1].loc).toEqual({ file: 'l.policy', line: 10, col: 40 });
    expect(when.items[1].expr.left.loc).toEqual({ file: 'l.policy', line: 10, col: 45 });
    expect(when.items[1].expr.right.loc).toEqual({ file: 'l.policy', line: 10, col: 49 });
  });
});
