// The compiled checker: a relation model compiled once, against an index's symbols, into one
// closure per (type, relation); a check walks the relationships through them without building
// strings or objects (the state of a check is one reused record). Same semantics as the
// reference interpreter (reference.ts), which the property tests hold it to.
//
// list-objects expands backwards from the subject over the reverse index and the model
// (reverse.ts: unions and tuple-to-usersets settle an object without a check; what `and` and
// `but not` decide is evaluated, or confirmed by check). list-subjects walks forwards from the
// object and keeps the candidates that check confirms.
//
// A request is validated once, before any hop: the object's type and relation, the subject
// (its type, and a userset's relation, must be the model's), and each contextual relationship
// (one the model does not allow makes the whole request an error, as a write of it would be).
// A hop answers 0 false, 1 true, 2 error, or CYCLE: it met an (object, relation) already being
// resolved. A cycle is false in the end, but a `but not` with a cycle on either side is false
// too (not true, as plain false under the subtracted side would make it).

import type { RelExpr } from './ast.js';
import type { RelationModel, RelationDef } from './model.js';
import { disallowed, relationOf } from './model.js';
import { fmtRelExpr } from './format.js';
import { relationshipText } from './tuple.js';
import { NONE, OverlayIndex, relationshipOf, withName, type RelationshipIndex } from './index.js';
import { CYCLE, MAX_DEPTH, type Outcome } from './reference.js';
import { allowedAt, expandReverse, ReversePlan, type Confirmer, type Restriction } from './reverse.js';
import { parseObject, parseSubject, type Relationship, type SubjectRef } from './tuple.js';

export { MAX_DEPTH } from './reference.js';

export type RelationErrorCode = 'resolution_too_complex' | 'condition_error' | 'invalid_request' | 'invalid_relationship';

/** `missing`: for a condition error, the context parameter neither the relationship nor the request gives. */
export interface RelationError { code: RelationErrorCode; message: string; missing?: string }

export type CheckResult =
  | { allowed: true; path: Relationship[] }
  | { allowed: false; path: [] }
  | { error: RelationError };

export type ListResult<K extends string> = ({ [k in K]: string[] } & { error?: undefined }) | { error: RelationError };

export interface RelationOptions {
  /** The request's context (a relationship's stored context wins over it). */
  context?: Record<string, unknown>;
  /** Relationships that hold for this request only. */
  contextual?: Relationship[];
  /** Record the relationships that granted it (check only). */
  path?: boolean;
  /**
   * Listings only: leave out an object or subject whose check errs (the hop limit, a condition
   * that cannot be evaluated) instead of making the whole listing that error, as a decision
   * about it would deny it. The rest are still exactly what check allows.
   */
  omitErrors?: boolean;
}

const UNKNOWN = -2;
const EMPTY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;
const NO_PATH: [] = [] as [];
/** The answer of a check that holds and was not asked for its path (shared: a check allocates nothing). */
const ALLOWED: CheckResult = { allowed: true, path: NO_PATH };
/** A subject no relationship can name (its type is no type's name), so that a check of it reads every path. */
const NO_SUBJECT: SubjectRef = Object.freeze({ type: ' ', id: ' ', wildcard: false });

/** The state of one check, reused: who is asked about, and what went wrong. */
interface State {
  index: RelationshipIndex;
  ctx: Record<string, unknown>;
  /** The subject: its object's symbol (UNKNOWN when the index never saw it), userset relation (NONE for none), type, wildcard. */
  sObj: number;
  sRel: number;
  sType: number;
  sWild: boolean;
  /** For an entity subject, its type's wildcard `t:*` (a relationship to it grants the subject); UNKNOWN otherwise. */
  sWildSym: number;
  /** (object, relation) pairs being resolved, for cycles. */
  stack: number[];
  depth: number;
  path: Relationship[] | null;
  error: { message: string; missing?: string } | null;
  tooComplex: boolean;
}

type RelFn = (st: State, o: number, depth: number) => Outcome;

