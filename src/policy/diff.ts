// `diff`: which requests change decision between two policy sets, exactly.
//
// The request space is cut into cells on which both sets decide the same way:
//  - agent IDs, people, actions and objects: by the closure under intersection
//    of every pattern either set mentions; one witness per closure element
//    (fresh values where the pattern has `*`) stands for its cell, which is the
//    pattern minus the more specific patterns inside it;
//  - who acts: an agent alone, a delegated agent and its person, or a person
//    acting directly;
//  - everything the conditions, limits and subject patterns read (see space.ts):
//    values of context fields, attributes, roles and groups, the relations
//    between two values, the clock, whether roles grant the action, and the
//    prior usage of every limit over time (a count's usage; a sum's usage plus
//    the request's amount), so that a changed rate or budget shows as the
//    requests, with the usage they state, that it now treats otherwise.
// A decision is constant on each cell, so deciding one request per cell with
// both compiled sets finds every change. Changed cells are merged into boxes
// (products of per-dimension cell sets; combinations no request has may be
// taken in), each printed as a region with an example request. Regions are of
// requests by agents that hold the capability of their action (without limits
// of its own: those are per agent, not policy), and without a prior approval:
// without the capability both sets deny, and an approval is a later request.
// Usage a request does not state is none.
//
// A permission `<action>:<kinds>` covers only objects of the singular kind, and
// a permit rule grants only what a permission could, so each concrete action's
// kind gets object cells of its own and no region names objects that nothing
// could ever grant.

import type { DecisionRequest, DecisionValue } from './types.js';
import type { CompiledLimitBlock, CompiledRule, PolicySet } from './compile.js';
import type { Atom, LimitField, PathNode } from './ast.js';
import { declaredTypesOf } from './declared.js';
import { scalarTypeOf } from './values.js';
import { setOwn } from './own.js';
import { atomsOf, relQuestionsOf, ROOTS } from './ast.js';
import { fmtExpr } from './format.js';
import { decide } from './decide.js';
import { checkPermissionKey, matchTyped, matchValue, meetPatterns, parseAgentPattern, parseTypedPattern, permissionCovers, patternToString, singularOf, type Pattern } from './patterns.js';
import { fmtLiteral } from './format.js';
import { parseExpr, pathFromText } from './parser.js';
import { compileRelQuestion } from './compile.js';
import { parseObject } from './relations/tuple.js';
import type { RelationModel } from './relations/model.js';
import {
  buildSpace, cellHolds, construct, dimSize, grantIn, isOther, keyOfPath, partialFeasible, relationOf, relKey, SpaceTooLarge,
  type Cell, type Dim, type Principal, type PrincipalKind, type RelDim, type RelValue, type Space, type UsageRead, type ValueDim,
} from './space.js';
import type { StrConstraint } from './strings.js';
import { decider, type Probe, type SideFacts } from './symbolic.js';
import {
  cellQuestions, combinationKey, combinations, combinationText, QUESTION, realise, REALISE_MAX_SIZE, unmodelledQuestions,
  type Answer, type CellQuestion, type Combination, type ExampleRelationship, type IdRole, type Realised,
} from './diff-questions.js';
import { addAmounts, usageKey, usedOf } from './usage.js';
import { StringSearchTooLarge } from './strings.js';
import { compileReader, envOf, MISSING } from './values.js';

export type FieldDesc = Record<string, unknown>;

/** A request as `explain --request` takes it. */
export interface ExampleRequest {
  subject: Record<string, unknown>;
  person?: Record<string, unknown>;
  action: string;
  resource: string;
  resource_attributes?: Record<string, unknown>;
  context: Record<string, unknown>;
  /** The clock, when the region depends on it (null: no usable clock). */
  now?: string | null;
  /** Prior usage by usage key (`{"count per 1h": 3}`), when the limits count any. */
  usage?: Record<string, number>;
  /** A delegation chain's agents, first to current (the subject), when the region depends on its depth. */
  chain?: string[];
  /** The stored entities that references in the example name (`{"customer:example-customer": {...}}`). */
  entities?: Record<string, Record<string, unknown>>;
  /**
   * The relationships of the request (`doc:1#viewer@user:anne`, the JSON form for one with a
   * condition), the whole graph, when the rules ask relationship questions.
   */
  relationships?: ExampleRelationship[];
}

export interface Change {
  subjects: string[];
  relation: string;
  object: string;
  except?: { subjects?: string[]; relation?: string[]; object?: string[] };
  /** Only agents acting alone (no person). */
  no_person?: true;
  region: Record<string, FieldDesc>;
  /** The time zone of the `time.*` entries of the region. */
  timezone?: string;
  before: DecisionValue;
  after: DecisionValue;
  example: ExampleRequest;
}

export interface DiffResult { changes: Change[]; notes: string[] }

/** Two sets too large to compare exactly; the message starts `too large to compare exactly:` and says what was. */
export class DiffTooLarge extends Error {
  constructor(what: string) { super(`too large to compare exactly: ${what}`); }
}

/** Two sets with something diff does not model; the message says what, and the diff gives no partial answer. */
export class DiffRefused extends Error {
  constructor(what: string) { super(`cannot compare exactly: ${what}`); }
}

/**
 * The work a diff may do, in steps: a node of the walk over the cells, a combination tried
 * while looking for an example, a request built for a combination. Counted, not timed, so
 * that the same two sets always give the same answer; past it the diff gives up with
 * DiffTooLarge rather than a partial answer. The default keeps every diff to a few seconds.
 */
export const DIFF_STEPS = 200_000;
/** The steps rendering one region costs besides one per dimension it describes. */
const RENDER_STEPS = 4;

/**
 * Combinations checked while widening and tightening the boxes of a diff. Both only make
 * regions read better (an answer is exact without them), so past this they stop rather
 * than fail.
 */
const TIDY_STEPS = 200_000;

/** Building a request for a combination costs about this many steps of the walk. */
const CONSTRUCT_STEPS = 10;

export interface DiffOptions {
  /** The steps the diff may spend (DIFF_STEPS when left out). */
  steps?: number;
  /** Filled with the steps spent, when given (also when the diff runs out). */
  spent?: { steps: number };
}

/** What a diff has spent, and where it is (for the message when it runs out). */
export class Budget {
  spent = 0;
  tidy = TIDY_STEPS;
  where = '';
  constructor(readonly max: number) {}
  spend(n: number): void {
    this.spent += n;
    if (this.spent > this.max) {
      throw new DiffTooLarge(`the conditions and limits read too many combinations of values (more than ${this.max} steps)${this.where ? `, on ${this.where}` : ''}`);
    }
  }
  /** Take n tidying steps; false (and none taken) when they are not left. */
  tidying(n: number): boolean {
    if (n > this.tidy) return false;
    this.tidy -= n;
    return true;
  }
}

// ---- pattern closures ------------------------------------------------------------

const meet = meetPatterns;

const key = (p: Pattern) => `${p.type === null ? '\u0001' : p.type}\u0000${p.segs === null ? '\u0001' : p.segs.map((s) => (s === null ? '\u0001' : s)).join('\u0000')}`;

export interface Cell0 { pattern: Pattern; except: Pattern[]; witness: string }

const CLOSURE_MAX = 2000;

