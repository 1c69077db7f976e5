import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
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