/** The wildcard symbol that grants an entity subject of a type; UNKNOWN for a wildcard or userset subject, or when there is none. */
function wildcardFor(index: RelationshipIndex, typeSym: number, notEntity: boolean): number {
  if (notEntity || typeSym < 0) return UNKNOWN;
  const w = index.wildcardOf(typeSym);
  return w === NONE ? UNKNOWN : w;
}


export class RelationChecker {
  /** type symbol → relation symbol → the relation's closure (arrays: a hop reads two cells). */
  private readonly fns: ((RelFn | undefined)[] | undefined)[] = [];
  private readonly st: State;
  private busy = false;
  /** The model read for list-objects' reverse expansion (made on the first listing). */
  private plan: ReversePlan | null = null;
  /** The state of the checks a listing makes for its subject (beside `st`, which a listing never holds). */
  private readonly listState: State;
  /** Compiled parts of definitions (what a `but not` subtracts), for a listing's gates. */
  private readonly parts = new Map<RelExpr, RelFn>();
  /** The model's relation names' symbols (a small map: the index's holds every object). */
  private readonly relationSyms = new Map<string, number>();
  private lastSubject = '';
  private lastSubjectSym = NONE;
  /** The error of a listing's last check that erred. */
  private listError: RelationError | null = null;
  /**
   * `type#relation` whose computed relations alone (no relationship needed) may reach the hop
   * limit, or loop: on an object nothing is stored on, these are walked rather than answered false.
   */
  private readonly deepAlone = new Set<string>();

  constructor(readonly model: RelationModel, readonly index: RelationshipIndex) {
    this.st = { index, ctx: EMPTY, sObj: UNKNOWN, sRel: NONE, sType: UNKNOWN, sWild: false, sWildSym: UNKNOWN, stack: [], depth: 0, path: null, error: null, tooComplex: false };
    for (const t of model.types.values()) {
      const ts = index.intern(t.name);
      const m: (RelFn | undefined)[] = [];
      this.fns[ts] = m;
      for (const r of t.relations.values()) {
        const rs = index.intern(r.name);
        this.relationSyms.set(r.name, rs);
        m[rs] = this.compileRelation(r);
      }
    }
    this.listState = { ...this.st, stack: [] };
    this.findDeepAlone();
  }

  /** The longest chain of computed relations from each relation (a loop counts as endless). */
  private findDeepAlone(): void {
    const longest = new Map<string, number>();
    const visiting = new Set<string>();
    const chain = (type: string, rel: string): number => {
      const k = `${type}#${rel}`;
      const known = longest.get(k);
      if (known !== undefined) return known;
      if (visiting.has(k)) return Infinity;
      visiting.add(k);
      const def = relationOf(this.model, type, rel);
      const of = (e: RelExpr): number => {
        switch (e.op) {
          case 'computed': return 1 + chain(type, e.relation);
          case 'union': case 'intersection': return Math.max(0, ...e.items.map(of));
          case 'exclusion': return Math.max(of(e.base), of(e.subtract));
          default: return 0;
        }
      };
      const n = def ? of(def.expr) : 0;
      visiting.delete(k);
      longest.set(k, n);
      return n;
    };
    for (const t of this.model.types.values()) for (const r of t.relations.values()) {
      if (chain(t.name, r.name) >= MAX_DEPTH) this.deepAlone.add(`${t.name}#${r.name}`);
    }
  }

  // ---- compiling ---------------------------------------------------------------------------

  private restrictions(def: RelationDef): Restriction[] {
    const ix = this.index;
    return def.direct.map((r) => ({ type: ix.intern(r.type), relation: r.relation !== undefined ? ix.intern(r.relation) : NONE, wildcard: r.wildcard === true, condition: r.condition }));
  }

  private compileRelation(def: RelationDef): RelFn {
    return this.compileExpr(def, def.expr);
  }

