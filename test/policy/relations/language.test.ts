// The language of relations: fmt round-trips random models and condition bodies; policy check
// reports what the model cannot mean, at the place; conditions evaluate as OpenFGA's CEL does.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parsePolicy } from '../../../src/policy/parser.js';
import { formatFile } from '../../../src/policy/format.js';
import { parseAndValidate } from '../../../src/policy/load.js';
import { buildModel } from '../../../src/policy/relations/model.js';
import { arbModelText } from './arbitraries.js';

/** The AST without locations and comments. */
function bare(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v, (k, x) => (k === 'loc' || k === 'comments' || k === 'lineLocs' ? undefined : x)));
}

const arbName = fc.constantFrom('a', 'b', 'n', 'l', 'm', 's');
const arbCExpr = fc.letrec<{ e: string; atom: string }>((tie) => ({
  atom: fc.oneof(
    { maxDepth: 4, depthIdentifier: 'cexpr' },
    arbName,
    fc.integer({ min: -5, max: 99 }).map(String),
    fc.constantFrom('1.5', '0u', '"x"', 'true', 'null', '[1, 2]', 'duration("1h30m")', 'timestamp("2023-01-01T00:00:00Z")', 'ipaddress("10.0.0.1")'),
    fc.tuple(arbName, tie('e')).map(([f, x]) => `size(${f}) + (${x})`),
    tie('e').map((x) => `(${x})`),
    fc.tuple(arbName, fc.constantFrom('"k"', '0')).map(([x, i]) => `${x}[${i}]`),
  ),
  e: fc.oneof(
    { maxDepth: 4, depthIdentifier: 'cexpr' },
    { weight: 3, arbitrary: tie('atom') },
    { weight: 1, arbitrary: fc.tuple(tie('atom'), fc.constantFrom('==', '!=', '<', '>=', 'in', 'not in', 'contains', '+', '-'), tie('atom')).map(([x, op, y]) => `${x} ${op} ${y}`) },
    { weight: 1, arbitrary: fc.tuple(tie('e'), fc.constantFrom('and', 'or'), tie('e')).map(([x, op, y]) => `${x} ${op} ${y}`) },
    { weight: 1, arbitrary: tie('atom').map((x) => `not ${x}`) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('any', 'all', 'one'), arbName, tie('e')).map(([q, v, b]) => `(${q} v in ${v}: ${b})`) },
  ),
})).e;

describe('fmt on relations', () => {
  it('parse(fmt(x)) equals x and fmt is idempotent, for random models', () => {
    fc.assert(fc.property(arbModelText, (text) => {
      const a = parsePolicy('m.policy', text);
      expect(a.diagnostics).toEqual([]);
      const once = formatFile(a.file!);
      const b = parsePolicy('m.policy', once);
      expect(b.diagnostics).toEqual([]);
      expect(bare(b.file!.items)).toEqual(bare(a.file!.items));
      expect(formatFile(b.file!)).toBe(once);
    }), { numRuns: 100 });
  });

  it('parse(fmt(x)) equals x for random condition bodies (types aside)', () => {
    fc.assert(fc.property(arbCExpr, (body) => {
      const a = parsePolicy('c.policy', `condition k(a: int) {\n  ${body}\n}\n`);
      expect(a.diagnostics, body).toEqual([]);
      const once = formatFile(a.file!);
      const b = parsePolicy('c.policy', once);
      expect(b.diagnostics, once).toEqual([]);
      expect(bare(b.file!.items), once).toEqual(bare(a.file!.items));
      expect(formatFile(b.file!)).toBe(once);
    }), { numRuns: 200 });
  });

  it('keeps comments, and group#member is not a comment', () => {
    const text = '# people\ntype user\n\ntype group {\n  # who belongs\n  relation member: [user, group#member] # nested groups\n}\n';
    expect(formatFile(parsePolicy('g.policy', text).file!)).toBe(text);
  });
});

