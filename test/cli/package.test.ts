// The CLI where policies live: a policy repository is not this repository. The single-file
// build runs `policy check`, `test` and `diff <rev>` in an empty folder with nothing installed;
// the package's manifest packs the built dist/ (built by prepack) and no tests, under a name and
// a bin that resolve to nothing else on the registry. Installing the packed tarball from the
// registry takes minutes on a busy machine, so that run is opt-in: GATEHOUSE_TEST_PACK=1.
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readdir, symlink } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { REFUNDS, refundTest, workDir, writeFiles } from './helpers.js';

interface Ran { code: number; stdout: string; stderr: string }

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}, timeout = 120_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, {
      cwd, timeout, maxBuffer: 32 * 1024 * 1024,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? cwd, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com', ...env },
    }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
  name: string; bin: Record<string, string>; files: string[]; scripts: Record<string, string>;
};

/** A policy repository: one committed version, then a working-tree change lowering the deny threshold. */
async function policyRepo(): Promise<string> {
  const repo = await workDir({ 'policies/refunds.policy': REFUNDS, 'policies/refunds.tests': refundTest('small refund', 10, 'allow') });
  for (const args of [['init', '-q', '-b', 'main'], ['add', '.'], ['commit', '-q', '-m', 'policies']]) {
    const r = await run('git', args, repo);
    expect(r.code, r.stderr).toBe(0);
  }
  await writeFiles(repo, { 'policies/refunds.policy': REFUNDS.replace('amount > 10000', 'amount > 5000') });
  return repo;
}

/** check, test and diff against main, through the given command. */
async function expectPolicyCommands(repo: string, cli: (args: string[]) => Promise<Ran>): Promise<void> {
  const check = await cli(['policy', 'check']);
  expect(check.code, check.stderr).toBe(0);
  expect(check.stdout).toMatch(/^ok: 2 files, 2 rules, 1 test; policy version refunds@1#[0-9a-f]+\n$/);
  const test = await cli(['policy', 'test', '--format', 'junit']);
  expect(test.code, test.stderr).toBe(0);
  expect(test.stdout).toContain('<testcase name="small refund"');
  const diff = await cli(['policy', 'diff', 'main', '--format', 'markdown']);
  expect(diff.code, diff.stderr).toBe(1);
  expect(diff.stdout).toMatch(/^\*\*Policy diff\*\* `main` → `policies \(working tree\)`: 1 region change decision/);
  expect(diff.stdout).toContain('`amount > 5000 and amount <= 10000`');
  expect(repo).not.toContain(projectRoot);
}

describe('the CLI outside this repository', () => {
  it('the single-file build runs check, test and diff in a folder with nothing installed', async () => {
    const out = await mkdtemp(join(tmpdir(), 'gh-bundle-'));
    const built = await run(process.execPath, [join(projectRoot, 'scripts', 'bundle-cli.mjs'), out], projectRoot);
    expect(built.code, built.stderr).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['gatehouse-authz.mjs', 'grammar', 'package.json']);
    const repo = await policyRepo();
    await expectPolicyCommands(repo, (args) => run(process.execPath, [join(out, 'gatehouse-authz.mjs'), ...args], repo));
    const version = await run(process.execPath, [join(out, 'gatehouse-authz.mjs'), '--version'], repo);
    expect(version.stdout).toMatch(/^gatehouse \d+\.\d+\.\d+/);
  }, 120_000);

  it('the package: a scoped name, a bin of its own, dist/ built by prepack, no tests packed', async () => {
    expect(pkg.name).toMatch(/^@[a-z0-9-]+\/[a-z0-9-]+$/);
    expect(pkg.bin['gatehouse-authz']).toBe('bin/gatehouse.js');
    expect(pkg.bin.gatehouse).toBe('bin/gatehouse.js'); // this repository's docs and tests use it
    expect(pkg.scripts.prepack).toBe('npm run build');
    // What npm would pack, from the manifest alone (scripts not run: dist/ may be absent here).
    const r = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], projectRoot, { npm_config_offline: 'true' });
    expect(r.code, r.stderr).toBe(0);
    const files = (JSON.parse(r.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    for (const f of ['bin/gatehouse.js', 'grammar/policy.ohm', 'package.json', 'src/store/migrations/001-foundation.sql']) expect(files).toContain(f);
    expect(files.filter((f) => f.startsWith('test/') || /\.test\.|(^|\/)bench\//.test(f) || (f.startsWith('src/') && f.endsWith('.ts')))).toEqual([]);
    expect(pkg.files).toContain('dist/');
  });

  it.skipIf(process.env.GATEHOUSE_TEST_PACK !== '1')('npm pack, then npm install --save-dev of the tarball in an empty folder, then npx gatehouse-authz there (GATEHOUSE_TEST_PACK=1)', async () => {
    // Packed from a copy, so that prepack's build does not write dist/ into the checkout.
    const stage = await mkdtemp(join(tmpdir(), 'gh-pack-'));
    for (const f of ['package.json', 'package-lock.json', 'bin', 'grammar', 'src', 'tsconfig.json', 'tsconfig.build.json']) await cp(join(projectRoot, f), join(stage, f), { recursive: true });
    await symlink(join(projectRoot, 'node_modules'), join(stage, 'node_modules'));
    const packed = await run('npm', ['pack', '--json', '--pack-destination', stage], stage, {}, 600_000);
    expect(packed.code, packed.stderr).toBe(0);
    const { filename, files } = (JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[])[0]!;
    expect(files.map((f) => f.path)).toContain('dist/cli.js');
    const repo = await policyRepo();
    await writeFiles(repo, { 'package.json': '{"name": "policies", "private": true}\n' });
    const installed = await run('npm', ['install', '--save-dev', join(stage, filename), '--no-audit', '--no-fund'], repo, {}, 1_200_000);
    expect(installed.code, installed.stderr).toBe(0);
    await expectPolicyCommands(repo, (args) => run('npx', ['--no-install', 'gatehouse-authz', ...args], repo));
  }, 1_800_000);
});
