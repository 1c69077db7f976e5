// `diff`: which requests change decision between two policy sets, exactly.
//
// The request space is cut into cells on which both sets decide the same way:
//  - agent IDs, people, actions and objects: by the closure under intersection
//    of every pattern either set mentions; one witness per closure element
//    (fresh values where the pattern has `*`) stands for its cell, which is the
//    pattern minus the more specific patterns inside it;
//  - each context field the applicable rules and limits name: cut at every
//    constant either set compares it with (points and the open intervals
//    between them for numbers; each string constant and "any other string";
//    true/false; "missing"; "any other type").
// A decision is constant on each cell, so evaluating one representative per
// cell with both compiled sets finds every change. Changed cells are merged
// into boxes (products of per-field cell sets), each printed as a region with
// an example request. Grants come from roles, not policy: diff decides for an
// agent (and person) holding every permission (`*:*`) and the capability of the
// action, with no prior approval. A permission `<action>:<kinds>` still covers only
// objects of the singular kind, so each concrete action's kind gets object cells of
// its own and no region names objects that no permission could ever reach.

import type { DecisionRequest, DecisionValue } from './types.js';
import type { CompiledLimitBlock, CompiledRule, PolicySet } from './compile.js';
import type { Expr, LimitField, Literal } from './ast.js';
import { decideWith } from './decide.js';
import { matchTyped, parseAgentPattern, parseTypedPattern, permissionCovers, patternToString, singularOf, type Pattern } from './patterns.js';
import { fmtLiteral } from './format.js';

export type FieldDesc = Record<string, unknown>;

export interface Change {
  subjects: string[];
  relation: string;
  object: string;
  except?: { subjects?: string[]; relation?: string[]; object?: string[] };
  no_person?: true;
  region: Record<string, FieldDesc>;
  before: DecisionValue;
  after: DecisionValue;
  example: { agent_id: string; person_id?: string; action: string; resource: string; context: Record<string, unknown> };
}

export interface DiffResult { changes: Change[]; notes: string[] }

export class DiffTooLarge extends Error {}

// ---- pattern closures ------------------------------------------------------------

function meet(a: Pattern, b: Pattern): Pattern | null {
  let type: string | null;
  if (a.type === null) type = b.type; else if (b.type === null || b.type === a.type) type = a.type; else return null;
  if (a.segs === null) return { type, segs: b.segs };
  if (b.segs === null) return { type, segs: a.segs };
  if (a.segs.length !== b.segs.length) return null;
  const segs: (string | null)[] = [];
  for (let i = 0; i < a.segs.length; i++) {
    const x = a.segs[i]!, y = b.segs[i]!;
    if (x === null) segs.push(y); else if (y === null || x === y) segs.push(x); else return null;
  }
  return { type, segs };
}

const key = (p: Pattern) => `${p.type === null ? '\u0001' : p.type}\u0000${p.segs === null ? '\u0001' : p.segs.map((s) => (s === null ? '\u0001' : s)).join('\u0000')}`;

interface Cell { pattern: Pattern; except: Pattern[]; witness: string }

const CLOSURE_MAX = 2000;

/** The cells of one dimension: one per element of the intersection closure of `patterns` and the universal pattern. */
function cells(patterns: Pattern[], universal: Pattern, fresh: (p: Pattern) => string): Cell[] {
  const all = new Map<string, Pattern>([[key(universal), universal]]);
  for (const p of patterns) all.set(key(p), p);
  let frontier = [...all.values()];
  while (frontier.length) {
    const next: Pattern[] = [];
    const current = [...all.values()];
    for (const a of frontier) for (const b of current) {
      const m = meet(a, b);
      if (m && !all.has(key(m))) { all.set(key(m), m); next.push(m); }
      if (all.size > CLOSURE_MAX) throw new DiffTooLarge('too many overlapping patterns to compare');
    }
    frontier = next;
  }
  const list = [...all.values()];
  const below = (q: Pattern, p: Pattern) => key(q) !== key(p) && (() => { const m = meet(p, q); return m !== null && key(m) === key(q); })();
  return list.map((p) => {
    const inside = list.filter((q) => below(q, p));
    const maximal = inside.filter((q) => !inside.some((r) => below(q, r)));
    return { pattern: p, except: maximal, witness: fresh(p) };
  });
}