function errors(text: string, tests?: string): string[] {
  const files = [{ path: 'm.policy', text }];
  if (tests !== undefined) files.push({ path: 'm.tests', text: tests });
  return parseAndValidate({ files }, { warnings: true }).diagnostics.map((d) => `${d.line}:${d.col}: ${d.severity === 'warning' ? 'warning: ' : ''}${d.message}`);
}

describe('policy check on relations', () => {
  const base = 'type user\n\ntype group {\n  relation member: [user]\n}\n\n';

  it('unknown types, relations and conditions, impossible usersets, each at its place', () => {
    expect(errors(base + 'type doc {\n  relation parent: [folder]\n  relation viewer: [user, group#owner, user with c] or editor\n}\n')).toEqual([
      '8:21: relation doc#parent: unknown type folder',
      '9:27: relation doc#viewer: group#owner is impossible: type group has no relation owner',
      '9:40: relation doc#viewer: unknown condition c',
      '9:56: relation doc#viewer: type doc has no relation editor',
    ]);
  });

  it('a tupleset must be a direct relation of plain types', () => {
    expect(errors(base + 'type doc {\n  relation parent: [group] or owner\n  relation owner: [user, group#member]\n  relation a: member from parent\n  relation b: member from owner\n  relation c: viewer from owner\n}\n')).toEqual([
      '10:15: relation doc#a: "from parent" needs doc#parent to be direct types only, such as [folder]',
      '11:15: relation doc#b: "from owner" needs doc#owner to list plain types, not group#member',
      '12:15: relation doc#c: "from owner" needs doc#owner to list plain types, not group#member',
    ]);
  });

  it('operators mixed without parentheses, and a second [...]', () => {
    expect(errors(base + 'type doc {\n  relation a: [user]\n  relation b: [user] or a and a\n  relation c: [user] or [group#member]\n}\n')).toEqual([
      '9:27: relation doc#b: "or" and "and" are mixed without parentheses; add parentheses to say which applies first',
      '10:12: relation doc#c: at most one [...] of direct types per definition',
    ]);
  });

  it('relations nothing can reach are warnings', () => {
    expect(errors(base + 'type doc {\n  relation a: b\n  relation b: a\n  relation c: [user] and a\n  relation d: [user] but not a\n}\n')).toEqual([
      '8:12: warning: relation doc#a can never hold: no relationship can reach it',
      '9:12: warning: relation doc#b can never hold: no relationship can reach it',
      '10:12: warning: relation doc#c can never hold: no relationship can reach it',
    ]);
  });

  it('a type with relations that no plural reads back to is a warning, until a kind declares one', () => {
    const bus = 'type bus {\n  relation driver: [user]\n}\n';
    expect(errors(base + bus + 'type status\n')).toEqual([
      '7:1: warning: type bus: no plural reads back as "bus" ("buses" reads as "buse"), so its relations are no permission (driver:<plural>) until one is declared: kind "buses" singular "bus"',
    ]);
    expect(errors(base + bus + 'kind "buses" singular "bus"\n')).toEqual([]);
  });

  it('ill-typed conditions and unknown names', () => {
    expect(errors('condition c(a: int, b: strin, t: timestamp, l: list<string>) {\n  a < "x" and z and t + duration("x") > t and l contains 1 and size(a) > 0 and matches("a", "(?=x)")\n}\n')).toEqual([
      '1:24: condition c, parameter b: unknown type "strin" (use bool, string, int, uint, double, duration, timestamp, ipaddress, any, list<T>, map<T>)',
      '2:5: condition c: "<" compares int with string',
      '2:15: condition c: unknown name z (the parameters are a, b, t, l)',
      '2:25: condition c: duration("x") is not a duration such as "1h30m"',
      '2:58: condition c: a list<string> contains string items, not int',
      '2:64: condition c: size needs a string, a list or a map, not int',
      '2:80: condition c: matches: "(?=x)" is not a valid regular expression',
    ]);
  });

  it('fixtures and assertions name what exists and what the model allows', () => {
    expect(errors(base + 'type doc {\n  relation viewer: [user]\n}\n', 'relationships {\n  "doc:1#viewer@group:g#member"\n  "doc:1#editor@user:a"\n  "doc:1viewer@user:a"\n}\n\ntest "t" {\n  check "user:a" "owner" "doc:1" expect true\n  list objects "user:a" "viewer" "folder" expect []\n  check "user:a" "viewer" "doc:1" expect maybe\n  list objects "doc:1#owner" "viewer" "doc" expect []\n}\n')).toEqual([
      '2:3: relationship "doc:1#viewer@group:g#member": doc#viewer does not allow group#member (it allows user)',
      '3:3: relationship "doc:1#editor@user:a": type doc has no relation editor',
      '4:3: relationship "doc:1viewer@user:a": "doc:1viewer@user:a" needs the form <object>#<relation>@<subject>',
      '8:3: check: type doc has no relation owner',
      '9:3: list objects: unknown type folder',
      '10:3: check: expect true, false or error, not maybe',
      '11:3: list objects: subject doc:1#owner: type doc has no relation owner',
    ]);
  });
});

