// The package's "bin": `npx gatehouse` works on a fresh clone after `npm ci` with no build, runs
// dist/ when it is current, and the sources when dist/ is missing or older than src/.
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { BIN, VERSION } from './helpers.js';

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: 120_000, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** A copy of the launcher in a tree of its own, with a dist/cli.js and a src/cli.ts that say which ran. */
async function tree(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'gh-bin-'));
  await mkdir(join(root, 'bin'));
  await mkdir(join(root, 'dist'));
  await mkdir(join(root, 'src', 'nested'), { recursive: true });
  await copyFile(BIN, join(root, 'bin', 'gatehouse.js'));
  await symlink(join(projectRoot, 'node_modules'), join(root, 'node_modules'));
  await writeFile(join(root, 'package.json'), '{"type": "module"}\n');
  await writeFile(join(root, 'dist', 'cli.js'), 'console.log("dist", process.argv.slice(2).join(" "));\n');
  // TypeScript-only syntax: runs only through tsx
  await writeFile(join(root, 'src', 'cli.ts'), 'const from: string = "src";\nconsole.log(from, process.argv.slice(2).join(" "));\n');
  await writeFile(join(root, 'src', 'nested', 'deep.ts'), 'export {};\n');
  return root;
}

const at = (seconds: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, seconds));

describe('the gatehouse bin', () => {
  it('runs dist/ when it is newer than every source file', async () => {
    const root = await tree();
    for (const f of ['src/cli.ts', 'src/nested/deep.ts']) await utimes(join(root, f), at(1), at(1));
    await utimes(join(root, 'dist', 'cli.js'), at(2), at(2));
    const r = await run(process.execPath, [join(root, 'bin', 'gatehouse.js'), 'policy', 'check'], root);
    expect(r.stdout).toBe('dist policy check\n');
  });

  it('runs the sources when any source file is newer than dist/, or dist/ is missing', async () => {
    const root = await tree();
    await utimes(join(root, 'dist', 'cli.js'), at(2), at(2));
    await utimes(join(root, 'src', 'cli.ts'), at(1), at(1));
    await utimes(join(root, 'src', 'nested', 'deep.ts'), at(3), at(3)); // an edit deep in the tree
    const stale = await run(process.execPath, [join(root, 'bin', 'gatehouse.js'), '--version'], root);
    expect(stale.stdout, stale.stderr).toBe('src --version\n');
    const fresh = await tree();
    await import('node:fs/promises').then((fs) => fs.rm(join(fresh, 'dist'), { recursive: true }));
    expect((await run(process.execPath, [join(fresh, 'bin', 'gatehouse.js'), 'x'], fresh)).stdout).toBe('src x\n');
  });

  it('`npx gatehouse` in the project runs the CLI', async () => {
    // an npm cache of its own, as on a machine that never ran it
    const cache = await mkdtemp(join(tmpdir(), 'gh-npm-cache-'));
    const r = await run('npx', ['gatehouse', '--version'], projectRoot, { npm_config_cache: cache });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`gatehouse ${VERSION}\n`);
  });
});