function freshName(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(base + i)) return base + i;
}

function witnessOf(p: Pattern, taken: Set<string>, typeBase: string, valueBase: string): string {
  const value = p.segs === null ? freshName(valueBase, taken) : p.segs.map((s) => (s === null ? freshName(valueBase, taken) : s)).join('/');
  if (p.type === '') return value;
  return `${p.type === null ? freshName(typeBase, taken) : p.type}:${value}`;
}

function constantsOf(patterns: Pattern[]): Set<string> {
  const s = new Set<string>();
  for (const p of patterns) {
    if (p.type) s.add(p.type);
    for (const seg of p.segs ?? []) if (seg !== null) s.add(seg);
  }
  return s;
}

// ---- context fields ----------------------------------------------------------------

type FCell =
  | { t: 'missing' }
  | { t: 'other'; types: string[] }
  | { t: 'num'; lo: number; hi: number; point: boolean } // point: lo === hi; else open interval (lo, hi)
  | { t: 'str'; v: string }
  | { t: 'strOther'; not: string[] }
  | { t: 'bool'; v: boolean };

interface FieldConsts { nums: Set<number>; strs: Set<string>; bools: boolean }

function addLiteral(c: FieldConsts, v: Literal): void {
  if (Array.isArray(v)) { for (const x of v) addLiteral(c, x); return; }
  if (typeof v === 'number') c.nums.add(v);
  else if (typeof v === 'string') c.strs.add(v);
  else c.bools = true;
}

function exprConsts(e: Expr, m: Map<string, FieldConsts>, get: (f: string) => FieldConsts): void {
  switch (e.type) {
    case 'and': case 'or': for (const i of e.items) exprConsts(i, m, get); break;
    case 'not': exprConsts(e.expr, m, get); break;
    case 'cmp': addLiteral(get(e.field), e.value); break;
    case 'in': addLiteral(get(e.field), e.values); break;
  }
}

function fieldCells(c: FieldConsts): FCell[] {
  const out: FCell[] = [];
  const types: string[] = [];
  if (c.nums.size) {
    types.push('number');
    const ns = [...c.nums].sort((a, b) => a - b);
    out.push({ t: 'num', lo: -Infinity, hi: ns[0]!, point: false });
    ns.forEach((n, i) => {
      out.push({ t: 'num', lo: n, hi: n, point: true });
      out.push({ t: 'num', lo: n, hi: i + 1 < ns.length ? ns[i + 1]! : Infinity, point: false });
    });
  }
  if (c.strs.size) {
    types.push('string');
    const ss = [...c.strs].sort();
    for (const s of ss) out.push({ t: 'str', v: s });
    out.push({ t: 'strOther', not: ss });
  }
  if (c.bools) {
    types.push('boolean');
    out.push({ t: 'bool', v: true }, { t: 'bool', v: false });
  }
  out.push({ t: 'other', types }, { t: 'missing' });
  return out;
}

function between(lo: number, hi: number): number {
  if (lo === -Infinity && hi === Infinity) return 0;
  if (lo === -Infinity) return Math.floor(hi) - 1 < hi ? Math.floor(hi) - 1 : hi - 1;
  if (hi === Infinity) return Math.ceil(lo) + 1 > lo ? Math.ceil(lo) + 1 : lo + 1;
  const mid = Math.floor((lo + hi) / 2);
  if (mid > lo && mid < hi) return mid;
  const m = lo + (hi - lo) / 2;
  return m > lo && m < hi ? m : lo;
}

function representative(c: FCell): { present: boolean; value?: unknown } {
  switch (c.t) {
    case 'missing': return { present: false };
    case 'other': return { present: true, value: null };
    case 'num': return { present: true, value: c.point ? c.lo : between(c.lo, c.hi) };
    case 'str': return { present: true, value: c.v };
    case 'strOther': return { present: true, value: freshName('other', new Set(c.not)) };
    case 'bool': return { present: true, value: c.v };
  }
}

