// The space of requests, cut into cells on which a set of conditions cannot
// tell two requests apart. Shared by `diff` (which decides one request per
// cell with both policy sets) and `policy check` (which asks whether a
// condition can ever hold).
//
// The cut:
//  - each path a condition reads is a dimension of "value cells": for numbers,
//    each constant it is compared with and the open intervals between; for
//    strings, each constant and the other strings (split by the `like`
//    patterns they match); true and false; for lists, empty or not and which
//    constants they hold; "another type"; "missing";
//  - each comparison of two paths is a dimension of its own: the relation
//    between the two values (<, ==, >, !=, or not comparable), membership of a
//    value in a list, or whether two lists meet or one holds the other;
//  - `time.*` values are dimensions too, but only their combinations that some
//    instant has (found by scanning the clock around every constant);
//  - whether roles grant the subject (and the person) the action.
// Every comparison of the language is decided by these, so one request per
// combination stands for all. A combination may be impossible (a number both
// equal to 5 and below another that is 3); `construct` builds a request for a
// combination, or says there is none, and every request it builds is checked
// to lie in its combination.

import type { DecisionRequest, PersonFacts, SubjectFacts } from './types.js';
import type { Atom, LimitField, PathNode, Root, Scalar } from './ast.js';
import { pathKey } from './ast.js';
import { BUILTINS, compileReader, envOf, MISSING, scalarTypeOf, type ValueType } from './values.js';
import { solveString, type StrConstraint } from './strings.js';
import { localTime } from './time.js';
import { permissionCovers } from './patterns.js';
import { likeMatcher } from './compile.js';
import { addAmounts, type UsageFacts } from './usage.js';
import { setOwn } from './own.js';
import { fitsType, schemaTypeOf, type DeclaredTypes } from './declared.js';

/** The one type a limit field's constants have, or null. */
function limitType(f: LimitField): ValueType | null {
  const ts = new Set<string | null>();
  if (f.max !== undefined || f.min !== undefined) ts.add('number');
  for (const op of ['in', 'not_in'] as const) { const v = f[op]; if (Array.isArray(v)) for (const x of v) ts.add(scalarTypeOf(x)); }
  if (f.eq !== undefined) ts.add(scalarTypeOf(f.eq));
  const [t] = [...ts];
  return ts.size === 1 && t ? (t as ValueType) : null;
}

export class SpaceTooLarge extends Error {}

type ScalarType = 'number' | 'string' | 'boolean';
const SCALARS: ScalarType[] = ['number', 'string', 'boolean'];

// ---- cells of one value ------------------------------------------------------------------

export type Cell =
  | { t: 'missing' }
  /** Missing, or of none of the types the conditions compare it with: every comparison of it fails alike. */
  | { t: 'absent'; types: ValueType[] }
  /** There, but of none of the types the conditions compare it with (cut from `absent` where a condition asks `has`). */
  | { t: 'other'; types: ValueType[] }
  | { t: 'num'; lo: number; hi: number; point: boolean }
  | { t: 'str'; v: string }
  | { t: 'strOther'; not: string[]; like: string[]; notLike: string[] }
  | { t: 'bool'; v: boolean }
  | { t: 'empty' }
  | { t: 'list'; item: ScalarType; has: Scalar[]; hasNot: Scalar[] };

function typeOfValue(v: unknown): ValueType | null {
  const s = scalarTypeOf(v);
  if (s) return s;
  if (!Array.isArray(v) || v.length === 0) return null;
  const t = scalarTypeOf(v[0]);
  if (!t) return null;
  for (const x of v) if (scalarTypeOf(x) !== t) return null;
  return `[${t}]` as ValueType;
}

/** A value of none of these types (an empty list has every list type). */
export function isOther(types: ValueType[], v: unknown): boolean {
  if (Array.isArray(v) && v.length === 0) return !types.some((t) => t.startsWith('['));
  const t = typeOfValue(v);
  return t === null || !types.includes(t);
}

/** Does a value (present or not) lie in a cell? */
export function cellHolds(c: Cell, present: boolean, v: unknown): boolean {
  if (c.t === 'missing') return !present;
  if (c.t === 'absent') return !present || isOther(c.types, v);
  if (c.t === 'other') return present && isOther(c.types, v);
  if (!present) return false;
  switch (c.t) {
    case 'num': return typeof v === 'number' && Number.isFinite(v) && (c.point ? v === c.lo : v > c.lo && v < c.hi);
    case 'str': return v === c.v;
    case 'strOther':
      return typeof v === 'string' && !c.not.includes(v) && c.like.every((p) => likeMatcher(p)(v)) && !c.notLike.some((p) => likeMatcher(p)(v));
    case 'bool': return v === c.v;
    case 'empty': return Array.isArray(v) && v.length === 0;
    case 'list': {
      if (!Array.isArray(v) || v.length === 0) return false;
      for (const x of v) if (scalarTypeOf(x) !== c.item) return false;
      return c.has.every((h) => v.includes(h)) && !c.hasNot.some((h) => v.includes(h));
    }
  }
}

/** A value of none of these types, for an `other` cell: a plain one where it can be. */
export function otherValue(types: ValueType[]): unknown {
  for (const v of ['other', 1, true, ['other'], { other: true }]) if (isOther(types, v)) return v;
  return { other: true };
}

function numberCells(nums: Set<number>): Cell[] {
  const out: Cell[] = [];
  const ns = [...nums].sort((a, b) => a - b);
  if (!ns.length) return [{ t: 'num', lo: -Infinity, hi: Infinity, point: false }];
  out.push({ t: 'num', lo: -Infinity, hi: ns[0]!, point: false });
  ns.forEach((n, i) => {
    out.push({ t: 'num', lo: n, hi: n, point: true });
    out.push({ t: 'num', lo: n, hi: i + 1 < ns.length ? ns[i + 1]! : Infinity, point: false });
  });
  return out;
}

const LIKE_MAX = 8;
const ITEMS_MAX = 8;

function stringCells(strs: Set<string>, likes: Set<string>): Cell[] {
  const consts = [...strs].sort();
  const out: Cell[] = consts.map((v) => ({ t: 'str', v }));
  const ls = [...likes].sort();
  if (ls.length > LIKE_MAX) throw new SpaceTooLarge(`too many like patterns on one value (${ls.length})`);
  for (let mask = 0; mask < 1 << ls.length; mask++) {
    const like = ls.filter((_, i) => mask & (1 << i)), notLike = ls.filter((_, i) => !(mask & (1 << i)));
    const cons: StrConstraint[] = [
      ...consts.map((c) => ({ kind: 'exact' as const, pattern: c, positive: false })),
      ...like.map((p) => ({ kind: 'like' as const, pattern: p, positive: true })),
      ...notLike.map((p) => ({ kind: 'like' as const, pattern: p, positive: false })),
    ];
    if (ls.length === 0 || solveString(cons, ['other']) !== null) out.push({ t: 'strOther', not: consts, like, notLike });
  }
  return out;
}

function listCells(item: ScalarType, consts: Scalar[]): Cell[] {
  if (consts.length > ITEMS_MAX) throw new SpaceTooLarge(`too many list items compared on one value (${consts.length})`);
  const out: Cell[] = [];
  for (let mask = 0; mask < 1 << consts.length; mask++) {
    out.push({ t: 'list', item, has: consts.filter((_, i) => mask & (1 << i)), hasNot: consts.filter((_, i) => !(mask & (1 << i))) });
  }
  return out;
}

// ---- who acts, and what is fixed by it -----------------------------------------------------

/** The kind of subject: an agent acting alone, a delegated agent with its person, a person acting directly. */
export type PrincipalKind = 'auto' | 'deleg' | 'user';

/** What a cell of subjects and objects fixes: example ids, and the patterns the ids keep to. */
export interface Principal {
  kind: PrincipalKind;
  subjectId: { witness: string; cons: StrConstraint[] };
  personId?: { witness: string; cons: StrConstraint[] };
  resourceType: { witness: string; cons: StrConstraint[] };
  resourceId: { witness: string; cons: StrConstraint[] };
  /** Objects `<kind>:<id>` cut out of the object cell: once the kind is known, the id keeps clear of them. */
  objectExceptions: { type: string; id: string }[];
  /** The action for an object of this kind (null: none of the cell's actions can apply to it). */
  actionFor: (kind: string) => string | null;
  /** An action of the cell, read by `action` paths where no action covers the object's example kind. */
  actionWitness?: string;
  /** Do the ids of a request lie in the cells? */
  check: (req: DecisionRequest) => boolean;
}

/** A path as the space sees it: for a person acting directly, `person.*` is `subject.*`. */
export function normalize(p: PathNode, kind: PrincipalKind): PathNode {
  if (kind === 'user' && p.root === 'person') return { type: 'path', root: 'subject', segs: p.segs };
  return { type: 'path', root: p.root, segs: p.segs };
}

type Status = 'free' | 'optionalString' | 'string' | 'list' | 'fixed' | 'time' | 'depth';

/** The depths a delegation chain can have (the pipeline refuses deeper ones). */
export const CHAIN_DEPTHS = [1, 2, 3, 4, 5];

