// Relationship questions in `diff`: each distinct question (by its text) is a fact of the
// request, as a comparison is, with the value true, false or "cannot be answered".
//
//  1. Refused: a question about an object read from a path; a question whose relation (or one
//     it reads, transitively) is defined differently in the two sets, or any question when a
//     relationship condition changed. Otherwise the graph, the request's and shared by both
//     sets, answers the question alike before and after.
//  2. Per cell of subjects and objects, a question's values: an error the cell fixes (no agent
//     acting, no person, a type without the relation, an entity type the model lacks); false
//     where the relation never takes the asking entity's type (an agent as `owner: [user]`);
//     else true and false, and an error too where the relation can fail to resolve (it reads a
//     conditioned restriction, or itself: recursion; a `through` relation whose types cycle can
//     chain past the hop limit). Besides, an error where an id it involves (subject, person,
//     resource) is no relationship object (`doc:a b`): ids are facts of their own (valid or
//     not), so questions sharing an id err together.
//  3. Combinations: every choice of id validity and of the values of the questions that remain,
//     one per distinct set of answers (a region is its answers); a choice a definition rules out
//     (a relation that is a union naming another: editor holds ⇒ viewer holds, on the same
//     object for the same entity) is left out.
//  4. Realising: for a request of a changed region, the smallest graph (tried by size, up to a
//     bound) built from the model's type restrictions over the request's own objects and one
//     more object per type (and chains past the hop limit, for the errors of recursive
//     relations), on which every question answers as the combination says and the request is
//     decided as the region says (a relation may grant the action itself); and ids made invalid
//     where the combination says so.
//     None found: the caller refuses rather than report or drop the region.

import type { DecisionRequest } from './types.js';
import type { PolicySet } from './compile.js';
import { compileRelQuestion } from './compile.js';
import type { RelObject, RelQuestion } from './ast.js';
import { relQuestionsOf } from './ast.js';
import { fmtExpr } from './format.js';
import type { RelationModel } from './relations/model.js';
import type { RelExpr } from './relations/ast.js';
import { affectedRelations, changedConditions, definitionChanges, relationReads } from './relations/diff.js';
import { MemoryIndex } from './relations/index.js';
import { parseObject, relationshipText, type Relationship } from './relations/tuple.js';
import { envOf } from './values.js';
import type { PrincipalKind } from './space.js';

/** The region key of a question's answer: `question: person has viewer on resource`. */
export const QUESTION = 'question: ';

/** 0 false, 1 true, 2 cannot be answered. */
export type Answer = 0 | 1 | 2;

/** An id a question involves: the acting subject's, the person's, the resource's. */
export type IdRole = 'subject' | 'person' | 'resource';

export interface CellQuestion {
  key: string;
  q: RelQuestion;
  /** Answers before ids are weighed: [2] when the cell fixes an error, [0] when no entity of the type can hold the relation, else [0, 1]. */
  values: Answer[];
  /** The ids whose validity it reads (an invalid one: the answer is 2). */
  ids: IdRole[];
  /** What it asks on the cell, whoever it names: questions alike here (`agent` and `subject` for an agent) answer alike. */
  same: string;
}

/** One combination: the validity of the ids read, and each question's answer. */
export interface Combination { invalid: IdRole[]; answers: Map<string, Answer> }

/** Graphs of at most this many relationships are tried when realising a combination. */
export const REALISE_MAX_SIZE = 4;
/** Graphs tried when realising one combination, at most. */
export const REALISE_TRIES = 20_000;

export const questionKey = (q: RelQuestion): string => fmtExpr(q);

const rkey = (t: string, r: string) => `${t}#${r}`;

function objectType(o: RelObject): string | null {
  if (o.type !== 'lit') return null;
  const p = typeof o.value === 'string' ? parseObject(o.value) : 'no object';
  return typeof p === 'string' ? null : p.type;
}

/** The relations a relation reads, transitively, itself included. */
function closure(m: RelationModel, start: string[]): Set<string> {
  const out = new Set(start);
  const pending = [...start];
  while (pending.length) {
    const k = pending.pop()!;
    const [t, r] = k.split('#') as [string, string];
    for (const d of relationReads(m, t, r)) if (!out.has(d)) { out.add(d); pending.push(d); }
  }
  return out;
}

/**
 * Can checking the relation fail: it reads a conditioned restriction (one an entity of the type
 * asked about can be the subject of, when given; a userset always), or reads itself (recursion).
 */