/** Describe a set of cells of one field; `{not: ...}` when the complement reads shorter. */
function describe(all: FCell[], chosen: Set<number>): FieldDesc | null {
  if (chosen.size === all.length) return null;
  const d = describeParts(all, chosen);
  const rest = new Set(all.map((_, i) => i).filter((i) => !chosen.has(i)));
  const comp = describeParts(all, rest);
  const size = (x: FieldDesc) => (Array.isArray(x.any_of) ? x.any_of.length : 1);
  return size(comp) < size(d) ? { not: comp } : d;
}

function describeParts(all: FCell[], chosen: Set<number>): FieldDesc {
  const parts: FieldDesc[] = [];
  // numbers: merge consecutive cells into ranges
  let run: FCell[] = [];
  const flush = () => {
    if (!run.length) return;
    const first = run[0] as Extract<FCell, { t: 'num' }>, last = run[run.length - 1] as Extract<FCell, { t: 'num' }>;
    const d: FieldDesc = {};
    if (run.length === 1 && first.point) d.eq = first.lo;
    else {
      if (first.lo !== -Infinity) d[first.point ? 'gte' : 'gt'] = first.lo;
      if (last.hi !== Infinity) d[last.point ? 'lte' : 'lt'] = last.hi;
      if (!Object.keys(d).length) d.type = 'number';
    }
    parts.push(d);
    run = [];
  };
  all.forEach((c, i) => {
    if (c.t !== 'num') return;
    if (chosen.has(i)) run.push(c); else flush();
  });
  flush();
  const strs = all.map((c, i) => [c, i] as const).filter(([c]) => c.t === 'str' || c.t === 'strOther');
  if (strs.length) {
    const other = strs.find(([c]) => c.t === 'strOther')!;
    const inc = strs.filter(([c, i]) => c.t === 'str' && chosen.has(i)).map(([c]) => (c as { v: string }).v);
    const exc = strs.filter(([c, i]) => c.t === 'str' && !chosen.has(i)).map(([c]) => (c as { v: string }).v);
    if (chosen.has(other[1])) parts.push(exc.length ? { not_in: exc } : { type: 'string' });
    else if (inc.length) parts.push({ in: inc });
  }
  const bools = all.map((c, i) => [c, i] as const).filter(([c, i]) => c.t === 'bool' && chosen.has(i));
  if (bools.length === 2) parts.push({ type: 'boolean' });
  else if (bools.length === 1) parts.push({ eq: (bools[0]![0] as { v: boolean }).v });
  all.forEach((c, i) => {
    if (!chosen.has(i)) return;
    if (c.t === 'other') parts.push({ other_than: c.types });
    if (c.t === 'missing') parts.push({ missing: true });
  });
  return parts.length === 1 ? parts[0]! : { any_of: parts };
}


/** Does a context value (present or not) lie in a field description of a region? */
export function matchesFieldDesc(d: FieldDesc, present: boolean, v: unknown): boolean {
  if (d.not !== undefined) return !matchesFieldDesc(d.not as FieldDesc, present, v);
  if (Array.isArray(d.any_of)) return (d.any_of as FieldDesc[]).some((x) => matchesFieldDesc(x, present, v));
  if (d.missing === true) return !present;
  if (!present) return false;
  if (Array.isArray(d.other_than)) {
    const t = typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean' ? typeof v : 'other';
    return !(d.other_than as string[]).includes(t);
  }
  if (Array.isArray(d.in)) return typeof v === 'string' && (d.in as string[]).includes(v);
  if (Array.isArray(d.not_in)) return typeof v === 'string' && !(d.not_in as string[]).includes(v);
  if ('eq' in d) return v === d.eq;
  if (typeof d.type === 'string') return typeof v === d.type;
  if (typeof v !== 'number') return false;
  if (typeof d.gt === 'number' && !(v > d.gt)) return false;
  if (typeof d.gte === 'number' && !(v >= d.gte)) return false;
  if (typeof d.lt === 'number' && !(v < d.lt)) return false;
  if (typeof d.lte === 'number' && !(v <= d.lte)) return false;
  return true;
}