  private compileExpr(def: RelationDef, e: RelExpr): RelFn {
    switch (e.op) {
      case 'direct': return this.compileDirect(def);
      case 'computed': {
        const rel = this.index.intern(e.relation);
        return (st, o, depth) => this.dispatch(st, o, rel, depth + 1);
      }
      case 'ttu': return this.compileTtu(def, e.relation, e.tupleset);
      case 'union': {
        const parts = e.items.map((i) => this.compileExpr(def, i));
        return (st, o, depth) => {
          let err = false, cycle = false;
          for (let i = 0; i < parts.length; i++) {
            const mark = st.path ? st.path.length : 0;
            const r = parts[i]!(st, o, depth);
            if (r === 1) return 1;
            if (st.path) st.path.length = mark;
            if (r === 2) err = true;
            else if (r === CYCLE) cycle = true;
          }
          return err ? 2 : cycle ? CYCLE : 0;
        };
      }
      case 'intersection': {
        const parts = e.items.map((i) => this.compileExpr(def, i));
        return (st, o, depth) => {
          const mark = st.path ? st.path.length : 0;
          let err = false, cycle = false;
          for (let i = 0; i < parts.length; i++) {
            const r = parts[i]!(st, o, depth);
            if (r === 0) { if (st.path) st.path.length = mark; return 0; }
            if (r === 2) err = true;
            else if (r === CYCLE) cycle = true;
          }
          if (err || cycle) { if (st.path) st.path.length = mark; return err ? 2 : CYCLE; }
          return 1;
        };
      }
      case 'exclusion': {
        const base = this.compileExpr(def, e.base), sub = this.compileExpr(def, e.subtract);
        return (st, o, depth) => {
          const mark = st.path ? st.path.length : 0;
          const b = base(st, o, depth);
          if (b === 0) { if (st.path) st.path.length = mark; return 0; }
          const m2 = st.path ? st.path.length : 0;
          const x = sub(st, o, depth);
          // What the subtracted part found is no part of what granted it.
          if (st.path) st.path.length = m2;
          if (x === 1 || b !== 1 || x !== 0) {
            if (st.path) st.path.length = mark;
            return x === 1 ? 0 : b === CYCLE || x === CYCLE ? CYCLE : 2;
          }
          return 1;
        };
      }
    }
  }

  /** 1 when the relationship's condition holds (or it has none), 0 when not, 2 when it cannot be evaluated. */
  private conditionHolds(st: State, c: number): Outcome {
    if (c === NONE) return 1;
    const stored = st.index.condition(c);
    const cond = this.model.conditions.get(stored.name);
    if (!cond) return 0;
    const r = cond.evaluate(stored.context, st.ctx);
    if (r.ok) return r.value ? 1 : 0;
    st.error ??= r.missing !== undefined ? { message: r.error, missing: r.missing } : { message: r.error };
    return 2;
  }

  private compileDirect(def: RelationDef): RelFn {
    const rs = this.restrictions(def);
    const rel = this.index.intern(def.name);
    return (st, o, depth) => {
      const list = st.index.subjects(rel, o);
      if (list === undefined) return 0;
      let err = false, cycle = false;
      for (let i = 0; i < list.length; i += 3) {
        const so = list[i]!, sr = list[i + 1]!;
        // A relationship to another entity is not read at all (its condition is not evaluated).
        if (sr === NONE && !(st.sRel === NONE && (so === st.sObj || so === st.sWildSym))) continue;
        if (!allowedAt(st.index, rs, list, i)) continue;
        const c = this.conditionHolds(st, list[i + 2]!);
        if (c !== 1) { if (c === 2) err = true; continue; }
        if (sr === NONE || (so === st.sObj && sr === st.sRel)) {
          if (st.path) st.path.push(relationshipOf(st.index, rel, o, list, i));
          return 1;
        }
        const mark = st.path ? st.path.length : 0;
        if (st.path) st.path.push(relationshipOf(st.index, rel, o, list, i));
        const r = this.dispatch(st, so, sr, depth + 1);
        if (r === 1) return 1;
        if (st.path) st.path.length = mark;
        if (r === 2) err = true;
        else if (r === CYCLE) cycle = true;
      }
      return err ? 2 : cycle ? CYCLE : 0;
    };
  }

