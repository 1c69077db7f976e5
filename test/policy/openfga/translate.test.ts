// OpenFGA conditions (CEL) into the policy language: each construct carried over, each refused by
// name with its line.
import { describe, expect, it } from 'vitest';
import { parseCel } from '../../../src/policy/openfga/cel.js';
import type { ConditionDef } from '../../../src/policy/openfga/model.js';
import { translateCondition } from '../../../src/policy/openfga/translate.js';
import { formatFile } from '../../../src/policy/format.js';
import { parsePolicy } from '../../../src/policy/parser.js';

const cond = (expression: string, params = 'a,b,c,s,l,m,t,d,ip'): ConditionDef => ({
  name: 'c',
  params: params.split(',').map((name) => ({ name, type: 'any' })),
  expression,
  expressionAt: { file: 'm.fga', line: 20 },
  at: { file: 'm.fga', line: 19 },
});

const text = (expression: string, params?: string) => {
  const r = translateCondition(cond(expression, params));
  if ('refusal' in r) throw new Error(`refused: ${r.refusal.message}`);
  return r.text;
};
const refused = (expression: string, params?: string) => {
  const r = translateCondition(cond(expression, params));
  return 'refusal' in r ? `${r.refusal.line}: ${r.refusal.message}` : `translated: ${r.text}`;
};

describe('CEL conditions in the policy language', () => {
  it.each([
    ['a == 1 && b != "x" || c >= 2.5', 'a == 1 and b != "x" or c >= 2.5'],
    ['a < b && (b <= c || !(a > c))', 'a < b and (b <= c or not a > c)'],
    ['!(a || b)', 'not (a == true or b == true)'],
    ['a', 'a == true'],
    ['!a', 'not a == true'],
    ['s.startsWith("x") && s.endsWith(\'y\') && s.contains("z") && s.matches("^[a-z]+$")', 'starts_with(s, "x") and ends_with(s, "y") and s contains "z" and matches(s, "^[a-z]+$")'],
    ['matches(s, r"\\d+")', 'matches(s, "\\\\d+")'],
    ['s.startsWith("x") == false', 'not starts_with(s, "x")'],
    ['true != s.endsWith("x")', 'not ends_with(s, "x")'],
    ['"k" in m && m["k"] == 1 && m.k == 1 && l[0] in l', '"k" in m and m["k"] == 1 and m["k"] == 1 and l[0] in l'],
    ['size(l) > 0 && l.size() < 3 && size(s) == 0x1F', 'size(l) > 0 and size(l) < 3 and size(s) == 31'],
    ['l.exists(x, x > 1)', 'any x in l: x > 1'],
    ['l.all(x, x > 1 && x < 5) && l.exists_one(y, y == 2)', '(all x in l: x > 1 and x < 5) and (one y in l: y == 2)'],
    ['l.exists(x, m.exists(y, x == y))', 'any x in l: any y in m: x == y'],
    ['l.exists(x, x > 1 || !l.all(y, y == x)) || a', '(any x in l: x > 1 or not (all y in l: y == x)) or a == true'],
    ['t < timestamp("2023-01-01T00:00:00Z") + duration("1h30m") && t - timestamp("2023-01-01T00:00:00Z") > d', 't < timestamp("2023-01-01T00:00:00Z") + duration("1h30m") and t - timestamp("2023-01-01T00:00:00Z") > d'],
    ['a - (b - c) == 1', 'a - (b - c) == 1'],
    ['ip.in_cidr("10.0.0.0/8") && ip != ipaddress("10.0.0.1") && ip != null', 'in_cidr(ip, "10.0.0.0/8") and ip != ipaddress("10.0.0.1") and ip != null'],
    ['a == 1u && b == -2 && c == .5 && a == 1e3 && b == -1.5', 'a == 1u and b == -2 and c == 0.5 and a == 1000 and b == -1.5'],
    ['a in [1, 2, 3]', 'a in [1, 2, 3]'],
    ['s == "tab\\there \\"q\\" \\u00e9"', 's == "tab\\there \\"q\\" é"'],
    ['s == """multi\nline"""', 's == "multi\\nline"'],
    ['a > 1 // a comment\n && b < 2', 'a > 1 and b < 2'],
  ])('%s', (cel, expected) => {
    expect(text(cel)).toBe(expected);
    // Already in the layout `fmt` prints.
    const file = `condition c(a: any, b: any, c: any, s: any, l: any, m: any, t: any, d: any, ip: any) {\n  ${expected}\n}\n`;
    const parsed = parsePolicy('c.policy', file);
    expect(parsed.diagnostics).toEqual([]);
    expect(formatFile(parsed.file!, { withComments: true })).toBe(file);
  });

  it('refuses what the language cannot say, by name and line', () => {
    expect(refused('a > 1 ? b : c')).toBe('20: condition c: the conditional operator "? :" is not supported');
    expect(refused('a > 1 &&\n  t.getHours() > 9')).toBe('21: condition c: the CEL function "getHours" is not supported');
    expect(refused('a * 2 > b')).toBe('20: condition c: the operator "*" is not supported (only "+" and "-")');
    expect(refused('a / 2 > b')).toBe('20: condition c: the operator "/" is not supported (only "+" and "-")');
    expect(refused('int(s) > 1')).toBe('20: condition c: the CEL function "int" is not supported');
    expect(refused('has(m.k)')).toBe('20: condition c: the CEL function "has" is not supported');
    expect(refused('m == {"a": 1}')).toBe('20: condition c: map literals ({...}) are not supported');
    expect(refused('s == b"x"')).toBe('20: condition c: bytes literals are not supported');
    expect(refused('\n\n  -a > 1')).toBe('22: condition c: negation ("-") of anything but a number literal is not supported');
    expect(refused('(a > 1) == (b > 1)')).toBe('20: condition c: a truth value (">") used as a value is not supported');
    expect(refused('timestamp(s) > t')).toBe('20: condition c: timestamp() of anything but a string literal is not supported');
    expect(refused('zzz > 1')).toBe('20: condition c: unknown name "zzz" (not a parameter of the condition)');
    expect(refused('l.exists(a, a > 1)')).toBe('20: condition c: the variable "a" of exists() hides a name already in use');
    expect(refused('l.exists(any, any > 1)')).toBe('20: condition c: the variable name "any" of exists() is a keyword of the policy language\'s conditions');
    expect(refused('like > 1', 'like')).toBe('19: condition c: parameter name "like" is a keyword of the policy language\'s conditions');
    expect(refused('a >')).toBe('20: condition c: CEL syntax error: unexpected "the end of the expression"');
    expect(refused('google.protobuf.Duration{seconds: 1} > d')).toBe('20: condition c: message literal google.protobuf.Duration{...} is not supported');
    expect(refused('s == "open')).toBe('20: condition c: CEL syntax error: unterminated string literal');
  });

  it('parses CEL precedence as CEL does', () => {
    const shape = (e: ReturnType<typeof parseCel>): string => {
      switch (e.t) {
        case 'binary': return `(${shape(e.l)} ${e.op} ${shape(e.r)})`;
        case 'unary': return `${e.op}${shape(e.e)}`;
        case 'ident': return e.name;
        case 'lit': return e.value;
        default: return e.t;
      }
    };
    expect(shape(parseCel('a || b && c == d + e * f'))).toBe('(a || (b && (c == (d + (e * f)))))');
    expect(shape(parseCel('!a == b in c'))).toBe('((!a == b) in c)');
    expect(shape(parseCel('a - b - c'))).toBe('((a - b) - c)');
  });
});