/** Does a request lie in a reported change's region? (Used by tests and tools.) */
export function inRegion(c: Change, req: DecisionRequest): boolean {
  const agentSub = 'agent:' + req.agent.id;
  const pat = (s: string) => parseTypedPattern(s)!;
  if (!matchTyped(pat(c.subjects[0]!), agentSub)) return false;
  const ex = c.except ?? {};
  if ((ex.subjects ?? []).some((s) => s.startsWith('agent:') && matchTyped(pat(s), agentSub))) return false;
  const person = req.person ?? null;
  if (c.no_person && person) return false;
  const userPat = c.subjects.find((s) => s.startsWith('user:'));
  if (userPat) {
    if (!person) return false;
    const us = 'user:' + person.id;
    if (!matchTyped(pat(userPat), us)) return false;
    if ((ex.subjects ?? []).some((s) => s.startsWith('user:') && matchTyped(pat(s), us))) return false;
  }
  if (!matchTyped(pat(c.relation), req.action) || (ex.relation ?? []).some((r) => matchTyped(pat(r), req.action))) return false;
  if (!matchTyped(pat(c.object), req.resource) || (ex.object ?? []).some((o) => matchTyped(pat(o), req.resource))) return false;
  for (const [f, d] of Object.entries(c.region)) {
    const present = Object.hasOwn(req.context, f);
    if (!matchesFieldDesc(d, present, present ? req.context[f] : undefined)) return false;
  }
  return true;
}

// ---- the diff ----------------------------------------------------------------------

const EVAL_MAX = 2_000_000;

interface Side { rules: CompiledRule[]; limits: CompiledLimitBlock[] }

function sideOf(set: PolicySet): Side {
  return { rules: set.compiled.rules, limits: [...set.compiled.limits.values()].flat() };
}