  private compileTtu(def: RelationDef, relation: string, tupleset: string): RelFn {
    const tsDef = relationOf(this.model, def.type, tupleset)!;
    const rs = this.restrictions(tsDef);
    const ts = this.index.intern(tupleset), rel = this.index.intern(relation);
    return (st, o, depth) => {
      const list = st.index.subjects(ts, o);
      if (list === undefined) return 0;
      let err = false, cycle = false;
      for (let i = 0; i < list.length; i += 3) {
        if (!allowedAt(st.index, rs, list, i)) continue;
        const c = this.conditionHolds(st, list[i + 2]!);
        if (c !== 1) { if (c === 2) err = true; continue; }
        const mark = st.path ? st.path.length : 0;
        if (st.path) st.path.push(relationshipOf(st.index, ts, o, list, i));
        const r = this.dispatch(st, list[i]!, rel, depth + 1);
        if (r === 1) return 1;
        if (st.path) st.path.length = mark;
        if (r === 2) err = true;
        else if (r === CYCLE) cycle = true;
      }
      return err ? 2 : cycle ? CYCLE : 0;
    };
  }

  /**
   * check(o, rel) for the subject of the state: the self userset, the hop limit (the request's
   * node is depth 0; a node at depth MAX_DEPTH is one hop too many), the definition, cycles.
   */
  private dispatch(st: State, o: number, rel: number, depth: number): Outcome {
    if (st.sRel === rel && st.sObj === o) return 1;
    if (depth >= MAX_DEPTH) { st.tooComplex = true; return 2; }
    const t = st.index.typeOf(o);
    const byRel = t < 0 ? undefined : this.fns[t];
    const fn = byRel === undefined ? undefined : byRel[rel];
    if (fn === undefined) return 0;
    const stack = st.stack;
    const n = st.depth;
    for (let i = 0; i < n; i += 2) if (stack[i] === o && stack[i + 1] === rel) return CYCLE;
    stack[n] = o; stack[n + 1] = rel;
    st.depth = n + 2;
    const r = fn(st, o, depth);
    st.depth = n;
    return r;
  }

  // ---- asking --------------------------------------------------------------------------------

  /**
   * The index of a request: this checker's, or an overlay with the request's contextual
   * relationships, each of which the model must allow (else the request is an error naming it).
   */
  private indexFor(opts: RelationOptions | undefined): RelationshipIndex | RelationError {
    const extra = opts?.contextual;
    if (!extra?.length) return this.index;
    for (const r of extra) {
      const why = disallowed(this.model, r);
      if (why) return { code: 'invalid_relationship', message: `contextual relationship ${relationshipText(r)}: ${why}` };
    }
    return new OverlayIndex(this.index, extra);
  }

  /** Is the request's subject one the model knows (its type, a userset's relation)? An error message when not. */
  private unknownSubject(subject: string, s: SubjectRef): string | null {
    const t = this.model.types.get(s.type);
    if (!t) return `subject ${subject}: unknown type ${s.type}`;
    if (s.relation !== undefined && !t.relations.has(s.relation)) return `subject ${subject}: type ${s.type} has no relation ${s.relation}`;
    return null;
  }

  /** Is the relation of a type known? An error message when not. */
  private unknown(type: string, relation: string): string | null {
    const t = this.model.types.get(type);
    if (!t) return `unknown type ${type}`;
    if (!t.relations.has(relation)) return `type ${type} has no relation ${relation}`;
    return null;
  }

  private begin(index: RelationshipIndex, s: SubjectRef, opts: RelationOptions | undefined): State {
    // A check that re-enters (a condition cannot, but be safe) gets its own state.
    const st: State = this.busy ? { ...this.st, stack: [] } : this.st;
    st.index = index;
    st.ctx = opts?.context ?? EMPTY;
    const obj = index.lookup(s.wildcard ? `${s.type}:*` : `${s.type}:${s.id}`);
    st.sObj = obj === NONE ? UNKNOWN : obj;
    if (s.relation !== undefined) {
      const r = index.lookup(s.relation);
      st.sRel = r === NONE ? UNKNOWN : r;
    } else st.sRel = NONE;
    const t = index.lookup(s.type);
    st.sType = t === NONE ? UNKNOWN : t;
    st.sWild = s.wildcard;
    st.sWildSym = wildcardFor(index, st.sType, s.wildcard || s.relation !== undefined);
    st.depth = 0;
    st.path = opts?.path ? [] : null;
    st.error = null;
    st.tooComplex = false;
    return st;
  }