function canFail(m: RelationModel, t: string, r: string, entityType?: string): boolean {
  const reached = closure(m, [rkey(t, r)]);
  for (const k of reached) {
    const [tt, rr] = k.split('#') as [string, string];
    const def = m.types.get(tt)?.relations.get(rr);
    if (def?.direct.some((ref) => ref.condition !== undefined && (entityType === undefined || ref.relation !== undefined || ref.type === entityType))) return true;
    // recursion: a relation that reaches itself again
    if (closure(m, relationReads(m, tt, rr)).has(k)) return true;
  }
  return false;
}

/** Can a `through R` walk go on past the hop limit: do R's plain-object targets cycle among types? */
function throughCycles(m: RelationModel, relation: string): boolean {
  const next = (t: string) => (m.types.get(t)?.relations.get(relation)?.direct ?? [])
    .filter((ref) => ref.relation === undefined && !ref.wildcard && m.types.get(ref.type)?.relations.has(relation)).map((ref) => ref.type);
  const state = new Map<string, 1 | 2>();
  const visit = (t: string): boolean => {
    if (state.get(t) === 1) return true;
    if (state.get(t) === 2) return false;
    state.set(t, 1);
    for (const u of next(t)) if (visit(u)) return true;
    state.set(t, 2);
    return false;
  };
  return [...m.types.keys()].some(visit);
}

/** The relations a question may check: on its object's type (any type with the relation, for the resource). */
function startsOf(m: RelationModel, q: RelQuestion): string[] {
  const typesWith = [...m.types.values()].filter((t) => t.relations.has(q.relation)).map((t) => t.name);
  if (q.type === 'has') {
    const t = objectType(q.object);
    return (t === null ? typesWith : typesWith.filter((x) => x === t)).map((x) => rkey(x, q.relation));
  }
  return typesWith.map((x) => rkey(x, q.relation));
}

/**
 * Why diff cannot model the two sets' relationship questions, or null (see the header, 1).
 * Both models must agree on every relation a question reads; then either one answers for both.
 */
export function unmodelledQuestions(before: PolicySet, after: PolicySet): string | null {
  const a = before.compiled.relations, b = after.compiled.relations;
  const affected = new Set(affectedRelations(a, b, definitionChanges(a, b)));
  const conditions = changedConditions(before, after);
  for (const set of [before, after]) for (const r of set.compiled.rules) {
    if (!r.ast.when) continue;
    for (const q of relQuestionsOf(r.ast.when)) {
      const text = fmtExpr(q);
      const where = `rule "${r.name}" (${r.source}) asks ${text}`;
      const objs = q.type === 'has' ? [q.object] : [q.object, q.ancestor];
      if (objs.some((o) => o.type === 'path')) return `${where} about an object read from a path, which diff does not model yet`;
      const starts = [...new Set([...startsOf(a, q), ...startsOf(b, q)])].sort();
      const changed = starts.find((k) => affected.has(k));
      if (changed) return `${where}, and relation ${changed} (or a relation it reads) is defined differently in the two versions`;
      if (conditions.length) return `${where}, and the relationship condition${conditions.length === 1 ? '' : 's'} ${conditions.join(', ')} changed, which diff does not model yet`;
    }
  }
  return null;
}

/** Can the question's relation fail to resolve (a conditioned relationship, a recursive definition, a `through` chain past the hop limit)? */
function canErr(m: RelationModel, q: RelQuestion, objectType: string | null, entityType?: string): boolean {
  if (q.type === 'within') return throughCycles(m, q.relation) || startsOf(m, q).some((k) => { const [t, r] = k.split('#') as [string, string]; return canFail(m, t, r); });
  return objectType !== null && canFail(m, objectType, q.relation, entityType);
}

/**
 * The distinct questions of a cell's rules with their values there (see the header, 2), or a
 * refusal when a question asks about the resource and the cell's objects have no one type.
 */
