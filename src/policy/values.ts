// Reading a path from a request, and the value types the language compares.
// One definition for the compiled evaluator, explain and diff.
//
//   context.<f>    the request's context (bare `<f>` is the same)
//   subject.<a>    id, type, name, mode, email, roles, groups; else attributes.<a>
//   person.<a>     id, email, roles, groups; else attributes.<a>. The person a delegated
//                  agent acts for; for a person acting directly (subject type user), the subject.
//   resource.<a>   id and type from `<type>:<id>`; else the resource's attributes
//   time.<p>       hour, minute, weekday, date (in the rule's time zone), epoch
//   chain.<a>      depth (how many agents act for the person: 0 for an agent acting alone or a
//                  person, 1 for one agent, more through sub-agents), agents (their IDs, first
//                  to current); else the list of the chain's agents' attributes.<a> (those that
//                  have it; missing when none does)
//   action         the action asked (`push:repos`); action.verb (`push`), action.kind (`repos`)
//
// Deeper segments read nested objects. A value is missing when any step is absent, or
// is not an object to step into. An object that names a stored entity (`{"type":
// "customer", "id": "c-1"}`) and lacks the next segment is followed into that entity's
// attributes (`resource.customer.fraud`), to any depth, each hop through a reference; a
// reference to no stored entity is missing (fail closed).

import type { PathNode, Root } from './ast.js';
import type { Attributes, DecisionRequest, PersonFacts, SubjectFacts } from './types.js';
import { epochSeconds, timeFacts, type TimeField } from './time.js';
import type { RelationModel } from './relations/model.js';
import type { RelationshipIndex } from './relations/index.js';

/** The value of a path that is not there. */
export const MISSING: unique symbol = Symbol('missing');
export type Read = unknown;