export function statusOf(p: PathNode, kind: PrincipalKind): { status: Status; fixed?: { present: boolean; value?: unknown } } {
  if (p.root === 'context') return { status: 'free' };
  if (p.root === 'time') return { status: 'time' };
  const first = p.segs[0]!;
  const deep = p.segs.length > 1;
  if (p.root === 'resource') {
    if (first === 'id' || first === 'type') return deep ? { status: 'fixed', fixed: { present: false } } : { status: 'string' };
    return { status: 'free' };
  }
  if (p.root === 'person' && kind === 'auto') return { status: 'fixed', fixed: { present: false } };
  if (p.root === 'chain') {
    // Without a person there is no chain: depth 0, no agents. A delegated agent's chain is 1 to 5 deep.
    if ((first === 'depth' || first === 'agents') && deep) return { status: 'fixed', fixed: { present: false } };
    if (kind !== 'deleg') {
      if (first === 'depth') return { status: 'fixed', fixed: { present: true, value: 0 } };
      return first === 'agents' ? { status: 'fixed', fixed: { present: true, value: [] } } : { status: 'fixed', fixed: { present: false } };
    }
    if (first === 'depth') return { status: 'depth' };
    // The agents' ids: a list like roles, its cells by the ids the conditions name; built with the depth (see assemble).
    if (first === 'agents') return { status: 'list' };
    throw new SpaceTooLarge(`chain.${p.segs.join('.')}: the attributes of a delegation chain's agents are not part of the modelled request space; chain.depth and chain.agents are`);
  }
  const builtins = BUILTINS[p.root];
  if (!Object.hasOwn(builtins, first)) return { status: 'free' };
  if (deep) return { status: 'fixed', fixed: { present: false } };
  switch (first) {
    case 'id': return { status: 'string' };
    case 'roles': case 'groups': return { status: 'list' };
    case 'type': return { status: 'fixed', fixed: { present: true, value: kind === 'user' ? 'user' : 'agent' } };
    case 'mode': return kind === 'user' ? { status: 'fixed', fixed: { present: false } } : { status: 'fixed', fixed: { present: true, value: kind === 'deleg' ? 'delegated' : 'autonomous' } };
    default: return { status: 'optionalString' };
  }
}

/** `action`, `action.verb` or `action.kind` of the cell's action (the action for its object's kind). */
function actionFact(principal: Principal, p: PathNode): { present: boolean; value?: unknown } {
  const action = principal.actionFor(principal.resourceType.witness) ?? principal.actionWitness ?? null;
  const i = action === null ? -1 : action.indexOf(':');
  if (i < 0 || p.segs.length > 1) return { present: false };
  if (p.segs.length === 0) return { present: true, value: action };
  if (p.segs[0] === 'verb') return { present: true, value: action!.slice(0, i) };
  if (p.segs[0] === 'kind') return { present: true, value: action!.slice(i + 1) };
  return { present: false };
}

// ---- dimensions ------------------------------------------------------------------------------

export interface ValueDim {
  kind: 'value';
  /** The full path (`context.amount`, `time.hour@Europe/Berlin`). */
  key: string;
  path: PathNode;
  zone: string;
  status: Status;
  cells: Cell[];
  /** The type every set's schema declares for the path: a value of another type is compared with nothing. */
  declared?: ValueType;
}

export type RelKind = 'cmp' | 'member' | 'any' | 'all';
export type RelValue = 'lt' | 'eq' | 'gt' | 'ne' | 'yes' | 'no' | 'na';

export interface RelDim {
  kind: 'rel';
  key: string;
  rel: RelKind;
  /** cmp: the two values; member: the value and the list; any: the two lists; all: the list that holds, then the held. */
  a: string;
  b: string;
  ordering: boolean;
  values: RelValue[];
}

export interface GrantDim { kind: 'grant'; key: string; who: 'subject' | 'person'; values: boolean[] }

/**
 * Prior usage of one limit over time (a usage key, `count per 1h`), as the limits of either
 * set read it. A count: the usage itself, cut at `max - 1` of every maximum (an allow would
 * pass `max`). A sum: the usage plus the request's own amount, cut at every maximum; its
 * `missing` cell is a request whose amount is no number at or above zero (no sum, every
 * such limit denies). The amount's own cells are cut at 0 and at every maximum too, so that
 * which totals a request can reach (at least its amount) follows from its amount's cell.
 */
export interface UsageDim {
  kind: 'usage';
  /** `usage:<usage key>` */
  key: string;
  usageKey: string;
  usage: 'count' | 'sum';
  /** the summed context field (sums only) */
  field: string | null;
  cells: Cell[];
}

/** One usage key the limits read, with every maximum either set gives it. */
export interface UsageRead { key: string; kind: 'count' | 'sum'; field: string | null; maxes: number[] }

export type Dim = ValueDim | RelDim | GrantDim | UsageDim;

export interface Space {
  principal: Principal;
  dims: Dim[];
  /** Fixed facts of the principal that conditions read (`subject.type`, a person's absence). */
  fixed: Map<string, { present: boolean; value?: unknown }>;
  /** Time zone per time dimension, and the combinations of time cells that occur. */
  signatures: Map<string, number> | null;
  timeDims: number[];
  valueDims: Map<string, ValueDim>;
  /** A compiled reader per value dimension, for checking what `construct` built. */
  readers: Map<string, (env: ReturnType<typeof envOf>) => unknown>;
  /** No relation ties two values together (and no object id depends on the object's kind): each cell has one value of its own. */
  simple: boolean;
  /** A value dimension lies inside another (a presence test of an object and a path into it): what is built is checked. */
  nested: boolean;
  /** Per value dimension and cell, its representative (filled as needed). */
  reps: (Val | null)[][];
  plans?: RelPlan[];
  tied?: Set<string>;
}

interface Use {
  key: string;
  path: PathNode;
  zone: string;
  types: Set<ValueType>;
  nums: Set<number>;
  strs: Set<string>;
  likes: Set<string>;
  items: { number: Set<number>; string: Set<string>; boolean: Set<boolean> };
  /** A condition asks whether it is there at all (`has`): missing is a cell of its own. */
  presence?: boolean;
  /** The type every set declares for every path read here, '' where one does not, null before any. */
  declared: ValueType | '' | null;
}

/** The time zone a time path is read in, as part of its key (`time.epoch` has none). */
function useKey(p: PathNode, zone: string): string {
  const k = pathKey(p);
  return p.root === 'time' && p.segs[0] !== 'epoch' ? `${k}@${zone}` : k;
}

export interface Reading {
  atoms: { atom: Atom; zone: string }[];
  limits: LimitField[];
  roleNames: string[];
  groupNames: string[];
  /** Object kinds a permission of the action covers: where `resource.type` is read, they are cells of their own. */
  kindConstants?: string[];
  /** Limits over time: each usage key is a dimension (see UsageDim). */
  usage?: UsageRead[];
  /**
   * The schema-declared types of each set the space serves. A path every set declares with one
   * type (and no limit reads with another) has cells of that type only, as a built-in path has:
   * a value of another type cannot be compared in any of them (see declared.ts), so it lies
   * with the missing ones, and examples keep to the schema.
   */
  declared?: DeclaredTypes[];
}

/** The dimension key of a path read in a rule of this zone, for this kind of subject. */
export function keyOfPath(p: PathNode, zone: string, kind: PrincipalKind): string {
  return useKey(normalize(p, kind), zone);
}

/** The key of the relation dimension two paths share (as buildSpace names it). */
export function relKey(rel: RelKind, ka: string, kb: string): string {
  const [x, y] = rel === 'cmp' || rel === 'any' ? ([ka, kb].sort() as [string, string]) : [ka, kb];
  return `${rel}:${x}:${y}`;
}

function litType(v: unknown): ScalarType | null {
  const t = scalarTypeOf(v);
  return t;
}

