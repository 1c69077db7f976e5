// The AuthZEN 1.0 request shapes, read by hand: the hot path parses a few small objects per
// request, and each failure names the field (`evaluations.3.resource.id: must be a string`).
// Unknown members are ignored (the specification's forward compatibility).

import { errors, type ProtocolError } from '../errors.js';
import { isJsonObject } from '../policy/own.js';

export type Properties = Record<string, unknown>;

export interface Subject { type: string; id: string; properties?: Properties }
export interface Resource { type: string; id: string; properties?: Properties }
export interface Action { name: string; properties?: Properties }

/** One access question, every required part present. */
export interface Evaluation {
  subject: Subject;
  action: Action;
  resource: Resource;
  context: Properties;
}

/** A part as sent, before defaults fill it in: any of its members may be missing. */
type Partial4 = { subject?: Properties; action?: Properties; resource?: Properties; context?: Properties };

export type Semantic = 'execute_all' | 'deny_on_first_deny' | 'permit_on_first_permit';
const SEMANTICS: readonly Semantic[] = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'];

/** The most evaluations one batch may hold (a bigger batch is a 400, not a slow answer). */
export const MAX_EVALUATIONS = 1000;

/** One issue with the request, as the management API's 400 lists them. */
interface Issue { path: string; message: string; code: string }

/** A field-named 400 (`error_description` lists every issue; `issues` carries them as data). */
export function badRequest(issues: Issue[]): ProtocolError {
  return errors.invalidRequest(issues.map((i) => `${i.path}: ${i.message}`).join('; '), { issues });
}


/** The body itself: a JSON object (an array or a scalar is a 400 before anything else). */
export function requireObject(body: unknown): Properties {
  if (!isJsonObject(body)) throw badRequest([{ path: 'body', message: 'must be a JSON object', code: 'invalid_type' }]);
  return body;
}

class Reader {
  readonly issues: Issue[] = [];
  fail(path: string, message: string, code = 'invalid_type'): void {
    this.issues.push({ path, message, code });
  }

  /** An optional object member; reports a non-object. */
  object(parent: Properties, key: string, path: string): Properties | undefined {
    const v = parent[key];
    if (v === undefined || v === null) return undefined;
    if (!isJsonObject(v)) {
      this.fail(path, 'must be an object');
      return undefined;
    }
    return v;
  }

  /** A required non-empty string member. */
  string(parent: Properties, key: string, path: string): string {
    const v = parent[key];
    if (v === undefined || v === null) this.fail(path, 'is required', 'required');
    else if (typeof v !== 'string') this.fail(path, 'must be a string');
    else if (v.length === 0) this.fail(path, 'must not be empty', 'too_small');
    else if (v.length > 1024) this.fail(path, 'must be at most 1024 characters', 'too_big');
    // A NUL cannot be stored (PostgreSQL's text refuses it) nor named in a policy: no id holds one.
    else if (v.includes('\u0000')) this.fail(path, 'must not contain a NUL character', 'invalid_value');
    else return v;
    return '';
  }

  /** An optional string member (type-checked when present). */
  optionalString(parent: Properties, key: string, path: string): string | undefined {
    const v = parent[key];
    if (v === undefined || v === null) return undefined;
    return this.string(parent, key, path);
  }

  properties(parent: Properties, path: string): Properties | undefined {
    return this.object(parent, 'properties', `${path}.properties`);
  }

  /** An entity `{type, id, properties?}`; `id` may be optional (the searched entity). */
  entity(v: Properties | undefined, path: string, idRequired: boolean): { type: string; id?: string; properties?: Properties } {
    if (!v) {
      this.fail(path, 'is required', 'required');
      return { type: '' };
    }
    const type = this.string(v, 'type', `${path}.type`);
    const id = idRequired ? this.string(v, 'id', `${path}.id`) : this.optionalString(v, 'id', `${path}.id`);
    const properties = this.properties(v, path);
    return { type, ...(id !== undefined ? { id } : {}), ...(properties ? { properties } : {}) };
  }

  action(v: Properties | undefined, path: string): Action {
    if (!v) {
      this.fail(path, 'is required', 'required');
      return { name: '' };
    }
    const name = this.string(v, 'name', `${path}.name`);
    const properties = this.properties(v, path);
    return properties ? { name, properties } : { name };
  }

  throwIfAny(): void {
    if (this.issues.length) throw badRequest(this.issues);
  }
}

/** Reads one complete evaluation from its (already merged) parts. */
function readEvaluation(r: Reader, parts: Partial4, prefix: string): Evaluation {
  const subject = r.entity(parts.subject, `${prefix}subject`, true) as Subject;
  const action = r.action(parts.action, `${prefix}action`);
  const resource = r.entity(parts.resource, `${prefix}resource`, true) as Resource;
  return { subject, action, resource, context: parts.context ?? {} };
}

/** The four parts of an object, each checked to be an object when present. */
function parts(r: Reader, o: Properties, prefix: string): Partial4 {
  const p: Partial4 = {};
  for (const key of ['subject', 'action', 'resource', 'context'] as const) {
    const v = r.object(o, key, `${prefix}${key}`);
    if (v) p[key] = v;
  }
  return p;
}

/** POST /access/v1/evaluation */
export function readEvaluationRequest(body: unknown): Evaluation {
  const o = requireObject(body);
  const r = new Reader();
  const e = readEvaluation(r, parts(r, o, ''), '');
  r.throwIfAny();
  return e;
}

/** An item of a batch: the question, or why it cannot be asked (answered `decision: false`). */
export type BatchItem = { ok: true; evaluation: Evaluation } | { ok: false; error: string };

export type EvaluationsRequest =
  | { kind: 'single'; evaluation: Evaluation }
  | { kind: 'batch'; semantic: Semantic; items: BatchItem[] };

