// list-objects by reverse expansion: from the subject outward through the model's rewrites to
// the objects of the asked type, as OpenFGA's ListObjects and SpiceDB's LookupResources walk.
//
// The model is read once into a plan of kinds (a relation of a type) and rules: how a node
// (an object's relation) that the subject holds makes another node hold, through a computed
// relation, a userset relationship, a tuple-to-userset, or (for the subject itself) a direct
// relationship or a wildcard. Only rules into the asked relation's closure (the kinds its
// definition can reach through its positive parts) are followed. A listing then runs in order:
//
//   1. Breadth first from the subject over relationships whose condition holds, through kinds
//      whose own definition is a union (no `and`, no `but not`): each node reached gets the
//      fewest hops that grant it. A relationship whose condition cannot be evaluated marks the
//      node above it as one to confirm. A kind with `and` or `but not` (a gate) does not pass
//      the walk on; it keeps, per positive leaf of its definition, the fewest hops.
//   2. A gate reached that other kinds of the closure are derived from is checked on its own
//      (a check there, with a fresh hop count and nothing on its path, holds whenever the check
//      from above would); when it holds or errs, it and every node above it are marked to
//      confirm.
//   3. Each object of the asked type reached: a union kind within the hop limit holds without a
//      check (check's walk would find that same path; a union holds on any part that does);
//      a gate that nothing marked is evaluated at its top, its positive leaves known from step 1
//      and what `but not` subtracts evaluated where check would, when that settles it (a positive
//      leaf the walk did not reach settles nothing); the rest are confirmed by check.
//      A check that errs makes the listing that error (or, when the caller asks, leaves that
//      object out).
//
// Hops are counted as check counts them: the request's node is depth 0, each computed relation,
// userset or tupleset followed one more; a node at depth 25 is too deep, except the subject's own
// userset, which holds before the limit is looked at.

import type { RelExpr, TypeRefNode } from './ast.js';
import type { RelationDef, RelationModel } from './model.js';
import { NONE, type RelationshipIndex } from './index.js';
import { MAX_DEPTH, type Outcome } from './reference.js';

/** A relation of a type, as the walk meets it on objects. */
export interface Kind {
  id: number;
  typeSym: number;
  relSym: number;
  def: RelationDef;
  /** Its own definition has `and` or `but not`: holding one positive part is not enough. */
  gate: boolean;
  /** The leaves (direct, computed, tuple-to-userset) in positive positions, numbered. */
  leaves: Map<RelExpr, number>;
}

/** A direct type restriction in symbols, for "does the model allow this relationship". */
export interface Restriction { type: number; relation: number; wildcard: boolean; condition: string | undefined }

/** How a held node (or the subject) makes a node of kind `parent` hold. */
interface Rule {
  parent: number;
  parentType: number;
  leaf: number;
  how: 'computed' | 'userset' | 'ttu' | 'direct' | 'wildcard';
  /** The relation whose relationships are read (for computed, unused). */
  rel: number;
  /** The relation of the held node, for a userset's reverse key `t:id#rel`. */
  childRelation: string;
  childRelSym: number;
  /** The restrictions of the relation read, for whether the model allows a relationship. */
  restrictions: Restriction[];
}

function restrictionsOf(index: RelationshipIndex, refs: TypeRefNode[]): Restriction[] {
  return refs.map((r) => ({ type: index.intern(r.type), relation: r.relation !== undefined ? index.intern(r.relation) : NONE, wildcard: r.wildcard === true, condition: r.condition }));
}

/** Does the model allow the relationship at triple i of a subjects() list? */
export function allowedAt(index: RelationshipIndex, rs: Restriction[], list: readonly number[], i: number): boolean {
  const so = list[i]!, sr = list[i + 1]!, c = list[i + 2]!;
  const type = index.typeOf(so), wild = so === index.wildcardOf(type);
  const cond = c === NONE ? undefined : index.condition(c).name;
  for (let k = 0; k < rs.length; k++) {
    const r = rs[k]!;
    if (r.type === type && r.relation === sr && r.wildcard === wild && r.condition === cond) return true;
  }
  return false;
}

/** The model read for reverse expansion, over an index's symbols. */
export class ReversePlan {
  readonly kinds: Kind[] = [];
  private readonly ids: (number[] | undefined)[] = [];
  /** Held kind → the rules it feeds. */
  private readonly fromChild: Rule[][] = [];
  /** A subject entity's type → the rules a relationship to it (or to its type's wildcard) feeds. */
  private readonly fromEntity = new Map<number, Rule[]>();
  private readonly closures = new Map<number, { inClosure: Uint8Array; feeds: Uint8Array }>();

