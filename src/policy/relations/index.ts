// Where the relationships are looked up: an interface the checker reads synchronously, and an
// in-memory implementation that holds every relationship (the store loads them all into it
// and applies its change feed with add/remove).
//
// Strings are interned to small integers ("symbols"): objects `t:id`, wildcards `t:*`,
// usersets `t:id#rel` (as reverse keys), types, relations and condition names. Relationships
// are kept twice, as Maps of flat number arrays:
//   forward  object → relation slot → [subject, subjectRelation | -1, condition | -1, ...]
//            (an array indexed by the object's symbol, then by the relation's small slot number:
//            a check's hop reads two array cells, no hash lookup)
//   reverse  relation → subject (the full subject text's symbol) → [object, ...]
// Symbols are never freed: they are the names of a model's world and stay few beside the ids.

import type { Relationship } from './tuple.js';
import { parseSubject } from './tuple.js';

export const NONE = -1;

/** A stored condition: its name's symbol, and the context written with the relationship. */
export interface StoredCondition { name: string; context: Record<string, unknown> }

export interface RelationshipIndex {
  /** The symbol of a string, made if new. */
  intern(s: string): number;
  /** The symbol of a string, or -1 when the index has never seen it. */
  lookup(s: string): number;
  name(sym: number): string;
  /** The type symbol of an object, entity or wildcard symbol (`user:anne` → `user`); -1 for others. */
  typeOf(sym: number): number;
  /** Is the symbol a wildcard `t:*`? */
  isWildcard(sym: number): boolean;
  /** The symbol of type `t`'s wildcard `t:*` (from the type's symbol), or -1 when the index never saw it. */
  wildcardOf(typeSym: number): number;
  /** Flat triples [subject, subjectRelation | -1, condition | -1] of the relationships on (object, relation). */
  subjects(relation: number, object: number): readonly number[] | undefined;
  /** The objects with a relationship (relation, subject), `subject` the symbol of the whole subject text. */
  objects(relation: number, subject: number): readonly number[] | undefined;
  condition(id: number): StoredCondition;
  /** The index whose symbols this one extends (itself when it is a root). */
  readonly root: RelationshipIndex;
}

const EMPTY_CONTEXT: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

type SymbolSource = Pick<RelationshipIndex, 'lookup' | 'name' | 'typeOf' | 'isWildcard' | 'wildcardOf'>;

/** A symbol table: strings ↔ integers, with each symbol's type (for `t:id` and `t:*`). */
class Symbols {
  private readonly ids = new Map<string, number>();
  readonly names: string[] = [];
  readonly types: number[] = [];
  readonly wild: boolean[] = [];
  /** Type symbol → its wildcard's symbol (a check compares a relationship's subject with it: no read of `wild`). */
  private readonly wildOf: number[] = [];
  constructor(private readonly parent: SymbolSource | null, private readonly offset: number) {}

  lookup(s: string): number {
    const p = this.parent ? this.parent.lookup(s) : NONE;
    if (p !== NONE) return p;
    const v = this.ids.get(s);
    return v === undefined ? NONE : v;
  }

  intern(s: string): number {
    const known = this.lookup(s);
    if (known !== NONE) return known;
    const id = this.offset + this.names.length;
    this.ids.set(s, id);
    this.names.push(s);
    this.types.push(NONE);
    this.wild.push(false);
    // `t:id` and `t:*` know their type (a userset key `t:id#r` and plain names do not).
    const c = s.indexOf(':');
    if (c > 0 && s.indexOf('#') < 0) {
      const t = this.intern(s.slice(0, c));
      this.types[id - this.offset] = t;
      this.wild[id - this.offset] = s.length === c + 2 && s.charCodeAt(c + 1) === 42;
      if (this.wild[id - this.offset]) this.wildOf[t] = id;
    }
    return id;
  }

  owns(sym: number): boolean { return sym >= this.offset; }
  name(sym: number): string { return this.parent && sym < this.offset ? this.parent.name(sym) : this.names[sym - this.offset]!; }
  typeOf(sym: number): number { return this.parent && sym < this.offset ? this.parent.typeOf(sym) : (this.types[sym - this.offset] ?? NONE); }
  isWildcard(sym: number): boolean { return this.parent && sym < this.offset ? this.parent.isWildcard(sym) : this.wild[sym - this.offset] === true; }
  wildcardOf(typeSym: number): number {
    const own = typeSym < 0 ? undefined : this.wildOf[typeSym];
    if (own !== undefined) return own;
    return this.parent ? this.parent.wildcardOf(typeSym) : NONE;
  }
}

/** Symbols of an overlay start here, above any root's. */
const OVERLAY_OFFSET = 1 << 30;

/**
 * Every relationship in memory. `add` of a relationship that exists replaces its condition;
 * `remove` of one that does not exist does nothing (a relationship is its object, relation
 * and subject).
 */