  private errorOf(st: State): RelationError {
    return st.tooComplex
      ? { code: 'resolution_too_complex', message: `resolving the relation needs more than ${MAX_DEPTH} hops (the relation asked is the first; each relation, userset or tupleset followed is one more)` }
      : { code: 'condition_error', message: st.error?.message ?? 'a condition could not be evaluated', ...(st.error?.missing !== undefined ? { missing: st.error.missing } : {}) };
  }

  /** The answer for one (object, relation, subject) on an index; the object and relation known to the model. */
  private checkOn(index: RelationshipIndex, object: string, relation: string, s: SubjectRef, opts: RelationOptions | undefined): CheckResult {
    const o = index.lookup(object);
    const rel = index.lookup(relation);
    if (o === NONE || rel === NONE) {
      // Nothing is stored on this object: only the subject's own userset can hold (`group:x#member`
      // is a member of group:x), or a chain of computed relations long enough to pass the hop limit.
      const self = s.relation !== undefined && `${s.type}:${s.id}` === object;
      if (!self && !this.deepAlone.has(`${object.slice(0, object.indexOf(':'))}#${relation}`)) return { allowed: false, path: NO_PATH };
      if (o !== NONE) return { allowed: false, path: NO_PATH };
      return this.checkOn(withName(index, object), object, relation, s, opts);
    }
    const reentrant = this.busy;
    const st = this.begin(index, s, opts);
    this.busy = true;
    try {
      const r = this.dispatch(st, o, rel, 0);
      if (r === 1) return st.path ? { allowed: true, path: st.path } : ALLOWED;
      if (r === 2) return { error: this.errorOf(st) };
      return { allowed: false, path: NO_PATH };
    } finally {
      this.busy = reentrant;
      st.path = null;
    }
  }

  /**
   * The common case without parsing: object and subject (an entity or a wildcard) are symbols of
   * the index and the relation is the object type's. Null to take the general path.
   */
  private fastCheck(object: string, relation: string, subject: string, opts: RelationOptions | undefined): CheckResult | null {
    const index = this.index;
    const o = index.lookup(object);
    // A symbol, once made, names its string for good: the last subject's is kept (a run of checks asks for one subject).
    let sObj = this.lastSubjectSym;
    if (subject !== this.lastSubject) {
      sObj = index.lookup(subject);
      if (sObj !== NONE) { this.lastSubject = subject; this.lastSubjectSym = sObj; }
    }
    if (o === NONE || sObj === NONE) return null;
    const sType = index.typeOf(sObj), oType = index.typeOf(o);
    // A subject whose type is not the model's takes the general path, which reports it.
    if (sType === NONE || oType === NONE || index.isWildcard(o) || this.fns[sType] === undefined) return null;
    const byRel = this.fns[oType];
    const rel = this.relationSyms.get(relation) ?? NONE;
    if (byRel === undefined || rel === NONE || byRel[rel] === undefined) return null;
    const reentrant = this.busy;
    const st: State = reentrant ? { ...this.st, stack: [] } : this.st;
    st.index = index;
    st.ctx = opts?.context ?? EMPTY;
    st.sObj = sObj; st.sRel = NONE; st.sType = sType; st.sWild = index.isWildcard(sObj);
    st.sWildSym = wildcardFor(index, sType, st.sWild);
    st.depth = 0;
    st.path = opts?.path ? [] : null;
    st.error = null;
    st.tooComplex = false;
    this.busy = true;
    try {
      const r = this.dispatch(st, o, rel, 0);
      if (r === 1) return st.path ? { allowed: true, path: st.path } : ALLOWED;
      if (r === 2) return { error: this.errorOf(st) };
      return { allowed: false, path: NO_PATH };
    } finally {
      this.busy = reentrant;
      st.path = null;
    }
  }

