// The reference interpreter: the semantics written as plainly as possible, over a plain list
// of relationships and strings, for the tests that hold the compiled checker to it. Slow by
// design (every lookup scans the list); never used to answer requests.
//
// A request is first validated: a subject whose type (or a userset's relation) the model lacks,
// or a contextual relationship the model does not allow, makes it an error. Then, with the
// request's object and relation at depth 0 and each hop one deeper:
//
//   check(o, r, s):  s is the userset o#r itself                         → true
//                    depth MAX_DEPTH or more                            → error
//                    r is not a relation of o's type                    → false
//                    o#r already on the path being resolved             → cycle
//                    else the definition of r:
//   [types]          a relationship o#r@x the model allows, whose condition holds, with x equal
//                    to s, or x = t:* and s an entity of type t, or x a userset y#q and check(y, q, s)
//                    (the condition of a relationship to another entity is not evaluated)
//   computed q       check(o, q, s)
//   q from ts        check(y, q, s) for each relationship o#ts@y, where q is a relation of y's type
//   or / and / but not   true/false/error/cycle logic: or is true if any part is, else an error
//                    if any part is, else a cycle if any part is, else false; and is false if any
//                    part is, else an error if any part is, else a cycle if any part is, else
//                    true; a but not b is false if a is false or b is true, else a cycle if
//                    either is, else an error if either is, else true.
// A condition that cannot be evaluated (a parameter missing) makes its relationship an error.
// A cycle answers false at the top (OpenFGA's rule: `x but not (a cycle back to x)` is false).

import type { RelExpr } from './ast.js';
import type { RelationModel } from './model.js';
import { allows, disallowed, relationOf } from './model.js';
import { parseSubject, type Relationship } from './tuple.js';

/** Hops a request may take: a node at this depth (the request's own being 0) is too complex. */
export const MAX_DEPTH = 25;

/** 0 false, 1 true, 2 error. */
export type Tri = 0 | 1 | 2;
/** A hop's outcome: a Tri, or CYCLE (it met a node being resolved). */
export const CYCLE = 3;
export type Outcome = Tri | typeof CYCLE;

export interface ReferenceRequest {
  object: string;
  relation: string;
  subject: string;
  context?: Record<string, unknown>;
  /** Relationships of this request only (with `tuples`, which then holds them too). */
  contextual?: Relationship[];
}

const typeOf = (o: string) => o.slice(0, o.indexOf(':'));

export function referenceCheck(model: RelationModel, tuples: Relationship[], req: ReferenceRequest): Tri {
  const ctx = req.context ?? {};
  const s = parseSubject(req.subject);
  if (typeof s === 'string') return 2;
  const st = model.types.get(s.type);
  if (!st || (s.relation !== undefined && !st.relations.has(s.relation))) return 2;
  if (req.contextual?.some((r) => disallowed(model, r) !== null)) return 2;
  const stack = new Set<string>();

  const conditionHolds = (t: Relationship): Tri => {
    if (!t.condition) return 1;
    const c = model.conditions.get(t.condition.name);
    if (!c) return 0;
    const r = c.evaluate(t.condition.context ?? {}, ctx);
    return r.ok ? (r.value ? 1 : 0) : 2;
  };

  /** The relationships on o#rel that the model allows. */
  const valid = (o: string, rel: string): Relationship[] => {
    const def = relationOf(model, typeOf(o), rel);
    if (!def) return [];
    return tuples.filter((t) => {
      if (t.object !== o || t.relation !== rel) return false;
      const ts = parseSubject(t.subject);
      if (typeof ts === 'string') return false;
      if (t.condition && !model.conditions.has(t.condition.name)) return false;
      return allows(def, ts.type, ts.relation, ts.wildcard, t.condition?.name);
    });
  };

  const check = (o: string, rel: string, depth: number): Outcome => {
    if (s.relation !== undefined && `${s.type}:${s.id}` === o && s.relation === rel) return 1;
    if (depth >= MAX_DEPTH) return 2;
    const def = relationOf(model, typeOf(o), rel);
    if (!def) return 0;
    const key = `${o}#${rel}`;
    if (stack.has(key)) return CYCLE;
    stack.add(key);
    const r = evalExpr(def.expr, o, rel, depth);
    stack.delete(key);
    return r;
  };

  const any = (results: Outcome[]): Outcome => (results.includes(1) ? 1 : results.includes(2) ? 2 : results.includes(CYCLE) ? CYCLE : 0);

  const evalExpr = (e: RelExpr, o: string, rel: string, depth: number): Outcome => {
    switch (e.op) {
      case 'direct': {
        const results: Outcome[] = [];
        for (const t of valid(o, rel)) {
          const ts = parseSubject(t.subject) as Exclude<ReturnType<typeof parseSubject>, string>;
          const matches = t.subject === req.subject || (ts.wildcard && s.relation === undefined && !s.wildcard && ts.type === s.type);
          // A relationship to another entity is not read at all (its condition is not evaluated).
          if (!matches && ts.relation === undefined) continue;
          const c = conditionHolds(t);
          if (c !== 1) { results.push(c); continue; }
          if (matches) return 1;
          results.push(check(`${ts.type}:${ts.id}`, ts.relation!, depth + 1));
        }
        return any(results);
      }
      case 'computed': return check(o, e.relation, depth + 1);
      case 'ttu': {
        const results: Outcome[] = [];
        for (const t of valid(o, e.tupleset)) {
          const c = conditionHolds(t);
          if (c !== 1) { results.push(c); continue; }
          results.push(check(t.subject, e.relation, depth + 1));
        }
        return any(results);
      }
      case 'union': return any(e.items.map((i) => evalExpr(i, o, rel, depth)));
      case 'intersection': {
        const rs = e.items.map((i) => evalExpr(i, o, rel, depth));
        return rs.includes(0) ? 0 : rs.includes(2) ? 2 : rs.includes(CYCLE) ? CYCLE : 1;
      }
      case 'exclusion': {
        const b = evalExpr(e.base, o, rel, depth), x = evalExpr(e.subtract, o, rel, depth);
        if (b === 0 || x === 1) return 0;
        if (b === CYCLE || x === CYCLE) return CYCLE;
        return b === 2 || x === 2 ? 2 : 1;
      }
    }
  };

  const r = check(req.object, req.relation, 0);
  return r === CYCLE ? 0 : r;
}
