#!/usr/bin/env node
// `npm start` builds only what changed: the compiled service in dist/ carries a stamp, the
// digest of everything the build reads (src/, the TypeScript configuration, package.json).
// When the stamp matches the sources, start-up goes straight to node; otherwise dist/ is
// emptied (a renamed or removed source leaves no stale module behind), rebuilt and stamped.
// The digest is of contents, not times: a checkout or a copy that keeps the bytes keeps the build.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const STAMP = '.build-stamp';
const INPUTS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'];

/** Every file under dir, as paths relative to root, in a stable order. */
function filesUnder(root, dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(root, p));
    else out.push(relative(root, p).split('\\').join('/'));
  }
  return out.sort();
}

/** The digest of what the build reads: each file's path and bytes. */
export function sourcesDigest(root) {
  const hash = createHash('sha256');
  const files = [...filesUnder(root, join(root, 'src')), ...INPUTS.filter((f) => existsSync(join(root, f)))];
  for (const f of files) {
    hash.update(`${f}\0`);
    hash.update(readFileSync(join(root, f)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** Whether dist/ was built from the sources as they are now. */
export function buildIsCurrent(root) {
  const stamp = join(root, 'dist', STAMP);
  if (!existsSync(join(root, 'dist', 'cli.js')) || !existsSync(stamp)) return false;
  return readFileSync(stamp, 'utf8').trim() === sourcesDigest(root);
}

/** Builds when the sources changed since the last build; returns what it did. */
export function buildIfChanged(root, compile) {
  if (buildIsCurrent(root)) return 'current';
  const digest = sourcesDigest(root);
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  compile(root);
  writeFileSync(join(root, 'dist', STAMP), `${digest}\n`);
  return 'built';
}

function tsc(root) {
  const bin = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [bin, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? dirname(dirname(fileURLToPath(import.meta.url)));
  const did = buildIfChanged(root, tsc);
  process.stderr.write(did === 'current' ? 'gatehouse: dist/ is built from the current sources\n' : 'gatehouse: built dist/ from the changed sources\n');
}