export function cellQuestions(rules: { name: string; ast: { when?: import('./ast.js').Expr } }[], kind: PrincipalKind, resourceType: string | null, model: RelationModel): CellQuestion[] | string {
  const out = new Map<string, CellQuestion>();
  for (const r of rules) {
    if (!r.ast.when) continue;
    for (const q of relQuestionsOf(r.ast.when)) {
      const key = questionKey(q);
      if (out.has(key)) continue;
      const objs = q.type === 'has' ? [q.object] : [q.object, q.ancestor];
      const ids: IdRole[] = [];
      if (objs.some((o) => o.type === 'resource')) {
        if (resourceType === null) return `rule "${r.name}" asks ${key} on objects of more than one type, which diff does not model yet`;
        ids.push('resource');
      }
      let fixedError = objs.some((o) => o.type === 'lit' && objectType(o) === null);
      const objText = (o: RelObject) => (o.type === 'lit' ? JSON.stringify(o.value) : 'resource');
      const same = q.type === 'has'
        ? `has ${q.who === 'person' && kind !== 'user' ? 'person' : 'subject'} ${q.relation} ${objText(q.object)}`
        : `within ${objText(q.object)} ${objText(q.ancestor)} ${q.relation}`;
      if (q.type === 'has') {
        if ((q.who === 'agent' && kind === 'user') || (q.who === 'person' && kind === 'auto')) fixedError = true;
        else ids.push(q.who === 'person' && kind !== 'user' ? 'person' : 'subject');
        const t = q.object.type === 'resource' ? resourceType : objectType(q.object);
        const entityType = q.who === 'person' || kind === 'user' ? 'user' : 'agent';
        // the checker errs on an object type without the relation, and on an entity of a type the model does not declare
        if (t === null || !model.types.get(t)?.relations.has(q.relation) || !model.types.has(entityType)) fixedError = true;
        else if (!fixedError && !canHold(model, t, q.relation, entityType)) {
          out.set(key, { key, q, values: canErr(model, q, t, entityType) ? [0, 2] : [0], ids, same });
          continue;
        }
      }
      const t = q.type === 'has' ? (q.object.type === 'resource' ? resourceType : objectType(q.object)) : null;
      const entity = q.type === 'has' ? (q.who === 'person' || kind === 'user' ? 'user' : 'agent') : undefined;
      out.set(key, { key, q, values: fixedError ? [2] : canErr(model, q, t, entity) ? [0, 1, 2] : [0, 1], ids: fixedError ? [] : ids, same });
    }
  }
  return [...out.values()];
}

/**
 * Can an entity of the type hold the relation at all: does some relation it reads take entities
 * of that type directly? (Usersets and tuplesets are read relations too; intersections and
 * exclusions only take away.) An agent is never the `owner` of `[user]`.
 */
function canHold(m: RelationModel, t: string, r: string, entityType: string): boolean {
  for (const k of closure(m, [rkey(t, r)])) {
    const [tt, rr] = k.split('#') as [string, string];
    if (m.types.get(tt)?.relations.get(rr)?.direct.some((ref) => ref.type === entityType && ref.relation === undefined)) return true;
  }
  return false;
}

/** Does relation `sub` of a type always hold where `sup` does not fail: `sup` is a union naming it (transitively)? */
function implies(m: RelationModel, type: string, sub: string, sup: string): boolean {
  const seen = new Set<string>();
  const walk = (rel: string): boolean => {
    if (rel === sub) return true;
    if (seen.has(rel)) return false;
    seen.add(rel);
    const e = m.types.get(type)?.relations.get(rel)?.expr;
    if (!e) return false;
    const parts: RelExpr[] = e.op === 'union' ? e.items : [e];
    return parts.some((p) => p.op === 'computed' && walk(p.relation));
  };
  return walk(sup);
}

