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
//      and what `but not` subtracts evaluated where check would; the rest are confirmed by check.
//      A check that errs makes the listing that error.
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

/**
 * The objects (symbols) on which the subject holds the target kind, or 'error' when a check
 * that decides one errs (the confirmer keeps which).
 */
export function expandReverse(plan: ReversePlan, index: RelationshipIndex, subject: ReverseSubject, target: number, confirm: Confirmer): number[] | 'error' {
  const K = plan.kinds.length;
  const { inClosure, feeds } = plan.closure(target);
  const ids = new Map<number, number>();
  const obj: number[] = [], kindOf: number[] = [], dist: number[] = [], marked: boolean[] = [], leafDist: (number[] | undefined)[] = [];
  /** A gate's own check, once: 0, 1 or 2; undefined when not yet asked. */
  const own: (0 | 1 | 2 | undefined)[] = [];
  let selfNode = -1;
  const nodeOf = (o: number, k: number): number => {
    const key = o * K + k;
    let n = ids.get(key);
    if (n === undefined) {
      n = obj.length;
      ids.set(key, n);
      obj.push(o); kindOf.push(k); dist.push(INF); marked.push(false); own.push(undefined);
      const kind = plan.kinds[k]!;
      leafDist.push(kind.gate ? new Array<number>(kind.leaves.size).fill(INF) : undefined);
    }
    return n;
  };

  let failed = false;
  const ownCheck = (n: number): 0 | 1 | 2 => {
    let r = own[n];
    if (r === undefined) own[n] = r = confirm.check(obj[n]!, plan.kinds[kindOf[n]!]!);
    return r;
  };
  const toMark: number[] = [];
  const mark = (n: number) => { if (!marked[n]) { marked[n] = true; toMark.push(n); } };
  /** A node that may hold through a path step 1 does not settle: a gate others derive from is checked first. */
  const markGated = (n: number) => {
    if (marked[n]) return;
    const k = kindOf[n]!;
    if (plan.kinds[k]!.gate && n !== selfNode && feeds[k]) { if (ownCheck(n) === 0) return; }
    mark(n);
  };

  /** Each relationship (or computed relation) by which node n, held, makes a node above it hold: (parent object, rule, its condition). */
  const above = (n: number, visit: (o: number, rule: Rule, c: Outcome) => void): void => {
    const x = obj[n]!;
    for (const rule of plan.rulesOfChild(kindOf[n]!)) {
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
  const readEdges = (rule: Rule, key: number, so: number, sr: number, visit: (o: number, rule: Rule, c: Outcome) => void): void => {
    const objs = index.objects(rule.rel, key);
    if (objs === undefined) return;
    for (let j = 0; j < objs.length; j++) {
      const o = objs[j]!;
      if (index.typeOf(o) !== rule.parentType) continue;
      const list = index.subjects(rule.rel, o);
      if (list === undefined) continue;
      for (let i = 0; i < list.length; i += 3) {
        if (list[i] !== so || list[i + 1] !== sr) continue;
        if (allowedAt(index, rule.restrictions, list, i)) visit(o, rule, list[i + 2] === NONE ? 1 : confirm.condition(list[i + 2]!));
        break;
      }
    }
  };

  // 1. Breadth first over unions, from the subject.
  const queue: number[] = [];
  const gates: number[] = [];
  const reached = (o: number, rule: Rule, d: number, c: Outcome) => {
    if (c === 0) return;
    const n = nodeOf(o, rule.parent);
    if (c !== 1) { markGated(n); return; }
    const ld = leafDist[n];
    if (ld !== undefined && n !== selfNode) {
      if (d < ld[rule.leaf]!) {
        if (ld.every((v) => v === INF) && feeds[rule.parent]) gates.push(n);
        ld[rule.leaf] = d;
      }
      return;
    }
    if (dist[n] === INF) { dist[n] = d; queue.push(n); }
  };
  if (subject.relation !== undefined) {
    const k = plan.kindOf(subject.typeSym, subject.relSym ?? NONE);
    if (k >= 0 && subject.obj >= 0) {
      selfNode = nodeOf(subject.obj, k);
      dist[selfNode] = 0;
      queue.push(selfNode);
    }
  } else {
    const wild = index.lookup(`${index.name(subject.typeSym)}:*`);
    for (const rule of plan.rulesOfEntity(subject.typeSym)) {
      if (!inClosure[rule.parent]) continue;
      const key = rule.how === 'wildcard' ? wild : subject.wildcard ? NONE : subject.obj;
      if (key < 0) continue;
      readEdges(rule, key, key, NONE, (o, r, c) => reached(o, r, 1, c));
    }
  }
  for (let qi = 0; qi < queue.length; qi++) {
    const n = queue[qi]!, d = dist[n]! + 1;
    above(n, (o, rule, c) => reached(o, rule, d, c));
  }

  // 2. Gates others derive from, then everything above what is marked.
  for (const n of gates) markGated(n);
  for (let i = 0; i < toMark.length; i++) above(toMark[i]!, (o, rule, c) => { if (c !== 0) markGated(nodeOf(o, rule.parent)); });

  // 3. The objects of the asked kind.
  const out: number[] = [];
  const settle = (n: number, r: 0 | 1 | 2) => {
    if (r === 1) out.push(obj[n]!);
    else if (r === 2) failed = true;
  };
  for (let n = 0; n < obj.length && !failed; n++) {
    if (kindOf[n] !== target || index.isWildcard(obj[n]!)) continue;
    const kind = plan.kinds[target]!;
    if (n === selfNode) { out.push(obj[n]!); continue; }
    if (!kind.gate) {
      if (dist[n]! <= MAX_DEPTH) out.push(obj[n]!);
      else settle(n, ownCheck(n));
      continue;
    }
    if (own[n] !== undefined || marked[n]) { settle(n, ownCheck(n)); continue; }
    const ld = leafDist[n]!;
    let unsure = false;
    const holds = (e: RelExpr): boolean => {
      switch (e.op) {
        case 'direct': case 'computed': case 'ttu': {
          const d = ld[kind.leaves.get(e)!]!;
          if (d <= MAX_DEPTH) return true;
          if (d !== INF) unsure = true;
          return false;
        }
        case 'union': return e.items.some(holds);
        case 'intersection': return e.items.every(holds);
        case 'exclusion': {
          if (!holds(e.base)) return false;
          const x = confirm.atTop(obj[n]!, kind, e.subtract);
          if (x === 2) unsure = true;
          return x === 0;
        }
      }
    };
    if (holds(kind.def.expr)) out.push(obj[n]!);
    else if (unsure) settle(n, ownCheck(n));
  }
  return failed ? 'error' : out;
}