/** The dimensions that decide every atom, limit and subject pattern read under one principal. */
export function buildSpace(reading: Reading, principal: Principal, grants: { subject: boolean; person: boolean }): Space {
  const kind = principal.kind;
  const uses = new Map<string, Use>();
  const fixed = new Map<string, { present: boolean; value?: unknown }>();
  const declaredSets = reading.declared ?? [];
  const declare = (u: Use, t: ValueType | '') => { u.declared = u.declared === null || u.declared === t ? t : ''; };
  const use = (p0: PathNode, zone: string): Use | null => {
    const p = normalize(p0, kind);
    const key = useKey(p, zone);
    // The action is fixed by the cell of actions and objects (diff cuts the actions at every constant they are compared with).
    if (p.root === 'action') { fixed.set(key, actionFact(principal, p)); return null; }
    const st = statusOf(p, kind);
    if (st.status === 'fixed') { fixed.set(key, st.fixed!); return null; }
    let u = uses.get(key);
    if (!u) {
      u = { key, path: p, zone, types: new Set(), nums: new Set(), strs: new Set(), likes: new Set(), items: { number: new Set(), string: new Set(), boolean: new Set() }, declared: null };
      uses.set(key, u);
    }
    if (!declaredSets.length) declare(u, '');
    for (const d of declaredSets) declare(u, schemaTypeOf(p0, d) ?? '');
    return u;
  };
  const addLit = (u: Use | null, v: unknown, asItem: boolean) => {
    if (!u) return;
    const t = litType(v);
    if (!t) return;
    if (asItem) { u.types.add(`[${t}]` as ValueType); (u.items[t] as Set<unknown>).add(v); return; }
    u.types.add(t);
    if (t === 'number') u.nums.add(v as number); else if (t === 'string') u.strs.add(v as string);
  };
  const rels = new Map<string, { rel: RelKind; a: string; b: string; ordering: boolean; equality: boolean }>();
  const addRel = (rel: RelKind, a: Use | null, b: Use | null, ordering: boolean, aKey?: string, bKey?: string) => {
    const ka = a?.key ?? aKey, kb = b?.key ?? bKey;
    if (!ka || !kb || ka === kb) return;
    // One dimension per pair: the first comparison written names the order of the two.
    const key = relKey(rel, ka, kb);
    const prev = rels.get(key);
    const equality = rel === 'cmp' && !ordering;
    if (prev) { prev.ordering ||= ordering; prev.equality ||= equality; }
    else rels.set(key, { rel, a: ka, b: kb, ordering, equality });
  };
  const keyOf = (p: PathNode, zone: string) => useKey(normalize(p, kind), zone);

  for (const { atom: a, zone } of reading.atoms) {
    const L = a.left.type === 'path' ? use(a.left, zone) : null;
    const R = a.right.type === 'path' ? use(a.right, zone) : null;
    const lk = a.left.type === 'path' ? keyOf(a.left, zone) : undefined;
    const rk = a.right.type === 'path' ? keyOf(a.right, zone) : undefined;
    switch (a.type) {
      case 'cmp': {
        const ordering = a.op !== 'eq' && a.op !== 'ne';
        if (a.left.type === 'path' && a.right.type === 'path') {
          if (ordering) { L?.types.add('number'); R?.types.add('number'); }
          addRel('cmp', L, R, ordering, lk, rk);
        } else {
          const u = L ?? R;
          const lit = a.left.type === 'lit' ? a.left.value : (a.right as { value: unknown }).value;
          if (ordering) { u?.types.add('number'); if (u && typeof lit === 'number') u.nums.add(lit); } else addLit(u, lit, false);
        }
        break;
      }
      case 'in':
        if (a.right.type === 'lit') { for (const v of a.right.value as Scalar[]) addLit(L, v, false); }
        else if (a.left.type === 'lit') addLit(R, a.left.value, true);
        else addRel('member', L, R, false, lk, rk);
        break;
      case 'contains':
        if (a.mode === 'one') {
          if (a.right.type === 'lit') addLit(L, a.right.value, true);
          else addRel('member', R, L, false, rk, lk);
        } else if (a.right.type === 'lit') {
          for (const v of a.right.value as Scalar[]) addLit(L, v, true);
        } else addRel(a.mode, L, R, false, lk, rk);
        break;
      case 'like':
        if (L) { L.types.add('string'); L.likes.add(String((a.right as { value: unknown }).value)); }
        break;
      case 'present':
        if (L) L.presence = true;
        break;
    }
  }
  for (const f of reading.limits) {
    const u = use({ type: 'path', root: 'context', segs: [f.field] }, 'UTC')!;
    // A limit reads the value as it is: its cells keep the limit's type, or it is no declared path.
    declare(u, limitType(f) ?? '');
    for (const op of ['max', 'min'] as const) if (typeof f[op] === 'number') { u.types.add('number'); u.nums.add(f[op] as number); }
    for (const op of ['in', 'not_in'] as const) if (Array.isArray(f[op])) for (const v of f[op] as Scalar[]) addLit(u, v, false);
    if (f.eq !== undefined) addLit(u, f.eq, false);
  }
  for (const r of reading.usage ?? []) {
    if (r.kind !== 'sum') continue;
    const u = use({ type: 'path', root: 'context', segs: [r.field!] }, 'UTC')!;
    declare(u, 'number');
    u.types.add('number');
    u.nums.add(0);
    for (const m of r.maxes) u.nums.add(m);
  }
  const typeUse = uses.get('resource.type');
  if (typeUse) for (const k of reading.kindConstants ?? []) typeUse.strs.add(k);
  const roots: Root[] = kind === 'deleg' ? ['subject', 'person'] : ['subject'];
  for (const r of roots) {
    if (reading.roleNames.length) { const u = use({ type: 'path', root: r, segs: ['roles'] }, 'UTC'); for (const n of reading.roleNames) addLit(u, n, true); }
    if (reading.groupNames.length) { const u = use({ type: 'path', root: r, segs: ['groups'] }, 'UTC'); for (const n of reading.groupNames) addLit(u, n, true); }
  }

  // Types flow through comparisons of two paths; a path with a known type keeps it.
  const builtinType = (u: Use): ValueType | null => {
    if (u.declared) return u.declared;
    if (u.path.root === 'time') return u.path.segs[0] === 'weekday' || u.path.segs[0] === 'date' ? 'string' : 'number';
    if (u.path.root === 'context' || u.path.segs.length > 1) return null;
    return (BUILTINS[u.path.root as Exclude<Root, 'context'>] as Record<string, ValueType>)[u.path.segs[0]!] ?? null;
  };
  for (const u of uses.values()) { const b = builtinType(u); if (b) u.types = new Set([b]); }
  const scalarOf = (u: Use) => [...u.types].filter((t) => !t.startsWith('['));
  const itemOf = (u: Use) => [...u.types].filter((t) => t.startsWith('[')).map((t) => t.slice(1, -1));
  for (let changed = true; changed;) {
    changed = false;
    const add = (u: Use | undefined, t: string) => { if (u && !builtinType(u) && !u.types.has(t as ValueType)) { u.types.add(t as ValueType); changed = true; } };
    for (const r of rels.values()) {
      const a = uses.get(r.a), b = uses.get(r.b);
      if (r.rel === 'cmp') {
        if (r.ordering) continue;
        for (const t of a ? scalarOf(a) : []) add(b, t);
        for (const t of b ? scalarOf(b) : []) add(a, t);
      } else if (r.rel === 'member') {
        for (const t of a ? scalarOf(a) : []) add(b, `[${t}]`);
        for (const t of b ? itemOf(b) : []) add(a, t);
      } else {
        for (const t of a ? itemOf(a) : []) add(b, `[${t}]`);
        for (const t of b ? itemOf(b) : []) add(a, `[${t}]`);
      }
    }
  }
  // `==`/`!=` of two values compares any two scalars of one type, not only the types their
  // constants name: two equal numbers where the conditions compare the values with strings are
  // equal, not mistyped; and where the pair is also ordered (numbers only: strings and booleans
  // err) two strings decide otherwise than two numbers. So both take cells of every scalar type
  // (unless one is built in, whose type fixes which pairs compare).
  for (const r of rels.values()) {
    if (r.rel !== 'cmp' || !r.equality) continue;
    const a = uses.get(r.a), b = uses.get(r.b);
    if (!a || !b || builtinType(a) || builtinType(b)) continue;
    for (const u of [a, b]) for (const t of SCALARS) u.types.add(t);
  }
  // Membership likewise: a value of any scalar type is compared with an empty list (which nothing
  // declares a type for, or a schema does in one version only), and with a list of its own type.
  // So the value takes cells of every scalar type and the list of every list type (unless built in).
  for (const r of rels.values()) {
    if (r.rel === 'cmp') continue;
    const a = uses.get(r.a), b = uses.get(r.b);
    if (a && !builtinType(a)) for (const t of SCALARS) a.types.add((r.rel === 'member' ? t : `[${t}]`) as ValueType);
    if (b && !builtinType(b)) for (const t of SCALARS) b.types.add(`[${t}]` as ValueType);
  }
  for (const r of rels.values()) {
    for (const [k, asList] of [[r.a, r.rel === 'any' || r.rel === 'all'], [r.b, r.rel !== 'cmp']] as const) {
      const u = uses.get(k);
      if (!u || u.types.size) continue;
      for (const t of SCALARS) u.types.add((asList ? `[${t}]` : t) as ValueType);
    }
  }

  // Value dimensions.
  const valueDims = new Map<string, ValueDim>();
  for (const u of [...uses.values()].sort((a, b) => a.key.localeCompare(b.key))) {
    const st = statusOf(u.path, kind).status;
    const cells: Cell[] = [];
    const scalars = scalarOf(u) as ScalarType[];
    const items = itemOf(u) as ScalarType[];
    if (st === 'depth') {
      // Exact: one cell per depth a chain can have.
      for (const n of CHAIN_DEPTHS) cells.push({ t: 'num', lo: n, hi: n, point: true });
    } else if (st === 'time') {
      if (scalars.includes('number')) cells.push(...numberCells(u.nums));
      else cells.push(...stringCells(u.strs, new Set()));
      cells.push({ t: 'missing' });
    } else {
      if (scalars.includes('number')) cells.push(...numberCells(u.nums));
      if (scalars.includes('string')) cells.push(...stringCells(u.strs, u.likes));
      if (scalars.includes('boolean')) cells.push({ t: 'bool', v: true }, { t: 'bool', v: false });
      if (items.length) cells.push({ t: 'empty' });
      for (const it of items) cells.push(...listCells(it, [...(u.items[it] as Set<Scalar>)].sort()));
      // Missing and mistyped fail every comparison alike, and every limit alike: one cell.
      if (st === 'free' && u.presence) cells.push({ t: 'missing' }, { t: 'other', types: [...u.types].sort() });
      else if (st === 'free') cells.push({ t: 'absent', types: [...u.types].sort() });
      if (st === 'optionalString') cells.push({ t: 'missing' });
    }
    valueDims.set(u.key, { kind: 'value', key: u.key, path: u.path, zone: u.zone, status: st, cells, ...(u.declared ? { declared: u.declared } : {}) });
  }

  const dims: Dim[] = [...valueDims.values()];
  for (const r of [...rels.values()].sort((x, y) => `${x.rel}${x.a}${x.b}`.localeCompare(`${y.rel}${y.a}${y.b}`))) {
    const values: RelValue[] = r.rel === 'cmp' ? (r.ordering ? ['lt', 'eq', 'gt', 'ne', 'na'] : ['eq', 'ne', 'na']) : ['yes', 'no', 'na'];
    dims.push({ kind: 'rel', key: relKey(r.rel, r.a, r.b), rel: r.rel, a: r.a, b: r.b, ordering: r.ordering, values });
  }
  for (const r of [...(reading.usage ?? [])].sort((x, y) => x.key.localeCompare(y.key))) {
    const cuts = new Set<number>([0, ...(r.kind === 'count' ? r.maxes.map((m) => m - 1) : r.maxes).filter((m) => m > 0)]);
    const cells: Cell[] = numberCells(cuts).filter((c) => c.t === 'num' && c.lo >= 0);
    if (r.kind === 'sum') cells.push({ t: 'missing' });
    dims.push({ kind: 'usage', key: 'usage:' + r.key, usageKey: r.key, usage: r.kind, field: r.field, cells });
  }
  if (grants.subject) dims.push({ kind: 'grant', key: 'grant:subject', who: 'subject', values: [true, false] });
  if (grants.person && kind === 'deleg') dims.push({ kind: 'grant', key: 'grant:person', who: 'person', values: [true, false] });

  const timeDims = dims.map((d, i) => (d.kind === 'value' && d.status === 'time' ? i : -1)).filter((i) => i >= 0);
  const readers = new Map([...valueDims.values()].map((d) => [d.key, compileReader(d.path, d.zone)]));
  // A chain's agents and its depth are built together: what is built is checked against both cells.
  const simple = !dims.some((d) => d.kind === 'rel') && !(valueDims.has('resource.id') && principal.objectExceptions.length > 0) && !valueDims.has('chain.agents');
  const keys = [...valueDims.keys()];
  // A value tested for presence and a path inside it (`resource.owner`, `resource.owner.tier`) are not independent.
  const nested = keys.some((k) => keys.some((o) => o.startsWith(k + '.')));
  const space: Space = { principal, dims, fixed, signatures: null, timeDims, valueDims, readers, simple, nested, reps: [] };
  if (timeDims.length) space.signatures = timeSignaturesOf(timeDims.map((i) => dims[i] as ValueDim));
  return space;
}