/**
 * An entity of an item over the top-level default: the item's object replaces the default as a
 * whole, except that its missing `type` or `id` comes from the default (so a default
 * `{"type": "todo"}` and items `{"id": "1"}` make `todo:1`).
 */
function mergeEntity(def: Properties | undefined, own: Properties | undefined): Properties | undefined {
  if (!own) return def;
  if (!def) return own;
  const out: Properties = { ...own };
  for (const key of ['type', 'id', 'name'] as const) {
    if (out[key] === undefined && def[key] !== undefined) out[key] = def[key];
  }
  return out;
}

/**
 * POST /access/v1/evaluations. Without `evaluations` (or with an empty array) the request is a
 * single evaluation. With items, the top-level subject, action, resource and context are
 * defaults for each; a malformed top level is a 400, while an item that is still incomplete
 * after the defaults is answered `decision: false` with the reason in its context.
 */
export function readEvaluationsRequest(body: unknown): EvaluationsRequest {
  const o = requireObject(body);
  const r = new Reader();
  const top = parts(r, o, '');
  const options = r.object(o, 'options', 'options');
  let semantic: Semantic = 'execute_all';
  if (options && options.evaluations_semantic !== undefined && options.evaluations_semantic !== null) {
    const s = options.evaluations_semantic;
    if (typeof s !== 'string' || !SEMANTICS.includes(s as Semantic)) {
      r.fail('options.evaluations_semantic', `must be one of ${SEMANTICS.join(', ')}`, 'invalid_value');
    } else semantic = s as Semantic;
  }
  const list = o.evaluations;
  if (list !== undefined && list !== null && !Array.isArray(list)) r.fail('evaluations', 'must be an array');
  if (Array.isArray(list) && list.length > MAX_EVALUATIONS) {
    r.fail('evaluations', `must hold at most ${MAX_EVALUATIONS} items`, 'too_big');
  }
  // The defaults are partial by nature, but what they do say must be well typed.
  for (const key of ['subject', 'resource'] as const) {
    const d = top[key];
    if (!d) continue;
    for (const m of ['type', 'id'] as const) if (d[m] !== undefined && typeof d[m] !== 'string') r.fail(`${key}.${m}`, 'must be a string');
    r.properties(d, key);
  }
  if (top.action) {
    if (top.action.name !== undefined && typeof top.action.name !== 'string') r.fail('action.name', 'must be a string');
    r.properties(top.action, 'action');
  }
  r.throwIfAny();

  if (!Array.isArray(list) || list.length === 0) {
    const single = new Reader();
    const evaluation = readEvaluation(single, top, '');
    single.throwIfAny();
    return { kind: 'single', evaluation };
  }

  const items: BatchItem[] = list.map((raw, i) => {
    const item = new Reader();
    if (!isJsonObject(raw)) return { ok: false, error: `evaluations.${i}: must be an object` };
    const own = parts(item, raw, `evaluations.${i}.`);
    const merged: Partial4 = {
      subject: mergeEntity(top.subject, own.subject),
      action: mergeEntity(top.action, own.action),
      resource: mergeEntity(top.resource, own.resource),
      context: own.context ?? top.context,
    };
    const evaluation = readEvaluation(item, merged, `evaluations.${i}.`);
    if (item.issues.length) return { ok: false, error: item.issues.map((x) => `${x.path}: ${x.message}`).join('; ') };
    return { ok: true, evaluation };
  });
  return { kind: 'batch', semantic, items };
}

// ---- searches ---------------------------------------------------------------------------

export interface PageRequest { token?: string; limit?: number }

export interface SearchRequest {
  subject: { type: string; id?: string; properties?: Properties };
  action?: Action;
  resource: { type: string; id?: string; properties?: Properties };
  context: Properties;
  page: PageRequest | undefined;
}

/** The largest page a search answers (a bigger `page.limit` is cut to it). */
export const MAX_PAGE = 1000;

function readPage(r: Reader, o: Properties): PageRequest | undefined {
  const page = r.object(o, 'page', 'page');
  if (!page) return undefined;
  const out: PageRequest = {};
  if (page.token !== undefined && page.token !== null && page.token !== '') {
    if (typeof page.token !== 'string') r.fail('page.token', 'must be a string');
    else if (page.token.length > 2048) r.fail('page.token', 'is not a token this PDP issued', 'invalid_value');
    else out.token = page.token;
  }
  if (page.limit !== undefined && page.limit !== null) {
    const l = page.limit;
    if (typeof l !== 'number' || !Number.isInteger(l) || l < 0) r.fail('page.limit', 'must be a non-negative integer');
    else out.limit = Math.min(l, MAX_PAGE);
  }
  return out;
}

export type SearchKind = 'subject' | 'resource' | 'action';

/**
 * A search request: the searched entity needs its `type` only (an `id` there is ignored);
 * the others are complete. Action search has no `action`.
 */
export function readSearchRequest(kind: SearchKind, body: unknown): SearchRequest {
  const o = requireObject(body);
  const r = new Reader();
  const p = parts(r, o, '');
  // The searched entity's `id` is ignored whatever it holds (an empty or non-string one too).
  const withoutId = (e: Properties | undefined): Properties | undefined => (e ? { ...e, id: undefined } : e);
  const subject = r.entity(kind === 'subject' ? withoutId(p.subject) : p.subject, 'subject', kind !== 'subject');
  const resource = r.entity(kind === 'resource' ? withoutId(p.resource) : p.resource, 'resource', kind !== 'resource');
  const action = kind === 'action' ? undefined : r.action(p.action, 'action');
  const page = readPage(r, o);
  r.throwIfAny();
  return { subject, resource, ...(action ? { action } : {}), context: p.context ?? {}, page };
}