  /** Does the subject (an entity, a userset `t:id#rel` or a wildcard `t:*`) hold the relation on the object? */
  check(object: string, relation: string, subject: string, opts?: RelationOptions): CheckResult {
    if (!opts?.contextual?.length) {
      const fast = this.fastCheck(object, relation, subject, opts);
      if (fast !== null) return fast;
    }
    const o = parseObject(object);
    if (typeof o === 'string') return { error: { code: 'invalid_request', message: o } };
    const bad = this.unknown(o.type, relation);
    if (bad) return { error: { code: 'invalid_request', message: bad } };
    const s = parseSubject(subject);
    if (typeof s === 'string') return { error: { code: 'invalid_request', message: s } };
    const badSubject = this.unknownSubject(subject, s);
    if (badSubject) return { error: { code: 'invalid_request', message: badSubject } };
    const index = this.indexFor(opts);
    if ('code' in index) return { error: index };
    return this.checkOn(index, object, relation, s, opts);
  }

  /**
   * Why the subject does not hold the relation, in words, for explain: a `but not` that removes
   * what the base grants (with both paths), a part of an `and` it lacks, or that nothing grants it.
   */
  whyNot(object: string, relation: string, subject: string, opts?: RelationOptions): string {
    const none = `no relationship grants ${subject} ${relation} on ${object}`;
    const o = parseObject(object), s = parseSubject(subject);
    if (typeof o === 'string' || typeof s === 'string') return none;
    const def = relationOf(this.model, o.type, relation);
    const index = this.indexFor(opts);
    if ('code' in index) return index.message;
    const os = index.lookup(object), rel = index.lookup(relation);
    if (!def || os === NONE || rel === NONE || this.busy) return none;
    const run = (e: RelExpr): { r: Outcome; path: string[] } => {
      const st = this.begin(index, s, { ...opts, path: true });
      this.busy = true;
      try {
        st.stack[0] = os; st.stack[1] = rel; st.depth = 2;
        const r = this.compileExpr(def, e)(st, os, 0);
        return { r, path: (st.path ?? []).map(relationshipText) };
      } finally { this.busy = false; st.path = null; }
    };
    const e = def.expr;
    if (e.op === 'exclusion') {
      const base = run(e.base), sub = run(e.subtract);
      if (base.r === 1 && sub.r === 1) {
        return `${relation} would hold through ${base.path.join(' → ') || 'its own userset'}, but "but not ${fmtRelExpr(e.subtract)}" removes it: ${sub.path.join(' → ')}`;
      }
    }
    if (e.op === 'intersection') {
      for (const item of e.items) if (run(item).r === 0 || run(item).r === CYCLE) return `${relation} needs "${fmtRelExpr(item)}" too, which ${subject} does not hold on ${object}`;
    }
    return none;
  }

  /** A fast yes/no for decisions: true only when allowed (an error is not allowed; `checkResult` tells them apart). */
  holds(object: string, relation: string, subject: string, context?: Record<string, unknown>): boolean {
    const r = this.check(object, relation, subject, context ? { context } : undefined);
    return 'allowed' in r && r.allowed;
  }