export function dimSize(d: Dim): number {
  return d.kind === 'value' || d.kind === 'usage' ? d.cells.length : d.values.length;
}

// ---- time --------------------------------------------------------------------------------------

const DAY = 86_400_000;
const SPAN = 16 * DAY;
/** A fortnight without daylight-saving changes anywhere north or south: every local hour of every weekday occurs in it. */
const BASE = Date.UTC(2026, 0, 5);

const YEAR = 366 * DAY;

/** How far a zone's wall clock is ahead of UTC at an instant, in minutes. */
function offsetOf(t: number, zone: string): number {
  const l = localTime(t, zone);
  const [y, m, d] = l.date.split('-').map(Number);
  return Math.round((Date.UTC(y!, m! - 1, d!, l.hour, l.minute) - Math.floor(t / 60_000) * 60_000) / 60_000);
}

/**
 * Two zones read together pair their local times by the offsets between them, and daylight
 * saving changes those offsets during the year (Berlin is UTC+1 in January, UTC+2 in July;
 * New York and Berlin change on different weeks). A year from `from` (within `to`) is
 * sampled every six hours; each set of offsets met there gets a window of its own, from a
 * day before it is first seen, so that every combination of the zones' local times is found.
 */
function offsetWindows(zones: string[], from: number, to: number, startScanned: boolean): [number, number][] {
  const out: [number, number][] = [];
  const seen = new Set<string>();
  const last = Math.min(from + YEAR, to);
  for (let t = from; t < last; t += DAY / 4) {
    const key = zones.map((z) => offsetOf(t, z)).join(',');
    if (seen.has(key)) continue;
    seen.add(key);
    if (seen.size === 1 && startScanned) continue; // the interval's own window scans the offsets at its start
    const start = Math.max(from, t - DAY);
    out.push([start, Math.min(start + SPAN, to)]);
  }
  return out;
}

function timeValue(d: ValueDim, t: number, local: (zone: string) => ReturnType<typeof localTime>): unknown {
  const f = d.path.segs[0]!;
  if (f === 'epoch') return Math.floor(t / 1000);
  return local(d.zone)[f as 'hour' | 'minute' | 'weekday' | 'date'];
}

/**
 * Scanning the clock is the slow part of building a space (a local time per instant
 * scanned), and a diff builds a space per cell of subjects, actions and objects, mostly
 * with the same time cells: the combinations are kept per set of time dimensions.
 */
const signatureCache = new Map<string, Map<string, number>>();

function timeSignaturesOf(dims: ValueDim[]): Map<string, number> {
  const key = JSON.stringify(dims.map((d) => [d.key, d.cells]));
  let sigs = signatureCache.get(key);
  if (!sigs) {
    sigs = timeSignatures(dims);
    if (signatureCache.size >= 200) signatureCache.clear();
    signatureCache.set(key, sigs);
  }
  return sigs;
}

function cellIndex(cells: Cell[], present: boolean, v: unknown): number {
  for (let i = 0; i < cells.length; i++) if (cellHolds(cells[i]!, present, v)) return i;
  return -1;
}

/**
 * Which combinations of time cells some instant has, each with the first instant found.
 * Cells change only at minute (or, without minutes, quarter-hour) boundaries and at epoch
 * constants, so scanning those boundaries around every constant finds every combination.
 */
function timeSignatures(dims: ValueDim[]): Map<string, number> {
  const out = new Map<string, number>();
  out.set(dims.map((d) => d.cells.length - 1).join(','), NaN); // no usable clock: every time value missing
  const epoch = dims.find((d) => d.path.segs[0] === 'epoch');
  const epochConsts = epoch ? epoch.cells.filter((c): c is Extract<Cell, { t: 'num' }> => c.t === 'num' && c.point).map((c) => c.lo) : [];
  const local = dims.filter((d) => d.path.segs[0] !== 'epoch');
  const step = local.some((d) => d.path.segs[0] === 'minute') ? 60_000 : 900_000;
  const zones = [...new Set(local.map((d) => d.zone))];
  const windows: [number, number][] = [];
  const points: number[] = [];
  const bounds = [-Infinity, ...epochConsts.sort((a, b) => a - b), Infinity];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const lo = bounds[i]!, hi = bounds[i + 1]!;
    const loMs = lo === -Infinity ? -Infinity : (lo + 1) * 1000, hiMs = hi === Infinity ? Infinity : hi * 1000;
    let start: number;
    if (loMs === -Infinity) start = hiMs === Infinity ? BASE : Math.min(BASE, hiMs - SPAN);
    else start = loMs;
    const end = Math.min(start + SPAN, hiMs);
    if (end > start) windows.push([start, end]);
    if (zones.length > 1) {
      const from = loMs === -Infinity ? Math.min(start, hiMs - YEAR) : start;
      windows.push(...offsetWindows(zones, from, hiMs, from === start));
    }
    if (i > 0) points.push(lo * 1000, lo * 1000 - 1000, lo * 1000 + 1000, lo * 1000 + 999);
  }
  for (const d of local) {
    if (d.path.segs[0] !== 'date') continue;
    for (const c of d.cells) if (c.t === 'str') { const day = Date.parse(c.v + 'T00:00:00Z'); if (Number.isFinite(day)) windows.push([day - 15 * 3_600_000, day + DAY + 15 * 3_600_000]); }
  }
  const record = (t: number) => {
    if (!Number.isFinite(t) || Math.abs(t) > 8.64e15) return;
    // one local time per zone for the instant, whichever dimensions read it
    const zones = new Map<string, ReturnType<typeof localTime>>();
    const local = (zone: string) => zones.get(zone) ?? zones.set(zone, localTime(t, zone)).get(zone)!;
    const key = dims.map((d) => cellIndex(d.cells, true, timeValue(d, t, local))).join(',');
    if (!key.split(',').includes('-1') && !out.has(key)) out.set(key, t);
  };
  for (const p of points) record(p);
  if (!local.length) { for (const [s] of windows) record(s); return out; }
  for (const [s, e] of windows) {
    record(s);
    for (let t = Math.ceil(s / step) * step; t < e; t += step) record(t);
  }
  return out;
}

// ---- building a request for a combination -------------------------------------------------------

export interface Val { present: boolean; value?: unknown }

export interface Built {
  request: DecisionRequest;
  values: Map<string, Val>;
}