  constructor(model: RelationModel, private readonly index: RelationshipIndex) {
    for (const t of model.types.values()) for (const r of t.relations.values()) {
      const typeSym = index.intern(t.name), relSym = index.intern(r.name);
      const leaves = new Map<RelExpr, number>();
      let gate = false;
      const walk = (e: RelExpr): void => {
        switch (e.op) {
          case 'direct': case 'computed': case 'ttu': leaves.set(e, leaves.size); break;
          case 'union': e.items.forEach(walk); break;
          case 'intersection': gate = true; e.items.forEach(walk); break;
          case 'exclusion': gate = true; walk(e.base); break;
        }
      };
      walk(r.expr);
      const k: Kind = { id: this.kinds.length, typeSym, relSym, def: r, gate, leaves };
      this.kinds.push(k);
      (this.ids[typeSym] ??= [])[relSym] = k.id;
      this.fromChild.push([]);
    }
    // One rule per (kind, leaf, way, child): a restriction listed twice (with and without a condition) reads the same relationships.
    const seen = new Set<string>();
    for (const k of this.kinds) {
      const t = model.types.get(index.name(k.typeSym))!;
      for (const [leaf, n] of k.leaves) {
        const base = { parent: k.id, parentType: k.typeSym, leaf: n, childRelation: '', childRelSym: NONE, restrictions: [] as Restriction[] };
        if (leaf.op === 'computed') {
          const child = this.kindOf(k.typeSym, index.intern(leaf.relation));
          if (child >= 0) this.fromChild[child]!.push({ ...base, how: 'computed', rel: NONE });
        } else if (leaf.op === 'ttu') {
          const ts = t.relations.get(leaf.tupleset);
          if (!ts) continue;
          const rs = restrictionsOf(index, ts.direct);
          const tsSym = index.intern(leaf.tupleset), q = index.intern(leaf.relation);
          for (const d of new Set(ts.direct.filter((x) => x.relation === undefined && !x.wildcard).map((x) => x.type))) {
            const child = this.kindOf(index.intern(d), q);
            const key = `${k.id}/${n}/ttu/${child}`;
            if (child < 0 || seen.has(key)) continue;
            seen.add(key);
            this.fromChild[child]!.push({ ...base, how: 'ttu', rel: tsSym, childRelation: leaf.relation, childRelSym: q, restrictions: rs });
          }
        } else if (leaf.op === 'direct') {
          const rs = restrictionsOf(index, k.def.direct);
          for (const ref of leaf.refs) {
            const d = index.intern(ref.type);
            if (ref.relation !== undefined) {
              const q = index.intern(ref.relation);
              const child = this.kindOf(d, q);
              const key = `${k.id}/${n}/userset/${child}`;
              if (child < 0 || seen.has(key)) continue;
              seen.add(key);
              this.fromChild[child]!.push({ ...base, how: 'userset', rel: k.relSym, childRelation: ref.relation, childRelSym: q, restrictions: rs });
            } else {
              const how = ref.wildcard ? 'wildcard' : 'direct';
              const key = `${k.id}/${n}/${how}/${d}`;
              if (seen.has(key)) continue;
              seen.add(key);
              const list = this.fromEntity.get(d) ?? [];
              this.fromEntity.set(d, list);
              list.push({ ...base, how, rel: k.relSym, restrictions: rs });
            }
          }
        }
      }
    }
  }

  kindOf(typeSym: number, relSym: number): number {
    const m = typeSym < 0 ? undefined : this.ids[typeSym];
    const id = m === undefined || relSym < 0 ? undefined : m[relSym];
    return id === undefined ? -1 : id;
  }

  rulesOfEntity(typeSym: number): readonly Rule[] { return this.fromEntity.get(typeSym) ?? []; }
  rulesOfChild(kind: number): readonly Rule[] { return this.fromChild[kind]!; }

  /**
   * The kinds a target's positive parts can reach (`inClosure`), and among them the kinds that
   * feed another kind of it (`feeds`: a gate of these must be settled before its parents are).
   */
  closure(target: number): { inClosure: Uint8Array; feeds: Uint8Array } {
    const known = this.closures.get(target);
    if (known) return known;
    const inClosure = new Uint8Array(this.kinds.length), feeds = new Uint8Array(this.kinds.length);
    inClosure[target] = 1;
    for (let grew = true; grew;) {
      grew = false;
      for (let c = 0; c < this.kinds.length; c++) {
        for (const rule of this.fromChild[c]!) {
          if (!inClosure[rule.parent]) continue;
          feeds[c] = 1;
          if (!inClosure[c]) { inClosure[c] = 1; grew = true; }
        }
      }
    }
    const out = { inClosure, feeds };
    this.closures.set(target, out);
    return out;
  }
}