describe('conditions evaluate as CEL does', () => {
  const model = buildModel([parsePolicy('c.policy', `
condition net(ip: ipaddress, cidr: string) {
  in_cidr(ip, cidr) and ip != ipaddress("10.0.0.9")
}
condition temporal(grant_time: timestamp, grant_duration: duration, current_time: timestamp) {
  current_time < grant_time + grant_duration
}
condition tags(allowed: list<string>, tag: string, m: map<int>) {
  tag in allowed and "k" in m and m["k"] > 1 and all t in allowed: size(t) > 0
}
condition idx(m: map<int>) {
  m["k"] > 1
}
condition text(s: string) {
  starts_with(s, "ab") and ends_with(s, "yz") and matches(s, "^a.*z$") and s contains "c" and one c in [s, "q"]: c == "q"
}
`).file!]);
  const ev = (name: string, ctx: Record<string, unknown>) => model.conditions.get(name)!.evaluate({}, ctx);

  it('ip addresses and CIDRs, timestamps and durations, lists, maps, strings, quantifiers', () => {
    expect(ev('net', { ip: '10.1.2.3', cidr: '10.0.0.0/8' })).toEqual({ ok: true, value: true });
    expect(ev('net', { ip: '10.0.0.9', cidr: '10.0.0.0/8' })).toEqual({ ok: true, value: false });
    expect(ev('net', { ip: '2001:db8::1', cidr: '2001:db8::/32' })).toEqual({ ok: true, value: true });
    expect(ev('net', { ip: '192.168.0.1', cidr: '10.0.0.0/8' })).toEqual({ ok: true, value: false });
    expect(ev('temporal', { grant_time: '2023-01-01T00:00:00Z', grant_duration: '1h', current_time: '2023-01-01T00:59:59Z' })).toEqual({ ok: true, value: true });
    expect(ev('temporal', { grant_time: '2023-01-01T00:00:00Z', grant_duration: '1h', current_time: '2023-01-01T01:00:00Z' })).toEqual({ ok: true, value: false });
    expect(ev('tags', { allowed: ['a', 'b'], tag: 'b', m: { k: 2 } })).toEqual({ ok: true, value: true });
    expect(ev('tags', { allowed: ['a', ''], tag: 'a', m: { k: 2 } })).toEqual({ ok: true, value: false });
    expect(ev('text', { s: 'abcxyz' })).toEqual({ ok: true, value: true });
  });

  it('a missing or unconvertible parameter is an error naming it; stored values win', () => {
    expect(ev('temporal', { grant_time: '2023-01-01T00:00:00Z', grant_duration: '1h' })).toEqual({ ok: false, error: 'condition temporal: parameter current_time is missing from the context', missing: 'current_time' });
    expect(ev('temporal', { grant_time: 'yesterday', grant_duration: '1h', current_time: '2023-01-01T00:00:00Z' })).toEqual({ ok: false, error: 'condition temporal: parameter grant_time must be an RFC 3339 timestamp such as "2023-01-01T00:00:00Z"' });
    expect(ev('tags', { allowed: ['a'], tag: 'a', m: {} })).toEqual({ ok: true, value: false });
    expect(ev('idx', { m: {} })).toEqual({ ok: false, error: 'condition idx: no such key "k"' });
    expect(ev('idx', { m: { k: 'two' } })).toEqual({ ok: false, error: 'condition idx: parameter m.k must be an int' });
    expect(ev('idx', { m: { k: '2.5' } })).toEqual({ ok: false, error: 'condition idx: parameter m.k must be an int' });
    // A decimal string is a number, as OpenFGA converts it for a numeric parameter.
    expect(ev('tags', { allowed: ['a', 'b'], tag: 'b', m: { k: '2' } })).toEqual({ ok: true, value: true });
    expect(model.conditions.get('net')!.evaluate({ cidr: '10.0.0.0/8' }, { ip: '10.0.0.1', cidr: '0.0.0.0/0' })).toEqual({ ok: true, value: true });
    expect(model.conditions.get('net')!.evaluate({ cidr: '192.168.0.0/16' }, { ip: '10.0.0.1', cidr: '0.0.0.0/0' })).toEqual({ ok: true, value: false });
  });

  it('timestamps and IPv4 addresses convert as Go reads them: fields in range, T and Z upper case, no leading zero', () => {
    const at = (current_time: string) => ev('temporal', { grant_time: '2024-02-28T00:00:00Z', grant_duration: '48h', current_time });
    expect(at('2024-02-29T12:00:00Z')).toEqual({ ok: true, value: true });
    expect(at('2024-03-01T12:00:00+01:00')).toEqual({ ok: true, value: false });
    for (const bad of ['2023-02-29T12:00:00Z', '2024-02-30T00:00:00Z', '2024-04-31T00:00:00Z', '2024-02-29t12:00:00z', '2024-02-29T24:00:00Z', '2024-02-29T12:60:00Z', '2024-02-29T12:00:00+25:00']) {
      expect(at(bad), bad).toEqual({ ok: false, error: expect.stringContaining('parameter current_time must be an RFC 3339 timestamp') });
    }
    expect(ev('net', { ip: '10.0.0.1', cidr: '10.0.0.0/8' })).toEqual({ ok: true, value: true });
    for (const bad of ['010.0.0.1', '10.0.0.01', '::ffff:10.0.0.01']) expect(ev('net', { ip: bad, cidr: '10.0.0.0/8' }), bad).toMatchObject({ ok: false });
  });
});