class UnionFind {
  parent = new Map<string, string>();
  find(x: string): string {
    let p = this.parent.get(x) ?? x;
    if (p !== x) { p = this.find(p); this.parent.set(x, p); }
    return p;
  }
  union(a: string, b: string): void { const x = this.find(a), y = this.find(b); if (x !== y) this.parent.set(x, y); }
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

function strConstraints(c: Cell): StrConstraint[] {
  if (c.t === 'str') return [{ kind: 'exact', pattern: c.v, positive: true }];
  if (c.t !== 'strOther') return [];
  return [
    ...c.not.map((v) => ({ kind: 'exact' as const, pattern: v, positive: false })),
    ...c.like.map((p) => ({ kind: 'like' as const, pattern: p, positive: true })),
    ...c.notLike.map((p) => ({ kind: 'like' as const, pattern: p, positive: false })),
  ];
}

function scalarCategory(c: Cell): ScalarType | null {
  return c.t === 'num' ? 'number' : c.t === 'str' || c.t === 'strOther' ? 'string' : c.t === 'bool' ? 'boolean' : null;
}

/** The relation of two values, as `decide` would see it. */
export function relationOf(rel: RelKind, ordering: boolean, a: Val, b: Val): RelValue {
  if (!a.present || !b.present) return 'na';
  const x = a.value, y = b.value;
  if (rel === 'cmp') {
    const tx = scalarTypeOf(x);
    if (tx === null || tx !== scalarTypeOf(y)) return 'na';
    if (x === y) return 'eq';
    if (ordering && tx === 'number') return (x as number) < (y as number) ? 'lt' : 'gt';
    return 'ne';
  }
  if (rel === 'member') {
    const tx = scalarTypeOf(x);
    if (tx === null || !Array.isArray(y) || !y.every((i) => scalarTypeOf(i) === tx)) return 'na';
    return y.includes(x) ? 'yes' : 'no';
  }
  if (!Array.isArray(x) || !Array.isArray(y)) return 'na';
  let t: string | null = null;
  for (const i of [...x, ...y]) { const ti = scalarTypeOf(i); if (ti === null || (t !== null && ti !== t)) return 'na'; t = ti; }
  if (rel === 'any') return x.some((i) => y.includes(i)) ? 'yes' : 'no';
  return y.every((i) => x.includes(i)) ? 'yes' : 'no';
}

/** Put a value at a path inside an object, creating the objects on the way. */
function setIn(obj: Record<string, unknown>, segs: string[], v: unknown): void {
  // Own properties only: a path named `__proto__` or `constructor` is an attribute like any other.
  let cur = obj;
  for (let i = 0; i < segs.length - 1; i++) {
    const s = segs[i]!;
    const next = Object.hasOwn(cur, s) ? cur[s] : undefined;
    if (typeof next !== 'object' || next === null || Array.isArray(next)) setOwn(cur, s, {});
    cur = cur[s] as Record<string, unknown>;
  }
  setOwn(cur, segs[segs.length - 1]!, v);
}

const timeValuesCache = new WeakMap<Space, Map<string, Val[]>>();

/**
 * A request for one combination (an index per dimension), or null when no request has it.
 * Every request returned is checked: each of its values lies in the chosen cell and each
 * relation holds as chosen.
 */
export function construct(space: Space, point: number[]): Built | null {
  if (space.simple) return constructSimple(space, point);
  return constructGeneral(space, point);
}

/** The value of one cell of one dimension on its own (no relation ties it to another), or null when it has none. */
export function representative(space: Space, i: number, ci: number): Val | null {
  let reps = space.reps[i];
  if (!reps) reps = space.reps[i] = [];
  if (ci in reps) return reps[ci]!;
  const d = space.dims[i] as ValueDim;
  const c = d.cells[ci]!;
  const p = space.principal;
  const idCons = d.key === 'subject.id' ? p.subjectId : d.key === 'person.id' ? p.personId : d.key === 'resource.id' ? p.resourceId : d.key === 'resource.type' ? p.resourceType : undefined;
  let v: Val | null;
  switch (c.t) {
    case 'missing': case 'absent': v = { present: false }; break;
    case 'other': v = { present: true, value: otherValue(c.types) }; break;
    case 'num': v = { present: true, value: c.point ? c.lo : between(c.lo, c.hi) }; break;
    case 'bool': v = { present: true, value: c.v }; break;
    case 'str': case 'strOther': {
      const str = solveString([...strConstraints(c), ...(idCons?.cons ?? [])], idCons ? [idCons.witness] : ['other', 'example']);
      v = str === null ? null : { present: true, value: str };
      break;
    }
    case 'empty': v = { present: true, value: [] }; break;
    case 'list': {
      if (c.has.length) { v = { present: true, value: [...c.has] }; break; }
      if (c.item === 'boolean') { const b = [true, false].find((x) => !c.hasNot.includes(x)); v = b === undefined ? null : { present: true, value: [b] }; break; }
      let n = 1;
      const taken = new Set<unknown>(c.hasNot);
      while (taken.has(c.item === 'number' ? 1_000_000 + n : `item-${n}`)) n++;
      v = { present: true, value: [c.item === 'number' ? 1_000_000 + n : `item-${n}`] };
      break;
    }
  }
  if (v && !cellHolds(c, v.present, v.value)) v = null;
  reps[ci] = v;
  return v;
}

/**
 * The clock of a point: the instant of its combination of time cells (null when no instant
 * has that combination), with the time values read at that instant set in `vals`.
 */
function clockAt(space: Space, point: number[], vals: Map<string, Val>): number | null {
  if (!space.timeDims.length) return BASE;
  const { dims } = space;
  const key = space.timeDims.map((i) => point[i]).join(',');
  const t = space.signatures!.get(key);
  if (t === undefined) return null;
  let values = timeValuesCache.get(space);
  if (!values) timeValuesCache.set(space, (values = new Map()));
  let vs = values.get(key);
  if (!vs) {
    const local = (zone: string) => localTime(t, zone);
    vs = space.timeDims.map((i) => (Number.isNaN(t) ? { present: false } : { present: true, value: timeValue(dims[i] as ValueDim, t, local) }));
    values.set(key, vs);
  }
  space.timeDims.forEach((i, j) => vals.set((dims[i] as ValueDim).key, vs![j]!));
  return t;
}

/**
 * The request of a point once its values are chosen: the action for the object's kind, an
 * object id outside the excepted ones, the prior usage; null when the principal's cell does
 * not hold it.
 */
function requestAt(space: Space, point: number[], vals: Map<string, Val>, now: number, grantSubject: boolean, grantPerson: boolean): DecisionRequest | null {
  const { principal } = space;
  const kind = vals.get('resource.type')?.present ? (vals.get('resource.type')!.value as string) : principal.resourceType.witness;
  const action = principal.actionFor(kind);
  if (action === null) return null;
  if (!vals.has('resource.id') && principal.objectExceptions.some((e) => e.type === kind)) {
    const id = solveString([...principal.resourceId.cons, ...principal.objectExceptions.filter((e) => e.type === kind).map((e) => ({ kind: 'seg' as const, pattern: e.id, positive: false }))], [principal.resourceId.witness]);
    if (id === null) return null;
    vals.set('resource.id', { present: true, value: id });
  }
  const usage = usageFor(space, point, vals);
  if (usage === null) return null;
  const request = assemble(space, vals, now, grantSubject, grantPerson, action, usage);
  return principal.check(request) ? request : null;
}

/** Without relations between values, each value is its cell's own representative. */
function constructSimple(space: Space, point: number[]): Built | null {
  const { dims } = space;
  const vals = new Map<string, Val>(space.fixed);
  let grantSubject = true, grantPerson = true;
  const now = clockAt(space, point, vals);
  if (now === null) return null;
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i]!;
    if (d.kind === 'grant') { if (d.who === 'subject') grantSubject = d.values[point[i]!]!; else grantPerson = d.values[point[i]!]!; continue; }
    if (d.kind !== 'value') continue;
    if (d.status === 'time') continue;
    const v = representative(space, i, point[i]!);
    if (v === null) return null;
    vals.set(d.key, v);
  }
  const request = requestAt(space, point, vals, now, grantSubject, grantPerson);
  if (request === null) return null;
  if (space.nested) {
    const env = envOf(request);
    for (let i = 0; i < dims.length; i++) {
      const d = dims[i]!;
      if (d.kind !== 'value' || d.status === 'time') continue;
      const v = space.readers.get(d.key)!(env);
      if (!cellHolds(d.cells[point[i]!]!, v !== MISSING, v)) return null;
    }
  }
  return { request, values: vals };
}

type Category = ScalarType | 'empty' | `list:${ScalarType}` | null;

function cellCategory(c: Cell): Category {
  if (c.t === 'empty') return 'empty';
  if (c.t === 'list') return `list:${c.item}`;
  return scalarCategory(c);
}

function comparable(rel: RelKind, a: Category, b: Category): boolean {
  const scalar = (x: Category) => x === 'number' || x === 'string' || x === 'boolean';
  if (rel === 'cmp') return scalar(a) && a === b;
  if (rel === 'member') return scalar(a) && (b === 'empty' || b === `list:${a}`);
  const list = (x: Category) => x === 'empty' || (x !== null && x.startsWith('list:'));
  return list(a) && list(b) && (a === 'empty' || b === 'empty' || a === b);
}

interface RelPlan { ia: number; ib: number; fa: Category; fb: Category; d: RelDim; at: number }

function relPlans(space: Space): RelPlan[] {
  if (space.plans) return space.plans;
  const index = new Map<string, number>();
  space.dims.forEach((d, i) => { if (d.kind === 'value') index.set(d.key, i); });
  const fixedCat = (k: string): Category => { const f = space.fixed.get(k); return f?.present ? scalarTypeOf(f.value) : null; };
  space.plans = space.dims.flatMap((d, at) => (d.kind !== 'rel' ? [] : [{
    ia: index.get(d.a) ?? -1, ib: index.get(d.b) ?? -1, fa: fixedCat(d.a), fb: fixedCat(d.b), d, at,
  }]));
  return space.plans;
}

/**
 * Can some request have the cells chosen so far? A cheap test that says no to most impossible
 * choices early: the time cells must be a combination some instant has, and a relation between
 * two values comparable exactly when their cells say so.
 */
export function partialFeasible(space: Space, point: number[], chosen: Uint8Array): boolean {
  const td = space.timeDims;
  if (td.length && td.some((i) => chosen[i])) {
    let sigs = signatureArrays.get(space);
    if (!sigs) signatureArrays.set(space, (sigs = [...space.signatures!.keys()].map((k) => k.split(',').map(Number))));
    if (!sigs.some((sig) => td.every((i, j) => !chosen[i] || sig[j] === point[i]))) return false;
  }
  for (const p of relPlans(space)) {
    if (!chosen[p.at] || (p.ia >= 0 && !chosen[p.ia]) || (p.ib >= 0 && !chosen[p.ib])) continue;
    if (!relationFits(space, p, point)) return false;
  }
  for (const [at, ia] of totalPlans(space)) {
    if (!chosen[at] || !chosen[ia]) continue;
    if (!totalReachable((space.dims[at] as UsageDim).cells[point[at]!]!, (space.dims[ia] as ValueDim).cells[point[ia]!]!)) return false;
  }
  return true;
}