export class MemoryIndex implements RelationshipIndex {
  private readonly forward: (number[] | undefined)[][] = [];
  /** Relation symbol → its slot in the per-object arrays of `forward` (relations are few). */
  private readonly slots: number[] = [];
  private readonly slotRelations: number[] = [];
  private readonly reverse = new Map<number, Map<number, number[]>>();
  private readonly conditions: StoredCondition[] = [];
  private readonly conditionIds = new Map<string, number>();
  private readonly symbols: Symbols;
  private count = 0;
  readonly root: RelationshipIndex;

  /** `over`: for an overlay (contextual relationships), the index whose symbols it extends. */
  constructor(over?: RelationshipIndex) {
    this.symbols = over ? new Symbols(over, OVERLAY_OFFSET) : new Symbols(null, 0);
    this.root = over ? over.root : this;
  }

  get size(): number { return this.count; }
  intern(s: string): number { return this.symbols.intern(s); }
  lookup(s: string): number { return this.symbols.lookup(s); }
  name(sym: number): string { return this.symbols.name(sym); }
  typeOf(sym: number): number { return this.symbols.typeOf(sym); }
  isWildcard(sym: number): boolean { return this.symbols.isWildcard(sym); }
  wildcardOf(typeSym: number): number { return this.symbols.wildcardOf(typeSym); }
  condition(id: number): StoredCondition { return this.conditions[id]!; }

  subjects(relation: number, object: number): readonly number[] | undefined {
    const rec = this.forward[object];
    if (rec === undefined) return undefined;
    const slot = this.slots[relation];
    return slot === undefined ? undefined : rec[slot];
  }

  private slotOf(relation: number): number {
    let slot = this.slots[relation];
    if (slot === undefined) {
      slot = this.slotRelations.length;
      this.slots[relation] = slot;
      this.slotRelations.push(relation);
    }
    return slot;
  }

  objects(relation: number, subject: number): readonly number[] | undefined {
    const m = this.reverse.get(relation);
    return m === undefined ? undefined : m.get(subject);
  }

  private conditionId(c: Relationship['condition']): number {
    if (!c) return NONE;
    const context = c.context ?? EMPTY_CONTEXT;
    const key = c.name + '\u0000' + JSON.stringify(context);
    let id = this.conditionIds.get(key);
    if (id === undefined) {
      id = this.conditions.length;
      this.conditions.push({ name: c.name, context });
      this.conditionIds.set(key, id);
    }
    return id;
  }

  /** The symbols of a relationship's parts: object, relation, subject object, subject relation, reverse key. */
  private parts(r: Relationship): [number, number, number, number, number] | null {
    const s = parseSubject(r.subject);
    if (typeof s === 'string') return null;
    const object = this.intern(r.object);
    const relation = this.intern(r.relation);
    if (s.relation !== undefined) {
      const so = this.intern(`${s.type}:${s.id}`);
      return [object, relation, so, this.intern(s.relation), this.intern(r.subject)];
    }
    const so = this.intern(r.subject);
    return [object, relation, so, NONE, so];
  }

  /** Adds (or replaces the condition of) a relationship; false when its subject is malformed. */
  add(r: Relationship): boolean {
    const p = this.parts(r);
    if (!p) return false;
    const [object, relation, so, sr, key] = p;
    const cond = this.conditionId(r.condition);
    const slot = this.slotOf(relation);
    let rec = this.forward[object];
    // Arrays are allocated at their exact size: an object has few relations, most hold one relationship.
    if (rec === undefined || rec.length <= slot) {
      const old = rec;
      rec = Array.from({ length: slot + 1 }, (_, i) => (old === undefined ? undefined : old[i]));
      this.forward[object] = rec;
    }
    const list = rec[slot];
    if (list === undefined) {
      rec[slot] = [so, sr, cond];
      this.addReverse(relation, key, object);
      this.count++;
      return true;
    }
    for (let i = 0; i < list.length; i += 3) {
      if (list[i] === so && list[i + 1] === sr) { list[i + 2] = cond; return true; }
    }
    list.push(so, sr, cond);
    this.addReverse(relation, key, object);
    this.count++;
    return true;
  }

  private addReverse(relation: number, key: number, object: number): void {
    let rm = this.reverse.get(relation);
    if (!rm) this.reverse.set(relation, (rm = new Map()));
    const objs = rm.get(key);
    if (objs) objs.push(object); else rm.set(key, [object]);
  }

