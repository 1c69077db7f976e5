// `policy check`, `policy test` and `policy explain` as processes: carets under every error of
// every file, --format json, a tests file against its directory's policies, explain's exit codes.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expectCaretBlocks as caretBlocks, gatehouse, REFUNDS, refundTest, workDir, writeFiles, type JsonDiagnostic } from './helpers.js';
import { runPolicyCommand } from '../../src/cli/policy.js';


// Three broken files: a validation error and a bad operator, a syntax error, and a file indented
// with tabs holding two errors of its own.
const BROKEN = {
  'bad/a.policy': 'rule "r" {\n  effect allow\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n  when x => 1\n}\n',
  'bad/b.policy': 'rule "r2" {\n  when\n}\n',
  'bad/c.policy': 'rule "x" {\n\teffect deny\n\tsubjects "robot:*"\n\trelation "create:refunds"\n\tobject "refund:*"\n\twhen amount > "5"\n}\n',
};

let cwd: string;
beforeAll(async () => {
  cwd = await workDir({
    ...BROKEN,
    'good/refunds.policy': REFUNDS,
    'good/refunds.tests': refundTest('small refund is allowed', 10, 'allow "allowed"') + '\n' + refundTest('medium refund waits', 5000, 'approval_required'),
  });
});

describe('gatehouse policy check', () => {
  it('every error of every file: file:line:col: message, the source line and a caret; exit 1', async () => {
    const [text, asJson] = await Promise.all([
      gatehouse(['policy', 'check', 'bad'], cwd),
      gatehouse(['policy', 'check', 'bad', '--format', 'json'], cwd),
    ]);
    expect(text.code).toBe(1);
    expect(asJson.code).toBe(1);
    const j = JSON.parse(asJson.stdout) as { ok: boolean; errors: number; diagnostics: JsonDiagnostic[] };
    expect(j.ok).toBe(false);
    expect(j.diagnostics.map((d) => `${d.file}:${d.line}:${d.col}`)).toEqual([
      'bad/a.policy:2:10', 'bad/a.policy:6:8', 'bad/b.policy:3:1', 'bad/c.policy:3:11', 'bad/c.policy:6:7',
    ]);
    expect(j.errors).toBe(5);
    for (const d of j.diagnostics) {
      expect(Object.keys(d).sort()).toEqual(['code', 'col', 'file', 'line', 'message', 'severity']);
      expect(d.severity).toBe('error');
      expect(d.message.length).toBeGreaterThan(0);
    }
    expect(j.diagnostics.find((d) => d.file === 'bad/b.policy')!.code).toBe('parse_error');
    expect(j.diagnostics.find((d) => d.file === 'bad/a.policy')!.code).toBe('invalid_policy');
    await caretBlocks(cwd, text.stderr, j.diagnostics);
    expect(text.stderr).toContain(' 2 |   effect allow\n   |          ^^^^^\n'); // the whole word
    expect(text.stderr.trimEnd().split('\n').at(-1)).toBe('5 errors');
    expect(text.stdout).toBe('');
  });

  it('a valid directory: ok line, exit 0; as JSON every count', async () => {
    const t = await gatehouse(['policy', 'check', 'good'], cwd);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/^ok: 2 files, 2 rules, 2 tests; policy version refunds@1#[0-9a-f]{12}\n$/);
    const j = await gatehouse(['policy', 'check', 'good', '--json', '--strict'], cwd);
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout)).toEqual({
      ok: true, errors: 0, warnings: 0, strict: true, diagnostics: [],
      targets: [{ target: 'good', ok: true, files: ['good/refunds.policy', 'good/refunds.tests'], rules: 2, tests: 2, policy_version: expect.stringMatching(/^refunds@1#/) }],
    });
  });

  it('the version is the content only: the same files named by another path, or copied elsewhere, have the same version', async () => {
    const versionOf = (out: string) => /policy version (\S+)/.exec(out)?.[1];
    const relative = await gatehouse(['policy', 'check', 'good'], cwd);
    const absolute = await gatehouse(['policy', 'check', join(cwd, 'good')], cwd);
    const elsewhere = await workDir({ 'other/refunds.policy': await readFile(join(cwd, 'good/refunds.policy'), 'utf8'), 'other/refunds.tests': await readFile(join(cwd, 'good/refunds.tests'), 'utf8') });
    const copied = await gatehouse(['policy', 'check', 'other'], elsewhere);
    expect(versionOf(relative.stdout)).toMatch(/^refunds@1#[0-9a-f]{12}$/);
    expect(versionOf(absolute.stdout)).toBe(versionOf(relative.stdout));
    expect(versionOf(copied.stdout)).toBe(versionOf(relative.stdout));
  });

  it('several targets: each checked on its own, exit 1 when any fails', async () => {
    const r = await gatehouse(['policy', 'check', 'good', 'bad/b.policy', '--format=json'], cwd);
    expect(r.code).toBe(1);
    const j = JSON.parse(r.stdout);
    expect(j.targets.map((t: { target: string; ok: boolean }) => [t.target, t.ok])).toEqual([['good', true], ['bad/b.policy', false]]);
    expect(j.diagnostics).toHaveLength(1);
  });
});

describe('gatehouse policy test', () => {
  it('--format json: every test with name, expected, actual and pass', async () => {
    const dir = await workDir({
      'refunds.policy': REFUNDS,
      'refunds.tests': refundTest('small', 10, 'allow') + refundTest('large is allowed (wrong)', 20000, 'allow "allowed"'),
    });
    const r = await gatehouse(['policy', 'test', '.', '--format', 'json'], dir);
    expect(r.code).toBe(1);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ ok: false, passed: 1, failed: 1, diagnostics: [] });
    expect(j.results).toEqual([
      { name: 'small', file: 'refunds.tests', line: 1, expected: { decision: 'allow' }, actual: { decision: 'allow', reason: 'allowed' }, pass: true, policy_version: expect.stringMatching(/^refunds@1#/) },
      { name: 'large is allowed (wrong)', file: 'refunds.tests', line: 10, expected: { decision: 'allow', reason: 'allowed' }, actual: { decision: 'deny', reason: 'rule_denied: block-large-refunds' }, pass: false, policy_version: expect.any(String) },
    ]);
  });

  it('a broken policy: its errors with carets (or in the JSON), exit 1', async () => {
    const t = await gatehouse(['policy', 'test', 'bad'], cwd);
    expect(t.code).toBe(1);
    expect(t.stderr).toContain('bad/a.policy:2:10: unknown effect "allow"');
    expect(t.stderr).toContain('   |          ^^^^^');
    const j = await gatehouse(['policy', 'test', 'bad', '--json'], cwd);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stdout)).toMatchObject({ ok: false, results: [], diagnostics: expect.arrayContaining([expect.objectContaining({ file: 'bad/b.policy', line: 3, col: 1, severity: 'error' })]) });
  });

  it('FILE.tests runs against the policies of its directory: a wrong expectation fails', async () => {
    // An empty policy allows a large refund; the directory's policy denies it. The expectation
    // below is the empty policy's answer, so only a run against the directory can catch it.
    const wrong = refundTest('large refund is allowed', 20000, 'allow');
    const dir = await workDir({ 'p/refunds.policy': REFUNDS, 'p/wrong.tests': wrong, 'p/right.tests': refundTest('large refund is denied', 20000, 'deny "rule_denied: block-large-refunds"'), 'empty/wrong.tests': wrong });
    const r = await gatehouse(['policy', 'test', 'p/wrong.tests'], dir);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAIL  large refund is allowed (p/wrong.tests:1): expected allow, got deny "rule_denied: block-large-refunds"');
    expect(r.stdout).not.toContain('large refund is denied'); // only the named file's tests run
    expect(r.stdout).toMatch(/0 passed, 1 failed; policy version refunds@1#/);
    const empty = await gatehouse(['policy', 'test', 'empty/wrong.tests'], dir);
    expect(empty.code, 'with no policies beside it, the same test passes').toBe(0);
    const right = await gatehouse(['policy', 'test', 'p/right.tests', '--json'], dir);
    expect(right.code).toBe(0);
    expect(JSON.parse(right.stdout).results).toEqual([expect.objectContaining({ name: 'large refund is denied', pass: true })]);
    const both = await gatehouse(['policy', 'test', 'p'], dir);
    expect(both.code).toBe(1);
    expect(both.stdout).toMatch(/1 passed, 1 failed/);
  });
});

describe('gatehouse policy explain', () => {
  const ask = (amount: number, ...more: string[]) => gatehouse(['policy', 'explain', 'good', '--agent', 'spiffe://localhost/agent/ops', '--action', 'create:refunds', '--resource', 'refund:r1', '--context', JSON.stringify({ amount }), '--permissions', 'create:refunds', ...more], cwd);

  it('exit 0 allow, 3 deny, 4 approval_required, with every check', async () => {
    const [allow, deny, approval] = await Promise.all([ask(10), ask(20000), ask(5000)]);
    expect(allow.code, allow.stderr).toBe(0);
    expect(allow.stdout).toContain('decision: allow');
    expect(deny.code).toBe(3);
    expect(deny.stdout).toContain('reason: rule_denied: block-large-refunds');
    expect(deny.stdout).toMatch(/deny_rules\s+fail\s+deny rule "block-large-refunds" when amount > 10000\s+\(good\/refunds\.policy:3\)/);
    expect(approval.code).toBe(4);
    expect(approval.stdout).toContain('decision: approval_required');
    for (const step of ['deny_rules', 'grants', 'approval_rules']) expect(approval.stdout).toContain(step);
    const j = await ask(5000, '--format', 'json');
    expect(j.code).toBe(4);
    expect(JSON.parse(j.stdout)).toMatchObject({ decision: 'approval_required', reason: 'approval_required: approve-medium-refunds', trace: expect.any(Array) });
    const approved = await ask(5000, '--approved');
    expect(approved.code).toBe(0);
  });

  it('a request read from a file that is not JSON or not a request: exit 2 naming the file', async () => {
    await writeFiles(cwd, { 'cut.json': '{"action": "create:ref', 'list.json': '[]' });
    for (const [file, why] of [['cut.json', 'is not JSON'], ['list.json', 'must be a JSON object']]) {
      let err = '';
      const code = await runPolicyCommand(['explain', 'good', '--request', `@${file}`], { stdout: () => {}, stderr: (t) => { err += t; }, cwd });
      expect([code, err]).toEqual([2, expect.stringMatching(new RegExp(`^gatehouse policy explain: ${file.replace('.', '\\.')}: .*${why}`))]);
    }
  });

  it('exit 1 on a policy error (with carets), 2 on a request that is not usable', async () => {
    const broken = await gatehouse(['policy', 'explain', 'bad', '--agent', 'a', '--action', 'a:b', '--resource', 'b:1'], cwd);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(' 6 |   when x => 1\n   |        ^\n');
    const bad = [
      ['--request', '{"action": "a:b"'],
      ['--request', '[]'],
      ['--request', '{"action": "a:b"}'],
      ['--request', '@missing.json'],
      ['--agent', 'a', '--action', 'a:b'],
      ['--agent', 'a', '--action', 'a:b', '--resource', 'b:1', '--context', '[1]'],
      ['--request', '{}', '--agent', 'a'],
    ];
    const runs = await Promise.all(bad.map((args) => gatehouse(['policy', 'explain', 'good', ...args], cwd)));
    runs.forEach((r, i) => {
      expect(r.code, bad[i]!.join(' ')).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
    });
  });
});
