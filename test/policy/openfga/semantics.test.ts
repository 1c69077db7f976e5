// Imported conditions mean in the policy language what they meant in CEL: each one is imported,
// read by the language's parser and evaluated by its condition evaluator on contexts whose CEL
// answer is known.
import { describe, expect, it } from 'vitest';
import { emitPolicy } from '../../../src/policy/openfga/emit.js';
import { modelFromDsl } from '../../../src/policy/openfga/source.js';
import { parsePolicy } from '../../../src/policy/parser.js';
import type { ConditionNode } from '../../../src/policy/relations/ast.js';
import { compileCondition } from '../../../src/policy/relations/conditions.js';

function imported(params: string, cel: string) {
  const m = modelFromDsl('m.fga', `model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [user with c]\ncondition c(${params}) {\n  ${cel}\n}\n`);
  if (!m.ok) throw new Error(JSON.stringify(m.refusals));
  const p = emitPolicy(m.value, { name: 'm', source: 'm.fga' });
  if (!p.ok) throw new Error(JSON.stringify(p.refusals));
  const parsed = parsePolicy('m.policy', p.value.text);
  const node = parsed.file?.items.find((i) => i.kind === 'condition') as ConditionNode | undefined;
  if (!node) throw new Error(JSON.stringify(parsed.diagnostics));
  return compileCondition(node);
}

const CASES: [string, string, [Record<string, unknown>, boolean][]][] = [
  ['x: int, y: int', 'x > 1 && y < 3', [[{ x: 2, y: 2 }, true], [{ x: 1, y: 2 }, false], [{ x: 2, y: 3 }, false]]],
  ['s: string', '!(s.startsWith("a")) || s.endsWith("z")', [[{ s: 'abc' }, false], [{ s: 'abz' }, true], [{ s: 'bcd' }, true]]],
  ['s: string', 's.contains("ell") && s.matches("^h.*o$")', [[{ s: 'hello' }, true], [{ s: 'help' }, false]]],
  ['s: string', 's.startsWith("a") == false', [[{ s: 'b' }, true], [{ s: 'a' }, false]]],
  ['m: map<string>', '"k" in m && m["k"] == "v"', [[{ m: { k: 'v' } }, true], [{ m: { j: 'v' } }, false], [{ m: { k: 'w' } }, false]]],
  ['m: map<int>', 'm.k == 1', [[{ m: { k: 1 } }, true], [{ m: { k: 2 } }, false]]],
  ['l: list<string>', 'l.exists(x, x == "a") && l.all(x, x != "")', [[{ l: ['a', 'b'] }, true], [{ l: ['b'] }, false], [{ l: ['a', ''] }, false]]],
  ['l: list<string>', 'l.exists_one(x, x == "a")', [[{ l: ['a', 'b'] }, true], [{ l: ['a', 'a'] }, false], [{ l: [] }, false]]],
  ['l: list<string>', 'size(l) == 2 && l[1] == "b" && "a" in l', [[{ l: ['a', 'b'] }, true], [{ l: ['a', 'c'] }, false]]],
  ['x: int', 'x in [1, 2, 3]', [[{ x: 2 }, true], [{ x: 4 }, false]]],
  ['current_time: timestamp, grant_time: timestamp, grant_duration: duration', 'current_time < grant_time + grant_duration', [
    [{ grant_time: '2023-01-01T00:00:00Z', grant_duration: '1h', current_time: '2023-01-01T00:10:00Z' }, true],
    [{ grant_time: '2023-01-01T00:00:00Z', grant_duration: '1h', current_time: '2023-01-01T02:00:00Z' }, false],
  ]],
  ['t: timestamp', 't - timestamp("2023-01-01T00:00:00Z") > duration("30m")', [[{ t: '2023-01-01T01:00:00Z' }, true], [{ t: '2023-01-01T00:20:00Z' }, false]]],
  ['ip: ipaddress', 'ip.in_cidr("192.168.0.0/24") && ip != ipaddress("192.168.0.1")', [[{ ip: '192.168.0.5' }, true], [{ ip: '192.168.0.1' }, false], [{ ip: '10.0.0.1' }, false]]],
  ['u: uint', 'u > 0u', [[{ u: 1 }, true], [{ u: 0 }, false]]],
  ['d: double', 'd > 0.5 || d == -1.0', [[{ d: -1 }, true], [{ d: 0.2 }, false], [{ d: 0.75 }, true]]],
  ['flag: bool, other: bool', 'flag && !other', [[{ flag: true, other: false }, true], [{ flag: true, other: true }, false]]],
];

describe('imported conditions, evaluated by the policy language', () => {
  for (const [params, cel, runs] of CASES) {
    it(cel, () => {
      const c = imported(params, cel);
      for (const [context, expected] of runs) expect([context, c.evaluate(context, {})]).toEqual([context, { ok: true, value: expected }]);
    });
  }
});