  /**
   * Every object of `type` on which the subject holds the relation, each once (sorted), by
   * reverse expansion from the subject (reverse.ts); exactly the objects check allows.
   */
  listObjects(subject: string, relation: string, type: string, opts?: RelationOptions): ListResult<'objects'> {
    const bad = this.unknown(type, relation);
    if (bad) return { error: { code: 'invalid_request', message: bad } };
    const s = parseSubject(subject);
    if (typeof s === 'string') return { error: { code: 'invalid_request', message: s } };
    const badSubject = this.unknownSubject(subject, s);
    if (badSubject) return { error: { code: 'invalid_request', message: badSubject } };
    const overlay = this.indexFor(opts);
    if ('code' in overlay) return { error: overlay };
    let index = overlay;
    // A userset holds its own relation even on an object nothing is stored on: give that object a symbol.
    if (s.relation !== undefined && index.lookup(`${s.type}:${s.id}`) === NONE) index = withName(index, `${s.type}:${s.id}`);
    const plan = (this.plan ??= new ReversePlan(this.model, this.index));
    const target = plan.kindOf(index.lookup(type), index.lookup(relation));
    const st = this.listState;
    st.index = index;
    st.ctx = opts?.context ?? EMPTY;
    const sObj = index.lookup(s.wildcard ? `${s.type}:*` : `${s.type}:${s.id}`);
    st.sObj = sObj === NONE ? UNKNOWN : sObj;
    const sRel = s.relation !== undefined ? index.lookup(s.relation) : NONE;
    st.sRel = s.relation !== undefined && sRel === NONE ? UNKNOWN : sRel;
    st.sType = index.lookup(s.type);
    st.sWild = s.wildcard;
    st.sWildSym = wildcardFor(index, st.sType, s.wildcard || s.relation !== undefined);
    this.listError = null;
    const reset = () => { st.depth = 0; st.path = null; st.error = null; st.tooComplex = false; };
    const confirm: Confirmer = {
      check: (o, kind) => {
        reset();
        const r = this.dispatch(st, o, kind.relSym, 0);
        if (r === 2) { this.listError ??= this.errorOf(st); return 2; }
        return r === 1 ? 1 : 0;
      },
      atTop: (o, kind, e) => {
        let fn = this.parts.get(e);
        if (!fn) this.parts.set(e, (fn = this.compileExpr(kind.def, e)));
        reset();
        st.stack[0] = o; st.stack[1] = kind.relSym; st.depth = 2;
        const r = fn(st, o, 0);
        st.depth = 0;
        return r;
      },
      condition: (c) => this.conditionHolds(st, c),
      omitErrors: opts?.omitErrors === true,
    };
    const found = expandReverse(plan, index, { obj: st.sObj, typeSym: st.sType, wildcard: s.wildcard, ...(s.relation !== undefined ? { relation: s.relation, relSym: st.sRel } : {}) }, target, confirm);
    st.ctx = EMPTY;
    st.index = this.index;
    if (found === 'error') return { error: this.listError ?? { code: 'condition_error', message: 'a condition could not be evaluated' } };
    const names = found.map((o) => index.name(o));
    return { objects: names.sort() };
  }