/** Every combination of a cell's questions (see the header, 3). */
export function combinations(qs: CellQuestion[], resourceType: string | null, model: RelationModel, validIds: ReadonlySet<IdRole> = new Set()): Combination[] {
  // An id the cell fixes to one that names an object is never invalid there.
  const roles = [...new Set(qs.flatMap((q) => q.ids))].filter((r) => !validIds.has(r)).sort();
  const out: Combination[] = [];
  const seen = new Set<string>();
  const masks = Array.from({ length: 1 << roles.length }, (_, m) => m).sort((x, y) => popcount(x) - popcount(y) || x - y);
  for (const mask of masks) {
    const invalid = roles.filter((_, i) => mask & (1 << i));
    const free = qs.filter((q) => q.values.length > 1 && !q.ids.some((r) => invalid.includes(r)));
    // one choice per distinct question on the cell: questions alike answer alike
    const vars = [...new Set(free.map((q) => q.same))];
    const choices = vars.map((v) => free.find((q) => q.same === v)!.values);
    const total = choices.reduce((n, c) => n * c.length, 1);
    for (let n = 0; n < total; n++) {
      const answers = new Map<string, Answer>();
      for (const q of qs) answers.set(q.key, q.ids.some((r) => invalid.includes(r)) ? 2 : q.values[0]!);
      const pick: Answer[] = [];
      for (let i = 0, rest = n; i < vars.length; i++) { pick.push(choices[i]![rest % choices[i]!.length]!); rest = Math.floor(rest / choices[i]!.length); }
      for (const q of free) answers.set(q.key, pick[vars.indexOf(q.same)]!);
      // Ids made invalid in other ways that give the same answers are the same region: the first (fewest) stands for them.
      const key = JSON.stringify([...answers]);
      if (!ruledOut(free, answers, resourceType, model) && !seen.has(key)) { seen.add(key); out.push({ invalid, answers }); }
    }
  }
  return out;
}

function popcount(n: number): number { let c = 0; for (; n; n &= n - 1) c++; return c; }

function ruledOut(free: CellQuestion[], answers: Map<string, Answer>, resourceType: string | null, model: RelationModel): boolean {
  for (const x of free) for (const y of free) {
    if (x === y || x.q.type !== 'has' || y.q.type !== 'has') continue;
    // the same entity (second word of `same`) and the same object (its last)
    const [, ex, , ox] = x.same.split(' '), [, ey, , oy] = y.same.split(' ');
    if (ex !== ey || ox !== oy) continue;
    const t = x.q.object.type === 'resource' ? resourceType : objectType(x.q.object);
    if (t === null) continue;
    if (answers.get(x.key) === 1 && answers.get(y.key) === 0 && implies(model, t, x.q.relation, y.q.relation)) return true;
  }
  return false;
}

/** The text of a combination, for a refusal. */
export function combinationText(c: Combination): string {
  return [...c.answers].map(([k, v]) => `${k} ${v === 1 ? 'holds' : v === 0 ? 'does not hold' : 'cannot be answered'}`).join(', ');
}

export const combinationKey = (c: Combination): string => JSON.stringify([...c.answers]);

/** The request with the ids the combination says are invalid made so (a space in the id), or null when that leaves the cell. */
function withInvalidIds(req: DecisionRequest, invalid: IdRole[]): DecisionRequest {
  let out = req;
  for (const r of invalid) {
    if (r === 'resource') out = { ...out, resource: out.resource + ' x' };
    else if (r === 'subject') out = { ...out, subject: { ...out.subject, id: out.subject.id + ' x' } };
    else if (out.person) out = { ...out, person: { ...out.person, id: out.person.id + ' x' } };
  }
  return out;
}

/** The objects of a request and its questions by type, plus one more of each type of the model. */
function objectsByType(req: DecisionRequest, qs: CellQuestion[], model: RelationModel): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (o: string) => {
    const p = parseObject(o);
    if (typeof p === 'string') return;
    const l = out.get(p.type) ?? out.set(p.type, []).get(p.type)!;
    if (!l.includes(o)) l.push(o);
  };
  add(req.resource);
  add(`${req.subject.type}:${req.subject.id}`);
  if (req.person && req.person.id) add(`user:${req.person.id}`);
  for (const q of qs) for (const o of q.q.type === 'has' ? [q.q.object] : [q.q.object, q.q.ancestor]) if (o.type === 'lit' && typeof o.value === 'string') add(o.value);
  for (const t of model.types.keys()) add(`${t}:diff-1`);
  return out;
}

/** Relationships past the hop limit in a chain: a `through` walk or a recursive check errs on it. */
const CHAIN = 30;

/**
 * What a graph is built from: each relationship the model's restrictions allow over the given
 * objects among the relations the questions read (a conditioned one without its context, which
 * errs unless the request gives the parameter), and, where a relation points from a type to the
 * same type (`parent: [folder]` on folders), a chain of 30 such relationships from each object
 * that can start one, taken as one piece.
 */
