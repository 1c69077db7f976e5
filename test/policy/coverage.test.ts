// Coverage counted by hand on small files: which rules the tests' decisions evaluated, each
// comparison seen true and seen false (a condition stops at a comparison that cannot be
// evaluated, so the ones after it are not counted), each limit kept and broken.
import { describe, expect, it } from 'vitest';
import { buildPolicySet, parseAndValidate } from '../../src/policy/load.js';
import { collectTests } from '../../src/policy/test-runner.js';
import { coverageLcov, measureCoverage } from '../../src/policy/coverage.js';

const POLICY = `policy "c" version 1

rule "big" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 100 and currency == "EUR"
}

rule "wait" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when region == "eu" and amount > 10
}

rule "never-reached" {
  effect deny
  subjects "agent:*"
  relation "delete:refunds"
  object "refund:*"
  when amount > 5
}

limits "create:refunds" for "*" {
  amount max 1000
}
`;

const test = (name: string, context: string, expect: string) => `test "${name}" {
  agent "spiffe://h/agent/a" autonomous
  permissions "create:refunds"
  capability "create:refunds"
  action "create:refunds"
  resource "refund:r1"
  context { ${context} }
  expect ${expect}
}
`;

function coverageOf(tests: string) {
  const parsed = parseAndValidate({ files: [{ path: 'c.policy', text: POLICY }, { path: 'c.tests', text: tests }] });
  expect(parsed.diagnostics.filter((d) => (d as { severity?: string }).severity !== 'warning')).toEqual([]);
  const set = buildPolicySet(parsed.files, []);
  return measureCoverage(set, collectTests(parsed.files), parsed.files);
}

const TWO = test('small', 'amount: 50, currency: "EUR"', 'approval_required') + test('big', 'amount: 200, currency: "EUR"', 'deny');

describe('policy test --coverage, counted by hand', () => {
  it('two tests: the rules reached, each comparison true or false, the stop after a missing value', () => {
    const c = coverageOf(TWO);
    expect(c.rules).toEqual([
      { file: 'c.policy', line: 3, name: 'big', exercised: true, conditions: [
        { line: 8, column: 8, text: 'amount > 100', true: true, false: true },
        { line: 8, column: 25, text: 'currency == "EUR"', true: true, false: false },
      ] },
      // Test "small" reaches it (no deny applies); `region` is missing, so `amount > 10` is never evaluated.
      { file: 'c.policy', line: 11, name: 'wait', exercised: true, conditions: [
        { line: 16, column: 8, text: 'region == "eu"', true: false, false: false },
        { line: 16, column: 27, text: 'amount > 10', true: false, false: false },
      ] },
      { file: 'c.policy', line: 19, name: 'never-reached', exercised: false, conditions: [
        { line: 24, column: 8, text: 'amount > 5', true: false, false: false },
      ] },
    ]);
    expect(c.limits).toEqual([
      { file: 'c.policy', line: 28, name: 'create:refunds for *: amount max 1000', exercised: true, conditions: [{ line: 28, column: 3, text: 'amount max 1000', true: true, false: false }] },
    ]);
    // covered: big 1 + 3 outcomes, wait 1, limit kept 1 = 6; coverable: (1+4) + (1+4) + (1+2) + 2 = 15
    expect(c.percent).toBe(40);
  });

  it('a third test breaking the limit: the limit counts broken, and the rules after it are not reached', () => {
    const c = coverageOf(TWO + test('over the limit', 'amount: 5000, currency: "EUR"', 'deny'));
    expect(c.limits[0]!.conditions[0]).toMatchObject({ true: true, false: true });
    expect(c.rules[0]!.conditions.map((x) => [x.true, x.false])).toEqual([[true, true], [true, false]]);
    expect(c.percent).toBe(46.6); // 7 of 15, rounded down
  });

  it('no tests: nothing exercised, 0%', () => {
    const c = coverageOf('');
    expect(c.rules.every((r) => !r.exercised && r.conditions.every((x) => !x.true && !x.false))).toBe(true);
    expect(c.percent).toBe(0);
  });

  it('lcov: a BRDA pair per comparison and limit, a DA line per rule and limit', () => {
    const lcov = coverageLcov(coverageOf(TWO));
    expect(lcov.split('\n')).toEqual([
      'TN:', 'SF:c.policy',
      'FN:3,big', 'FN:11,wait', 'FN:19,never-reached',
      'FNDA:1,big', 'FNDA:1,wait', 'FNDA:0,never-reached',
      'FNF:3', 'FNH:2',
      'BRDA:8,0,0,1', 'BRDA:8,0,1,1',
      'BRDA:8,1,0,1', 'BRDA:8,1,1,0',
      'BRDA:16,2,0,0', 'BRDA:16,2,1,0',
      'BRDA:16,3,0,0', 'BRDA:16,3,1,0',
      'BRDA:24,4,0,-', 'BRDA:24,4,1,-',
      'BRDA:28,5,0,1', 'BRDA:28,5,1,0',
      'BRF:12', 'BRH:4',
      'DA:3,1', 'DA:11,1', 'DA:19,0', 'DA:28,1',
      'LF:4', 'LH:3', 'end_of_record', '',
    ]);
  });
});
