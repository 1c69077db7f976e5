// Relationships: the text form (`document:1#viewer@user:anne`, OpenFGA's tuple notation) and
// the JSON form (`{"object", "relation", "subject", "condition"?}`), parsed into one shape.

/** A relationship. `subject` is an entity `t:id`, a userset `t:id#rel` or a wildcard `t:*`. */
export interface Relationship {
  object: string;
  relation: string;
  subject: string;
  condition?: { name: string; context?: Record<string, unknown> };
}

/** A subject, split: `user:anne`, `group:eng#member` (relation `member`), `user:*` (wildcard). */
export interface SubjectRef { type: string; id: string; relation?: string; wildcard: boolean }

const NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;
// No NUL either: no store can hold it (PostgreSQL's text refuses it).
const ID = /^[^\s#@:*\0][^\s#@\0]*$/;

export function isName(s: string): boolean {
  return NAME.test(s);
}

/** `type:id` (no wildcard, no relation), or an error message. */
export function parseObject(s: string): { type: string; id: string } | string {
  if (typeof s !== 'string') return 'an object is a string "<type>:<id>"';
  const c = s.indexOf(':');
  if (c < 0) return `object "${s}" needs the form <type>:<id>`;
  const type = s.slice(0, c), id = s.slice(c + 1);
  if (!NAME.test(type)) return `object "${s}": "${type}" is not a type name`;
  if (!ID.test(id)) return `object "${s}": the id must be non-empty, without spaces, NUL, "#", "@" or "*"`;
  return { type, id };
}

/** An entity, a userset or a wildcard, or an error message. */
export function parseSubject(s: string): SubjectRef | string {
  if (typeof s !== 'string') return 'a subject is a string "<type>:<id>", "<type>:<id>#<relation>" or "<type>:*"';
  const h = s.indexOf('#');
  if (h >= 0) {
    const obj = parseObject(s.slice(0, h));
    if (typeof obj === 'string') return `subject "${s}": ${obj}`;
    const rel = s.slice(h + 1);
    if (!NAME.test(rel)) return `subject "${s}": "${rel}" is not a relation name`;
    return { type: obj.type, id: obj.id, relation: rel, wildcard: false };
  }
  if (s.endsWith(':*')) {
    const type = s.slice(0, -2);
    if (!NAME.test(type)) return `subject "${s}": "${type}" is not a type name`;
    return { type, id: '*', wildcard: true };
  }
  const obj = parseObject(s);
  if (typeof obj === 'string') return obj.replace(/^object/, 'subject');
  return { type: obj.type, id: obj.id, wildcard: false };
}

/** `document:1#viewer@user:anne` → a relationship, or an error message. */
export function parseRelationshipText(text: string): Relationship | string {
  const at = text.indexOf('@');
  if (at < 0) return `"${text}" needs the form <object>#<relation>@<subject>`;
  const left = text.slice(0, at), subject = text.slice(at + 1);
  const h = left.indexOf('#');
  if (h < 0) return `"${text}" needs the form <object>#<relation>@<subject>`;
  const object = left.slice(0, h), relation = left.slice(h + 1);
  const o = parseObject(object);
  if (typeof o === 'string') return o;
  if (!NAME.test(relation)) return `"${text}": "${relation}" is not a relation name`;
  const s = parseSubject(subject);
  if (typeof s === 'string') return s;
  return { object, relation, subject };
}

export function relationshipText(r: Relationship): string {
  return `${r.object}#${r.relation}@${r.subject}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON form, checked for shape (not against a model): a relationship or an error message. */
export function parseRelationshipJson(v: unknown): Relationship | string {
  if (!isRecord(v)) return 'a relationship is an object {"object", "relation", "subject"}';
  for (const k of Object.keys(v)) if (!['object', 'relation', 'subject', 'condition'].includes(k)) return `unknown field "${k}"`;
  const { object, relation, subject, condition } = v;
  if (typeof object !== 'string') return '"object" must be a string "<type>:<id>"';
  if (typeof relation !== 'string' || !NAME.test(relation)) return '"relation" must be a relation name';
  if (typeof subject !== 'string') return '"subject" must be a string';
  const o = parseObject(object);
  if (typeof o === 'string') return o;
  const s = parseSubject(subject);
  if (typeof s === 'string') return s;
  const r: Relationship = { object, relation, subject };
  if (condition !== undefined && condition !== null) {
    if (!isRecord(condition) || typeof condition.name !== 'string' || !NAME.test(condition.name)) return '"condition" must be {"name": "<condition>", "context"?: {...}}';
    for (const k of Object.keys(condition)) if (k !== 'name' && k !== 'context') return `unknown field "condition.${k}"`;
    if (condition.context !== undefined && !isRecord(condition.context)) return '"condition.context" must be an object';
    r.condition = condition.context !== undefined ? { name: condition.name, context: condition.context as Record<string, unknown> } : { name: condition.name };
  }
  return r;
}