const totalPlanCache = new WeakMap<Space, [number, number][]>();

/** Each sum's total dimension with the dimension of the amount it adds. */
function totalPlans(space: Space): [number, number][] {
  let plans = totalPlanCache.get(space);
  if (!plans) {
    plans = [];
    for (let i = 0; i < space.dims.length; i++) {
      const d = space.dims[i]!;
      if (d.kind !== 'usage' || d.usage !== 'sum') continue;
      const ia = space.dims.findIndex((x) => x.kind === 'value' && x.key === 'context.' + d.field);
      if (ia >= 0) plans.push([i, ia]);
    }
    totalPlanCache.set(space, plans);
  }
  return plans;
}

const signatureArrays = new WeakMap<Space, number[][]>();

function relationFits(space: Space, p: RelPlan, point: number[]): boolean {
  if (p.ia >= 0 && (space.dims[p.ia] as ValueDim).status === 'time') return true;
  if (p.ib >= 0 && (space.dims[p.ib] as ValueDim).status === 'time') return true;
  const ca = p.ia >= 0 ? cellCategory((space.dims[p.ia] as ValueDim).cells[point[p.ia]!]!) : p.fa;
  const cb = p.ib >= 0 ? cellCategory((space.dims[p.ib] as ValueDim).cells[point[p.ib]!]!) : p.fb;
  const v = p.d.values[point[p.at]!]!;
  if (comparable(p.d.rel, ca, cb) !== (v !== 'na')) return false;
  if (p.d.rel === 'cmp' && v !== 'na') {
    if (ca === 'number' && p.d.ordering && v === 'ne') return false;
    if (ca !== 'number' && (v === 'lt' || v === 'gt')) return false;
  }
  return true;
}

/** Cheap refusals: a relation is comparable exactly when the cells of its two values say so. */
function quickCheck(space: Space, point: number[]): boolean {
  for (const p of relPlans(space)) if (!relationFits(space, p, point)) return false;
  return true;
}

/** The values a relation ties to another (and an object's id, when cut-out objects depend on its kind). */
function tiedKeys(space: Space): Set<string> {
  if (space.tied) return space.tied;
  const t = new Set<string>();
  for (const d of space.dims) if (d.kind === 'rel') { t.add(d.a); t.add(d.b); }
  if (space.principal.objectExceptions.length) { t.add('resource.id'); t.add('resource.type'); }
  return (space.tied = t);
}