  /** Removes a relationship (its condition does not matter); false when it was not there. */
  remove(r: Relationship): boolean {
    const s = parseSubject(r.subject);
    if (typeof s === 'string') return false;
    const object = this.lookup(r.object), relation = this.lookup(r.relation);
    const so = this.lookup(s.relation !== undefined ? `${s.type}:${s.id}` : r.subject);
    const sr = s.relation !== undefined ? this.lookup(s.relation) : NONE;
    const key = this.lookup(r.subject);
    if (object === NONE || relation === NONE || so === NONE || key === NONE || (s.relation !== undefined && sr === NONE)) return false;
    const rec = this.forward[object];
    const slot = this.slots[relation];
    const list = rec === undefined || slot === undefined ? undefined : rec[slot];
    if (!list) return false;
    let found = -1;
    for (let i = 0; i < list.length; i += 3) if (list[i] === so && list[i + 1] === sr) { found = i; break; }
    if (found < 0) return false;
    list.splice(found, 3);
    if (!list.length) rec![slot!] = undefined;
    const rm = this.reverse.get(relation)!;
    const objs = rm.get(key)!;
    const at = objs.indexOf(object);
    if (at >= 0) objs.splice(at, 1);
    if (!objs.length) rm.delete(key);
    this.count--;
    return true;
  }

  /** Every relationship, for tests and debugging (not for the hot path). */
  *all(): Generator<Relationship> {
    // forEach skips the holes (an overlay's symbols start far up).
    const recs: [number, (number[] | undefined)[]][] = [];
    this.forward.forEach((rec, object) => recs.push([object, rec]));
    for (const [object, rec] of recs) {
      for (let slot = 0; slot < rec.length; slot++) {
        const list = rec[slot];
        if (list) for (let i = 0; i < list.length; i += 3) yield this.relationshipAt(this.slotRelations[slot]!, object, list, i);
      }
    }
  }

  /** The relationship at triple `i` of a subjects() list. */
  relationshipAt(relation: number, object: number, list: readonly number[], i: number): Relationship {
    return relationshipOf(this, relation, object, list, i);
  }
}

/** The relationship at triple `i` of `index.subjects(relation, object)`. */
export function relationshipOf(index: RelationshipIndex, relation: number, object: number, list: readonly number[], i: number): Relationship {
  const so = list[i]!, sr = list[i + 1]!, c = list[i + 2]!;
  const r: Relationship = { object: index.name(object), relation: index.name(relation), subject: sr === NONE ? index.name(so) : `${index.name(so)}#${index.name(sr)}` };
  if (c !== NONE) {
    const cond = index.condition(c);
    r.condition = Object.keys(cond.context).length ? { name: cond.name, context: cond.context } : { name: cond.name };
  }
  return r;
}

/**
 * An index with extra relationships for one request (contextual relationships): the base's
 * relationships and the extras together, the base untouched.
 */
export class OverlayIndex implements RelationshipIndex {
  private readonly extra: MemoryIndex;
  readonly root: RelationshipIndex;
  constructor(private readonly base: RelationshipIndex, extras: Relationship[]) {
    this.extra = new MemoryIndex(base);
    for (const r of extras) this.extra.add(r);
    this.root = base.root;
  }
  intern(s: string): number { return this.extra.intern(s); }
  /** Makes a symbol for a name this request asks about that nothing stores. */
  withSymbol(s: string): this { this.extra.intern(s); return this; }
  lookup(s: string): number { return this.extra.lookup(s); }
  name(sym: number): string { return this.extra.name(sym); }
  typeOf(sym: number): number { return this.extra.typeOf(sym); }
  isWildcard(sym: number): boolean { return this.extra.isWildcard(sym); }
  wildcardOf(typeSym: number): number { return this.extra.wildcardOf(typeSym); }
  condition(id: number): StoredCondition {
    return id >= CONDITION_OVERLAY ? this.extra.condition(id - CONDITION_OVERLAY) : this.base.condition(id);
  }
  subjects(relation: number, object: number): readonly number[] | undefined {
    const a = this.base.subjects(relation, object), b = this.extra.subjects(relation, object);
    if (!b) return a;
    const shifted = b.map((v, i) => (i % 3 === 2 && v !== NONE ? v + CONDITION_OVERLAY : v));
    return a ? [...a, ...shifted] : shifted;
  }
  objects(relation: number, subject: number): readonly number[] | undefined {
    const a = this.base.objects(relation, subject), b = this.extra.objects(relation, subject);
    if (!b) return a;
    return a ? [...a, ...b] : b;
  }
}

const CONDITION_OVERLAY = 1 << 30;

/**
 * The index with a symbol for a name nothing stores. An overlay (a request's own) takes the
 * symbol itself: an overlay over an overlay would number its symbols and conditions from the
 * same offsets as the one below, and two names would share a symbol.
 */
export function withName(index: RelationshipIndex, name: string): RelationshipIndex {
  return index instanceof OverlayIndex ? index.withSymbol(name) : new OverlayIndex(index, []).withSymbol(name);
}
