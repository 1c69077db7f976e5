import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The directory holding package.json (from src/ under tsx and vitest, and from dist/): grammar/, static files and src/store/migrations/ are read from it at run time. */
function findProjectRoot(from: string): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${from}`);
    dir = parent;
  }
}

export const projectRoot = findProjectRoot(dirname(fileURLToPath(import.meta.url)));

/**
 * `mkdir -p`: makes `dir` and the directories above it that are missing, one at a time. Node's
 * own recursive mkdir spins forever where the system answers ENOENT for a directory that can
 * never be made (under /proc, say): a start-up or a command given such a path would hang
 * instead of failing. Throws the first error (ENOENT, EACCES, ENOTDIR...) as mkdir gives it.
 */
export function makeDirectory(dir: string): void {
  const target = resolve(dir);
  const missing: string[] = [];
  for (let d = target; !existsSync(d); d = dirname(d)) {
    missing.push(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  // As mkdir -p: a file where the directory should be is an error, not a directory.
  if (!statSync(target).isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${target}'`), { code: 'ENOTDIR' });
}