function constructGeneral(space: Space, point: number[]): Built | null {
  if (!quickCheck(space, point)) return null;
  const { dims, principal } = space;
  const vals = new Map<string, Val>();
  for (const [k, v] of space.fixed) vals.set(k, v);
  const cellOf = new Map<string, Cell>();
  const rels: { d: RelDim; v: RelValue }[] = [];
  let grantSubject = true, grantPerson = true;
  const tied = tiedKeys(space);
  let lone = true;
  dims.forEach((d, i) => {
    if (d.kind === 'value' && d.status !== 'time' && !tied.has(d.key)) {
      const v = representative(space, i, point[i]!);
      if (v === null) lone = false; else vals.set(d.key, v);
    } else if (d.kind === 'value') cellOf.set(d.key, d.cells[point[i]!]!);
    else if (d.kind === 'rel') rels.push({ d, v: d.values[point[i]!]! });
    else if (d.kind === 'usage') return;
    else if (d.who === 'subject') grantSubject = d.values[point[i]!]!; else grantPerson = d.values[point[i]!]!;
  });
  if (!lone) return null;

  // The clock: the instant of the chosen combination of time cells.
  const now = clockAt(space, point, vals);
  if (now === null) return null;

  // Quick refusals: a relation that is comparable exactly when its cells say so.
  const category = (k: string): ScalarType | 'list' | 'empty' | null => {
    const c = cellOf.get(k);
    if (!c) { const f = vals.get(k); if (!f || !f.present) return null; const t = scalarTypeOf(f.value); return t; }
    if (c.t === 'empty') return 'empty';
    if (c.t === 'list') return 'list';
    return scalarCategory(c);
  };
  for (const { d, v } of rels) {
    const ca = category(d.a), cb = category(d.b);
    if (d.rel === 'cmp') {
      const comparable = ca !== null && ca === cb && ca !== 'list' && ca !== 'empty';
      if (comparable !== (v !== 'na')) return null;
      if (comparable && ca === 'number' && d.ordering && v === 'ne') return null;
      if (comparable && ca !== 'number' && (v === 'lt' || v === 'gt')) return null;
      if (!d.ordering && (v === 'lt' || v === 'gt')) return null;
    } else if (d.rel === 'member') {
      const item = cellOf.get(d.b)?.t === 'list' ? (cellOf.get(d.b) as { item: string }).item : null;
      const comparable = ca !== null && ca !== 'list' && ca !== 'empty' && (cb === 'empty' || (cb === 'list' && item === ca));
      if (comparable !== (v !== 'na')) return null;
    } else {
      const ia = cellOf.get(d.a)?.t === 'list' ? (cellOf.get(d.a) as { item: string }).item : null;
      const ib = cellOf.get(d.b)?.t === 'list' ? (cellOf.get(d.b) as { item: string }).item : null;
      const lists = (ca === 'list' || ca === 'empty') && (cb === 'list' || cb === 'empty');
      const comparable = lists && (ia === null || ib === null || ia === ib);
      if (comparable !== (v !== 'na')) return null;
    }
  }

  const strCons = (k: string): StrConstraint[] => {
    const c = cellOf.get(k);
    const out = c ? strConstraints(c) : [];
    if (k === 'subject.id') out.push(...principal.subjectId.cons);
    if (k === 'person.id' && principal.personId) out.push(...principal.personId.cons);
    if (k === 'resource.id') {
      out.push(...principal.resourceId.cons);
      const kind = vals.get('resource.type');
      const t = kind?.present ? kind.value : chosenType();
      for (const e of principal.objectExceptions) if (e.type === t) out.push({ kind: 'seg', pattern: e.id, positive: false });
    }
    if (k === 'resource.type') out.push(...principal.resourceType.cons);
    return out;
  };
  const witnessOf = (k: string): string[] => {
    if (k === 'subject.id') return [principal.subjectId.witness];
    if (k === 'person.id' && principal.personId) return [principal.personId.witness];
    if (k === 'resource.id') return [principal.resourceId.witness];
    if (k === 'resource.type') return [principal.resourceType.witness];
    return ['other', 'example'];
  };

  // Scalars joined by relations: equal ones share a value; then numbers are ordered, strings kept apart.
  const uf = new UnionFind();
  const chosenType = (): unknown => (chosen.has(uf.find('resource.type')) ? chosen.get(uf.find('resource.type')) : principal.resourceType.witness);
  const scalarKeys = new Set<string>();
  for (const [k, c] of cellOf) if (scalarCategory(c)) scalarKeys.add(k);
  for (const [k, v] of vals) if (v.present && scalarTypeOf(v.value)) scalarKeys.add(k);
  const cmpRels = rels.filter((r) => r.d.rel === 'cmp' && r.v !== 'na');
  for (const { d, v } of cmpRels) if (v === 'eq') uf.union(d.a, d.b);
  const classes = new Map<string, string[]>();
  for (const k of scalarKeys) { const r = uf.find(k); const l = classes.get(r); if (l) l.push(k); else classes.set(r, [k]); }
  const chosen = new Map<string, unknown>(); // class root → value

  for (const [root, members] of classes) {
    const cats = new Set(members.map((k) => category(k)));
    if (cats.size !== 1) return null;
    const cat = [...cats][0] as ScalarType;
    const fixedVals = members.map((k) => vals.get(k)).filter((v): v is Val => v !== undefined && v.present);
    if (new Set(fixedVals.map((v) => v.value)).size > 1) return null;
    if (cat === 'boolean') {
      const bs = new Set<unknown>([...fixedVals.map((v) => v.value), ...members.map((k) => cellOf.get(k)).filter((c) => c?.t === 'bool').map((c) => (c as { v: boolean }).v)]);
      if (bs.size > 1) return null;
      chosen.set(root, [...bs][0]);
    }
  }

  // Numbers: domains per class, < edges, != pairs tried both ways.
  const numClasses = [...classes.entries()].filter(([, m]) => category(m[0]!) === 'number');
  if (numClasses.length) {
    const dom = new Map<string, { lo: number; loOpen: boolean; hi: number; hiOpen: boolean }>();
    for (const [root, members] of numClasses) {
      let d = { lo: -Infinity, loOpen: true, hi: Infinity, hiOpen: true };
      const narrow = (lo: number, loOpen: boolean, hi: number, hiOpen: boolean) => {
        if (lo > d.lo || (lo === d.lo && loOpen && !d.loOpen)) d = { ...d, lo, loOpen };
        if (hi < d.hi || (hi === d.hi && hiOpen && !d.hiOpen)) d = { ...d, hi, hiOpen };
      };
      for (const k of members) {
        const c = cellOf.get(k);
        if (c?.t === 'num') narrow(c.lo, !c.point, c.hi, !c.point);
        const f = vals.get(k);
        if (f?.present) narrow(f.value as number, false, f.value as number, false);
      }
      if (d.lo > d.hi || (d.lo === d.hi && (d.loOpen || d.hiOpen))) return null;
      dom.set(root, d);
    }
    const edges: [string, string][] = [];
    const nes: [string, string][] = [];
    for (const { d, v } of cmpRels) {
      const a = uf.find(d.a), b = uf.find(d.b);
      if (category(d.a) !== 'number') continue;
      if (v === 'lt') edges.push([a, b]);
      else if (v === 'gt') edges.push([b, a]);
      else if (v === 'ne') nes.push([a, b]);
      else if (v === 'eq' && a !== b) return null;
      if ((v === 'lt' || v === 'gt' || v === 'ne') && a === b) return null;
    }
    let solved: Map<string, number> | null = null;
    for (let mask = 0; mask < 1 << nes.length && !solved; mask++) {
      const all = [...edges, ...nes.map(([a, b], i) => (mask & (1 << i) ? [b, a] : [a, b]) as [string, string])];
      solved = orderNumbers([...dom.keys()], dom, all);
    }
    if (!solved) return null;
    for (const [r, v] of solved) chosen.set(r, v);
  }

  // Strings: each class satisfies all its members' constraints; classes kept apart where a relation says !=.
  const strClasses = [...classes.entries()].filter(([, m]) => category(m[0]!) === 'string');
  if (strClasses.length) {
    const apart = new Map<string, Set<string>>();
    for (const { d, v } of cmpRels) {
      if (category(d.a) !== 'string') continue;
      const a = uf.find(d.a), b = uf.find(d.b);
      if (v === 'ne') { if (a === b) return null; (apart.get(a) ?? apart.set(a, new Set()).get(a)!).add(b); (apart.get(b) ?? apart.set(b, new Set()).get(b)!).add(a); }
    }
    const consOf = new Map<string, StrConstraint[]>();
    for (const [root, members] of strClasses) {
      const cons: StrConstraint[] = [];
      for (const k of members) {
        cons.push(...strCons(k));
        const f = vals.get(k);
        if (f?.present) cons.push({ kind: 'exact', pattern: f.value as string, positive: true });
      }
      consOf.set(root, cons);
    }
    // Classes pinned to one string first, so that the others can keep clear of them; an object's kind before its id.
    const pinned = (r: string) => Number(consOf.get(r)!.some((c) => c.kind === 'exact' && c.positive));
    const holdsId = (r: string) => Number(classes.get(r)!.includes('resource.id'));
    const order = strClasses.map(([r]) => r).sort((x, y) => holdsId(x) - holdsId(y) || pinned(y) - pinned(x));
    for (const root of order) {
      const cons = classes.get(root)!.includes('resource.id') ? [...classes.get(root)!.flatMap(strCons)] : [...consOf.get(root)!];
      for (const k of classes.get(root)!) { const f = vals.get(k); if (f?.present) cons.push({ kind: 'exact', pattern: f.value as string, positive: true }); }
      for (const o of apart.get(root) ?? []) if (chosen.has(o)) cons.push({ kind: 'exact', pattern: chosen.get(o) as string, positive: false });
      const members = classes.get(root)!;
      const s = solveString(cons, members.flatMap(witnessOf));
      if (s === null) return null;
      chosen.set(root, s);
    }
  }

  for (const [root, members] of classes) {
    for (const k of members) {
      if (vals.has(k)) continue;
      if (chosen.has(root)) { vals.set(k, { present: true, value: chosen.get(root) }); continue; }
      const c = cellOf.get(k)!;
      if (c.t === 'num') vals.set(k, { present: true, value: c.point ? c.lo : between(c.lo, c.hi) });
      else if (c.t === 'bool') vals.set(k, { present: true, value: c.v });
    }
  }

  // The rest of the value cells: missing, another type, and lists (built from the relations that fill them).
  const lists = new Map<string, unknown[]>();
  for (const [k, c] of cellOf) {
    if (vals.has(k)) continue;
    if (c.t === 'missing' || c.t === 'absent') vals.set(k, { present: false });
    else if (c.t === 'other') vals.set(k, { present: true, value: otherValue(c.types) });
    else if (c.t === 'empty') lists.set(k, []);
    else if (c.t === 'list') lists.set(k, [...c.has]);
    else return null;
  }
  const cellItem = (k: string): ScalarType => { const c = cellOf.get(k); return c?.t === 'list' ? c.item : 'string'; };
  const forbidden = (k: string): Scalar[] => { const c = cellOf.get(k); return c?.t === 'list' ? c.hasNot : []; };
  /** A new item for lists: never a constant, never another value; for booleans, one the lists allow. */
  const taken = new Set<unknown>();
  for (const c of cellOf.values()) {
    if (c.t === 'str') taken.add(c.v);
    if (c.t === 'strOther') c.not.forEach((x) => taken.add(x));
    if (c.t === 'num') { taken.add(c.lo); taken.add(c.hi); }
    if (c.t === 'list') [...c.has, ...c.hasNot].forEach((x) => taken.add(x));
  }
  for (const v of vals.values()) if (v.present) taken.add(v.value);
  let counter = 0;
  const fresh = (item: ScalarType, avoid: Scalar[], not: unknown[] = []): Scalar | undefined => {
    if (item === 'boolean') return [true, false].find((b) => !avoid.includes(b) && !not.includes(b));
    for (;;) {
      counter++;
      const v = item === 'number' ? 1_000_000 + counter : `item-${counter}`;
      if (!taken.has(v)) { taken.add(v); return v; }
    }
  };
  /**
   * What a list must not take: its cell's exclusions, a value it must not hold, the items of a
   * list it must not meet, and what a list that must hold all of its items must not take
   * (booleans have only two).
   */
  const avoidIn = (k: string, seen = new Set<string>()): Scalar[] => {
    seen.add(k);
    const out = [...forbidden(k)];
    for (const { d, v } of rels) {
      if (d.rel === 'member' && v === 'no' && d.b === k) { const x = vals.get(d.a); if (x?.present) out.push(x.value as Scalar); }
      if (d.rel === 'any' && v === 'no' && (d.a === k || d.b === k)) out.push(...((lists.get(d.a === k ? d.b : d.a) ?? []) as Scalar[]));
      if (d.rel === 'all' && v === 'yes' && d.b === k && !seen.has(d.a)) out.push(...avoidIn(d.a, seen));
    }
    return out;
  };
  // The relations fill the lists; a non-empty list still empty takes a fresh item, and the
  // relations run again, so that a list another must hold (contains all) holds it too.
  const fillEmpty = (): boolean | null => {
    let filled = false;
    for (const [k, l] of lists) {
      if (cellOf.get(k)?.t !== 'list' || l.length) continue;
      // A chain always holds the subject: the agent acting last is the item it needs.
      const subjectId = space.principal.subjectId.witness;
      if (k === 'chain.agents' && !forbidden(k).includes(subjectId)) { l.push(subjectId); filled = true; continue; }
      const f = fresh(cellItem(k), avoidIn(k));
      if (f === undefined) return null;
      l.push(f);
      filled = true;
    }
    return filled;
  };
  // What lists must hold goes in first (members, then what a list must hold whole, then shared
  // items), fresh items that keep two lists apart last: a fresh item then avoids what is there.
  const rank = ({ d, v }: { d: RelDim; v: RelValue }) => (d.rel === 'member' && v === 'yes' ? 0 : d.rel === 'all' && v === 'yes' ? 1 : d.rel === 'any' && v === 'yes' ? 2 : 3);
  const building = [...rels].sort((x, y) => rank(x) - rank(y));
  for (let pass = 0; pass < 4; pass++) {
    for (let round = 0, changed = true; changed && round < 20; round++) {
      changed = false;
      for (const { d, v } of building) {
        const a = lists.get(d.a), b = lists.get(d.b);
        if (d.rel === 'member' && v === 'yes') {
          const x = vals.get(d.a);
          if (b && x?.present && !b.includes(x.value)) { b.push(x.value); changed = true; }
        } else if (d.rel === 'any' && v === 'yes' && a && b && !a.some((i) => b.includes(i))) {
          const f = fresh(cellItem(d.a), [...avoidIn(d.a), ...avoidIn(d.b)]);
          if (f === undefined) return null;
          a.push(f); b.push(f);
          changed = true;
        } else if (d.rel === 'all' && v === 'yes' && a && b) {
          for (const i of b) if (!a.includes(i)) { a.push(i); changed = true; }
        } else if (d.rel === 'all' && v === 'no' && a && b && b.every((i) => a.includes(i))) {
          const f = fresh(cellItem(d.b), avoidIn(d.b), a);
          if (f === undefined) return null;
          b.push(f);
          changed = true;
        }
      }
    }
    const filled = fillEmpty();
    if (filled === null) return null;
    if (!filled) break;
  }
  for (const [k, l] of lists) vals.set(k, { present: true, value: l });

  const request = requestAt(space, point, vals, now, grantSubject, grantPerson);
  if (request === null) return null;
  // Check: every value in its cell, every relation as chosen.
  const env = envOf(request);
  const seen = new Map<string, Val>();
  const read = (k: string): Val => {
    let v = seen.get(k);
    if (!v) {
      const r = space.readers.get(k);
      const x = r ? r(env) : MISSING;
      v = x === MISSING ? { present: false } : { present: true, value: x };
      seen.set(k, v);
    }
    return v;
  };
  for (const [k, c] of cellOf) { const v = read(k); if (!cellHolds(c, v.present, v.value)) return null; }
  // A value of another type than its path's declared one relates to nothing (as missing).
  const typed = (k: string, x: Val): Val => {
    const t = space.valueDims.get(k)?.declared;
    return t && x.present && !fitsType(x.value, t) ? { present: false } : x;
  };
  for (const { d, v } of rels) {
    const a = space.valueDims.has(d.a) ? typed(d.a, read(d.a)) : (vals.get(d.a) ?? { present: false });
    const b = space.valueDims.has(d.b) ? typed(d.b, read(d.b)) : (vals.get(d.b) ?? { present: false });
    if (relationOf(d.rel, d.ordering, a, b) !== v) return null;
  }
  return { request, values: vals };
}

