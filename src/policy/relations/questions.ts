// Relationship questions in rule conditions, answered against the request's relationships:
//
//   WHO has R on OBJ        WHO is `subject` (the acting agent `agent:<id>`, or a person acting
//                           directly `user:<id>`), `agent` (the acting agent; none when a person
//                           acts directly), `person` (`user:<id>` of the person a delegated agent
//                           acts for, or of the person acting). True when the checker grants R.
//   OBJ in ANC through R    OBJ is ANC, or one of OBJ's R relationships points to ANC, or to an
//                           object whose R points to ANC, and so on. Each R followed is one hop;
//                           cycles end (an object is visited once); needing more than 25 hops is
//                           the error resolution_too_complex. R must take only plain objects as
//                           its subjects (checked by `policy check`), so the stored relationships
//                           are every R there is; each one followed is confirmed by the checker
//                           (so a conditioned relationship counts only when its condition holds,
//                           and one the model no longer allows is ignored).
//
// An object is the resource, a value holding `"<type>:<id>"` or `{"type", "id"}`, or a constant.
// The answer is three-valued as every condition's: an error (no relationships given, no person,
// an object that is not one, an unknown relation of the object's type, a condition that cannot be
// evaluated, too many hops) is "cannot be evaluated", and the rule fails closed.

import type { PathNode, RelObject, RelQuestion } from '../ast.js';
import type { RelationModel } from './model.js';
import type { RelationshipIndex } from './index.js';
import { NONE } from './index.js';
import { relationChecker, MAX_DEPTH } from './checker.js';
import { parseObject, relationshipText } from './tuple.js';

/** What a relationship question reads from a decision. */
export interface QuestionEnv {
  subject: { type: string; id: string };
  person: { id: string } | null;
  resource: string;
  ctx: Record<string, unknown>;
  model?: RelationModel;
  relationships?: RelationshipIndex;
}

export type QuestionAnswer =
  | { value: 0 | 1; path: string[] }
  | { value: 2; error: string };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An object's id `type:id` from a value, or why the value is none. */
export function objectOfValue(v: unknown): string | { error: string } {
  if (typeof v === 'string') {
    const o = parseObject(v);
    return typeof o === 'string' ? { error: o } : v;
  }
  if (isRecord(v) && typeof v.type === 'string' && typeof v.id === 'string') {
    const text = `${v.type}:${v.id}`;
    const o = parseObject(text);
    return typeof o === 'string' ? { error: o } : text;
  }
  return { error: 'is not an object ("<type>:<id>" or {"type", "id"})' };
}

export type ObjectReader<E extends QuestionEnv = QuestionEnv> = (env: E) => string | { error: string };

/** A reader of a question's object; `read` reads a path (the evaluator's own reader). */
export function compileObject<E extends QuestionEnv>(o: RelObject, read: (p: PathNode) => (env: E) => unknown, missing: unknown, text: (p: PathNode) => string): ObjectReader<E> {
  if (o.type === 'resource') {
    return (env) => {
      const r = objectOfValue(env.resource);
      return typeof r === 'string' ? r : { error: `the resource ${r.error}` };
    };
  }
  if (o.type === 'lit') {
    const r = objectOfValue(o.value);
    return () => r;
  }
  const reader = read(o);
  const name = text(o);
  return (env) => {
    const v = reader(env);
    if (v === missing) return { error: `${name} is missing` };
    const r = objectOfValue(v);
    return typeof r === 'string' ? r : { error: `${name} ${r.error.startsWith('is ') ? r.error : `holds no object: ${r.error}`}` };
  };
}

function entityOf(who: 'agent' | 'person' | 'subject', env: QuestionEnv): string | { error: string } {
  const s = env.subject;
  switch (who) {
    case 'subject': return `${s.type}:${s.id}`;
    case 'agent': return s.type === 'agent' ? `agent:${s.id}` : { error: 'no agent acts (a person acts directly)' };
    case 'person': {
      const p = env.person;
      return p && typeof p.id === 'string' && p.id !== '' ? `user:${p.id}` : { error: 'the agent acts for no person' };
    }
  }
}

/** A question compiled once: objects' readers; evaluated per decision. */
export function compileQuestion<E extends QuestionEnv>(q: RelQuestion, objectReader: (o: RelObject) => ObjectReader<E>): (env: E) => QuestionAnswer {
  if (q.type === 'has') {
    const obj = objectReader(q.object);
    const relation = q.relation;
    return (env) => {
      const o = obj(env);
      if (typeof o !== 'string') return { value: 2, error: o.error };
      const e = entityOf(q.who, env);
      if (typeof e !== 'string') return { value: 2, error: e.error };
      const model = env.model, index = env.relationships;
      if (!model || !index) return { value: 2, error: 'no relationships were given to the decision' };
      const type = o.slice(0, o.indexOf(':'));
      if (!model.types.get(type)?.relations.has(relation)) return { value: 2, error: `type ${type} has no relation ${relation}` };
      const r = relationChecker(model, index).check(o, relation, e, { context: env.ctx, path: true });
      if ('error' in r) return { value: 2, error: r.error.message };
      return r.allowed ? { value: 1, path: r.path.map(relationshipText) } : { value: 0, path: [] };
    };
  }
  const obj = objectReader(q.object), anc = objectReader(q.ancestor);
  const relation = q.relation;
  return (env) => {
    const o = obj(env);
    if (typeof o !== 'string') return { value: 2, error: o.error };
    const a = anc(env);
    if (typeof a !== 'string') return { value: 2, error: a.error };
    if (o === a) return { value: 1, path: [] };
    const model = env.model, index = env.relationships;
    if (!model || !index) return { value: 2, error: 'no relationships were given to the decision' };
    return reach(model, index, o, a, relation, env.ctx);
  };
}

/** Breadth first from `from` along `relation` relationships, looking for `to`. */
function reach(model: RelationModel, index: RelationshipIndex, from: string, to: string, relation: string, ctx: Record<string, unknown>): QuestionAnswer {
  const relSym = index.lookup(relation);
  if (relSym === NONE) return { value: 0, path: [] };
  const checker = relationChecker(model, index);
  // The relationship that reached each object, for the path.
  const via = new Map<string, { from: string; text: string }>();
  const seen = new Set([from]);
  let frontier = [from];
  let error: string | null = null;
  for (let hops = 0; frontier.length; hops++) {
    const next: string[] = [];
    for (const x of frontier) {
      const type = x.slice(0, x.indexOf(':'));
      if (!model.types.get(type)?.relations.has(relation)) continue;
      const xs = index.lookup(x);
      const list = xs === NONE ? undefined : index.subjects(relSym, xs);
      if (!list) continue;
      for (let i = 0; i < list.length; i += 3) {
        if (list[i + 1] !== NONE || index.isWildcard(list[i]!)) continue;
        const y = index.name(list[i]!);
        if (seen.has(y)) continue;
        if (hops >= MAX_DEPTH) return { value: 2, error: `resolution_too_complex: more than ${MAX_DEPTH} ${relation} relationships followed up from ${from}` };
        const r = checker.check(x, relation, y, { context: ctx });
        if ('error' in r) { error ??= r.error.message; continue; }
        if (!r.allowed) continue;
        seen.add(y);
        via.set(y, { from: x, text: `${x}#${relation}@${y}` });
        if (y === to) {
          const path: string[] = [];
          for (let at = y; at !== from;) { const v = via.get(at)!; path.unshift(v.text); at = v.from; }
          return { value: 1, path };
        }
        next.push(y);
      }
    }
    frontier = next;
  }
  return error !== null ? { value: 2, error } : { value: 0, path: [] };
}
