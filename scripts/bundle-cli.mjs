#!/usr/bin/env node
// A build of the command line as one JavaScript file, for a policy repository that wants the
// CLI without installing the package and its dependencies: `node scripts/bundle-cli.mjs <dir>`
// writes <dir>/gatehouse-authz.mjs, the grammar it reads (grammar/policy.ohm) and a
// package.json naming the version. `node <dir>/gatehouse-authz.mjs policy check` then runs with
// nothing else installed. The native SQLite driver cannot be bundled: it is loaded from the
// folder's node_modules only when a command opens a SQLite database (serve, migrate, audit).
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const out = resolve(process.argv[2] ?? join(root, 'dist-bundle'));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** better-sqlite3 as a module that requires the real driver when first constructed. */
const nativeSqlite = {
  name: 'native-sqlite-on-demand',
  setup(b) {
    b.onResolve({ filter: /^better-sqlite3$/ }, () => ({ path: 'better-sqlite3', namespace: 'on-demand' }));
    b.onLoad({ filter: /.*/, namespace: 'on-demand' }, () => ({
      contents: `import { createRequire } from 'node:module';
export default function Database(...args) {
  let D;
  try { D = createRequire(import.meta.url)('better-sqlite3'); }
  catch { throw new Error('a SQLite database needs the better-sqlite3 package beside this build (npm install better-sqlite3)'); }
  return new D(...args);
}`,
      loader: 'js',
    }));
  },
};

mkdirSync(join(out, 'grammar'), { recursive: true });
await build({
  entryPoints: [join(root, 'src', 'cli.ts')],
  outfile: join(out, 'gatehouse-authz.mjs'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  logLevel: 'warning',
  plugins: [nativeSqlite],
  external: ['pg-native'],
  // CommonJS dependencies call require(); an ES module has none of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);" },
});
copyFileSync(join(root, 'grammar', 'policy.ohm'), join(out, 'grammar', 'policy.ohm'));
writeFileSync(join(out, 'package.json'), JSON.stringify({ name: pkg.name, version: pkg.version, type: 'module', bin: { 'gatehouse-authz': 'gatehouse-authz.mjs' } }, null, 2) + '\n');
process.stdout.write(`${join(out, 'gatehouse-authz.mjs')}\n`);
