// The unified diff of `policy fmt --diff`, on random texts: applying it to the first text gives
// the second, and diff(1) agrees on how many lines change when the edit search is not cut short.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { unifiedDiff } from '../../src/cli/udiff.js';
import { applyUnifiedDiff } from './udiff-apply.js';

const line = fc.constantFrom('a', 'b', 'c', '', '  d', '}', 'rule "r" {');
const text = fc.tuple(fc.array(line, { maxLength: 40 }), fc.boolean()).map(([ls, eol]) => (ls.length ? ls.join('\n') + (eol ? '\n' : '') : ''));

function changedLines(d: string): number {
  return d.split('\n').filter((l) => /^[+-]/.test(l) && !/^(\+\+\+|---) /.test(l)).length;
}

describe('unifiedDiff', () => {
  it('a text of hundreds of thousands of changed lines gives its diff, not a stack overflow', () => {
    const a = 'x\n'.repeat(300_000);
    const d = unifiedDiff(a, 'y\n' + a.replace(/x/g, 'z'), 'big', 'big');
    expect(changedLines(d)).toBe(600_001);
  });

  it('equal texts give nothing', () => {
    expect(unifiedDiff('a\nb\n', 'a\nb\n', 'x', 'x')).toBe('');
  });

  it('applies to the first text to give the second', () => {
    fc.assert(fc.property(text, text, (a, b) => {
      const d = unifiedDiff(a, b, 'x', 'x');
      expect(a === b ? d === '' : d.startsWith('--- x\n+++ x\n@@ ')).toBe(true);
      expect(applyUnifiedDiff(a, d)).toBe(b);
    }), { numRuns: 500 });
  });

  it('is as small as diff(1)\'s', () => {
    if (!existsSync('/usr/bin/diff')) return;
    const dir = mkdtempSync(join(tmpdir(), 'gh-udiff-'));
    fc.assert(fc.property(text, text, (a, b) => {
      writeFileSync(join(dir, 'a'), a);
      writeFileSync(join(dir, 'b'), b);
      let theirs = '';
      try { execFileSync('diff', ['-u', 'a', 'b'], { cwd: dir }); } catch (e) { theirs = String((e as { stdout: Buffer }).stdout); }
      expect(changedLines(unifiedDiff(a, b, 'a', 'b'))).toBe(changedLines(theirs));
    }), { numRuns: 60 });
  });

  it('far apart changes get separate hunks with three lines of context', () => {
    const a = Array.from({ length: 30 }, (_, i) => `l${i}`).join('\n') + '\n';
    const b = a.replace('l2\n', 'L2\n').replace('l25\n', 'L25\n');
    const d = unifiedDiff(a, b, 'f', 'f');
    expect(d.split('\n').filter((l) => l.startsWith('@@'))).toEqual(['@@ -1,6 +1,6 @@', '@@ -23,7 +23,7 @@']);
    expect(applyUnifiedDiff(a, d)).toBe(b);
  });

  it('past the edit budget the middle is one replaced block, still a correct diff', () => {
    const a = 'head\n' + Array.from({ length: 1500 }, (_, i) => `a${i}`).join('\n') + '\ntail\n';
    const b = 'head\n' + Array.from({ length: 1500 }, (_, i) => `b${i}`).join('\n') + '\ntail\n';
    const d = unifiedDiff(a, b, 'f', 'f');
    expect(d.split('\n').filter((l) => l.startsWith('@@'))).toEqual(['@@ -1,1502 +1,1502 @@']);
    expect(applyUnifiedDiff(a, d)).toBe(b);
  });
});