/** The cells of one dimension: one per element of the intersection closure of `patterns` and the universal pattern. */
function cells(patterns: Pattern[], universal: Pattern, fresh: (p: Pattern) => string): Cell0[] {
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

const valueText = (p: Pattern) => (p.segs === null ? '*' : p.segs.map((s) => (s === null ? '*' : s)).join('/'));

/** The constraints on an id that keep it in a cell: matches the pattern, none of the exceptions. */
function idConstraints(c: Cell0): StrConstraint[] {
  return [
    { kind: 'seg', pattern: valueText(c.pattern), positive: true },
    ...c.except.map((e) => ({ kind: 'seg' as const, pattern: valueText(e), positive: false })),
  ];
}

function inIdCell(c: Cell0, id: string): boolean {
  return matchValue(c.pattern.segs, id) && !c.except.some((e) => matchValue(e.segs, id));
}

function inTypedCell(c: Cell0, s: string): boolean {
  return matchTyped(c.pattern, s) && !c.except.some((e) => matchTyped(e, s));
}

// ---- fields of a region --------------------------------------------------------------

/** Describe a set of cells of one value; `{not: ...}` when the complement reads shorter. */
function describe(all: Cell[], chosen: Set<number>, integers = false): FieldDesc | null {
  if (chosen.size === all.length) return null;
  const d = describeParts(all, chosen, integers);
  const rest = new Set(all.map((_, i) => i).filter((i) => !chosen.has(i)));
  const comp = describeParts(all, rest, integers);
  const size = (x: FieldDesc) => (Array.isArray(x.any_of) ? x.any_of.length : 1);
  return size(comp) < size(d) ? { not: comp } : d;
}

/** Usage (and a total of usage and amount) is never below zero: a bound `>= 0` says nothing. */
function atLeastZero(d: FieldDesc | null): FieldDesc | null {
  if (d === null) return null;
  if (d.not !== undefined) return { not: atLeastZero(d.not as FieldDesc) };
  if (Array.isArray(d.any_of)) return { any_of: (d.any_of as FieldDesc[]).map((x) => atLeastZero(x)!) };
  if (d.gte !== 0) return d;
  const { gte: _, ...rest } = d;
  return Object.keys(rest).length ? rest : { type: 'number' };
}

/** With whole numbers only (time.hour, time.minute, time.epoch), bounds read as whole numbers too. */
function integral(d: FieldDesc): FieldDesc {
  const out: FieldDesc = { ...d };
  if (typeof out.gt === 'number' && Number.isInteger(out.gt)) { out.gte = out.gt + 1; delete out.gt; }
  if (typeof out.lt === 'number' && Number.isInteger(out.lt)) { out.lte = out.lt - 1; delete out.lt; }
  if (typeof out.gte === 'number' && out.gte === out.lte) return { eq: out.gte };
  return out;
}

function describeParts(all: Cell[], chosen: Set<number>, integers = false): FieldDesc {
  const parts: FieldDesc[] = [];
  // numbers: consecutive cells merge into ranges
  let run: Extract<Cell, { t: 'num' }>[] = [];
  const flush = () => {
    if (!run.length) return;
    const first = run[0]!, last = run[run.length - 1]!;
    const d: FieldDesc = {};
    if (run.length === 1 && first.point) d.eq = first.lo;
    else {
      if (first.lo !== -Infinity) d[first.point ? 'gte' : 'gt'] = first.lo;
      if (last.hi !== Infinity) d[last.point ? 'lte' : 'lt'] = last.hi;
      if (!Object.keys(d).length) d.type = 'number';
    }
    parts.push(integers ? integral(d) : d);
    run = [];
  };
  all.forEach((c, i) => {
    if (c.t !== 'num') return;
    if (chosen.has(i)) run.push(c); else flush();
  });
  flush();
  // strings: constants, and the other strings (split by like patterns)
  const strs = all.map((c, i) => [c, i] as const).filter(([c]) => c.t === 'str' || c.t === 'strOther');
  if (strs.length) {
    const others = strs.filter(([c]) => c.t === 'strOther');
    const inc = strs.filter(([c, i]) => c.t === 'str' && chosen.has(i)).map(([c]) => (c as { v: string }).v);
    const exc = strs.filter(([c, i]) => c.t === 'str' && !chosen.has(i)).map(([c]) => (c as { v: string }).v);
    if (others.length && others.every(([, i]) => chosen.has(i))) parts.push(exc.length ? { not_in: exc } : { type: 'string' });
    else {
      if (inc.length) parts.push({ in: inc });
      for (const [c, i] of others) {
        if (!chosen.has(i)) continue;
        const o = c as Extract<Cell, { t: 'strOther' }>;
        const d: FieldDesc = {};
        if (o.not.length) d.not_in = o.not; else d.type = 'string';
        if (o.like.length) d.like = o.like;
        if (o.notLike.length) d.not_like = o.notLike;
        parts.push(d);
      }
    }
  }
  const bools = all.map((c, i) => [c, i] as const).filter(([c, i]) => c.t === 'bool' && chosen.has(i));
  if (bools.length === 2) parts.push({ type: 'boolean' });
  else if (bools.length === 1) parts.push({ eq: (bools[0]![0] as { v: boolean }).v });
  // lists
  const lists = all.map((c, i) => [c, i] as const).filter(([c]) => c.t === 'list');
  const byItem = new Map<string, (readonly [Cell, number])[]>();
  for (const l of lists) { const it = (l[0] as { item: string }).item; (byItem.get(it) ?? byItem.set(it, []).get(it)!).push(l); }
  const emptyIdx = all.findIndex((c) => c.t === 'empty');
  let emptyDone = emptyIdx < 0 || !chosen.has(emptyIdx);
  for (const [item, ls] of byItem) {
    const picked = ls.filter(([, i]) => chosen.has(i));
    if (!picked.length) continue;
    if (picked.length === ls.length) {
      parts.push(emptyDone ? { list_of: item, nonempty: true } : { list_of: item });
      emptyDone = true;
      continue;
    }
    // The constants every picked list holds, or lacks, when that describes the set exactly.
    const consts = (ls[0]![0] as { has: unknown[]; hasNot: unknown[] });
    const universe = [...consts.has, ...consts.hasNot];
    const always = universe.filter((x) => picked.every(([c]) => (c as { has: unknown[] }).has.includes(x)));
    const never = universe.filter((x) => picked.every(([c]) => (c as { hasNot: unknown[] }).hasNot.includes(x)));
    const size = ls.filter(([c]) => always.every((x) => (c as { has: unknown[] }).has.includes(x)) && never.every((x) => (c as { hasNot: unknown[] }).hasNot.includes(x))).length;
    if (size === picked.length) {
      const d: FieldDesc = { list_of: item };
      if (always.length) d.contains = always;
      if (never.length) d.not_contains = never;
      if (emptyDone || always.length) d.nonempty = true;
      else emptyDone = true;
      parts.push(d);
    } else {
      for (const [c] of picked) {
        const l = c as Extract<Cell, { t: 'list' }>;
        const d: FieldDesc = { list_of: item, nonempty: true };
        if (l.has.length) d.contains = l.has;
        if (l.hasNot.length) d.not_contains = l.hasNot;
        parts.push(d);
      }
    }
  }
  if (!emptyDone) parts.push({ empty: true });
  all.forEach((c, i) => {
    if (!chosen.has(i)) return;
    if (c.t === 'absent') parts.push({ missing_or_not: c.types });
    if (c.t === 'other') parts.push({ present_not: c.types });
    if (c.t === 'missing') parts.push({ missing: true });
  });
  return parts.length === 1 ? parts[0]! : { any_of: parts };
}

/** Does a value (present or not) lie in a field description of a region? */
export function matchesFieldDesc(d: FieldDesc, present: boolean, v: unknown): boolean {
  if (d.not !== undefined) return !matchesFieldDesc(d.not as FieldDesc, present, v);
  if (Array.isArray(d.any_of)) return (d.any_of as FieldDesc[]).some((x) => matchesFieldDesc(x, present, v));
  if (d.missing === true) return !present;
  if (Array.isArray(d.missing_or_not)) return !present || isOther(d.missing_or_not as never, v);
  if (!present) return false;
  if (Array.isArray(d.present_not)) return isOther(d.present_not as never, v);
  if (Array.isArray(d.missing_or_not)) return !present || isOther(d.missing_or_not as never, v);
  if (d.empty === true) return Array.isArray(v) && v.length === 0;
  if (typeof d.list_of === 'string') {
    if (!Array.isArray(v) || !v.every((x) => typeof x === d.list_of && (typeof x !== 'number' || Number.isFinite(x)))) return false;
    if (d.nonempty === true && v.length === 0) return false;
    if (Array.isArray(d.contains) && !(d.contains as unknown[]).every((x) => v.includes(x))) return false;
    if (Array.isArray(d.not_contains) && (d.not_contains as unknown[]).some((x) => v.includes(x))) return false;
    return true;
  }
  if (Array.isArray(d.in)) return typeof v === 'string' && (d.in as string[]).includes(v);
  if (d.not_in !== undefined || d.like !== undefined || d.not_like !== undefined || d.type === 'string') {
    if (typeof v !== 'string') return false;
    if (Array.isArray(d.not_in) && (d.not_in as string[]).includes(v)) return false;
    return cellHolds({ t: 'strOther', not: [], like: (d.like as string[]) ?? [], notLike: (d.not_like as string[]) ?? [] }, true, v);
  }
  if ('eq' in d) return v === d.eq;
  if (typeof d.type === 'string') return typeof v === d.type && (typeof v !== 'number' || Number.isFinite(v));
  if (typeof v !== 'number' || !Number.isFinite(v)) return false;
  if (typeof d.gt === 'number' && !(v > d.gt)) return false;
  if (typeof d.gte === 'number' && !(v >= d.gte)) return false;
  if (typeof d.lt === 'number' && !(v < d.lt)) return false;
  if (typeof d.lte === 'number' && !(v <= d.lte)) return false;
  return true;
}

/**
 * The sets of relation values one operator names. For a pair that is also ordered, `!=` is
 * every unequal pair (numbers either way round, or unequal strings or booleans); without
 * order, unequal is one value.
 */
const REL_OPS_ORDERED: [RelValue[], string][] = [
  [['lt'], '<'], [['eq'], '=='], [['gt'], '>'], [['lt', 'eq'], '<='], [['eq', 'gt'], '>='], [['lt', 'gt', 'ne'], '!='], [['lt', 'eq', 'gt', 'ne'], 'comparable'],
];
const REL_OPS_UNORDERED: [RelValue[], string][] = [[['eq'], '=='], [['ne'], '!='], [['eq', 'ne'], 'comparable']];

function describeRel(d: RelDim, chosen: Set<number>): FieldDesc | null {
  if (chosen.size === d.values.length) return null;
  const desc = describeRelParts(d, chosen);
  const comp = describeRelParts(d, new Set(d.values.map((_, i) => i).filter((i) => !chosen.has(i))));
  const size = (x: FieldDesc) => (Array.isArray(x.any_of) ? x.any_of.length : 1);
  return size(comp) < size(desc) ? { not: comp } : desc;
}

function describeRelParts(d: RelDim, chosen: Set<number>): FieldDesc {
  const vs = d.values.filter((_, i) => chosen.has(i));
  const na = vs.includes('na');
  const rest = vs.filter((v) => v !== 'na');
  const parts: FieldDesc[] = [];
  if (d.rel === 'cmp') {
    if (rest.length) {
      const set = new Set<RelValue>(rest);
      const ops = d.ordering ? REL_OPS_ORDERED : REL_OPS_UNORDERED;
      const match = ops.find(([vals]) => vals.length === set.size && vals.every((v) => set.has(v)));
      if (match) parts.push(match[1] === 'comparable' ? { comparable: true } : { op: match[1] });
      else {
        for (const v of rest) {
          // An unequal pair of strings or booleans, where numbers are ordered instead.
          if (v === 'ne' && d.ordering) parts.push({ op: '!=', not_numbers: true });
          else parts.push({ op: ops.find(([vals]) => vals.length === 1 && vals[0] === v)![1] });
        }
      }
    }
  } else if (rest.length === 2) parts.push({ comparable: true });
  else if (rest.length === 1) parts.push({ holds: rest[0] === 'yes' });
  if (na) parts.push({ comparable: false });
  return parts.length === 1 ? parts[0]! : { any_of: parts };
}

/**
 * Two values compared are told apart by the types the conditions compare them as: a value of
 * another type (`"x"` where only numbers are ordered) is as good as missing, whatever the
 * other value is. A region of a comparison names those types (`of`) when they are not every
 * scalar type.
 */
function withTypes(desc: FieldDesc | null, d: RelDim, byKey: Map<string, ValueDim>): FieldDesc | null {
  if (desc === null) return desc;
  const typesOf = (k: string) => {
    const v = byKey.get(k);
    return v ? new Set<string | null>(v.cells.map((c) => (c.t === 'num' ? 'number' : c.t === 'str' || c.t === 'strOther' ? 'string' : c.t === 'bool' ? 'boolean' : null))) : null;
  };
  // A list is told apart by the types of its items (an empty list by none).
  const itemsOf = (k: string) => {
    const v = byKey.get(k);
    return v ? new Set<string | null>(v.cells.map((c) => (c.t === 'list' ? c.item : null))) : null;
  };
  const ALL = ['boolean', 'number', 'string'];
  if (d.rel === 'cmp') {
    const ta = typesOf(d.a), tb = typesOf(d.b);
    const of = ALL.filter((t) => (!ta || ta.has(t)) && (!tb || tb.has(t)));
    return of.length === 3 ? desc : { ...desc, of };
  }
  // A membership: the value's types (`of`; the first list's item types for contains any/all), and the list's item types (`items_of`).
  const ta = d.rel === 'member' ? typesOf(d.a) : itemsOf(d.a), tb = itemsOf(d.b);
  const of = ALL.filter((t) => !ta || ta.has(t)), itemsOfB = ALL.filter((t) => !tb || tb.has(t));
  return { ...desc, ...(of.length === 3 ? {} : { of }), ...(itemsOfB.length === 3 ? {} : { items_of: itemsOfB }) };
}

/** A value as a region of a comparison sees it: of a type the region names (`of`, or `items_of` for the list of a membership), else as good as missing. */
function ofTypes(d: FieldDesc, v: { present: boolean; value?: unknown }, rel: RelDim['rel'], side: 'a' | 'b'): { present: boolean; value?: unknown } {
  const key = rel !== 'cmp' && side === 'b' ? 'items_of' : 'of';
  const types = d[key];
  if (!Array.isArray(types) || !v.present) return v;
  const list = rel === 'any' || rel === 'all' || (rel === 'member' && side === 'b');
  if (list) return Array.isArray(v.value) && v.value.every((i) => (types as unknown[]).includes(scalarTypeOf(i))) ? v : { present: false };
  const t = typeof v.value === 'number' && !Number.isFinite(v.value) ? null : typeof v.value;
  return (types as string[]).includes(t as string) ? v : { present: false };
}

/** `!=` holds for every comparable pair that is not equal (numbers ordered either way, other values unequal). */
function matchesRelDesc(d: FieldDesc, rel: RelValue): boolean {
  if (d.not !== undefined) return !matchesRelDesc(d.not as FieldDesc, rel);
  if (Array.isArray(d.any_of)) return (d.any_of as FieldDesc[]).some((x) => matchesRelDesc(x, rel));
  if (d.comparable === false) return rel === 'na';
  if (rel === 'na') return false;
  if (d.comparable === true) return true;
  if (typeof d.holds === 'boolean') return (rel === 'yes') === d.holds;
  if (d.not_numbers === true) return rel === 'ne';
  switch (d.op) {
    case '<': return rel === 'lt';
    case '>': return rel === 'gt';
    case '==': return rel === 'eq';
    case '<=': return rel === 'lt' || rel === 'eq';
    case '>=': return rel === 'gt' || rel === 'eq';
    case '!=': return rel !== 'eq';
  }
  return false;
}

// ---- names of dimensions in a region --------------------------------------------------

/** A path as a region names it: a context field bare when that reads unambiguously. */
function pathName(p: PathNode): string {
  if (p.root === 'context' && !(ROOTS as readonly string[]).includes(p.segs[0]!)) return p.segs.join('.');
  return [p.root, ...p.segs].join('.');
}

const GRANT_KEY = {
  subject: 'subject.permissions cover the action',
  person: 'person.permissions cover the action',
  /** The subject's, and for a delegated agent its person's too. */
  both: 'permissions cover the action',
} as const;

function dimName(d: Dim, byKey: Map<string, ValueDim>, fixedPath: (k: string) => PathNode, zoneSuffix: boolean): string {
  const name = (k: string) => {
    const v = byKey.get(k);
    const p = v ? v.path : fixedPath(k);
    const at = v && v.path.root === 'time' && v.path.segs[0] !== 'epoch' && zoneSuffix ? '@' + v.zone : '';
    return pathName(p) + at;
  };
  if (d.kind === 'value') return name(d.key);
  if (d.kind === 'grant') return GRANT_KEY[d.who];
  if (d.kind === 'usage') return usageDimName(d.usageKey, d.field);
  switch (d.rel) {
    case 'cmp': return `${name(d.a)} vs ${name(d.b)}`;
    case 'member': return `${name(d.a)} in ${name(d.b)}`;
    case 'any': return `${name(d.a)} contains any ${name(d.b)}`;
    case 'all': return `${name(d.a)} contains all ${name(d.b)}`;
  }
}

/** `used count per 1h`; for a sum, the total an allow would reach: `used amount sum per 24h + amount`. */
function usageDimName(key: string, field: string | null): string {
  return field === null ? `${USED}${key}` : `${USED}${key} + ${pathName({ type: 'path', root: 'context', segs: [field] })}`;
}

const USED = 'used ';

/** The usage a region entry names, read from a request as decide() reads it (a sum: usage plus amount, when summable). */
function readUsageName(req: DecisionRequest, name: string): { present: boolean; value?: unknown } {
  const plus = name.indexOf(' + ');
  const key = name.slice(USED.length, plus < 0 ? undefined : plus);
  const used = usedOf(req.usage, key);
  if (plus < 0) return { present: true, value: used };
  const field = key.slice(0, key.indexOf(' sum per '));
  const v = Object.hasOwn(req.context, field) ? req.context[field] : undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return { present: false };
  return { present: true, value: addAmounts(used, v) };
}

function pathOfName(name: string): { path: PathNode; zone?: string } {
  const at = name.indexOf('@');
  const text = at < 0 ? name : name.slice(0, at);
  return { path: pathFromText(text), ...(at < 0 ? {} : { zone: name.slice(at + 1) }) };
}

const readers = new Map<string, (env: ReturnType<typeof envOf>) => unknown>();

function readName(req: DecisionRequest, name: string, zone: string): { present: boolean; value?: unknown } {
  const k = name + '\u0000' + zone;
  let r = readers.get(k);
  if (!r) {
    const { path, zone: z } = pathOfName(name);
    r = compileReader(path, z ?? zone);
    if (readers.size > 1000) readers.clear();
    readers.set(k, r);
  }
  const v = r(envOf(req));
  return v === MISSING ? { present: false } : { present: true, value: v };
}

// ---- membership of a request in a change ------------------------------------------------

/** Does a request lie in a reported change's region? (Used by tests and tools.) */
export function inRegion(c: Change, req: DecisionRequest, singulars: Record<string, string> = {}, model?: RelationModel): boolean {
  const s = req.subject;
  // Regions are of requests without a prior approval, by agents that hold the capability of
  // the action (with no limits of its own).
  if (req.approved === true) return false;
  if (s.type === 'agent') {
    const cap = (s.capabilities ?? []).find((x) => x.name === req.action);
    if (!cap || (cap.limits && Object.keys(cap.limits).length)) return false;
  }
  const pat = (x: string) => parseTypedPattern(x)!;
  const ex = c.except ?? {};
  const first = c.subjects[0]!;
  const delegated = s.type === 'agent' && s.mode === 'delegated';
  const person = delegated && req.person && typeof req.person.id === 'string' && req.person.id !== '' ? req.person : null;
  if (first.startsWith('user:')) {
    if (s.type !== 'user') return false;
    const us = 'user:' + s.id;
    if (!matchTyped(pat(first), us) || (ex.subjects ?? []).some((x) => matchTyped(pat(x), us))) return false;
  } else {
    if (s.type !== 'agent') return false;
    const as = 'agent:' + s.id;
    if (!matchTyped(pat(first), as) || (ex.subjects ?? []).some((x) => x.startsWith('agent:') && matchTyped(pat(x), as))) return false;
    if (delegated && !person) return false;
    if (c.no_person && delegated) return false;
    const userPat = c.subjects[1];
    if (userPat) {
      if (!person) return false;
      const us = 'user:' + person.id;
      if (!matchTyped(pat(userPat), us) || (ex.subjects ?? []).some((x) => x.startsWith('user:') && matchTyped(pat(x), us))) return false;
    }
  }
  if (!matchTyped(pat(c.relation), req.action) || (ex.relation ?? []).some((r) => matchTyped(pat(r), req.action))) return false;
  if (!matchTyped(pat(c.object), req.resource) || (ex.object ?? []).some((o) => matchTyped(pat(o), req.resource))) return false;
  const zone = c.timezone ?? 'UTC';
  for (const [name, d] of Object.entries(c.region)) {
    if (name === GRANT_KEY.subject) { if (grantIn(req, 'subject', singulars) !== d.holds) return false; continue; }
    if (name === GRANT_KEY.person) { if (grantIn(req, 'person', singulars) !== d.holds) return false; continue; }
    if (name === GRANT_KEY.both) {
      const ok = grantIn(req, 'subject', singulars) && (!delegated || grantIn(req, 'person', singulars));
      if (ok !== d.holds) return false;
      continue;
    }
    if (name.startsWith(QUESTION)) {
      // A relationship question's answer on the request's relationships (with the model the two sets share).
      const q = parseExpr(name.slice(QUESTION.length)).expr;
      if (!model || !q || (q.type !== 'has' && q.type !== 'within')) return false;
      const env = envOf(req);
      env.model = model;
      if (compileRelQuestion(q)(env).value !== (d.answer === true ? 1 : d.answer === false ? 0 : 2)) return false;
      continue;
    }
    if (name.startsWith(USED)) {
      const v = readUsageName(req, name);
      if (!matchesFieldDesc(d, v.present, v.value)) return false;
      continue;
    }
    const rel = relationName(name);
    if (rel) {
      const a = readName(req, rel.a, zone), b = readName(req, rel.b, zone);
      if (!matchesRelDesc(d, relationOf(rel.rel, true, ofTypes(d, a, rel.rel, 'a'), ofTypes(d, b, rel.rel, 'b')))) return false;
      continue;
    }
    const v = readName(req, name, zone);
    if (!matchesFieldDesc(d, v.present, v.value)) return false;
  }
  return true;
}

function relationName(name: string): { rel: RelDim['rel']; a: string; b: string } | null {
  for (const [sep, rel] of [[' vs ', 'cmp'], [' contains any ', 'any'], [' contains all ', 'all'], [' in ', 'member']] as const) {
    const i = name.indexOf(sep);
    if (i > 0) return { rel, a: name.slice(0, i), b: name.slice(i + sep.length) };
  }
  return null;
}

// ---- the diff ----------------------------------------------------------------------

interface Side { rules: CompiledRule[]; limits: CompiledLimitBlock[] }

const sides = new WeakMap<PolicySet, Side>();

function sideOf(set: PolicySet): Side {
  let s = sides.get(set);
  if (!s) sides.set(set, (s = { rules: set.compiled.rules, limits: [...set.compiled.limits.values()].flat() }));
  return s;
}

const IDENTITY = new Set(['subject.id', 'person.id', 'resource.id', 'resource.type']);

/**
 * A block's plain limits as diff weighs them. A sum over a field also denies what
 * `<field> min 0` denies (a missing field, a value that is not a number or below zero);
 * the rest of it, and every count, is weighed against prior usage (`usageOf`).
 */
function limitFieldsOf(l: CompiledLimitBlock): LimitField[] {
  const out = [...l.ast.fields];
  for (const u of l.usage ?? []) if (u.kind === 'sum') out.push({ field: u.field!, min: 0 });
  return out;
}

/** A block's limits over time: the usage key each reads and its maximum. */
function usageOf(l: CompiledLimitBlock): NonNullable<SideFacts['usage']> {
  return (l.usage ?? []).map((u) => ({ key: usageKey(u), kind: u.kind, max: u.max }));
}

/** Every usage key the blocks read, with every maximum given to it. */
function usageReads(blocks: CompiledLimitBlock[]): UsageRead[] {
  const byKey = new Map<string, UsageRead>();
  for (const b of blocks) for (const u of b.usage ?? []) {
    const key = usageKey(u);
    let r = byKey.get(key);
    if (!r) byKey.set(key, (r = { key, kind: u.kind, field: u.field, maxes: [] }));
    if (!r.maxes.includes(u.max)) r.maxes.push(u.max);
  }
  return [...byKey.values()];
}

export interface Computed { dims: Dim[]; boxes: { sets: Set<number>[]; point: number[]; before: DecisionValue; after: DecisionValue }[] }

/**
 * The action patterns a rule's condition compares the action with: `action == "push:repos"`,
 * `action.verb in ["push", "merge"]` (`push:*`, `merge:*`), `action.kind == "repos"` (`*:repos`).
 * A comparison of the action with another value, or a `like` pattern on it, is not modelled.
 */
function actionConstantPatterns(r: CompiledRule): Pattern[] {
  return r.ast.when ? actionConstantsOfAtoms(atomsOf(r.ast.when), `rule "${r.name}" (${r.source})`) : [];
}

/** The action patterns comparisons compare the action with; `who` names their rule or invariant in a refusal. */
function actionConstantsOfAtoms(atoms: Atom[], who: string): Pattern[] {
  const out: Pattern[] = [];
  for (const a of atoms) {
    const sides = [a.left, a.right];
    const at = sides.findIndex((o) => o.type === 'path' && o.root === 'action');
    if (at < 0) continue;
    const path = sides[at] as PathNode, other = sides[1 - at]!;
    if (other.type === 'path') throw new DiffRefused(`${who} compares ${fmtExpr(a)}: the action against another value, which diff does not model yet`);
    if (a.type === 'like') throw new DiffRefused(`${who} matches the action with a pattern (${fmtExpr(a)}), which diff does not model yet`);
    const values = Array.isArray(other.value) ? other.value : [other.value];
    for (const v of values) {
      if (typeof v !== 'string' || v === '' || v.includes('*')) continue;
      const text = path.segs.length === 0 ? v : path.segs[0] === 'verb' ? `${v}:*` : `*:${v}`;
      if (path.segs.length === 0 ? checkPermissionKey(v, 'action', false) : v.includes(':')) continue;
      const p = parseTypedPattern(text);
      if (p) out.push(p);
    }
  }
  return out;
}

/**
 * Refuse sets whose rules ask what the exact engine does not model (the action against a value;
 * relationship questions, unless `questions`: then those diffQuestions cannot answer).
 */
export function refuseUnmodelled(sets: PolicySet[], questions = false): void {
  for (const set of sets) for (const r of set.compiled.rules) {
    const q = r.ast.when ? relQuestionsOf(r.ast.when)[0] : undefined;
    if (q && !questions) throw new DiffRefused(`rule "${r.name}" (${r.source}) asks a relationship question (${fmtExpr(q)}), which diff does not model yet`);
    actionConstantPatterns(r);
  }
  if (questions && sets.length === 2) {
    const why = unmodelledQuestions(sets[0]!, sets[1]!);
    if (why) throw new DiffRefused(why);
  }
}

export function diffPolicySets(before: PolicySet, after: PolicySet, options: DiffOptions = {}): DiffResult {
  refuseUnmodelled([before, after], true);
  try {
    const budget = new Budget(options.steps ?? DIFF_STEPS);
    try {
      return diffInner(before, after, budget);
    } finally {
      if (options.spent) options.spent.steps = Math.min(budget.spent, budget.max);
    }
  } catch (e) {
    if (e instanceof SpaceTooLarge || e instanceof StringSearchTooLarge) throw new DiffTooLarge(e.message);
    throw e;
  }
}

/**
 * What one cell of actions, objects and subjects gives the one who walks it: the space of the
 * values the rules, limits (and extra atoms) read there, which rules and limits apply, and a
 * signature of all that, equal for cells on which the same walk gives the same answer.
 */
export interface CellContext {
  space: Space;
  rules: CompiledRule[];
  limits: CompiledLimitBlock[];
  ac: Cell0; oc: Cell0; pc: PCell;
  agentW?: string; personW?: string;
  /** The action of the cell, or null for a cell of actions of any kinds (then `actionFor` the object's kind). */
  action: string | null;
  actionFor: (kind: string) => string | null;
  sig: string;
  who: string;
}

type PCell = { kind: PrincipalKind; agent?: Cell0; person?: Cell0 };

/** What a walk of the request space adds to what the sets themselves cut it by. */
interface CellWalk {
  /** Action and object patterns that cut the cells too, with the cells inside them alone walked. */
  onlyActions?: Pattern[];
  onlyObject?: Pattern;
  /** Comparisons read besides the rules' (an invariant's condition), each with its time zone. */
  atoms?: { atom: Atom; zone: string }[];
  /** Walk the cells no rule or limit applies to as well (roles alone decide them), and weigh role grants always. */
  everyCell?: boolean;
}

/**
 * The request space of some policy sets, cut into cells of actions, objects and subjects (see the
 * header); for each cell some rule or limit is weighed on, `visit` is called with its space.
 */
export function forEachCell(sets: PolicySet[], budget: Budget, walk: CellWalk, visit: (c: CellContext) => void): { personCells: number } {
  const sides = sets.map(sideOf);
  const declared = sets.map((s) => declaredTypesOf(s.compiled.files));
  const singularsAll = sets.map((s) => s.compiled.singulars);
  const allRules = sides.flatMap((s) => s.rules);
  const allLimits = sides.flatMap((s) => s.limits);
  const actionPats = [
    ...allRules.flatMap((r) => r.relations.map((rel) => parseTypedPattern(rel)!)),
    ...allLimits.map((l) => parseTypedPattern(l.capability)!),
    // every constant a condition compares the action with cuts the actions, so that on each cell such a comparison is constant
    ...allRules.flatMap((r) => actionConstantPatterns(r)),
    ...(walk.onlyActions ?? []),
    ...actionConstantsOfAtoms((walk.atoms ?? []).map((a) => a.atom), 'the invariant'),
  ];
  const objectPats = [...allRules.map((r) => parseTypedPattern(r.ast.object)!), ...(walk.onlyObject ? [walk.onlyObject] : [])];
  // `<kind>:*` for the kind each concrete action covers, on either side's singulars
  for (const a of actionPats) {
    if (a.segs === null || a.segs.length !== 1 || a.segs[0] === null) continue;
    const kinds = a.segs[0];
    for (const sing of singularsAll) objectPats.push({ type: (Object.hasOwn(sing, kinds) ? sing[kinds] : undefined) ?? singularOf(kinds), segs: null });
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
  const userCells = cells(userPats, { type: '', segs: null }, (p) => witnessOf(p, userTaken, '', 'example-person'));
  const principals: PCell[] = [
    ...agentCells.map((a) => ({ kind: 'auto' as const, agent: a })),
    ...agentCells.flatMap((a) => userCells.map((u) => ({ kind: 'deleg' as const, agent: a, person: u }))),
    ...userCells.map((u) => ({ kind: 'user' as const, person: u })),
  ];
  const inside = (c: Cell0, p: Pattern) => { const m = meet(c.pattern, p); return m !== null && key(m) === key(c.pattern); };

  for (const ac of actionCells) {
    if (walk.onlyActions && !walk.onlyActions.some((p) => inside(ac, p))) continue;
    const kindsWild = !(ac.pattern.segs && ac.pattern.segs.length === 1 && ac.pattern.segs[0] !== null);
    const relOk = (r: CompiledRule) => r.relations.some((rel) => matchTyped(parseTypedPattern(rel)!, ac.witness));
    const rulesA = allRules.filter(relOk);
    const limitsA = allLimits.filter((l) => l.capability === ac.witness);
    if (!rulesA.length && !limitsA.length && !walk.everyCell) continue;
    for (const oc of objectCells) {
      if (walk.onlyObject && !inside(oc, walk.onlyObject)) continue;
      const rulesO = rulesA.filter((r) => r.object(oc.witness));
      if (!rulesO.length && !limitsA.length && !walk.everyCell) continue;
      // A cell of actions with any kinds (`create:*`) holds actions of every kind: for an object of
      // kind k, an action of the cell whose kinds cover k (others are denied by both sets alike).
      const actionFor = (kind: string) => (kindsWild ? coveringAction(ac, kind, singularsAll) : ac.witness);
      const objType = oc.pattern.type;
      const objectCell: Pick<Principal, 'resourceType' | 'resourceId' | 'objectExceptions'> = {
        resourceType: {
          witness: oc.witness.slice(0, oc.witness.indexOf(':')),
          cons: [
            ...(objType !== null ? [{ kind: 'exact' as const, pattern: objType, positive: true }] : []),
            ...oc.except.filter((e) => e.segs === null && e.type !== null).map((e) => ({ kind: 'exact' as const, pattern: e.type!, positive: false })),
          ],
        },
        resourceId: {
          witness: oc.witness.slice(oc.witness.indexOf(':') + 1),
          cons: [
            { kind: 'seg', pattern: valueText(oc.pattern), positive: true },
            ...oc.except.filter((e) => e.type === null).map((e) => ({ kind: 'seg' as const, pattern: valueText(e), positive: false })),
          ],
        },
        objectExceptions: oc.except.filter((e) => e.type !== null && e.segs !== null).map((e) => ({ type: e.type!, id: valueText(e) })),
      };
      for (const pc of principals) {
        const agentW = pc.agent?.witness, personW = pc.person?.witness;
        const who = `${patternToString(ac.pattern)} on ${patternToString(oc.pattern)} by ${pc.kind === 'user' ? 'a person acting directly' : pc.kind === 'deleg' ? 'an agent acting for a person' : 'an agent acting alone'}`;
        budget.where = who;
        // every cell of actions, objects and subjects costs a step, and one whose rules are weighed a space's worth
        budget.spend(1);
        const idMatch = (r: CompiledRule) => {
          const subs = r.ast.subjects;
          const a = agentW !== undefined && subs.some((s) => s.startsWith('agent:') && matchTyped(parseTypedPattern(s)!, 'agent:' + agentW));
          const u = personW !== undefined && subs.some((s) => s.startsWith('user:') && matchTyped(parseTypedPattern(s)!, 'user:' + personW));
          return (a ? 'a' : '') + (u ? 'u' : '');
        };
        const byRole = (r: CompiledRule) => r.ast.subjects.some((s) => s.startsWith('role:') || s.startsWith('group:'));
        const rulesP = rulesO.filter((r) => idMatch(r) !== '' || byRole(r));
        const limitsP = pc.kind === 'user' ? [] : limitsA.filter((l) => l.agent(agentW!));
        if (!rulesP.length && !limitsP.length && !walk.everyCell) continue;
        const atoms: { atom: Atom; zone: string }[] = [];
        for (const r of rulesP) if (r.ast.when) for (const atom of atomsOf(r.ast.when)) atoms.push({ atom, zone: r.zone });
        atoms.push(...(walk.atoms ?? []));
        const roleNames = [...new Set(rulesP.flatMap((r) => r.ast.subjects.filter((s) => s.startsWith('role:')).map((s) => s.slice(5))))].sort();
        const groupNames = [...new Set(rulesP.flatMap((r) => r.ast.subjects.filter((s) => s.startsWith('group:')).map((s) => s.slice(6))))].sort();
        // Without a permit rule, only roles grant: a request they do not grant is denied by both sets alike.
        const hasPermit = walk.everyCell || rulesP.some((r) => r.effect === 'permit');
        const principal: Principal = {
          kind: pc.kind,
          actionWitness: ac.witness,
          subjectId: pc.kind === 'user' ? { witness: personW!, cons: idConstraints(pc.person!) } : { witness: agentW!, cons: idConstraints(pc.agent!) },
          ...(pc.kind === 'deleg' ? { personId: { witness: personW!, cons: idConstraints(pc.person!) } } : {}),
          ...objectCell,
          actionFor,
          check: (req) => {
            if (!inTypedCell(oc, req.resource) || !matchTyped(ac.pattern, req.action) || ac.except.some((e) => matchTyped(e, req.action))) return false;
            if (pc.kind === 'user') return inIdCell(pc.person!, req.subject.id);
            if (!inIdCell(pc.agent!, req.subject.id)) return false;
            return pc.kind !== 'deleg' || (!!req.person && inIdCell(pc.person!, req.person.id));
          },
        };
        const kindConstants = kindsWild ? [] : [...new Set(singularsAll.map((m) => { const k = ac.witness.slice(ac.witness.indexOf(':') + 1); return (Object.hasOwn(m, k) ? m[k] : undefined) ?? singularOf(k); }))];
        budget.spend(CONSTRUCT_STEPS);
        const space = buildSpace({ atoms, limits: limitsP.flatMap(limitFieldsOf), roleNames, groupNames, kindConstants, usage: usageReads(limitsP), declared }, principal, { subject: hasPermit, person: hasPermit });
        const readsIdentity = space.dims.some((d) => d.kind === 'value' && IDENTITY.has(d.key))
          || space.dims.some((d) => d.kind === 'rel' && (IDENTITY.has(d.a) || IDENTITY.has(d.b)));
        const coherence = kindsWild ? 'w' : singularsAll.map((s) => (permissionCovers('*:*', ac.witness, oc.witness, s) ? 'g' : 'n')).join('');
        const sig = [
          pc.kind, coherence,
          ...rulesP.map((r) => sides.findIndex((sd) => sd.rules.includes(r)) + ':' + r.index + idMatch(r)), '|',
          ...limitsP.map((l) => allLimits.indexOf(l)),
          ...(readsIdentity ? ['|', agentW, personW, oc.witness, ac.witness] : []),
          // the action a condition reads is fixed by the cell: another action cell may decide otherwise
          ...([...space.fixed.keys()].some((k) => k === 'action' || k.startsWith('action.')) ? ['|', String(space.fixed.get('action')?.value ?? ''), String(space.fixed.get('action.verb')?.value ?? ''), String(space.fixed.get('action.kind')?.value ?? '')] : []),
        ].join(',');
        budget.where = `${who} (${space.dims.length} values and relations read)`;
        visit({ space, rules: rulesP, limits: limitsP, ac, oc, pc, agentW, personW, action: kindsWild ? null : ac.witness, actionFor, sig, who });
      }
    }
  }
  return { personCells: userCells.length };
}

/**
 * The relationship questions the rules ask on a cell, and the combinations of their answers the
 * cell is compared under (none asked: once, with no answers); a question not modelled is refused.
 */
export function cellCombinations(c: CellContext, rules: Parameters<typeof cellQuestions>[0], model: RelationModel): { qs: CellQuestion[]; combos: (Combination | null)[] } {
  const qs = cellQuestions(rules, c.pc.kind, c.oc.pattern.type, model);
  if (typeof qs === 'string') throw new DiffRefused(qs);
  return { qs, combos: qs.length ? combinations(qs, c.oc.pattern.type, model, fixedValidIds(c)) : [null] };
}

/** The ids a cell fixes to one constant that a relationship can name (no request of the cell has another). */
function fixedValidIds(c: CellContext): Set<IdRole> {
  const constant = (p: Pattern) => (p.segs !== null && p.segs.every((x) => x !== null) ? p.segs.join('/') : null);
  const out = new Set<IdRole>();
  const names = (type: string, cell: Cell0 | undefined) => {
    const id = cell ? constant(cell.pattern) : null;
    return id !== null && typeof parseObject(`${type}:${id}`) !== 'string';
  };
  if (names(c.pc.kind === 'user' ? 'user' : 'agent', c.pc.kind === 'user' ? c.pc.person : c.pc.agent)) out.add('subject');
  if (c.pc.kind === 'deleg' && names('user', c.pc.person)) out.add('person');
  if (c.oc.pattern.type !== null && names(c.oc.pattern.type, c.oc)) out.add('resource');
  return out;
}

/** The decider of one set on a cell: its rules and limits among those the cell weighs. */
export function sideProbe(set: PolicySet, c: CellContext, answers?: ReadonlyMap<string, Answer>): Probe {
  const side = sideOf(set);
  const limits = c.limits.filter((l) => side.limits.includes(l));
  return decider(c.space, {
    rules: c.rules.filter((r) => side.rules.includes(r)), limits: limits.flatMap(limitFieldsOf), usage: limits.flatMap(usageOf),
    singulars: set.compiled.singulars, action: c.action, actionFor: c.actionFor, ...(answers ? { answers } : {}),
  }, { agent: c.agentW, person: c.personW });
}

function diffInner(before: PolicySet, after: PolicySet, budget: Budget): DiffResult {
  const notes: string[] = [];
  const singB = JSON.stringify(Object.entries(before.compiled.singulars).sort());
  const singA = JSON.stringify(Object.entries(after.compiled.singulars).sort());
  if (singB !== singA) notes.push('declared kind singulars differ: which objects a permission covers changes, also for actions no rule or limit names');
  const memo = new Map<string, Computed>();
  const changes: Change[] = [];
  const references = sharedReferences([before, after]);
  const model = before.compiled.relations;
  const { personCells } = forEachCell([before, after], budget, {}, (c) => {
    // Relationship questions: the cell is compared once per combination of their answers.
    const { qs, combos } = cellCombinations(c, c.rules, model);
    for (const combo of combos) {
      if (combo) budget.spend(1);
      /** The request of the combination, with its graph; a region with no request found is refused, never dropped. */
      const realised = (req: DecisionRequest, expected: [DecisionValue, DecisionValue]): Realised => {
        if (!combo) return { request: req, graph: [] };
        budget.spend(CONSTRUCT_STEPS);
        // A graph may also grant the action through a relation: it must leave the decisions the cells say.
        const decidesAs = (x: DecisionRequest) => decide(x, before).decision === expected[0] && decide(x, after).decision === expected[1];
        const r = realise(req, qs, combo, [before, after], c.space.principal.check, decidesAs, (n) => budget.spend(n));
        if (!r) throw new DiffRefused(`no graph of up to ${REALISE_MAX_SIZE} relationships found where ${combinationText(combo)} (${c.who}), so whether its decisions change is not known`);
        return r;
      };
      const probes: [Probe, Probe] = [sideProbe(before, c, combo?.answers), sideProbe(after, c, combo?.answers)];
      const sig = combo ? `${c.sig}|${combinationKey(combo)}` : c.sig;
      let computed = memo.get(sig);
      budget.spend((computed?.boxes.length ?? 0) * CONSTRUCT_STEPS);
      let built = computed?.boxes.map((b) => construct(c.space, b.point));
      if (!computed || built!.some((x) => x === null)) {
        computed = compare(c.space, probes, c.rules, budget, (req, expected) => {
          const r = realised(req, expected).request;
          return [decide(r, before).decision, decide(r, after).decision];
        });
        memo.set(sig, computed);
        budget.spend(computed.boxes.length * CONSTRUCT_STEPS);
        built = computed.boxes.map((b) => construct(c.space, b.point));
      }
      // Rendering a region is work too: a step per dimension it describes.
      computed.boxes.forEach((b, i) => {
        budget.spend(RENDER_STEPS + computed!.dims.length);
        const r = realised(built![i]!.request, [b.before, b.after]);
        const change = render(c.space, computed!.dims, b, r.request, c.ac, c.oc, c.pc);
        if (combo) {
          // The example decided as reported (the walk checked its first request; this one is checked too).
          const [db, da] = [decide(r.request, before).decision, decide(r.request, after).decision];
          if (db !== b.before || da !== b.after) throw new Error(`diff: the cells say ${b.before} -> ${b.after}, deciding the example says ${db} -> ${da}`);
          for (const [k, v] of combo.answers) change.region[QUESTION + k] = { answer: v === 1 ? true : v === 0 ? false : 'error' };
          change.example.relationships = r.graph;
        }
        change.example = withReferences(change.example, references);
        changes.push(change);
      });
    }
  });
  const merged = mergePersonCells(changes, personCells);
  merged.sort((x, y) => (x.relation + x.object + x.subjects.join()).localeCompare(y.relation + y.object + y.subjects.join()));
  return { changes: merged, notes };
}

/**
 * Walk the space dimension by dimension (those the first rules read first). Where both sets
 * are decided for every request below a node, stop: the same decision, nothing to report; two
 * decisions, one box (the node's cells, and every cell of the dimensions not chosen yet), with
 * an example request built below it and checked with decide().
 */
export function compare(space: Space, probes: [Probe, Probe], rules: CompiledRule[], budget: Budget, decideBoth: (req: DecisionRequest, expected: [DecisionValue, DecisionValue]) => [DecisionValue, DecisionValue]): Computed {
  const dims = space.dims;
  const sizes = dims.map(dimSize);
  const order = walkOrder(space, rules);
  const point = new Array<number>(dims.length).fill(0);
  const chosen = new Uint8Array(dims.length);
  const groups: { before: DecisionValue; after: DecisionValue; boxes: { sets: Set<number>[]; point: number[] }[] }[] = [];
  const feasibleMemo = new Map<string, boolean>();
  /** Does some request have the combination? Paid from the budget, or (tidying) from what tidying has left. */
  const feasibleFrom = (tidying: boolean) => (p: number[]) => {
    const n = p.join(',');
    let f = feasibleMemo.get(n);
    if (f === undefined) {
      if (tidying) budget.tidy -= CONSTRUCT_STEPS; else budget.spend(CONSTRUCT_STEPS);
      f = construct(space, p) !== null;
      if (feasibleMemo.size < 200_000) feasibleMemo.set(n, f);
    }
    return f;
  };
  const feasible = feasibleFrom(false);
  /** A point below the node that some request has, or null. */
  const example = (level: number): number[] | null => {
    let tries = 0;
    const picked = Uint8Array.from(chosen);
    const walk = (l: number): boolean => {
      if (l === order.length) { if (++tries > EXAMPLE_TRIES) throw new DiffTooLarge('too many impossible combinations to find an example'); budget.spend(1); return feasible(point); }
      const d = order[l]!;
      picked[d] = 1;
      for (let v = 0; v < sizes[d]!; v++) {
        budget.spend(1);
        point[d] = v;
        if (partialFeasible(space, point, picked) && walk(l + 1)) return true;
      }
      picked[d] = 0;
      return false;
    };
    const saved = [...point];
    const ok = walk(level);
    const found = ok ? [...point] : null;
    for (let i = 0; i < point.length; i++) point[i] = saved[i]!;
    return found;
  };
  const visit = (level: number): void => {
    budget.spend(1);
    const b = probes[0](point, chosen), a = probes[1](point, chosen);
    if (b !== null && a !== null) {
      if (a === b) return;
      const ex = example(level);
      if (!ex) return;
      budget.spend(CONSTRUCT_STEPS);
      const built = construct(space, ex)!;
      const [db, da] = decideBoth(built.request, [b, a]);
      if (db !== b || da !== a) throw new Error(`diff: the cells say ${b} -> ${a}, deciding the example says ${db} -> ${da}`);
      let g = groups.find((x) => x.before === b && x.after === a);
      if (!g) groups.push((g = { before: b, after: a, boxes: [] }));
      g.boxes.push({ sets: dims.map((_, i) => (chosen[i] ? new Set([point[i]!]) : new Set(Array.from({ length: sizes[i]! }, (_, v) => v)))), point: ex });
      return;
    }
    if (level === order.length) throw new Error('diff: a request whose decision the cells do not settle');
    const d = order[level]!;
    chosen[d] = 1;
    for (let v = 0; v < sizes[d]!; v++) {
      point[d] = v;
      if (partialFeasible(space, point, chosen)) visit(level + 1);
    }
    chosen[d] = 0;
    point[d] = 0;
  };
  visit(0);
  const boxes: Computed['boxes'] = [];
  for (const g of groups) {
    const decidedAs = (p: number[]) => {
      const all = new Uint8Array(dims.length).fill(1);
      return probes[0](p, all) === g.before && probes[1](p, all) === g.after;
    };
    for (const sets of mergeBoxes(g.boxes.map((x) => x.sets), sizes, decidedAs, feasibleFrom(true), budget)) {
      const hit = g.boxes.find((x) => x.point.every((v, i) => sets[i]!.has(v)))!;
      boxes.push({ sets, point: hit.point, before: g.before, after: g.after });
    }
  }
  return { dims, boxes };
}

const EXAMPLE_TRIES = 100_000;

/**
 * The dimensions in the order the rules read them, deny rules first: a comparison of two
 * values hangs on the relation between them, a comparison with constants on the value's
 * cell, so each comparison is settled as early as the walk can settle it.
 */
function walkOrder(space: Space, rules: CompiledRule[]): number[] {
  const n = space.dims.length;
  const index = new Map<string, number>();
  space.dims.forEach((d, i) => index.set(d.key, i));
  const order: number[] = [];
  const seen = new Uint8Array(n);
  const add = (i: number | undefined) => { if (i !== undefined && i >= 0 && !seen[i]) { seen[i] = 1; order.push(i); } };
  const kind = space.principal.kind;
  const rank = { deny: 0, permit: 1, require_approval: 2 } as const;
  for (const r of [...rules].sort((x, y) => rank[x.effect] - rank[y.effect] || x.index - y.index)) {
    if (!r.ast.when) continue;
    for (const a of atomsOf(r.ast.when)) {
      const lk = a.left.type === 'path' ? keyOfPath(a.left, r.zone, kind) : null;
      const rk = a.right.type === 'path' ? keyOfPath(a.right, r.zone, kind) : null;
      if (lk !== null && rk !== null) {
        for (const rel of ['cmp', 'member', 'any', 'all'] as const) {
          add(index.get(relKey(rel, lk, rk)));
          add(index.get(relKey(rel, rk, lk)));
        }
        if (a.type === 'cmp' && a.op !== 'eq' && a.op !== 'ne') add(index.get(lk));
      } else add(index.get((lk ?? rk)!));
    }
  }
  space.dims.forEach((d, i) => { if (d.kind === 'value' && d.key.startsWith('context.')) add(i); });
  space.dims.forEach((d, i) => { if (d.kind === 'usage') add(i); });
  space.dims.forEach((d, i) => { if (d.kind === 'grant') add(i); });
  space.dims.forEach((d, i) => { if (d.kind === 'value' && (d.key.endsWith('.roles') || d.key.endsWith('.groups'))) add(i); });
  space.dims.forEach((_, i) => add(i));
  return order;
}

function flat(p: number[], sizes: number[]): number {
  let n = 0;
  for (let i = 0; i < p.length; i++) n = n * sizes[i]! + p[i]!;
  return n;
}

/** Every point of a box (a product of per-dimension sets); calls f until it returns false. */
function everyPoint(sets: number[][], f: (p: number[]) => boolean): boolean {
  const p = sets.map((s) => s[0]!);
  const at = new Array<number>(sets.length).fill(0);
  if (sets.some((s) => s.length === 0)) return true;
  for (;;) {
    if (!f(p)) return false;
    let i = sets.length - 1;
    for (; i >= 0; i--) {
      if (++at[i]! < sets[i]!.length) { p[i] = sets[i]![at[i]!]!; break; }
      at[i] = 0; p[i] = sets[i]![0]!;
    }
    if (i < 0) return true;
  }
}

const SLAB_MAX = 20_000;

/**
 * Unite the disjoint boxes of one group where they differ in one dimension only; then widen a
 * box by a cell when every combination that adds is decided the group's way or has no request
 * (only where that costs little to check), unite again, and leave out the cells of a box
 * that only combinations without a request have.
 */
function mergeBoxes(
  start: Set<number>[][], sizes: number[], decidedAs: (p: number[]) => boolean, feasible: (p: number[]) => boolean, budget: Budget,
): Set<number>[][] {
  const dims = sizes.length;
  if (dims === 0) return start.slice(0, 1);
  const k = (s: Set<number>) => [...s].sort((a, b) => a - b).join(',');
  let boxes = start;
  const unite = () => {
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
  };
  unite();
  // Widening must keep boxes apart: a cell is taken in only where no other box has it.
  const overlaps = (b: Set<number>[], d: number, v: number) => boxes.some((o) => o !== b && o.every((s, i) => (i === d ? s.has(v) : [...b[i]!].some((x) => s.has(x)))));
  let widened = false;
  for (const b of boxes) {
    for (let d = 0; d < dims; d++) {
      for (let v = 0; v < sizes[d]!; v++) {
        if (b[d]!.has(v)) continue;
        const sets = b.map((s, i) => (i === d ? [v] : [...s]));
        const slab = sets.reduce((n, s) => n * s.length, 1);
        if (slab > SLAB_MAX) continue;
        if (!budget.tidying(slab + boxes.length)) continue;
        if (overlaps(b, d, v)) continue;
        if (everyPoint(sets, (p) => decidedAs(p) || !feasible(p))) { b[d]!.add(v); widened = true; }
      }
    }
  }
  if (widened) unite();
  // Tightening: a cell of a box that no request of the box has (`time.hour` missing beside a
  // weekday, which only a clock gives) is left out, so that a region names only what a
  // request can be. Only combinations without a request go, so the region keeps its requests.
  for (const b of boxes) {
    for (let d = 0; d < dims; d++) {
      if (b[d]!.size < 2 || b[d]!.size === sizes[d]) continue;
      for (const v of [...b[d]!]) {
        const sets = b.map((s, i) => (i === d ? [v] : [...s]));
        const slab = sets.reduce((n, s) => n * s.length, 1);
        if (slab > SLAB_MAX || !budget.tidying(slab)) continue;
        if (everyPoint(sets, (p) => !feasible(p))) b[d]!.delete(v);
      }
    }
  }
  return boxes;
}

function render(
  space: Space, dims: Dim[], b: Computed['boxes'][number], req: DecisionRequest, ac: Cell0, oc: Cell0,
  pc: { kind: PrincipalKind; agent?: Cell0; person?: Cell0 },
): Change {
  const byKey = space.valueDims;
  const zones = new Set<string>();
  const zoneOfKey = (k: string) => { const v = byKey.get(k); if (v && v.status === 'time' && v.path.segs[0] !== 'epoch') zones.add(v.zone); };
  dims.forEach((d, i) => {
    if (b.sets[i]!.size === dimSize(d)) return;
    if (d.kind === 'value') zoneOfKey(d.key);
    else if (d.kind === 'rel') { zoneOfKey(d.a); zoneOfKey(d.b); }
  });
  const suffix = zones.size > 1;
  const fixedPath = (k: string) => pathFromText(k.split('@')[0]!);
  const region: Record<string, FieldDesc> = {};
  dims.forEach((d, i) => {
    const chosen = b.sets[i]!;
    let desc: FieldDesc | null;
    if (d.kind === 'value') desc = describe(d.cells, chosen, d.status === 'time');
    else if (d.kind === 'usage') {
      desc = atLeastZero(describe(d.cells, chosen));
      // "any total" says only that the amount can be summed: left out where the amount's cells say so already
      if (desc?.type === 'number' && Object.keys(desc).length === 1 && d.field !== null) {
        const ai = dims.findIndex((x) => x.kind === 'value' && x.key === 'context.' + d.field);
        if (ai >= 0 && [...b.sets[ai]!].every((ci) => { const c = (dims[ai] as ValueDim).cells[ci]!; return c.t === 'num' && c.lo >= 0; })) desc = null;
      }
    }
    else if (d.kind === 'rel') desc = withTypes(describeRel(d, chosen), d, byKey);
    else desc = chosen.size === d.values.length ? null : { holds: d.values[[...chosen][0]!] };
    if (desc) region[dimName(d, byKey, fixedPath, suffix)] = desc;
  });
  if (!dims.some((d) => d.kind === 'grant')) region[GRANT_KEY.both] = { holds: true };
  const subjects: string[] = [];
  const exSubjects: string[] = [];
  if (pc.agent) {
    subjects.push(`agent:${patternToString(pc.agent.pattern)}`);
    exSubjects.push(...pc.agent.except.map((p) => `agent:${patternToString(p)}`));
  }
  if (pc.person) {
    subjects.push(`user:${patternToString(pc.person.pattern)}`);
    exSubjects.push(...pc.person.except.map((p) => `user:${patternToString(p)}`));
  }
  const except: NonNullable<Change['except']> = {};
  if (exSubjects.length) except.subjects = exSubjects;
  if (ac.except.length) except.relation = ac.except.map(patternToString);
  if (oc.except.length) except.object = oc.except.map(patternToString);
  const c: Change = {
    subjects, relation: patternToString(ac.pattern), object: patternToString(oc.pattern),
    region, before: b.before, after: b.after, example: exampleOf(req, space),
  };
  if (zones.size === 1) c.timezone = [...zones][0]!;
  if (Object.keys(except).length) c.except = except;
  if (pc.kind === 'auto') c.no_person = true;
  return c;
}

/** The references both sets' schemas declare alike (full path -> entity type). */
export function sharedReferences(sets: PolicySet[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, t] of sets[0]?.compiled.referenceTypes ?? []) if (sets.every((s) => s.compiled.referenceTypes.get(k) === t)) out.set(k, t);
  return out;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An example whose values at paths the schema declares as references (`resource.customer:
 * entity customer`) name a stored entity, as a request does, rather than hold its attributes
 * inline: `{"type": "customer", "id": "example-customer"}` there, and the attributes under
 * `entities`. (An entity with attributes named `type` or `id` stays inline: a reference object
 * would read its own.)
 */
export function withReferences(ex: ExampleRequest, refs: ReadonlyMap<string, string>): ExampleRequest {
  if (!refs.size) return ex;
  const entities: Record<string, Record<string, unknown>> = { ...(ex.entities ?? {}) };
  const taken = new Set(Object.keys(entities));
  const walk = (prefix: string, obj: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) {
      const path = `${prefix}.${k}`;
      const type = refs.get(path);
      let value: unknown = isPlainObject(v) ? walk(path, v) : v;
      if (type !== undefined && isPlainObject(value) && !Object.hasOwn(value, 'type') && !Object.hasOwn(value, 'id')) {
        let id = `example-${type}`;
        for (let n = 2; taken.has(`${type}:${id}`); n++) id = `example-${type}-${n}`;
        taken.add(`${type}:${id}`);
        setOwn(entities, `${type}:${id}`, value);
        value = { type, id };
      }
      setOwn(out, k, value);
    }
    return out;
  };
  const out: ExampleRequest = { ...ex, context: walk('context', ex.context) };
  if (ex.resource_attributes) out.resource_attributes = walk('resource', ex.resource_attributes);
  if (isPlainObject(ex.subject.attributes)) out.subject = { ...ex.subject, attributes: walk('subject', ex.subject.attributes) };
  if (ex.person && isPlainObject(ex.person.attributes)) out.person = { ...ex.person, attributes: walk('person', ex.person.attributes) };
  if (Object.keys(entities).length) out.entities = entities;
  return out;
}

export function exampleOf(req: DecisionRequest, space: Space): ExampleRequest {
  const s = req.subject;
  const subject: Record<string, unknown> = { type: s.type, id: s.id };
  if (s.mode) subject.mode = s.mode;
  if (s.roles.length) subject.roles = s.roles;
  if (s.groups.length) subject.groups = s.groups;
  if (s.email !== undefined) subject.email = s.email;
  if (s.name !== undefined) subject.name = s.name;
  if (Object.keys(s.attributes).length) subject.attributes = s.attributes;
  subject.permissions = s.permissions;
  const ex: ExampleRequest = { subject, action: req.action, resource: req.resource, context: req.context };
  if (req.person) {
    const p = req.person;
    const person: Record<string, unknown> = { id: p.id };
    if (p.email !== undefined) person.email = p.email;
    if (p.roles.length) person.roles = p.roles;
    if (p.groups.length) person.groups = p.groups;
    if (Object.keys(p.attributes).length) person.attributes = p.attributes;
    person.permissions = p.permissions;
    ex.person = person;
  }
  if (req.resourceAttributes && Object.keys(req.resourceAttributes).length) ex.resource_attributes = req.resourceAttributes;
  if (space.timeDims.length) ex.now = Number.isFinite(req.now) ? new Date(req.now).toISOString() : null;
  if (req.usage) ex.usage = { ...req.usage };
  if (req.chain && req.chain.agents.length > 1) ex.chain = req.chain.agents.map((a) => a.id);
  return ex;
}

/**
 * An agent acting alone and the same agent acting for any person, with the same region and
 * decisions, read better as one change about the agent.
 */
function mergePersonCells(changes: Change[], personCells: number): Change[] {
  const keyOf = (c: Change) => JSON.stringify([c.subjects[0], c.except?.subjects?.filter((s) => s.startsWith('agent:')), c.relation, c.except?.relation, c.object, c.except?.object, c.region, c.timezone, c.before, c.after]);
  const groups = new Map<string, Change[]>();
  for (const c of changes) {
    if (!c.subjects[0]!.startsWith('agent:')) continue;
    const k = keyOf(c);
    (groups.get(k) ?? groups.set(k, []).get(k)!).push(c);
  }
  const drop = new Set<Change>();
  const out: Change[] = [];
  for (const g of groups.values()) {
    const alone = g.find((c) => c.no_person);
    const withPerson = g.filter((c) => !c.no_person);
    if (!alone || withPerson.length !== personCells) continue;
    for (const c of g) drop.add(c);
    const m: Change = { ...alone };
    delete m.no_person;
    out.push(m);
  }
  for (const c of changes) if (!drop.has(c)) out.push(c);
  return out;
}

/**
 * An action of the cell `ac` whose kinds cover objects of `kind`, so that a permission can
 * grant it; null when there is none.
 */
function coveringAction(ac: Cell0, kind: string, singulars: Record<string, string>[]): string | null {
  const verb = ac.witness.slice(0, ac.witness.indexOf(':'));
  const plurals = [kind + 's', kind + 'es', ...(kind.endsWith('y') ? [kind.slice(0, -1) + 'ies'] : []), kind,
    ...singulars.flatMap((m) => Object.entries(m).filter(([, v]) => v === kind).map(([k]) => k))];
  for (const kinds of plurals) {
    const action = `${verb}:${kinds}`;
    if (!matchTyped(ac.pattern, action) || ac.except.some((p) => matchTyped(p, action))) continue;
    if (singulars.some((m) => permissionCovers('*:*', action, `${kind}:x`, m))) return action;
  }
  return null;
}

// ---- text --------------------------------------------------------------------------

export function fieldDescText(f: string, d: FieldDesc): string {
  if (d.not !== undefined) return `not (${fieldDescText(f, d.not as FieldDesc)})`;
  if (Array.isArray(d.any_of)) return '(' + (d.any_of as FieldDesc[]).map((x) => fieldDescText(f, x)).join(' or ') + ')';
  if (f.startsWith(QUESTION)) {
    const q = f.slice(QUESTION.length);
    return d.answer === true ? q : d.answer === false ? `not ${q}` : `${q} cannot be answered`;
  }
  const rel = relationName(f);
  if (f === GRANT_KEY.subject || f === GRANT_KEY.person) return `${f.split(' ')[0]} ${d.holds ? 'cover' : 'do not cover'} the action`;
  if (f === GRANT_KEY.both) return d.holds ? 'permissions cover the action' : 'permissions do not cover the action';
  if (rel) {
    if (d.comparable === false) return `${rel.a} and ${rel.b} cannot be compared`;
    if (d.comparable === true) return `${rel.a} and ${rel.b} are comparable`;
    if (rel.rel === 'cmp') return `${rel.a} ${d.op} ${rel.b}`;
    const what = rel.rel === 'member' ? 'in' : rel.rel === 'any' ? 'contains any' : 'contains all';
    return d.holds ? `${rel.a} ${what} ${rel.b}` : `not ${rel.a} ${what} ${rel.b}`;
  }
  // a total of usage and amount that is any number: the amount can be summed
  if (f.startsWith(USED) && f.includes(' + ') && d.type === 'number' && Object.keys(d).length === 1) return `${f.slice(f.indexOf(' + ') + 3)} is a number >= 0`;
  if (f.startsWith(USED) && f.includes(' + ') && d.missing) return `${f.slice(f.indexOf(' + ') + 3)} is missing, not a number or below 0`;
  if (d.missing) return `${f} missing`;
  if (Array.isArray(d.missing_or_not)) return `${f} is missing or not a ${(d.missing_or_not as string[]).join('/') || 'value'}`;
  if (Array.isArray(d.present_not)) return (d.present_not as string[]).length ? `${f} is there but not a ${(d.present_not as string[]).join('/')}` : `${f} is there`;
  if (d.empty) return `${f} is an empty list`;
  if (typeof d.list_of === 'string') {
    const parts = [`${f} is a ${d.nonempty ? 'non-empty ' : ''}list of ${d.list_of}s`];
    if (Array.isArray(d.contains)) parts.push(`holding ${fmtLiteral(d.contains as string[])}`);
    if (Array.isArray(d.not_contains)) parts.push(`without ${fmtLiteral(d.not_contains as string[])}`);
    return parts.join(' ');
  }
  if (Array.isArray(d.in)) return (d.in as string[]).length === 1 ? `${f} == ${fmtLiteral((d.in as string[])[0]!)}` : `${f} in ${fmtLiteral(d.in as string[])}`;
  if (d.not_in !== undefined || d.like !== undefined || d.not_like !== undefined) {
    const parts = [Array.isArray(d.not_in) ? `${f} is a string not in ${fmtLiteral(d.not_in as string[])}` : `${f} is a string`];
    for (const p of (d.like as string[]) ?? []) parts.push(`${f} like ${fmtLiteral(p)}`);
    for (const p of (d.not_like as string[]) ?? []) parts.push(`${f} not like ${fmtLiteral(p)}`);
    return parts.join(' and ');
  }
  if ('eq' in d) return `${f} == ${fmtLiteral(d.eq as string)}`;
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
    const kind = c.subjects[0]!.startsWith('user:') ? ' (acting directly)' : c.no_person ? ' (no person)' : '';
    const who = c.subjects.join(' ') + kind + (ex.subjects?.length ? ` except ${ex.subjects.join(', ')}` : '');
    const rel = c.relation + (ex.relation?.length ? ` except ${ex.relation.join(', ')}` : '');
    const obj = c.object + (ex.object?.length ? ` except ${ex.object.join(', ')}` : '');
    const where = Object.entries(c.region).map(([f, d]) => fieldDescText(f, d)).join(' and ') || 'any request';
    out.push('');
    out.push(`  ${rel} on ${obj} by ${who}`);
    out.push(`    when ${where}${c.timezone ? ` (time in ${c.timezone})` : ''}: ${c.before} -> ${c.after}`);
    out.push(`    example: ${JSON.stringify(c.example)}`);
  }
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.join('\n') + '\n';
}
