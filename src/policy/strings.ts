// Finding a string that satisfies a set of pattern constraints: equal to a
// constant or not, matching a `like` pattern or not, matching a subject or
// object pattern (`spiffe://h/agent/*`) or not. Each constraint is a small
// automaton; a breadth-first search over their product finds a shortest string
// that every positive constraint accepts and every negative one rejects, or
// proves there is none. Used by `diff` and `policy check` to build example
// values and to tell which combinations of facts can occur at all.

import { likeMatcher } from './compile.js';
import { matchValue, parseValuePattern } from './patterns.js';

/**
 * `exact`: the string itself. `like`: `*` any text. `seg`: a value pattern of subjects and
 * objects (`*` alone: anything; else split at `/`, a `*` segment is one non-empty segment).
 */
export interface StrConstraint { kind: 'exact' | 'like' | 'seg'; pattern: string; positive: boolean }

type Tok = { c: string } | { star: 'any' | 'seg' };

interface Auto { toks: Tok[]; any: boolean; test: (s: string) => boolean }

function automaton(k: StrConstraint): Auto {
  if (k.kind === 'exact') return { toks: [...k.pattern].map((c) => ({ c })), any: false, test: (s) => s === k.pattern };
  if (k.kind === 'like') {
    const toks: Tok[] = [];
    for (const ch of k.pattern) toks.push(ch === '*' ? { star: 'any' } : { c: ch });
    return { toks, any: false, test: likeMatcher(k.pattern) };
  }
  const segs = parseValuePattern(k.pattern);
  if (segs === null) return { toks: [], any: true, test: () => true };
  const toks: Tok[] = [];
  segs.forEach((s, i) => {
    if (i > 0) toks.push({ c: '/' });
    if (s === null) toks.push({ star: 'seg' });
    else for (const ch of s) toks.push({ c: ch });
  });
  return { toks, any: false, test: (s) => matchValue(segs, s) };
}

/** Positions reachable without reading (a `*` may match nothing; a segment `*` must match one character first). */
function closure(a: Auto, set: Set<number>): Set<number> {
  const out = new Set(set);
  const stack = [...set];
  while (stack.length) {
    const i = stack.pop()!;
    const t = a.toks[i];
    if (t && 'star' in t && t.star === 'any' && !out.has(i + 1)) { out.add(i + 1); stack.push(i + 1); }
  }
  return out;
}

function stepAuto(a: Auto, set: Set<number>, ch: string): Set<number> {
  const next = new Set<number>();
  for (const i of set) {
    const t = a.toks[i];
    if (!t) continue;
    if ('c' in t) { if (t.c === ch) next.add(i + 1); continue; }
    if (t.star === 'any') next.add(i);
    else if (ch !== '/') { next.add(i); next.add(i + 1); } // a segment star reads one or more non-'/' characters
  }
  return closure(a, next);
}

function accepts(a: Auto, set: Set<number>): boolean {
  return a.any || set.has(a.toks.length);
}

export class StringSearchTooLarge extends Error {}

const STATE_MAX = 200_000;

/**
 * A string that satisfies every constraint, trying `prefer` first; null when none exists.
 * The search runs over the characters the patterns use plus one other, which is enough:
 * characters no pattern names all behave alike.
 */
export function solveString(constraints: StrConstraint[], prefer: string[] = []): string | null {
  const key = JSON.stringify([constraints, prefer]);
  const hit = memo.get(key);
  if (hit !== undefined) return hit;
  const s = search(constraints, prefer);
  if (memo.size >= MEMO_MAX) memo.clear();
  memo.set(key, s);
  return s;
}

const memo = new Map<string, string | null>();
const MEMO_MAX = 20_000;

function search(constraints: StrConstraint[], prefer: string[]): string | null {
  const autos = constraints.map(automaton);
  const ok = (s: string) => constraints.every((k, i) => autos[i]!.test(s) === k.positive);
  for (const p of prefer) if (ok(p)) return p;
  const alphabet = new Set<string>();
  for (const k of constraints) for (const ch of k.pattern) if (ch !== '*') alphabet.add(ch);
  alphabet.add('/');
  for (const ch of 'xyzqjkvwabcdefghilmnoprstu0123456789-_.') if (!alphabet.has(ch)) { alphabet.add(ch); break; }
  const letters = [...alphabet].sort((a, b) => rankChar(a) - rankChar(b));
  const start = autos.map((a) => closure(a, new Set([0])));
  const keyOf = (st: Set<number>[]) => st.map((s) => [...s].sort((x, y) => x - y).join(',')).join('|');
  const seen = new Set<string>([keyOf(start)]);
  let frontier: { s: string; st: Set<number>[] }[] = [{ s: '', st: start }];
  while (frontier.length) {
    for (const f of frontier) {
      if (constraints.every((k, i) => accepts(autos[i]!, f.st[i]!) === k.positive) && ok(f.s)) return f.s;
    }
    const next: typeof frontier = [];
    for (const f of frontier) {
      for (const ch of letters) {
        const st = f.st.map((s, i) => stepAuto(autos[i]!, s, ch));
        // A positive constraint that can no longer accept anything prunes the branch.
        if (constraints.some((k, i) => k.positive && !autos[i]!.any && st[i]!.size === 0)) continue;
        const key = keyOf(st);
        if (seen.has(key)) continue;
        seen.add(key);
        if (seen.size > STATE_MAX) throw new StringSearchTooLarge('too many string patterns to combine');
        next.push({ s: f.s + ch, st });
      }
    }
    frontier = next;
  }
  return null;
}

/** Letters first, so that examples read as words. */
function rankChar(c: string): number {
  if (/[a-z]/.test(c)) return 0;
  if (/[A-Z0-9]/.test(c)) return 1;
  return 2;
}
