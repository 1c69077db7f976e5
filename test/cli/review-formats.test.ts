// The formats a reviewer's CI reads: JUnit XML from `policy test`, SARIF 2.1.0 from `policy
// check`, a pull-request comment from `policy diff --format markdown`, and `policy diff <rev>`
// reading a revision's policies out of a git repository made for the test.
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { gatehouse, REFUNDS, refundTest, workDir, writeFiles } from './helpers.js';
import { JUNIT_SCHEMAS, junitCases, junitErrors, junitSchemaErrors, officialSarifErrors, sarifErrors } from './review-schemas.js';

const DEPLOYS = `policy "deploys" version 1

rule "staging-deploys" {
  effect permit
  subjects "agent:*"
  relation "create:deployments"
  object "deployment:staging"
}
`;

const deployTest = (name: string, expect: string) => `test "${name}" {
  agent "spiffe://localhost/agent/ci" autonomous
  permissions "create:deployments"
  capability "create:deployments"
  action "create:deployments"
  resource "deployment:staging"
  expect ${expect}
}
`;

describe('policy test --format junit', () => {
  it('a testsuite per file, a testcase per test block, failures with expected and actual; valid against the JUnit schema', async () => {
    const dir = await workDir({
      'p/refunds.policy': REFUNDS,
      'p/deploys.policy': DEPLOYS,
      'p/refunds.tests': refundTest('small refund', 10, 'allow') + '\n' + refundTest('large refund', 20000, 'allow') + '\n' + refundTest('medium refund', 2000, 'approval_required'),
      'p/deploys.tests': deployTest('staging deploy', 'allow'),
    });
    const r = await gatehouse(['policy', 'test', 'p', '--format', 'junit'], dir);
    expect(r.code).toBe(1); // a test fails
    expect(junitErrors(r.stdout)).toEqual([]);
    expect(await junitSchemaErrors(r.stdout)).toEqual([]);
    const cases = junitCases(r.stdout);
    expect(cases.map((c) => [c.suite, c.name])).toEqual([
      ['p/deploys.tests', 'staging deploy'],
      ['p/refunds.tests', 'small refund'],
      ['p/refunds.tests', 'large refund'],
      ['p/refunds.tests', 'medium refund'],
    ]);
    const failed = cases.filter((c) => c.failure !== undefined);
    expect(failed.map((c) => c.name)).toEqual(['large refund']);
    expect(failed[0]!.failure).toContain('expected: allow');
    expect(failed[0]!.failure).toMatch(/actual: deny "/);
    expect(failed[0]!.failure).toContain('at: p/refunds.tests:');
    expect(failed[0]!.message).toMatch(/^expected allow, got deny/);
  });

  it('all passing: exit 0, no failure elements', async () => {
    const dir = await workDir({ 'p/deploys.policy': DEPLOYS, 'p/deploys.tests': deployTest('staging deploy', 'allow') });
    const r = await gatehouse(['policy', 'test', 'p', '--format', 'junit'], dir);
    expect(r.code).toBe(0);
    expect(junitErrors(r.stdout)).toEqual([]);
    expect(await junitSchemaErrors(r.stdout)).toEqual([]);
    expect(r.stdout).not.toContain('<failure');
  });

  it('policies that do not load: one errored suite naming the error, exit 1', async () => {
    const dir = await workDir({ 'p/broken.policy': 'policy "x" version 1\n\nrule "r" {\n  effect sometimes\n}\n' });
    const r = await gatehouse(['policy', 'test', 'p', '--format', 'junit'], dir);
    expect(r.code).toBe(1);
    expect(junitErrors(r.stdout)).toEqual([]);
    expect(await junitSchemaErrors(r.stdout)).toEqual([]);
    expect(r.stdout).toMatch(/<error message="the policies do not load" type="policy_error">p\/broken\.policy:\d+:\d+: [^<]*unknown effect &quot;sometimes&quot;/);
  });

  it('the validators reject what the schema rejects (libxml2 against the XML Schema, and the checks of counts)', async () => {
    const good = '<?xml version="1.0"?><testsuites><testsuite id="0" package="p" name="a" timestamp="2026-01-01T00:00:00" hostname="h" tests="1" failures="1" errors="0" time="0"><properties/><testcase name="t" classname="a" time="0"><failure type="x">why</failure></testcase><system-out/><system-err/></testsuite></testsuites>';
    expect(JUNIT_SCHEMAS.length).toBeGreaterThan(0);
    expect(await junitSchemaErrors(good)).toEqual([]);
    for (const bad of [
      good.replace(' classname="a"', ''), good.replace('<properties/>', ''), good.replace(' type="x"', ''),
      good.replace('<testsuites>', '<testsuites tests="1">'), good.replace('T00:00:00', 'T00:00:00.000Z'), good.replace('tests="1"', 'tests="one"'),
      good.replace('<system-out/><system-err/>', '<system-err/><system-out/>'), good.replace('<failure type="x">why</failure>', '<failure type="x">why</failure><error type="y"/>'),
    ]) expect((await junitSchemaErrors(bad)).length, bad).toBeGreaterThan(0);
    expect(junitErrors(good)).toEqual([]);
    expect(junitErrors(good.replace(' classname="a"', ''))).toContain('testsuite[0].testcase[0]: missing attribute classname');
    expect(junitErrors(good.replace('<properties/>', ''))).toHaveLength(1);
    expect(junitErrors(good.replace('failures="1"', 'failures="0"'))).toHaveLength(1);
    expect(junitErrors(good.replace(' type="x"', ''))).toHaveLength(1);
    expect(junitErrors(good.replace('<testsuites>', '<testsuites tests="1">'))).toHaveLength(1);
    expect(junitErrors(good.replace('T00:00:00', 'T00:00:00.000Z'))).toHaveLength(1);
  });
});

describe('policy check --format sarif', () => {
  it('one run of the tool gatehouse, a rule per code, each diagnostic at its line and column; valid SARIF 2.1.0', async () => {
    const dir = await workDir({
      'p/ok.policy': DEPLOYS,
      'p/never.policy': REFUNDS.replace('when amount > 10000', 'when amount > 10000 and amount < 5'),
      'q/broken.policy': 'policy "x" version 1\n\nrule "r" {\n  effect sometimes\n}\n',
    });
    const [sarif, asJson] = await Promise.all([
      gatehouse(['policy', 'check', 'p', 'q', '--format', 'sarif'], dir),
      gatehouse(['policy', 'check', 'p', 'q', '--format', 'json'], dir),
    ]);
    expect(sarif.code).toBe(1);
    const log = JSON.parse(sarif.stdout);
    expect(sarifErrors(log)).toEqual([]);
    expect(log.version).toBe('2.1.0');
    expect(log.runs).toHaveLength(1);
    const run = log.runs[0];
    expect(run.tool.driver.name).toBe('gatehouse');
    const ds = JSON.parse(asJson.stdout).diagnostics as { file: string; line: number; col: number; severity: string; code: string; message: string }[];
    expect(ds.some((d) => d.severity === 'warning') && ds.some((d) => d.severity === 'error')).toBe(true);
    expect(run.tool.driver.rules.map((x: { id: string }) => x.id)).toEqual([...new Set(ds.map((d) => d.code))].sort());
    expect(run.results.map((x: any) => [x.ruleId, x.level, x.message.text, x.locations[0].physicalLocation.artifactLocation.uri, x.locations[0].physicalLocation.region.startLine, x.locations[0].physicalLocation.region.startColumn]))
      .toEqual(ds.map((d) => [d.code, d.severity, d.message, d.file, d.line, d.col]));
  });

  it('a valid set: an empty run, exit 0; the validator rejects what the schema rejects', async () => {
    const dir = await workDir({ 'p/ok.policy': DEPLOYS });
    const r = await gatehouse(['policy', 'check', 'p', '--format', 'sarif'], dir);
    expect(r.code).toBe(0);
    const log = JSON.parse(r.stdout);
    expect(sarifErrors(log)).toEqual([]);
    expect(log.runs[0].results).toEqual([]);
    // the official schema and the structural check each reject what the schema rejects
    expect(officialSarifErrors({ ...log, version: '2.0.0' }).length).toBeGreaterThan(0);
    expect(sarifErrors({ ...log, version: '2.0.0' })).toContain('$.version: "2.0.0" not one of 2.1.0');
    expect(officialSarifErrors({ version: '2.1.0', runs: [{ tool: { driver: {} } }] })).toContain("/runs/0/tool/driver: must have required property 'name'");
    expect(sarifErrors({ version: '2.1.0', runs: [{ tool: { driver: {} } }] })).toContain('$.runs[0].tool.driver: missing name');
    const bad = { version: '2.1.0', runs: [{ tool: { driver: { name: 'g' } }, results: [{ message: { text: 'm' }, level: 'fatal', locations: [{ physicalLocation: { region: { startLine: 0 } } }] }] }] };
    expect(officialSarifErrors(bad).length).toBeGreaterThan(0);
    expect(sarifErrors(bad).length).toBeGreaterThanOrEqual(2);
  });
});

const refundsWith = (large: number) => REFUNDS.replace('amount > 10000', `amount > ${large}`);

describe('policy diff --format markdown', () => {
  it('a summary line, the regions as a table before → after, each example in a collapsed block', async () => {
    const dir = await workDir({ 'v1/r.policy': refundsWith(10000), 'v2/r.policy': refundsWith(5000) });
    const [md, asJson] = await Promise.all([
      gatehouse(['policy', 'diff', 'v1', 'v2', '--format', 'markdown'], dir),
      gatehouse(['policy', 'diff', 'v1', 'v2', '--json'], dir),
    ]);
    expect(md.code).toBe(1);
    const changes = JSON.parse(asJson.stdout).changes as { before: string; after: string; example: unknown }[];
    expect(changes.length).toBeGreaterThan(0);
    const lines = md.stdout.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^\\*\\*Policy diff\\*\\* \`v1\` → \`v2\`: ${changes.length} regions? change decision \\(`));
    expect(lines[2]).toBe('| # | Who | Action | On | When | Before | After |');
    const rows = lines.filter((l) => /^\| \d+ \|/.test(l));
    expect(rows.map((l) => l.split(' | ').slice(-2).map((c) => c.replace(/[*| ]/g, '')))).toEqual(changes.map((c) => [c.before, c.after]));
    expect(rows[0]).toContain('`amount > 5000 and amount <= 10000`');
    const blocks = [...md.stdout.matchAll(/<details>\n<summary>(.*)<\/summary>\n\n```json\n([\s\S]*?)\n```/g)];
    expect(blocks.map((b) => JSON.parse(b[2]!))).toEqual(changes.map((c) => c.example));
    expect(md.stdout.match(/<\/details>/g)).toHaveLength(changes.length);
  });

  it('nothing changes: one line, exit 0', async () => {
    const dir = await workDir({ 'v1/r.policy': REFUNDS, 'v2/r.policy': REFUNDS });
    const r = await gatehouse(['policy', 'diff', 'v1', 'v2', '--format', 'markdown'], dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('**Policy diff** `v1` → `v2`: no decision changes.\n');
  });
});