describe('the parser locates every node', () => {
  it('types, relations, restrictions, operands, conditions, fixtures and assertions', () => {
    const text = 'type doc {\n  relation viewer: [user with c] or owner from parent\n}\n\ncondition c(n: int) {\n  n > 1\n}\n\nrelationships {\n  "doc:1#viewer@user:a"\n}\n\ntest "t" {\n  check "user:a" "viewer" "doc:1" expect true\n}\n';
    const items = parsePolicy('l.policy', text).file!.items as any[];
    const at = (n: { loc?: { line: number; col: number } }) => `${n.loc!.line}:${n.loc!.col}`;
    const rel = items[0].relations[0];
    expect([at(items[0]), at(rel), at(rel.expr), at(rel.expr.items[0]), at(rel.expr.items[0].refs[0]), at(rel.expr.items[1])]).toEqual(['1:1', '2:12', '2:20', '2:20', '2:21', '2:37']);
    const cond = items[1];
    expect([at(cond), at(cond.params[0]), at(cond.params[0].type), at(cond.body), at(cond.body.left), at(cond.body.right)]).toEqual(['5:1', '5:13', '5:16', '6:5', '6:3', '6:7']);
    expect([at(items[2]), at(items[2].lines[0]), at(items[3].assertions[0])]).toEqual(['9:1', '10:3', '14:3']);
  });
});