/** What the expansion asks of the checker, for the listing's subject. */
export interface Confirmer {
  /** Check of the kind's relation on an object, as a request would: 0, 1 or 2 (a cycle is 0); on 2 the checker keeps the error. */
  check(o: number, kind: Kind): 0 | 1 | 2;
  /** An expression of the kind's definition on an object, evaluated where check evaluates it (the node being resolved, at depth 0). */
  atTop(o: number, kind: Kind, e: RelExpr): Outcome;
  /** A stored condition: 1 holds, 0 does not, 2 cannot be evaluated. */
  condition(c: number): Outcome;
  /** Leave out an object of the asked kind whose check errs, instead of making the listing that error. */
  omitErrors?: boolean;
}

/** The listing's subject in symbols: an entity or wildcard (object symbol, or UNKNOWN), or a userset's object and relation. */
export interface ReverseSubject {
  /** The entity's (or wildcard's, or userset object's) symbol; negative when the index never saw it. */
  obj: number;
  typeSym: number;
  wildcard: boolean;
  /** For a userset subject: its relation's name and symbol. */
  relation?: string;
  relSym?: number;
}

const INF = Number.POSITIVE_INFINITY;
/** A table that grew past this many nodes is not kept for the next listing. */
const KEEP_NODES = 1 << 16;

/**
 * The nodes of one listing, in arrays reused from one listing to the next (a listing of
 * thousands of objects would otherwise allocate a hash map and a record per node, garbage that
 * the next collection must sweep): (object, kind) → node number by open addressing, whose
 * slots are valid for the current generation only, so that starting over clears nothing.
 */
class NodeTable {
  count = 0;
  obj = new Int32Array(256);
  kind = new Int32Array(256);
  /** Fewest hops over unions (INF: none). */
  dist = new Float64Array(256);
  marked = new Uint8Array(256);
  /** A gate's own check: 0, 1, 2, or -1 when not asked. */
  own = new Int8Array(256);
  /** Where a gate's per-leaf hops start in `leaves` (-1 for a union kind). */
  leafAt = new Int32Array(256);
  leaves = new Float64Array(1024);
  leafCount = 0;
  private keys = new Float64Array(1024);
  private slots = new Int32Array(1024);
  private stamps = new Uint32Array(1024);
  private generation = 1;

  start(): void {
    this.count = 0;
    this.leafCount = 0;
    if (++this.generation === 0xffffffff) { this.stamps.fill(0); this.generation = 1; }
  }

  private static hash(key: number, mask: number): number {
    return Math.imul((key | 0) ^ ((key / 4294967296) | 0), 0x9e3779b1) & mask;
  }

  /** The node of (o, k), made when new (`leaves` of them for a gate). */
  node(o: number, k: number, key: number, leaves: number): number {
    const mask = this.keys.length - 1;
    let h = NodeTable.hash(key, mask);
    while (this.stamps[h] === this.generation) {
      if (this.keys[h] === key) return this.slots[h]!;
      h = (h + 1) & mask;
    }
    const n = this.count++;
    if (n === this.obj.length) this.growNodes();
    this.stamps[h] = this.generation; this.keys[h] = key; this.slots[h] = n;
    this.obj[n] = o; this.kind[n] = k; this.dist[n] = INF; this.marked[n] = 0; this.own[n] = -1;
    if (leaves > 0) {
      if (this.leafCount + leaves > this.leaves.length) this.leaves = grown(this.leaves, this.leafCount + leaves);
      this.leafAt[n] = this.leafCount;
      this.leaves.fill(INF, this.leafCount, this.leafCount + leaves);
      this.leafCount += leaves;
    } else this.leafAt[n] = -1;
    if (this.count * 2 > this.keys.length) this.rehash();
    return n;
  }

  private growNodes(): void {
    const size = this.obj.length * 2;
    this.obj = grown(this.obj, size); this.kind = grown(this.kind, size); this.dist = grown(this.dist, size);
    this.marked = grown(this.marked, size); this.own = grown(this.own, size); this.leafAt = grown(this.leafAt, size);
  }