  /**
   * Every subject of `subjectType` (`user`, or a userset filter `group#member`) that holds the
   * relation on the object, each once (sorted): entities, `t:*` when a wildcard grants it, and
   * for a userset filter the usersets that do, the object's own included.
   *
   * The walk forward from the object reads every relationship that could grant or lead to a
   * subject (a userset to follow, a tupleset's objects, a subject of the asked type) and
   * evaluates its condition: one that cannot be evaluated makes the listing an error even when
   * another path grants the same subject (a check stops at the first path that grants; a
   * listing reads them all), and one that is false is not followed. A listing whose walk would
   * pass the hop limit is that error too, whether or not any subject is found: a check for a
   * subject nothing can match walks every path and tells. With `omitErrors`, a relationship
   * whose condition cannot be evaluated is not followed and a subject whose check errs is left
   * out.
   */
  listSubjects(object: string, relation: string, subjectType: string, opts?: RelationOptions): ListResult<'subjects'> {
    const o0 = parseObject(object);
    if (typeof o0 === 'string') return { error: { code: 'invalid_request', message: o0 } };
    const bad = this.unknown(o0.type, relation);
    if (bad) return { error: { code: 'invalid_request', message: bad } };
    const h = subjectType.indexOf('#');
    const fType = h < 0 ? subjectType : subjectType.slice(0, h);
    const fRel = h < 0 ? undefined : subjectType.slice(h + 1);
    if (!this.model.types.has(fType)) return { error: { code: 'invalid_request', message: `unknown type ${fType}` } };
    if (fRel !== undefined && !this.model.types.get(fType)!.relations.has(fRel)) return { error: { code: 'invalid_request', message: `type ${fType} has no relation ${fRel}` } };
    const index = this.indexFor(opts);
    if ('code' in index) return { error: index };
    const ctx = opts?.context ?? EMPTY;
    let conditionError: RelationError | null = null;
    /** Is a relationship read on the walk one to follow: the model allows it and its condition holds (a condition error stops the walk)? */
    const readable = (t: Relationship): boolean => {
      if (disallowed(this.model, t) !== null) return false;
      if (!t.condition) return true;
      const r = this.model.conditions.get(t.condition.name)!.evaluate(t.condition.context ?? EMPTY, ctx);
      if (r.ok) return r.value;
      conditionError ??= { code: 'condition_error', message: r.error, ...(r.missing !== undefined ? { missing: r.missing } : {}) };
      return false;
    };
    const candidates = new Set<string>();
    const seen = new Set<string>();
    const queue: [string, string][] = [];
    const visit = (o: string, rel: string) => {
      const k = `${o}#${rel}`;
      if (seen.has(k)) return;
      seen.add(k);
      queue.push([o, rel]);
    };
    visit(object, relation);
    for (let qi = 0; qi < queue.length; qi++) {
      const [o, rel] = queue[qi]!;
      const oType = o.slice(0, o.indexOf(':'));
      if (fRel !== undefined && oType === fType && rel === fRel) candidates.add(`${o}#${rel}`);
      const def = relationOf(this.model, oType, rel);
      if (!def) continue;
      const walk = (e: RelExpr): void => {
        switch (e.op) {
          case 'direct': {
            for (const t of this.stored(index, o, rel)) {
              const s = parseSubject(t.subject) as SubjectRef;
              const wanted = s.relation !== undefined || (fRel === undefined && s.type === fType);
              if (!wanted || !readable(t)) continue;
              if (s.relation !== undefined) {
                if (fRel !== undefined && s.type === fType && s.relation === fRel) candidates.add(t.subject);
                visit(`${s.type}:${s.id}`, s.relation);
              } else candidates.add(t.subject);
            }
            break;
          }
          case 'computed': visit(o, e.relation); break;
          case 'ttu': for (const t of this.stored(index, o, e.tupleset)) if (readable(t)) visit(t.subject, e.relation); break;
          case 'union': case 'intersection': e.items.forEach(walk); break;
          case 'exclusion': walk(e.base); walk(e.subtract); break;
        }
      };
      walk(def.expr);
      if (conditionError !== null && !opts?.omitErrors) return { error: conditionError };
    }
    if (!opts?.omitErrors) {
      const probe = this.checkOn(index, object, relation, NO_SUBJECT, opts?.context ? { context: opts.context } : undefined);
      if ('error' in probe && probe.error.code === 'resolution_too_complex') return { error: probe.error };
    }
    const out: string[] = [];
    for (const c of candidates) {
      const s = parseSubject(c);
      if (typeof s === 'string') continue;
      const r = this.checkOn(index, object, relation, s, opts?.context ? { context: opts.context } : undefined);
      if ('error' in r && opts?.omitErrors) continue;
      if ('error' in r) return { error: r.error };
      if (r.allowed) out.push(c);
    }
    return { subjects: out.sort() };
  }

  /** The relationships stored on o#rel (for listing; not the hot path). */
  private stored(index: RelationshipIndex, object: string, rel: string): Relationship[] {
    const o = index.lookup(object), r = index.lookup(rel);
    if (o === NONE || r === NONE) return [];
    const list = index.subjects(r, o);
    if (!list) return [];
    const out: Relationship[] = [];
    for (let i = 0; i < list.length; i += 3) out.push(relationshipOf(index, r, o, list, i));
    return out;
  }
}

const checkers = new WeakMap<RelationModel, WeakMap<RelationshipIndex, RelationChecker>>();

/** The checker of a model over an index, compiled once per pair. */
export function relationChecker(model: RelationModel, index: RelationshipIndex): RelationChecker {
  let byIndex = checkers.get(model);
  if (!byIndex) checkers.set(model, (byIndex = new WeakMap()));
  let c = byIndex.get(index);
  if (!c) byIndex.set(index, (c = new RelationChecker(model, index)));
  return c;
}
