// --version, --help and usage errors, through the real command.
import { beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands.js';
import { gatehouse, VERSION, workDir } from './helpers.js';

let cwd: string;
beforeAll(async () => {
  cwd = await workDir();
});

/** A usage error: exit 2, nothing on stdout, exactly one line on stderr. */
function expectUsageError(r: { code: number; stdout: string; stderr: string }, pattern: RegExp) {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.endsWith('\n')).toBe(true);
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}

describe('gatehouse --version and --help', () => {
  it('--version and -V print the package version', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await gatehouse([flag], cwd);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`gatehouse ${VERSION}\n`);
    }
  });

  it('--help lists every command and every option', async () => {
    const r = await gatehouse(['--help'], cwd);
    expect(r.code).toBe(0);
    expect(COMMANDS.length).toBeGreaterThanOrEqual(7);
    for (const c of COMMANDS) {
      expect(r.stdout).toContain(`  ${c.path.join(' ')}`);
      for (const o of c.options) expect(r.stdout).toContain(o.value ? `${o.name} ${o.value}` : o.name);
    }
    for (const words of ['serve', 'policy check', 'policy fmt', 'policy test', 'policy diff', 'policy explain', 'audit verify']) expect(r.stdout).toContain(`  ${words}`);
    for (const opt of ['--version', '--help', '--write', '--check', '--diff', '--format text|json', '--strict', '--db <file>', '--request <json|@file>']) expect(r.stdout).toContain(opt);
  });

  it('<command> --help shows that command with every option, exit 0', async () => {
    const runs = await Promise.all(COMMANDS.map((c) => gatehouse([...c.path, '--help'], cwd)));
    COMMANDS.forEach((c, i) => {
      const r = runs[i]!;
      expect(r.code, c.path.join(' ')).toBe(0);
      expect(r.stdout).toContain(`usage: gatehouse ${c.path.join(' ')}`);
      for (const o of c.options) expect(r.stdout).toContain(o.name);
      expect(r.stdout).toContain('--help');
    });
    const h = await gatehouse(['help', 'policy', 'fmt'], cwd);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('usage: gatehouse policy fmt');
    const group = await gatehouse(['policy', '--help'], cwd);
    expect(group.code).toBe(0);
    for (const c of COMMANDS.filter((x) => x.path[0] === 'policy')) expect(group.stdout).toContain(c.path.join(' '));
  });

  it('no command prints the help on stderr, exit 2', async () => {
    const r = await gatehouse([], cwd);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('usage: gatehouse <command>');
  });
});

describe('usage errors: exit 2 and one line', () => {
  it('an unknown command', async () => {
    expectUsageError(await gatehouse(['frobnicate'], cwd), /^gatehouse: unknown command 'frobnicate'/);
    expectUsageError(await gatehouse(['policy', 'frobnicate'], cwd), /^gatehouse: unknown command 'policy frobnicate'/);
  });

  it('an unknown option, before or after the command', async () => {
    expectUsageError(await gatehouse(['--frob'], cwd), /unknown option '--frob'/);
    expectUsageError(await gatehouse(['policy', 'check', '--frob'], cwd), /^gatehouse policy check: unknown option '--frob'/);
    expectUsageError(await gatehouse(['policy', 'fmt', 'x', '-x'], cwd), /unknown option '-x'/);
    expectUsageError(await gatehouse(['audit', 'verify', '--database', 'x'], cwd), /unknown option '--database'/);
    expectUsageError(await gatehouse(['serve', '--port', '1'], cwd), /^gatehouse serve: unknown option '--port'/);
  });

  it('a missing or wrong value, a flag given a value, arguments too few or too many', async () => {
    expectUsageError(await gatehouse(['policy', 'check', '--format'], cwd), /'--format' needs a value/);
    expectUsageError(await gatehouse(['policy', 'check', '--format', 'yaml'], cwd), /'--format' must be text, json or sarif, not 'yaml'/);
    expectUsageError(await gatehouse(['policy', 'check', '--strict=yes'], cwd), /'--strict' takes no value/);
    expectUsageError(await gatehouse(['policy', 'diff'], cwd), /^gatehouse policy diff: needs <old> \[<new>\]/);
    expectUsageError(await gatehouse(['policy', 'diff', 'a', 'b', 'c'], cwd), /takes at most 2 arguments/);
    expectUsageError(await gatehouse(['policy', 'test', '--coverage', '--min-coverage', 'lots'], cwd), /a percent from 0 to 100, not 'lots'/);
    expectUsageError(await gatehouse(['policy', 'test', '--format', 'lcov'], cwd), /--format lcov is coverage: add --coverage/);
    expectUsageError(await gatehouse(['policy', 'explain', 'a', 'b'], cwd), /takes at most 1 argument/);
    expectUsageError(await gatehouse(['serve', 'now'], cwd), /takes no arguments/);
    expectUsageError(await gatehouse(['policy', 'fmt', '--check', '--write'], cwd), /--check or --write, not both/);
  });

  it('a file or directory that does not exist is an input error (exit 2, one line)', async () => {
    for (const cmd of ['check', 'fmt', 'test']) {
      expectUsageError(await gatehouse(['policy', cmd, 'no-such-dir'], cwd), new RegExp(`^gatehouse policy ${cmd}: no such file or directory: no-such-dir`));
    }
  });
});