export function diffPolicySets(before: PolicySet, after: PolicySet): DiffResult {
  const notes: string[] = [];
  const sb = sideOf(before), sa = sideOf(after);
  const singB = JSON.stringify(Object.entries(before.compiled.singulars).sort());
  const singA = JSON.stringify(Object.entries(after.compiled.singulars).sort());
  if (singB !== singA) notes.push('declared kind singulars differ: which objects a permission covers changes, also for actions no rule or limit names');

  const allRules = [...sb.rules, ...sa.rules];
  const allLimits = [...sb.limits, ...sa.limits];
  const actionPats = [...allRules.map((r) => parseTypedPattern(r.ast.relation)!), ...allLimits.map((l) => parseTypedPattern(l.capability)!)];
  const objectPats = allRules.map((r) => parseTypedPattern(r.ast.object)!);
  // `<kind>:*` for the kind each concrete action covers, on either side's singulars
  for (const a of actionPats) {
    if (a.segs === null || a.segs.length !== 1 || a.segs[0] === null) continue;
    const kinds = a.segs[0];
    for (const sing of [before.compiled.singulars, after.compiled.singulars]) {
      objectPats.push({ type: (Object.hasOwn(sing, kinds) ? sing[kinds] : undefined) ?? singularOf(kinds), segs: null });
    }
  }
  const agentPats = [
    ...allRules.flatMap((r) => r.ast.subjects.filter((s) => s.startsWith('agent:')).map((s) => parseAgentPattern(s.slice(6)))),
    ...allLimits.map((l) => parseAgentPattern(l.forAgent)),
  ];
  const userPats = allRules.flatMap((r) => r.ast.subjects.filter((s) => s.startsWith('user:')).map((s) => parseAgentPattern(s.slice(5))));

  const actionTaken = constantsOf(actionPats), objectTaken = constantsOf(objectPats), agentTaken = constantsOf(agentPats), userTaken = constantsOf(userPats);
  const actionCells = cells(actionPats, { type: null, segs: null }, (p) => witnessOf(p, actionTaken, 'act', 'things'));
  const objectCells = cells(objectPats, { type: null, segs: null }, (p) => witnessOf(p, objectTaken, 'thing', 'example'));
  const agentCells = cells(agentPats, { type: '', segs: null }, (p) => witnessOf(p, agentTaken, '', 'example-agent'));
  // People: no cell when no rule names a user (then a person changes nothing).
  const personCells: (Cell | 'none' | 'any')[] = userPats.length
    ? ['none', ...cells(userPats, { type: '', segs: null }, (p) => witnessOf(p, userTaken, '', 'example-person'))]
    : ['any'];

  const memo = new Map<string, { box: Map<string, Set<number>>; fields: [string, FCell[]][]; before: DecisionValue; after: DecisionValue }[]>();
  const changes: Change[] = [];
  let evaluations = 0;

  for (const ac of actionCells) {
    const kindsWild = !(ac.pattern.segs && ac.pattern.segs.length === 1 && ac.pattern.segs[0] !== null);
    const relOk = (r: CompiledRule) => matchTyped(parseTypedPattern(r.ast.relation)!, ac.witness);
    const rulesA = allRules.filter(relOk);
    const limitsA = allLimits.filter((l) => l.capability === ac.witness);
    if (!rulesA.length && !limitsA.length) continue;
    for (const oc of objectCells) {
      const rulesO = rulesA.filter((r) => r.object(oc.witness));
      if (!rulesO.length && !limitsA.length) continue;
      for (const gc of agentCells) {
        const limitsG = limitsA.filter((l) => l.agent(gc.witness));
        for (const pc of personCells) {
          const userSub = typeof pc === 'object' ? 'user:' + pc.witness : null;
          const rulesG = rulesO.filter((r) => r.subjects('agent:' + gc.witness, userSub));
          if (!rulesG.length && !limitsG.length) continue;
          // A cell of actions with any kinds (`create:*`) holds actions of every kind, so the grant is not
          // constant on it: there diff assumes the grant (and picks an example action that has it).
          const exampleAction = kindsWild ? coveringAction(ac, oc, [before.compiled.singulars, after.compiled.singulars]) : ac.witness;
          if (exampleAction === null) continue;
          const granted = kindsWild ? 'w' : [before, after].map((p) => (permissionCovers('*:*', ac.witness, oc.witness, p.compiled.singulars) ? 'g' : 'n')).join('');
          if (granted === 'nn') continue; // nobody can be granted this action on this object: deny on both sides
          const sig = [granted, ...rulesG.map((r) => (sb.rules.includes(r) ? 'b' : 'a') + r.index), '|', ...limitsG.map((l) => allLimits.indexOf(l))].join(',');
          let boxes = memo.get(sig);
          if (!boxes) {
            boxes = contextDiff(before, after, rulesG, limitsG, {
              agent: gc.witness, person: typeof pc === 'object' ? pc.witness : undefined, action: ac.witness, resource: oc.witness,
            }, kindsWild, (n) => { evaluations += n; if (evaluations > EVAL_MAX) throw new DiffTooLarge('too many request cells to compare'); });
            memo.set(sig, boxes);
          }
          for (const b of boxes) changes.push(render(b, ac, oc, gc, pc, exampleAction));
        }
      }
    }
  }
  changes.sort((x, y) => (x.relation + x.object + x.subjects.join()).localeCompare(y.relation + y.object + y.subjects.join()));
  return { changes, notes };
}

