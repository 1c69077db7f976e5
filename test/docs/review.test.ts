// docs/review.md as a reviewer runs it: its shell blocks in order, in one bash session, in a
// git repository holding a copy of policies/examples (committed, then changed by the first
// block), `npx gatehouse` being this checkout's bin. Each block's promised output (its trailing
// `# ` lines) must be what it printed, and the diff's shown first line what the diff printed.
import { execFile } from 'node:child_process';
import { cp, mkdtemp } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { BIN } from '../cli/helpers.js';
import { expectPromisedOutput, type Block } from './walk.js';
import { junitErrors, sarifErrors } from '../cli/review-schemas.js';

const DOC = readFileSync(join(projectRoot, 'docs', 'review.md'), 'utf8');
const blocks: Block[] = [...DOC.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m, index) => ({ index, lang: m[1]!, text: m[2]! }));

function bash(script: string, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', script], {
      cwd, timeout: 400_000, maxBuffer: 32 * 1024 * 1024,
      env: { PATH: process.env.PATH ?? '', HOME: cwd, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com' },
    }, (err, stdout, stderr) => (err && typeof err.code !== 'number' ? reject(err) : resolve({ code: err ? (err.code as number) : 0, stdout, stderr })));
  });
}

describe('docs/review.md', () => {
  it('its commands run in order on a real change and print what it shows', async () => {
    const repo = await mkdtemp(join(tmpdir(), 'gh-review-'));
    const out = join(repo, 'out');
    await cp(join(projectRoot, 'policies', 'examples'), join(repo, 'policies', 'examples'), { recursive: true });
    const setup = `set -e\ngit init -q -b main\ngit add policies\ngit commit -q -m policies\nmkdir -p ${out}\nset +e\nnpx() { if [ "$1" = gatehouse ]; then shift; node ${JSON.stringify(BIN)} "$@"; else command npx "$@"; fi; }`;
    const sh = blocks.filter((b) => b.lang === 'sh');
    expect(sh.length).toBeGreaterThanOrEqual(7);
    const body = sh.map((b) => `echo "@@begin ${b.index}"\n${b.text.replaceAll('/tmp/', `${out}/`)}\necho "@@end ${b.index}"`).join('\n');
    const ran = await bash(`${setup}\n${body}`, repo);
    const of = (b: Block) => {
      const m = new RegExp(`@@begin ${b.index}\\n([\\s\\S]*?)@@end ${b.index}\\n`).exec(ran.stdout);
      if (!m) throw new Error(`block ${b.index} did not finish:\n${ran.stdout.slice(-2000)}\n${ran.stderr}`);
      return m[1]!;
    };
    for (const b of sh) expectPromisedOutput(b, of(b));

    // The change is valid; the diff's first line is the one shown under it, and it exits 1.
    expect(of(sh[0]!)).toMatch(/^ok: \d+ files, /);
    const diffBlock = sh.find((b) => b.text.includes('policy diff HEAD --dir policies/examples; echo'))!;
    const shown = blocks[diffBlock.index + 1]!;
    expect(shown.lang).toBe('');
    expect(of(diffBlock).split('\n')[0]).toBe(shown.text.trimEnd());
    expect(of(diffBlock)).toMatch(/exit 1\n$/);
    // The files the walk wrote are what CI reads.
    expect(junitErrors(readFileSync(join(out, 'junit.xml'), 'utf8'))).toEqual([]);
    expect(sarifErrors(JSON.parse(readFileSync(join(out, 'gatehouse.sarif'), 'utf8')))).toEqual([]);
    expect(readFileSync(join(out, 'lcov.info'), 'utf8')).toMatch(/^TN:\nSF:policies\/examples\/[\s\S]*end_of_record\n$/);
    expect(readFileSync(join(out, 'comment.md'), 'utf8')).toContain('<details>');
  }, 400_000);
});
