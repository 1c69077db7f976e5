// `policy test --coverage` as a process: the JSON shape, text and LCOV from the same run, and
// --min-coverage deciding the exit code.
import { describe, expect, it } from 'vitest';
import { gatehouse, REFUNDS, refundTest, workDir } from './helpers.js';

describe('policy test --coverage', () => {
  it('json, text and lcov of one run; --min-coverage exits 1 under the percent', async () => {
    const dir = await workDir({ 'p/r.policy': REFUNDS, 'p/r.tests': refundTest('small', 10, 'allow') + '\n' + refundTest('large', 20000, 'deny') });
    const [asJson, text, lcov, at, over] = await Promise.all([
      gatehouse(['policy', 'test', 'p', '--coverage', '--format', 'json'], dir),
      gatehouse(['policy', 'test', 'p', '--coverage'], dir),
      gatehouse(['policy', 'test', 'p', '--coverage', '--format', 'lcov'], dir),
      gatehouse(['policy', 'test', 'p', '--coverage', '--min-coverage', '83.3'], dir),
      gatehouse(['policy', 'test', 'p', '--coverage', '--min-coverage', '84', '--json'], dir),
    ]);
    expect(asJson.code).toBe(0);
    // block-large-refunds: evaluated, `amount > 10000` true and false; approve-medium-refunds:
    // evaluated by "small" only, `amount >= 1000` false only: 1 + 2 + 1 + 1 = 5 of (1 + 2) + (1 + 2) = 6.
    expect(JSON.parse(asJson.stdout)).toEqual({
      percent: 83.3,
      rules: [
        { file: 'p/r.policy', line: 3, name: 'block-large-refunds', exercised: true, conditions: [{ line: 8, column: 8, text: 'amount > 10000', true: true, false: true }] },
        { file: 'p/r.policy', line: 11, name: 'approve-medium-refunds', exercised: true, conditions: [{ line: 16, column: 8, text: 'amount >= 1000', true: false, false: true }] },
      ],
      limits: [],
    });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('2 passed, 0 failed');
    expect(text.stdout).toContain('coverage: 83.3%');
    expect(text.stdout).toMatch(/amount >= 1000 {2}p\/r\.policy:16:8 {2}\(never true\)/);
    expect(lcov.stdout).toContain('SF:p/r.policy\n');
    expect(lcov.stdout).toContain('BRDA:16,1,0,0\nBRDA:16,1,1,1\n');
    expect(lcov.stdout).toContain('BRF:4\nBRH:3\n');
    expect([at.code, at.stderr]).toEqual([0, '']);
    expect(over.code).toBe(1);
    expect(JSON.parse(over.stdout).percent).toBe(83.3);
    expect(over.stderr).toBe('coverage 83.3% is under the minimum of 84%\n');
  });

  it('--min-coverage without --coverage measures for the threshold alone, beside any format', async () => {
    const dir = await workDir({ 'p/r.policy': REFUNDS, 'p/r.tests': refundTest('small', 10, 'allow') + '\n' + refundTest('large', 20000, 'deny') });
    const [under, at, junit] = await Promise.all([
      gatehouse(['policy', 'test', 'p', '--min-coverage', '84'], dir),
      gatehouse(['policy', 'test', 'p', '--min-coverage', '83.3'], dir),
      gatehouse(['policy', 'test', 'p', '--format', 'junit', '--min-coverage', '90'], dir),
    ]);
    expect(under.code).toBe(1);
    expect(under.stdout).toContain('2 passed, 0 failed');
    expect(under.stdout).not.toContain('coverage:');
    expect(under.stderr).toBe('coverage 83.3% is under the minimum of 84%\n');
    expect([at.code, at.stderr]).toEqual([0, '']);
    expect(junit.code).toBe(1);
    expect(junit.stdout).toMatch(/^<\?xml[^]*<\/testsuites>\n?$/);
    expect(junit.stderr).toBe('coverage 83.3% is under the minimum of 90%\n');
  });

  it('a failing test fails the run whatever the coverage', async () => {
    const dir = await workDir({ 'p/r.policy': REFUNDS, 'p/r.tests': refundTest('wrong', 10, 'deny') });
    const r = await gatehouse(['policy', 'test', 'p', '--coverage', '--format', 'json', '--min-coverage', '0'], dir);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).percent).toBeGreaterThan(0);
  });
});