function candidates(qs: CellQuestion[], model: RelationModel, objects: Map<string, string[]>): Relationship[][] {
  const starts = qs.flatMap((q) => startsOf(model, q.q));
  const reached = closure(model, starts);
  for (const q of qs) if (q.q.type === 'within') for (const t of model.types.values()) if (t.relations.has(q.q.relation)) reached.add(rkey(t.name, q.q.relation));
  const out: Relationship[][] = [];
  const seen = new Set<string>();
  for (const k of [...reached].sort()) {
    const [t, r] = k.split('#') as [string, string];
    const def = model.types.get(t)?.relations.get(r);
    if (!def) continue;
    for (const x of objects.get(t) ?? []) for (const ref of def.direct) {
      const subjects = ref.wildcard ? [`${ref.type}:*`] : (objects.get(ref.type) ?? []).map((o) => (ref.relation !== undefined ? `${o}#${ref.relation}` : o));
      for (const subject of subjects) {
        const rel: Relationship = { object: x, relation: r, subject, ...(ref.condition !== undefined ? { condition: { name: ref.condition } } : {}) };
        const text = relationshipText(rel);
        if (!seen.has(text)) { seen.add(text); out.push([rel]); }
      }
    }
  }
  for (const k of [...reached].sort()) {
    const [t, r] = k.split('#') as [string, string];
    const def = model.types.get(t)?.relations.get(r);
    for (const ref of def?.direct ?? []) {
      if (ref.relation !== undefined || ref.wildcard || ref.condition !== undefined) continue;
      const loop = model.types.get(ref.type)?.relations.get(r)?.direct.some((x) => x.type === ref.type && x.relation === undefined && !x.wildcard && x.condition === undefined);
      if (!loop) continue;
      for (const x of objects.get(t) ?? []) {
        const chain: Relationship[] = [];
        let at = x;
        for (let i = 1; i <= CHAIN; i++) { const next = `${ref.type}:chain-${i}`; chain.push({ object: at, relation: r, subject: next }); at = next; }
        out.push(chain);
      }
    }
  }
  return out;
}

/** A relationship of an example: its text, or (with a condition, which the text cannot carry) its JSON form. */
export type ExampleRelationship = string | { object: string; relation: string; subject: string; condition: { name: string; context?: Record<string, unknown> } };

export interface Realised { request: DecisionRequest; graph: ExampleRelationship[] }

const exampleRelationship = (r: Relationship): ExampleRelationship => (r.condition ? { object: r.object, relation: r.relation, subject: r.subject, condition: r.condition } : relationshipText(r));

/**
 * A request of the combination (see the header, 4): the given one with ids made invalid as it
 * says and the smallest graph found on which each question answers as it says and the request
 * `decidesAs` the region says (a relation may grant the action itself); null when none is found
 * within the bound, or the ids cannot be made so.
 * Each graph tried is a step `spend` pays for (a diff's work is counted).
 */
export function realise(req: DecisionRequest, qs: CellQuestion[], c: Combination, sets: [PolicySet, PolicySet], inCell: (req: DecisionRequest) => boolean, decidesAs: (req: DecisionRequest) => boolean, spend: (steps: number) => void = () => {}): Realised | null {
  const base = withInvalidIds(req, c.invalid);
  if (c.invalid.length && !inCell(base)) return null;
  const model = sets[0].compiled.relations;
  const cands = candidates(qs, model, objectsByType(base, qs, model));
  const compiled = qs.map((q) => ({ key: q.key, f: compileRelQuestion(q.q) }));
  let tries = 0;
  const pick: number[] = [];
  const attempt = (): Realised | null | undefined => {
    if (++tries > REALISE_TRIES) return null;
    spend(1);
    const graph = pick.flatMap((i) => cands[i]!);
    const index = new MemoryIndex();
    for (const r of graph) index.add(r);
    const request: DecisionRequest = { ...base, relationships: index };
    for (const set of sets) {
      const env = envOf(request);
      env.model = set.compiled.relations;
      if (compiled.some((q) => q.f(env).value !== c.answers.get(q.key))) return undefined;
    }
    if (!decidesAs(request)) return undefined;
    return { request, graph: graph.map(exampleRelationship) };
  };
  const rec = (start: number, size: number): Realised | null | undefined => {
    if (pick.length === size) return attempt();
    for (let i = start; i < cands.length; i++) {
      pick.push(i);
      const r = rec(i + 1, size);
      pick.pop();
      if (r !== undefined) return r;
    }
    return undefined;
  };
  for (let size = 0; size <= Math.min(REALISE_MAX_SIZE, cands.length); size++) {
    const r = rec(0, size);
    if (r !== undefined) return r;
  }
  return null;
}
