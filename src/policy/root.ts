// Finds the project root (the directory holding package.json) by walking up
// from this module, so the grammar file is found both from src/ (tsx, vitest)
// and from dist/ (the built server).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function projectRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'grammar'))) return (cached = dir);
    const up = dirname(dir);
    if (up === dir) throw new Error('gatehouse: cannot find the project root (package.json with grammar/) above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}