/** Earliest values on a grid, in an order that respects every `a < b` edge; null when the edges and domains cannot all hold. */
function orderNumbers(
  nodes: string[], dom: Map<string, { lo: number; loOpen: boolean; hi: number; hiOpen: boolean }>, edges: [string, string][],
): Map<string, number> | null {
  const indeg = new Map(nodes.map((n) => [n, 0]));
  const succ = new Map<string, string[]>(nodes.map((n) => [n, []]));
  for (const [a, b] of edges) { succ.get(a)!.push(b); indeg.set(b, indeg.get(b)! + 1); }
  const order: string[] = [];
  const ready = nodes.filter((n) => indeg.get(n) === 0);
  while (ready.length) {
    const n = ready.shift()!;
    order.push(n);
    for (const s of succ.get(n)!) { indeg.set(s, indeg.get(s)! - 1); if (indeg.get(s) === 0) ready.push(s); }
  }
  if (order.length !== nodes.length) return null;
  const marks = new Set<number>();
  for (const d of dom.values()) { if (Number.isFinite(d.lo)) marks.add(d.lo); if (Number.isFinite(d.hi)) marks.add(d.hi); }
  const sorted = [...marks].sort((a, b) => a - b);
  const k = nodes.length + 1;
  const grid: number[] = [...sorted];
  if (!sorted.length) for (let i = -k; i <= k; i++) grid.push(i);
  else {
    for (let i = 1; i <= k; i++) { grid.push(Math.floor(sorted[0]!) - i); grid.push(Math.ceil(sorted[sorted.length - 1]!) + i); }
    for (let j = 0; j + 1 < sorted.length; j++) {
      const a = sorted[j]!, b = sorted[j + 1]!;
      for (let i = 1; i <= k; i++) grid.push(a + ((b - a) * i) / (k + 1));
    }
  }
  grid.sort((a, b) => a - b);
  const preds = new Map<string, string[]>(nodes.map((n) => [n, []]));
  for (const [a, b] of edges) preds.get(b)!.push(a);
  const value = new Map<string, number>();
  for (const n of order) {
    const d = dom.get(n)!;
    const floor = Math.max(-Infinity, ...preds.get(n)!.map((p) => value.get(p)!));
    const v = grid.find((g) => g > floor && (d.loOpen ? g > d.lo : g >= d.lo) && (d.hiOpen ? g < d.hi : g <= d.hi));
    if (v === undefined) return null;
    value.set(n, v);
  }
  return value;
}

const partsCache = new Map<string, string[]>();

/** The values under each root, as nested objects: `resource.owner.team` → `{owner: {team}}`. */
function nestAll(vals: Map<string, Val>): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = { context: {}, subject: {}, person: {}, resource: {} };
  // Shorter paths first: a value tested only for presence (`resource has customer`) gives way to the
  // object its deeper paths build (`resource.customer.tier`), and stays there.
  const entries = [...vals].sort((a, b) => a[0].split('.').length - b[0].split('.').length);
  for (const [k, v] of entries) {
    if (!v.present) continue;
    let parts = partsCache.get(k);
    if (!parts) { parts = k.includes('@') ? [] : k.split('.'); if (partsCache.size > 10_000) partsCache.clear(); partsCache.set(k, parts); }
    const o = parts[0] !== undefined && Object.hasOwn(out, parts[0]) ? out[parts[0]] : undefined;
    if (o) setIn(o, parts.slice(1), v.value);
  }
  return out;
}

function assemble(space: Space, vals: Map<string, Val>, now: number, grantSubject: boolean, grantPerson: boolean, action: string, usage: UsageFacts | undefined): DecisionRequest {
  const p = space.principal;
  const get = (k: string) => vals.get(k);
  const str = (k: string, fallback: string) => { const v = get(k); return v?.present && typeof v.value === 'string' ? v.value : fallback; };
  const nested = nestAll(vals);
  const attrs = (root: 'subject' | 'person') => {
    const all = nested[root]!;
    for (const b in BUILTINS[root]) delete all[b];
    return all;
  };
  const listOr = (k: string) => { const v = get(k); return v?.present ? (v.value as string[]) : []; };
  const subject: SubjectFacts = {
    type: p.kind === 'user' ? 'user' : 'agent',
    id: str('subject.id', p.subjectId.witness),
    roles: listOr('subject.roles'),
    groups: listOr('subject.groups'),
    permissions: grantSubject ? [action] : [],
    attributes: attrs('subject'),
  };
  if (p.kind !== 'user') { subject.mode = p.kind === 'deleg' ? 'delegated' : 'autonomous'; subject.capabilities = [{ name: action }]; }
  for (const b of ['email', 'name'] as const) { const v = get('subject.' + b); if (v?.present) (subject as unknown as Record<string, unknown>)[b] = v.value; }
  const request: DecisionRequest = {
    subject,
    action,
    resource: `${str('resource.type', p.resourceType.witness)}:${str('resource.id', p.resourceId.witness)}`,
    context: nested.context!,
    now,
  };
  if (usage) request.usage = usage;
  const ra = nested.resource!;
  delete ra.id; delete ra.type;
  if (Object.keys(ra).length) request.resourceAttributes = ra;
  if (p.kind === 'deleg') {
    const person: PersonFacts = {
      id: str('person.id', p.personId!.witness),
      roles: listOr('person.roles'),
      groups: listOr('person.groups'),
      permissions: grantPerson ? [action] : [],
      attributes: attrs('person'),
    };
    const e = get('person.email');
    if (e?.present) person.email = e.value as string;
    request.person = person;
    // A chain of the depth chosen: the subject acting last, above it the agents the chosen list
    // of ids names (other than the subject), then agents standing in up to the depth. A list that
    // cannot fit the depth (or leaves out the subject) is caught by the check of what is built.
    const depth = get('chain.depth');
    const named = get('chain.agents');
    const ids = named?.present && Array.isArray(named.value) ? (named.value as unknown[]).filter((x): x is string => typeof x === 'string' && x !== subject.id) : [];
    const n = depth?.present && typeof depth.value === 'number' ? depth.value : ids.length + 1;
    if (n > 1 || ids.length) {
      const above = ids.map((id): SubjectFacts => ({ ...subject, id }));
      for (let i = above.length; i < n - 1; i++) above.push({ ...subject, id: `${subject.id}~above-${i + 1}` });
      request.chain = { agents: [...above, subject] };
    }
  }
  return request;
}

// ---- prior usage -----------------------------------------------------------------------------------

/** A value of a number cell: the point, or one strictly inside the interval. */
function numberIn(c: Extract<Cell, { t: 'num' }>): number {
  return c.point ? c.lo : between(c.lo, c.hi);
}

/** A request's amount that a sum can add: a finite number, not below zero. */
function summable(v: Val | undefined): v is { present: true; value: number } {
  return !!v && v.present && typeof v.value === 'number' && Number.isFinite(v.value) && v.value >= 0;
}

/** Could a request whose amount lies in `amount` reach a total in `total` (usage is never below zero)? */
export function totalReachable(total: Cell, amount: Cell): boolean {
  const valid = amount.t === 'num' && amount.lo >= 0;
  if (total.t === 'missing') return !valid;
  if (total.t !== 'num' || !valid) return false;
  // the total is at least the amount: the amount's cell must start below the total's cell's end
  return total.point ? amount.hi <= total.lo : amount.lo < total.hi;
}

/**
 * The prior usage of a combination, given the request's other values: a count's usage is its
 * cell's own value; a sum's usage is the total chosen less the amount (none when the amount is
 * no summable number). Null when no usage gives the combination.
 */
function usageFor(space: Space, point: number[], vals: Map<string, Val>): UsageFacts | undefined | null {
  let out: UsageFacts | undefined;
  for (let i = 0; i < space.dims.length; i++) {
    const d = space.dims[i]!;
    if (d.kind !== 'usage') continue;
    const c = d.cells[point[i]!]!;
    out ??= {};
    if (d.usage === 'count') { out[d.usageKey] = numberIn(c as Extract<Cell, { t: 'num' }>); continue; }
    const v = vals.get('context.' + d.field);
    if (c.t === 'missing') { if (summable(v)) return null; out[d.usageKey] = 0; continue; }
    if (c.t !== 'num' || !summable(v)) return null;
    const amount = v.value;
    let total: number;
    if (c.point) total = c.lo;
    else if (amount > c.lo && amount < c.hi) total = amount;
    else total = between(c.lo, c.hi);
    if (total < amount) return null;
    const used = total === amount ? 0 : Number((total - amount).toPrecision(15));
    const sum = addAmounts(used, amount);
    if (!(c.point ? sum === c.lo : sum > c.lo && sum < c.hi)) return null;
    out[d.usageKey] = used;
  }
  return out;
}

// ---- membership of a request in a combination (for regions) ------------------------------------

/** The value of a dimension in a request. */
export function valueIn(d: ValueDim, req: DecisionRequest): Val {
  const x = compileReader(d.path, d.zone)(envOf(req));
  return x === MISSING ? { present: false } : { present: true, value: x };
}

export function grantIn(req: DecisionRequest, who: 'subject' | 'person', singulars: Record<string, string>): boolean {
  const facts = who === 'subject' ? req.subject : req.person;
  const perms = facts && Array.isArray(facts.permissions) ? facts.permissions : [];
  return perms.some((p) => typeof p === 'string' && permissionCovers(p, req.action, req.resource, singulars));
}