function contextDiff(
  before: PolicySet, after: PolicySet, rules: CompiledRule[], limits: CompiledLimitBlock[],
  at: { agent: string; person?: string; action: string; resource: string }, assumeGranted: boolean, count: (n: number) => void,
) {
  const consts = new Map<string, FieldConsts>();
  const get = (f: string) => { let c = consts.get(f); if (!c) consts.set(f, (c = { nums: new Set(), strs: new Set(), bools: false })); return c; };
  for (const r of rules) if (r.ast.when) exprConsts(r.ast.when, consts, get);
  for (const l of limits) for (const f of l.ast.fields as LimitField[]) {
    const c = get(f.field);
    for (const k of ['max', 'min', 'in', 'not_in', 'eq'] as const) if (f[k] !== undefined) addLiteral(c, f[k]!);
  }
  const fields = [...consts.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([f, c]) => [f, fieldCells(c)] as [string, FCell[]]);
  const total = fields.reduce((n, [, cs]) => n * cs.length, 1);
  count(total);
  const reps = fields.map(([, cs]) => cs.map(representative));
  const groups = new Map<string, number[][]>();
  const idx = new Array<number>(fields.length).fill(0);
  const base: DecisionRequest = {
    agent: { id: at.agent, mode: at.person ? 'delegated' : 'autonomous', permissions: ['*:*'], capabilities: [{ name: at.action }] },
    action: at.action, resource: at.resource, context: {},
  };
  if (at.person) base.person = { id: at.person, permissions: ['*:*'] };
  for (let n = 0; n < total; n++) {
    const context: Record<string, unknown> = {};
    fields.forEach(([f], i) => { const r = reps[i]![idx[i]!]!; if (r.present) context[f] = r.value; });
    const req = { ...base, context };
    const b = decideWith(req, before, { assumeGranted }).decision;
    const a = decideWith(req, after, { assumeGranted }).decision;
    if (a !== b) {
      const k = `${b}>${a}`;
      let g = groups.get(k);
      if (!g) groups.set(k, (g = []));
      g.push([...idx]);
    }
    for (let i = fields.length - 1; i >= 0; i--) { if (++idx[i]! < fields[i]![1].length) break; idx[i] = 0; }
  }
  const out: { box: Map<string, Set<number>>; fields: [string, FCell[]][]; before: DecisionValue; after: DecisionValue }[] = [];
  for (const [k, points] of groups) {
    const [b, a] = k.split('>') as [DecisionValue, DecisionValue];
    for (const box of mergeBoxes(points, fields.length)) {
      out.push({ box: new Map(fields.map(([f], i) => [f, box[i]!])), fields, before: b, after: a });
    }
  }
  return out;
}

/** Merge points of a grid into boxes: repeatedly unite boxes equal in every dimension but one. */
function mergeBoxes(points: number[][], dims: number): Set<number>[][] {
  let boxes = points.map((p) => p.map((x) => new Set([x])));
  if (dims === 0) return boxes.slice(0, 1);
  const k = (s: Set<number>) => [...s].sort((a, b) => a - b).join(',');
  for (let changed = true; changed;) {
    changed = false;
    for (let d = 0; d < dims; d++) {
      const groups = new Map<string, Set<number>[][]>();
      for (const b of boxes) {
        const key = b.map((s, i) => (i === d ? '*' : k(s))).join('|');
        const g = groups.get(key);
        if (g) g.push(b); else groups.set(key, [b]);
      }
      if (groups.size === boxes.length) continue;
      changed = true;
      boxes = [...groups.values()].map((g) => g[0]!.map((s, i) => (i === d ? new Set(g.flatMap((b) => [...b[d]!])) : s)));
    }
  }
  return boxes;
}

function render(
  b: { box: Map<string, Set<number>>; fields: [string, FCell[]][]; before: DecisionValue; after: DecisionValue },
  ac: Cell, oc: Cell, gc: Cell, pc: Cell | 'none' | 'any', exampleAction: string,
): Change {
  const region: Record<string, FieldDesc> = {};
  const context: Record<string, unknown> = {};
  for (const [f, all] of b.fields) {
    const chosen = b.box.get(f)!;
    const d = describe(all, chosen);
    if (d) region[f] = d;
    const order = [...chosen].sort((x, y) => rank(all[x]!) - rank(all[y]!) || x - y);
    const r = representative(all[order[0]!]!);
    if (r.present) context[f] = r.value;
  }
  const subjects = [`agent:${patternToString(gc.pattern)}`];
  const except: NonNullable<Change['except']> = {};
  const exSubjects = gc.except.map((p) => `agent:${patternToString(p)}`);
  if (typeof pc === 'object') {
    subjects.push(`user:${patternToString(pc.pattern)}`);
    exSubjects.push(...pc.except.map((p) => `user:${patternToString(p)}`));
  }
  if (exSubjects.length) except.subjects = exSubjects;
  if (ac.except.length) except.relation = ac.except.map(patternToString);
  if (oc.except.length) except.object = oc.except.map(patternToString);
  const c: Change = {
    subjects, relation: patternToString(ac.pattern), object: patternToString(oc.pattern),
    region, before: b.before, after: b.after,
    example: { agent_id: gc.witness, action: exampleAction, resource: oc.witness, context },
  };
  if (Object.keys(except).length) c.except = except;
  if (pc === 'none') c.no_person = true;
  if (typeof pc === 'object') c.example.person_id = pc.witness;
  return c;
}

