// `policy fmt`: prints unless --write; --check names the files that would change (exit 1);
// --diff is a unified diff that patch(1) applies.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { applyUnifiedDiff } from './udiff-apply.js';
import { gatehouse, REFUNDS, workDir } from './helpers.js';

const MESSY = `# refunds, messily
policy "refunds"   version 1
rule "block-large-refunds" { effect deny subjects "agent:*" relation "create:refunds"
    object "refund:*" when amount>10000 }


rule "approve-medium-refunds" {
effect require_approval
    subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >=   1000
}`; // no final newline

const CANONICAL = REFUNDS.replace('policy "refunds" version 1', '# refunds, messily\npolicy "refunds" version 1');

let cwd: string;
beforeEach(async () => {
  cwd = await workDir({ 'p/messy.policy': MESSY, 'p/tidy.policy': REFUNDS.replace(/refunds/g, 'payouts').replace(/refund:/g, 'payout:') });
});

const read = (p: string) => readFile(join(cwd, p), 'utf8');

describe('gatehouse policy fmt', () => {
  it('prints the canonical layout of a file and writes nothing', async () => {
    const r = await gatehouse(['policy', 'fmt', 'p/messy.policy'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(CANONICAL);
    expect(await read('p/messy.policy')).toBe(MESSY);
  });

  it('prints each file of a directory under a header', async () => {
    const r = await gatehouse(['policy', 'fmt', 'p'], cwd);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`==> p/messy.policy <==\n${CANONICAL}==> p/tidy.policy <==\n${await read('p/tidy.policy')}`);
  });

  it('--check names each file that would change, exits 1 and writes nothing; 0 once tidy', async () => {
    const r = await gatehouse(['policy', 'fmt', '--check', 'p'], cwd);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('would reformat p/messy.policy\n');
    expect(await read('p/messy.policy')).toBe(MESSY);
    const tidy = await gatehouse(['policy', 'fmt', '-c', 'p/tidy.policy'], cwd);
    expect(tidy).toMatchObject({ code: 0, stdout: '' });
  });

  it('--write rewrites in place and names the file; then --check passes', async () => {
    const r = await gatehouse(['policy', 'fmt', '--write', 'p'], cwd);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('formatted p/messy.policy\n');
    expect(await read('p/messy.policy')).toBe(CANONICAL);
    expect((await gatehouse(['policy', 'fmt', '--check', 'p'], cwd)).code).toBe(0);
    expect((await gatehouse(['policy', 'fmt', '-w', 'p'], cwd)).stdout).toBe('');
  });

  it('--diff prints a unified diff that turns the file into its canonical layout', async () => {
    const r = await gatehouse(['policy', 'fmt', '--diff', 'p'], cwd);
    expect(r.code).toBe(0); // --diff alone reports, it does not fail
    expect(r.stdout.split('\n').slice(0, 3)).toEqual(['--- p/messy.policy', '+++ p/messy.policy', expect.stringMatching(/^@@ -1,\d+ \+1,\d+ @@$/)]);
    expect(r.stdout).toContain('\\ No newline at end of file');
    expect(r.stdout).not.toContain('tidy.policy'); // unchanged files print nothing
    expect(applyUnifiedDiff(MESSY, r.stdout)).toBe(CANONICAL);
    expect(await read('p/messy.policy')).toBe(MESSY);
    if (existsSync('/usr/bin/patch')) {
      execFileSync('patch', ['-p0', '--quiet'], { cwd, input: r.stdout });
      expect(await read('p/messy.policy')).toBe(CANONICAL);
    }
  });

  it('--check --diff shows the diff and exits 1', async () => {
    const r = await gatehouse(['policy', 'fmt', '--check', '--diff', 'p/messy.policy'], cwd);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^--- p\/messy\.policy\n\+\+\+ p\/messy\.policy\n@@ /);
  });

  it('a file that does not parse: its error with a caret, exit 1, the other files still formatted', async () => {
    await writeFile(join(cwd, 'p', 'broken.policy'), 'rule "r" {\n  effect deny\n  when amount >\n}\n');
    const r = await gatehouse(['policy', 'fmt', '--write', 'p'], cwd);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^p\/broken\.policy:4:1: expected .*\n {3}\|\n 4 \| }\n {3}\| \^\n/);
    expect(await read('p/messy.policy')).toBe(CANONICAL);
  });
});