  private rehash(): void {
    const { keys, slots, stamps, generation } = this;
    const size = keys.length * 2, mask = size - 1;
    this.keys = new Float64Array(size); this.slots = new Int32Array(size); this.stamps = new Uint32Array(size);
    for (let i = 0; i < keys.length; i++) {
      if (stamps[i] !== generation) continue;
      let h = NodeTable.hash(keys[i]!, mask);
      while (this.stamps[h] === generation) h = (h + 1) & mask;
      this.stamps[h] = generation; this.keys[h] = keys[i]!; this.slots[h] = slots[i]!;
    }
  }
}

function grown<T extends Int32Array | Float64Array | Uint8Array | Int8Array>(a: T, atLeast: number): T {
  let size = a.length * 2;
  while (size < atLeast) size *= 2;
  const b = new (a.constructor as new (n: number) => T)(size);
  b.set(a);
  return b;
}

let spare: NodeTable | null = null;

/**
 * The objects (symbols) on which the subject holds the target kind, or 'error' when a check
 * that decides one errs (the confirmer keeps which).
 */
export function expandReverse(plan: ReversePlan, index: RelationshipIndex, subject: ReverseSubject, target: number, confirm: Confirmer): number[] | 'error' {
  // A confirming check never lists, but a table in use is never shared.
  const t = spare ?? new NodeTable();
  spare = null;
  t.start();
  try {
    return expand(t, plan, index, subject, target, confirm);
  } finally {
    if (t.obj.length <= KEEP_NODES) spare = t;
  }
}