/**
 * An action of the cell `ac` whose kinds cover the object cell's kind, so that a permission can
 * grant it; null when there is none (no request of the two cells can ever be granted).
 */
function coveringAction(ac: Cell, oc: Cell, singulars: Record<string, string>[]): string | null {
  const kind = oc.pattern.type;
  if (kind === null || kind === '') return ac.witness;
  const verb = ac.witness.slice(0, ac.witness.indexOf(':'));
  const plurals = [kind + 's', kind + 'es', ...(kind.endsWith('y') ? [kind.slice(0, -1) + 'ies'] : []), kind,
    ...singulars.flatMap((m) => Object.entries(m).filter(([, v]) => v === kind).map(([k]) => k))];
  for (const kinds of plurals) {
    const action = `${verb}:${kinds}`;
    if (!matchTyped(ac.pattern, action) || ac.except.some((p) => matchTyped(p, action))) continue;
    if (singulars.some((m) => permissionCovers('*:*', action, oc.witness, m))) return action;
  }
  return null;
}

function rank(c: FCell): number {
  return c.t === 'missing' ? 2 : c.t === 'other' ? 3 : 1;
}

// ---- text --------------------------------------------------------------------------

export function fieldDescText(f: string, d: FieldDesc): string {
  if (d.not !== undefined) return `not (${fieldDescText(f, d.not as FieldDesc)})`;
  if (Array.isArray(d.any_of)) return '(' + (d.any_of as FieldDesc[]).map((x) => fieldDescText(f, x)).join(' or ') + ')';
  if (d.missing) return `${f} missing`;
  if (Array.isArray(d.other_than)) return `${f} is not a ${['number', 'string', 'boolean'].filter((t) => (d.other_than as string[]).includes(t)).join('/') || 'scalar'}`;
  if (Array.isArray(d.in)) return (d.in as string[]).length === 1 ? `${f} == ${fmtLiteral((d.in as string[])[0]!)}` : `${f} in ${fmtLiteral(d.in as string[])}`;
  if (Array.isArray(d.not_in)) return `${f} is a string not in ${fmtLiteral(d.not_in as string[])}`;
  if ('eq' in d) return `${f} == ${fmtLiteral(d.eq as Literal)}`;
  if (typeof d.type === 'string') return `${f} is a ${d.type}`;
  const parts: string[] = [];
  if (d.gt !== undefined) parts.push(`${f} > ${d.gt}`);
  if (d.gte !== undefined) parts.push(`${f} >= ${d.gte}`);
  if (d.lt !== undefined) parts.push(`${f} < ${d.lt}`);
  if (d.lte !== undefined) parts.push(`${f} <= ${d.lte}`);
  return parts.join(' and ');
}

export function diffText(r: DiffResult): string {
  if (!r.changes.length) return 'no decision changes\n' + r.notes.map((n) => `note: ${n}\n`).join('');
  const out: string[] = [`${r.changes.length} region${r.changes.length === 1 ? '' : 's'} change decision:`];
  for (const c of r.changes) {
    const ex = c.except ?? {};
    const who = c.subjects.join(' ') + (c.no_person ? ' (no person)' : '') + (ex.subjects?.length ? ` except ${ex.subjects.join(', ')}` : '');
    const rel = c.relation + (ex.relation?.length ? ` except ${ex.relation.join(', ')}` : '');
    const obj = c.object + (ex.object?.length ? ` except ${ex.object.join(', ')}` : '');
    const where = Object.entries(c.region).map(([f, d]) => fieldDescText(f, d)).join(' and ') || 'any context';
    out.push('');
    out.push(`  ${rel} on ${obj} by ${who}`);
    out.push(`    when ${where}: ${c.before} -> ${c.after}`);
    out.push(`    example: ${JSON.stringify(c.example)}`);
  }
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.join('\n') + '\n';
}
