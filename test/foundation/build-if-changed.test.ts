import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain Node script (it runs before anything is built), without types
import { buildIfChanged, buildIsCurrent } from '../../scripts/build-if-changed.mjs';

// `npm start` builds only when what the build reads changed since the last build.
const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function project(): string {
  const root = mkdtempSync(join(tmpdir(), 'gatehouse-build-'));
  roots.push(root);
  mkdirSync(join(root, 'src', 'store'), { recursive: true });
  writeFileSync(join(root, 'src', 'cli.ts'), 'export const a = 1;\n');
  writeFileSync(join(root, 'src', 'store', 'db.ts'), 'export const b = 2;\n');
  writeFileSync(join(root, 'tsconfig.json'), '{}\n');
  writeFileSync(join(root, 'tsconfig.build.json'), '{}\n');
  return root;
}

/** A stand-in compiler that counts its runs and writes what tsc would. */
function compiler() {
  const c = {
    runs: 0,
    compile(root: string) {
      c.runs++;
      mkdirSync(join(root, 'dist'), { recursive: true });
      writeFileSync(join(root, 'dist', 'cli.js'), `// build ${c.runs}\n`);
    },
  };
  return c;
}

describe('a start builds only what changed', () => {
  it('builds the first time, then not again while the sources stay as they are', () => {
    const root = project();
    const c = compiler();
    expect(buildIsCurrent(root)).toBe(false);
    expect(buildIfChanged(root, c.compile)).toBe('built');
    expect(buildIfChanged(root, c.compile)).toBe('current');
    // Times alone are no change (a fresh checkout touches every file).
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(root, 'src', 'cli.ts'), later, later);
    expect(buildIfChanged(root, c.compile)).toBe('current');
    expect(c.runs).toBe(1);
  });

  it('rebuilds after a source is edited, added, renamed or removed, or the configuration changes', () => {
    const root = project();
    const c = compiler();
    buildIfChanged(root, c.compile);
    const changes = [
      () => writeFileSync(join(root, 'src', 'cli.ts'), 'export const a = 3;\n'),
      () => writeFileSync(join(root, 'src', 'store', 'new.ts'), 'export {};\n'),
      () => {
        rmSync(join(root, 'src', 'store', 'new.ts'));
        writeFileSync(join(root, 'src', 'store', 'renamed.ts'), 'export {};\n');
      },
      () => rmSync(join(root, 'src', 'store', 'renamed.ts')),
      () => writeFileSync(join(root, 'tsconfig.build.json'), '{"compilerOptions":{}}\n'),
    ];
    for (const [i, change] of changes.entries()) {
      change();
      expect(buildIfChanged(root, c.compile), `change ${i}`).toBe('built');
      expect(buildIfChanged(root, c.compile), `change ${i}`).toBe('current');
    }
    expect(c.runs).toBe(1 + changes.length);
  });

  it('rebuilds when dist/ is gone, and leaves no module of an earlier build behind', () => {
    const root = project();
    const c = compiler();
    buildIfChanged(root, c.compile);
    writeFileSync(join(root, 'dist', 'stale.js'), '// from a source since removed\n');
    writeFileSync(join(root, 'src', 'cli.ts'), 'export const a = 4;\n');
    buildIfChanged(root, c.compile);
    expect(existsSync(join(root, 'dist', 'stale.js'))).toBe(false);
    rmSync(join(root, 'dist'), { recursive: true });
    expect(buildIfChanged(root, c.compile)).toBe('built');
    expect(c.runs).toBe(3);
  });
});