function git(args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: cwd, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com', GIT_CONFIG_NOSYSTEM: '1' },
    }, (err, stdout, stderr) => (err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve(stdout)));
  });
}

describe('policy diff <git-ref>', () => {
  it('a revision against the working tree, two revisions, and a bad revision named with exit 2', async () => {
    const repo = await workDir({ 'policies/r.policy': refundsWith(10000), 'policies/r.tests': refundTest('small', 10, 'allow'), 'README': 'x\n' });
    await git(['init', '-q', '-b', 'main'], repo);
    await git(['add', '.'], repo);
    await git(['commit', '-q', '-m', 'first'], repo);
    await writeFiles(repo, { 'policies/r.policy': refundsWith(5000), 'old/r.policy': refundsWith(10000) });

    // `main` against the working tree: the same answer as the two directories on disk.
    const [fromGit, fromDisk] = await Promise.all([gatehouse(['policy', 'diff', 'main', '--json'], repo), gatehouse(['policy', 'diff', 'old', 'policies', '--json'], repo)]);
    expect(fromGit.stderr).toBe('');
    expect(fromGit.code).toBe(1);
    expect(JSON.parse(fromGit.stdout)).toEqual(JSON.parse(fromDisk.stdout));

    // Two revisions, the working tree left out; the files are read at the revisions, not from disk.
    await git(['add', 'policies'], repo);
    await git(['commit', '-q', '-m', 'lower'], repo);
    await writeFiles(repo, { 'policies/r.policy': 'not a policy' });
    const two = await gatehouse(['policy', 'diff', 'HEAD~1', 'HEAD', '--json'], repo);
    expect(two.code).toBe(1);
    expect(JSON.parse(two.stdout)).toEqual(JSON.parse(fromDisk.stdout));
    const same = await gatehouse(['policy', 'diff', 'HEAD', 'main'], repo);
    expect([same.code, same.stdout]).toEqual([0, 'no decision changes\n']);

    // --dir names the directory; from a subdirectory it is relative to where the command runs.
    await writeFiles(repo, { 'policies/r.policy': refundsWith(5000), 'sub/p/r.policy': refundsWith(1) });
    await git(['add', '.'], repo);
    await git(['commit', '-q', '-m', 'sub'], repo);
    const inSub = await gatehouse(['policy', 'diff', 'HEAD~2', 'HEAD', '--dir', '../policies', '--format', 'markdown'], `${repo}/sub`);
    expect(inSub.code).toBe(1);
    expect(inSub.stdout).toMatch(/^\*\*Policy diff\*\* `HEAD~2` → `HEAD`: /);

    const bad = await gatehouse(['policy', 'diff', 'no-such-branch'], repo);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toBe("gatehouse policy diff: 'no-such-branch' is neither a file or directory nor a git revision of this repository\n");
    const noDir = await gatehouse(['policy', 'diff', 'HEAD', '--dir', 'nowhere'], repo);
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toContain('nowhere');

    // Outside a repository the revision is named too.
    const plain = await workDir({ 'policies/r.policy': REFUNDS });
    const outside = await gatehouse(['policy', 'diff', 'main'], plain);
    expect(outside.code).toBe(2);
    expect(outside.stderr).toContain("'main'");
  });

  it('a NUL in a revision or --dir (possible when the CLI runs in process) is an input error naming it, not a crash', async () => {
    const repo = await workDir({ 'policies/r.policy': REFUNDS });
    await git(['init', '-q', '-b', 'main'], repo);
    await git(['add', '.'], repo);
    await git(['commit', '-q', '-m', 'first'], repo);
    for (const [args, named] of [[['diff', 'ma\0in'], "'ma\\0in' is not a git revision"], [['diff', 'main', '--dir', 'pol\0icies'], 'pol\\0icies']] as const) {
      let err = '';
      const code = await runPolicyCommand([...args], { stdout: () => {}, stderr: (t) => { err += t; }, cwd: repo });
      expect([code, err]).toEqual([2, expect.stringContaining(named)]);
    }
  });
});
