#!/usr/bin/env node
// The `gatehouse` command (package.json "bin"; installed elsewhere also as `gatehouse-authz`). Runs the compiled CLI in dist/ when it is at
// least as new as every file under src/, else the TypeScript sources through tsx: a fresh
// clone works straight after `npm ci` with no build step, and an edited source never runs
// against a stale build. `npm run build` makes start-up faster; nothing needs it.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const built = join(root, 'dist', 'cli.js');
const sources = join(root, 'src');

/** The newest modification time of any file under dir. */
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

function buildIsCurrent() {
  if (!existsSync(built)) return false;
  // An installed package carries dist/ and no TypeScript sources.
  if (!existsSync(join(sources, 'cli.ts'))) return true;
  return statSync(built).mtimeMs >= newest(sources);
}

if (buildIsCurrent()) {
  await import(pathToFileURL(built).href);
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write('gatehouse: dist/ is missing or older than src/, and tsx is not installed to run the sources: run `npm run build`\n');
    process.exit(1);
  }
  register();
  await import(pathToFileURL(join(sources, 'cli.ts')).href);
}
