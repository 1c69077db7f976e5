import { z } from 'zod';
import type { SubjectFormat } from '../store/ssf.js';

/** An RFC 9493 subject identifier (or an SSF complex subject): `format` plus its members. */
export type SubjectId = { format: string } & Record<string, unknown>;

const str = z.string().min(1).max(1024);

/**
 * The formats whose members we check; any other format is accepted as given (RFC 9493 lets
 * parties agree on more), it simply never matches one of our events.
 */
const simpleFormats: Record<string, z.ZodType> = {
  iss_sub: z.object({ format: z.literal('iss_sub'), iss: str, sub: str }),
  email: z.object({ format: z.literal('email'), email: str }),
  opaque: z.object({ format: z.literal('opaque'), id: str }),
  phone_number: z.object({ format: z.literal('phone_number'), phone_number: str }),
  account: z.object({ format: z.literal('account'), uri: str }),
  did: z.object({ format: z.literal('did'), url: str }),
  uri: z.object({ format: z.literal('uri'), uri: str }),
};

function checkSimple(value: Record<string, unknown>, ctx: z.RefinementCtx, path: (string | number)[]): void {
  const schema = simpleFormats[value.format as string];
  if (!schema) return;
  const r = schema.safeParse(value);
  if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: 'custom', message: i.message, path: [...path, ...i.path] });
}

/**
 * The largest subject identifier a stream keeps, in bytes of its canonical JSON: the canonical
 * form is the identity of the stored row (part of its primary key), and a key must fit in one
 * index entry on either database.
 */
export const MAX_SUBJECT_BYTES = 2000;

export const subjectIdSchema = z
  .object({ format: str })
  .catchall(z.unknown())
  .superRefine((value, ctx) => {
    if (Buffer.byteLength(canonicalKey(value), 'utf8') > MAX_SUBJECT_BYTES) {
      ctx.addIssue({ code: 'custom', message: `is too large: at most ${MAX_SUBJECT_BYTES} bytes as JSON` });
      return;
    }
    if (value.format === 'complex') {
      const members = Object.entries(value).filter(([k]) => k !== 'format');
      if (members.length === 0) ctx.addIssue({ code: 'custom', message: 'a complex subject needs at least one member' });
      for (const [name, member] of members) {
        if (typeof member !== 'object' || member === null || typeof (member as { format?: unknown }).format !== 'string') {
          ctx.addIssue({ code: 'custom', message: 'must be a subject identifier with a format', path: [name] });
        } else checkSimple(member as Record<string, unknown>, ctx, [name]);
      }
      return;
    }
    if (value.format === 'aliases') {
      const ids = value.identifiers;
      if (!Array.isArray(ids) || ids.length === 0) ctx.addIssue({ code: 'custom', message: 'must be a non-empty array', path: ['identifiers'] });
      return;
    }
    checkSimple(value, ctx, []);
  });

/** Sorted-key JSON: two equal identifiers give the same key whatever the member order. */
export function canonicalKey(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalKey).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalKey(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What an event is about, as the sink knows it. */
export interface EventSubject {
  issuer: string;
  user_id: string;
  email: string;
  session_id?: string;
}

/** The person as the `sub_id` of a SET, in the format the stream asked for. */
export function personSubjectId(s: EventSubject, format: SubjectFormat): SubjectId {
  return format === 'email' ? { format: 'email', email: s.email } : { format: 'iss_sub', iss: s.issuer, sub: s.user_id };
}

/** Does one simple identifier name the person (or, for `session`, the session) of the event? */
function simpleMatches(id: Record<string, unknown>, s: EventSubject, role: 'user' | 'session'): boolean {
  if (role === 'session') {
    return s.session_id !== undefined && id.format === 'opaque' && id.id === s.session_id;
  }
  switch (id.format) {
    case 'iss_sub':
      return id.iss === s.issuer && id.sub === s.user_id;
    case 'email':
      return typeof id.email === 'string' && id.email.toLowerCase() === s.email.toLowerCase();
    case 'opaque':
      return id.id === s.user_id;
    case 'aliases':
      return Array.isArray(id.identifiers) && id.identifiers.some((a) => a && typeof a === 'object' && simpleMatches(a as Record<string, unknown>, s, 'user'));
    default:
      return false;
  }
}

/**
 * SSF subject matching (SSF 1.0, Subject Matching): a simple subject matches when it names the
 * person. A complex one matches unless a member both sides define differs; our events define
 * `user` and, for session-revoked, `session`, so other members (device, tenant, ...) are wildcards.
 */
export function subjectMatches(added: Record<string, unknown>, s: EventSubject): boolean {
  if (added.format !== 'complex') return simpleMatches(added, s, 'user');
  for (const [name, member] of Object.entries(added)) {
    if (name !== 'user' && name !== 'session') continue;
    if (name === 'session' && s.session_id === undefined) continue;
    if (!member || typeof member !== 'object' || !simpleMatches(member as Record<string, unknown>, s, name)) return false;
  }
  return true;
}