const hasOwn = Object.hasOwn;
const EMPTY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** Everything a decision reads, gathered once per decision. */
export interface Env {
  ctx: Record<string, unknown>;
  subject: SubjectFacts;
  /** The person a delegated agent acts for; the subject itself for a user; else null. */
  person: PersonFacts | SubjectFacts | null;
  resource: string;
  attrs: Attributes;
  now: number;
  /** The action asked, `<verb>:<kinds>`. */
  action: string;
  /** The relation model of the policy set (set by decide), for relationship questions. */
  model?: RelationModel;
  /** The request's relationships, for relationship questions; none given: such questions cannot be evaluated. */
  relationships?: RelationshipIndex;
  /** The agents acting for the person, first to current (one, the subject, for a delegated agent; none without a person). */
  chain: readonly SubjectFacts[];
  /** Stored entities that references lead to (see DecisionRequest.entities). */
  entities?: ReadonlyMap<string, Attributes | null>;
  /** Paths the schema declares as references, full path → entity type: a string there is an id. */
  referenceTypes?: ReadonlyMap<string, string>;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function envOf(req: DecisionRequest): Env {
  const subject = req.subject;
  // Only a delegated agent acts for a person; an agent acting alone has none, whatever the request carries.
  const person = subject.type === 'user' ? subject : subject.mode === 'delegated' && isRecord(req.person) ? req.person : null;
  return {
    ctx: isRecord(req.context) ? req.context : EMPTY,
    subject,
    person,
    resource: req.resource,
    attrs: isRecord(req.resourceAttributes) ? req.resourceAttributes : EMPTY,
    now: req.now,
    action: req.action,
    ...(req.relationships ? { relationships: req.relationships } : {}),
    chain: chainOf(req, subject, person),
    ...(req.entities ? { entities: req.entities } : {}),
  };
}

const NO_AGENTS: readonly SubjectFacts[] = Object.freeze([]);

/** The agents acting for the person: the request's chain, else the delegated agent itself. */
function chainOf(req: DecisionRequest, subject: SubjectFacts, person: unknown): readonly SubjectFacts[] {
  if (isRecord(req.chain) && Array.isArray(req.chain.agents) && req.chain.agents.length) return req.chain.agents;
  if (subject.type !== 'agent' || !isRecord(person) || typeof person.id !== 'string' || person.id === '') return NO_AGENTS;
  return [subject];
}


/** The `<type>:<id>` an object names when it is a reference to a stored entity, else null. */
export function referenceOf(v: unknown): string | null {
  if (!isRecord(v)) return null;
  const t = v.type, id = v.id;
  return typeof t === 'string' && typeof id === 'string' && t !== '' && id !== '' && !t.includes(':') ? `${t}:${id}` : null;
}

/** How many references one path may follow: enough for real models, bounded against cycles. */
export const REFERENCE_HOPS = 8;

/** A table keyed by names a rule writes: no prototype, so `constructor` or `__proto__` is just a name it lacks. */
const table = <T>(entries: Record<string, T>): Record<string, T> => Object.assign(Object.create(null) as Record<string, T>, entries);

/** The built-in facts of each root, with their types; any other name is a custom attribute. */
export const BUILTINS: Record<Exclude<Root, 'context'>, Record<string, ValueType>> = {
  subject: table({ id: 'string', type: 'string', name: 'string', mode: 'string', email: 'string', roles: '[string]', groups: '[string]' }),
  person: table({ id: 'string', email: 'string', roles: '[string]', groups: '[string]' }),
  resource: table({ id: 'string', type: 'string' }),
  time: table({ hour: 'number', minute: 'number', weekday: 'string', date: 'string', epoch: 'number' }),
  chain: table({ depth: 'number', agents: '[string]' }),
  action: table({ verb: 'string', kind: 'string' }),
};

/** The types a value can have for the language: a scalar, or a list of one scalar type. */
export type ValueType = 'number' | 'string' | 'boolean' | '[number]' | '[string]' | '[boolean]';
export const VALUE_TYPES: readonly ValueType[] = ['number', 'string', 'boolean', '[number]', '[string]', '[boolean]'];

export function scalarTypeOf(v: unknown): 'number' | 'string' | 'boolean' | null {
  switch (typeof v) {
    case 'number': return Number.isFinite(v) ? 'number' : null;
    case 'string': return 'string';
    case 'boolean': return 'boolean';
    default: return null;
  }
}

/** Does a value have this type? A list has it when every item has the item type (an empty list has every list type). */
export function hasType(v: unknown, t: ValueType): boolean {
  if (t.charCodeAt(0) !== 91 /* [ */) return scalarTypeOf(v) === t;
  if (!Array.isArray(v)) return false;
  const item = t.slice(1, -1);
  for (let i = 0; i < v.length; i++) if (scalarTypeOf(v[i]) !== item) return false;
  return true;
}

function step(v: unknown, segs: string[], from: number, env?: Env, root?: string): Read {
  const entities = env?.entities;
  let cur = v;
  let hops = 0;
  for (let i = from; i < segs.length; i++) {
    if (typeof cur === 'string' && entities && env!.referenceTypes?.size) {
      // A string where the schema declares a reference is the id of an entity of that type.
      const type = env!.referenceTypes.get(`${root}.${segs.slice(0, i).join('.')}`);
      const target = type === undefined || ++hops > REFERENCE_HOPS ? undefined : entities.get(`${type}:${cur}`);
      if (!target) return MISSING;
      cur = target;
    }
    if (!isRecord(cur)) return MISSING;
    if (!hasOwn(cur, segs[i]!)) {
      const ref = entities ? referenceOf(cur) : null;
      if (ref === null || ++hops > REFERENCE_HOPS) return MISSING;
      const target = entities!.get(ref);
      if (!target) return MISSING;
      cur = target;
      i--;
      continue;
    }
    cur = cur[segs[i]!];
  }
  return cur === undefined ? MISSING : cur;
}

function builtin(facts: object, name: string): Read {
  const v = (facts as Record<string, unknown>)[name];
  return v === undefined ? MISSING : v;
}

/** A reader of one path, compiled once. `zone` is the time zone of `time.*` for the rule. */
export function compileReader(p: PathNode, zone: string): (env: Env) => Read {
  const segs = p.segs;
  const first = segs[0]!;
  const deep = segs.length > 1;
  switch (p.root) {
    case 'context':
      if (!deep) return (env) => (hasOwn(env.ctx, first) && env.ctx[first] !== undefined ? env.ctx[first] : MISSING);
      return (env) => step(env.ctx, segs, 0, env, 'context');
    case 'subject':
      if (hasOwn(BUILTINS.subject, first)) {
        return deep ? () => MISSING : (env) => builtin(env.subject, first);
      }
      return (env) => step(env.subject.attributes, segs, 0, env, 'subject');
    case 'person':
      if (hasOwn(BUILTINS.person, first)) {
        return deep ? () => MISSING : (env) => (env.person ? builtin(env.person, first) : MISSING);
      }
      return (env) => (env.person ? step(env.person.attributes, segs, 0, env, 'person') : MISSING);
    case 'resource':
      if (first === 'id' || first === 'type') {
        if (deep) return () => MISSING;
        const wantId = first === 'id';
        return (env) => {
          const r = env.resource;
          const i = typeof r === 'string' ? r.indexOf(':') : -1;
          if (i < 0) return MISSING;
          return wantId ? r.slice(i + 1) : r.slice(0, i);
        };
      }
      return (env) => step(env.attrs, segs, 0, env, 'resource');
    case 'action': {
      if (segs.length > 1) return () => MISSING;
      if (segs.length === 0) return (env) => (typeof env.action === 'string' ? env.action : MISSING);
      if (first !== 'verb' && first !== 'kind') return () => MISSING;
      const verb = first === 'verb';
      return (env) => {
        const a = env.action;
        const i = typeof a === 'string' ? a.indexOf(':') : -1;
        if (i < 0) return MISSING;
        return verb ? a.slice(0, i) : a.slice(i + 1);
      };
    }
    case 'chain':
      if (first === 'depth') return deep ? () => MISSING : (env) => env.chain.length;
      if (first === 'agents') return deep ? () => MISSING : (env) => env.chain.map((a) => a.id);
      return (env) => {
        const out: unknown[] = [];
        for (const a of env.chain) {
          const v = step(a.attributes, segs, 0, env, 'chain');
          if (v !== MISSING) out.push(v);
        }
        return out.length ? out : MISSING;
      };
    case 'time': {
      if (deep) return () => MISSING;
      const f = first as TimeField;
      if (f === 'epoch') return (env) => epochSeconds(env.now) ?? MISSING;
      if (f !== 'hour' && f !== 'minute' && f !== 'weekday' && f !== 'date') return () => MISSING;
      return (env) => {
        const t = timeFacts(env.now, zone);
        return t ? t[f] : MISSING;
      };
    }
  }
}

/** Read one path of a request (slow path: explain, diff, tools). */
export function readPath(req: DecisionRequest, p: PathNode, zone = 'UTC'): { present: boolean; value: unknown } {
  const v = compileReader(p, zone)(envOf(req));
  return v === MISSING ? { present: false, value: undefined } : { present: true, value: v };
}