function expand(t: NodeTable, plan: ReversePlan, index: RelationshipIndex, subject: ReverseSubject, target: number, confirm: Confirmer): number[] | 'error' {
  const K = plan.kinds.length;
  const { inClosure, feeds } = plan.closure(target);
  let selfNode = -1;
  const nodeOf = (o: number, k: number): number => {
    const kind = plan.kinds[k]!;
    return t.node(o, k, o * K + k, kind.gate ? kind.leaves.size : 0);
  };

  let failed = false;
  const ownCheck = (n: number): 0 | 1 | 2 => {
    let r = t.own[n]!;
    if (r < 0) t.own[n] = r = confirm.check(t.obj[n]!, plan.kinds[t.kind[n]!]!);
    return r as 0 | 1 | 2;
  };
  const toMark: number[] = [];
  const mark = (n: number) => { if (!t.marked[n]) { t.marked[n] = 1; toMark.push(n); } };
  /** A node that may hold through a path step 1 does not settle: a gate others derive from is checked first. */
  const markGated = (n: number) => {
    if (t.marked[n]) return;
    const k = t.kind[n]!;
    if (plan.kinds[k]!.gate && n !== selfNode && feeds[k]) { if (ownCheck(n) === 0) return; }
    mark(n);
  };

  type Visit = (o: number, rule: Rule, c: Outcome) => void;
  /** Each relationship (or computed relation) by which node n, held, makes a node above it hold: (parent object, rule, its condition). */
  const above = (n: number, visit: Visit): void => {
    const x = t.obj[n]!;
    for (const rule of plan.rulesOfChild(t.kind[n]!)) {
      if (!inClosure[rule.parent]) continue;
      if (rule.how === 'computed') { visit(x, rule, 1); continue; }
      let key: number;
      if (rule.how === 'userset') {
        key = index.lookup(`${index.name(x)}#${rule.childRelation}`);
        if (key === NONE) continue;
      } else key = x;
      readEdges(rule, key, x, rule.how === 'userset' ? rule.childRelSym : NONE, visit);
    }
  };
  /** The relationships `rule.rel` to subject `key` (whose parts are so, sr) on objects of the rule's parent type the model allows. */
  const readEdges = (rule: Rule, key: number, so: number, sr: number, visit: Visit): void => {
    const objs = index.objects(rule.rel, key);
    if (objs === undefined) return;
    for (let j = 0; j < objs.length; j++) {
      const o = objs[j]!;
      if (index.typeOf(o) !== rule.parentType) continue;
      const list = index.subjects(rule.rel, o);
      if (list === undefined) continue;
      // The same relationship can be listed twice: stored, and again among a request's contextual
      // ones, each with its own condition (or one the model no longer allows). As check reads them,
      // any one allowed that holds makes the edge hold; else one that cannot be evaluated.
      let edge: Outcome | undefined;
      for (let i = 0; i < list.length; i += 3) {
        if (list[i] !== so || list[i + 1] !== sr || !allowedAt(index, rule.restrictions, list, i)) continue;
        const c = list[i + 2] === NONE ? 1 : confirm.condition(list[i + 2]!);
        if (c === 1) { edge = 1; break; }
        if (edge === undefined || c === 2) edge = c;
      }
      if (edge !== undefined) visit(o, rule, edge);
    }
  };

  // 1. Breadth first over unions, from the subject.
  const queue: number[] = [];
  const gates: number[] = [];
  let hops = 1;
  const reached: Visit = (o, rule, c) => {
    if (c === 0) return;
    const n = nodeOf(o, rule.parent);
    if (c !== 1) { markGated(n); return; }
    const at = t.leafAt[n]!;
    if (at >= 0 && n !== selfNode) {
      const leaf = at + rule.leaf;
      if (hops < t.leaves[leaf]!) {
        // A gate others derive from is settled in step 2: listed when its first leaf is reached.
        if (feeds[rule.parent]) {
          let first = true;
          for (let i = at, end = at + plan.kinds[rule.parent]!.leaves.size; i < end; i++) if (t.leaves[i] !== INF) { first = false; break; }
          if (first) gates.push(n);
        }
        t.leaves[leaf] = hops;
      }
      return;
    }
    if (t.dist[n] === INF) { t.dist[n] = hops; queue.push(n); }
  };
  if (subject.relation !== undefined) {
    const k = plan.kindOf(subject.typeSym, subject.relSym ?? NONE);
    if (k >= 0 && subject.obj >= 0) {
      selfNode = nodeOf(subject.obj, k);
      t.dist[selfNode] = 0;
      queue.push(selfNode);
    }
  } else {
    const wild = index.lookup(`${index.name(subject.typeSym)}:*`);
    for (const rule of plan.rulesOfEntity(subject.typeSym)) {
      if (!inClosure[rule.parent]) continue;
      const key = rule.how === 'wildcard' ? wild : subject.wildcard ? NONE : subject.obj;
      if (key < 0) continue;
      readEdges(rule, key, key, NONE, reached);
    }
  }
  for (let qi = 0; qi < queue.length; qi++) {
    const n = queue[qi]!;
    hops = t.dist[n]! + 1;
    above(n, reached);
  }

  // 2. Gates others derive from, then everything above what is marked.
  for (const n of gates) markGated(n);
  const markAbove: Visit = (o, rule, c) => { if (c !== 0) markGated(nodeOf(o, rule.parent)); };
  for (let i = 0; i < toMark.length; i++) above(toMark[i]!, markAbove);

  // 3. The objects of the asked kind.
  const out: number[] = [];
  const settle = (n: number, r: 0 | 1 | 2) => {
    if (r === 1) out.push(t.obj[n]!);
    else if (r === 2 && !confirm.omitErrors) failed = true;
  };
  const kind = plan.kinds[target]!;
  let n = 0, at = 0;
  /**
   * Does the gate's definition hold on node n, from the hops found per leaf and what `but not`
   * subtracts evaluated in place: 1 yes, 0 no, 2 not known from the walk (then the node is
   * checked). A positive leaf the walk did not reach is not known to be false: check evaluates it
   * on the object and may meet the hop limit or a condition that errs there (OpenFGA confirms an
   * intersection's candidates by check for the same reason).
   */
  const holds = (e: RelExpr): 0 | 1 | 2 => {
    switch (e.op) {
      case 'direct': case 'computed': case 'ttu':
        return t.leaves[at + kind.leaves.get(e)!]! <= MAX_DEPTH ? 1 : 2;
      case 'union': {
        let r: 0 | 1 | 2 = 0;
        for (const item of e.items) {
          const h = holds(item);
          if (h === 1) return 1;
          if (h === 2) r = 2;
        }
        return r;
      }
      case 'intersection': {
        for (const item of e.items) if (holds(item) !== 1) return 2;
        return 1;
      }
      case 'exclusion': {
        const base = holds(e.base);
        if (base !== 1) return base;
        const x = confirm.atTop(t.obj[n]!, kind, e.subtract);
        return x === 0 ? 1 : x === 1 ? 0 : 2;
      }
    }
  };
  for (n = 0; n < t.count && !failed; n++) {
    if (t.kind[n] !== target || index.isWildcard(t.obj[n]!)) continue;
    if (n === selfNode) { out.push(t.obj[n]!); continue; }
    if (!kind.gate) {
      if (t.dist[n]! <= MAX_DEPTH) out.push(t.obj[n]!);
      else settle(n, ownCheck(n));
      continue;
    }
    if (t.own[n]! >= 0 || t.marked[n]) { settle(n, ownCheck(n)); continue; }
    at = t.leafAt[n]!;
    const h = holds(kind.def.expr);
    if (h === 1) out.push(t.obj[n]!);
    else if (h === 2) settle(n, ownCheck(n));
  }
  return failed ? 'error' : out;
}
