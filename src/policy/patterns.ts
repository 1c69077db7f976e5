// Patterns of subjects, relations, objects and agent IDs; permission keys;
// kind singulars. Shared by the validator, the compiler and `diff`.
//
// A pattern is split at its FIRST colon into a type (or kind, or action) and a
// value. `*` as the whole type matches any type, `*` as the whole value
// matches any value. Otherwise the value is split at `/` and a `*` segment
// matches any one non-empty segment (`agent:spiffe://localhost/agent/*`).

import { ROLE_NAME } from './names.js';

/** `null` is the wildcard. */
export type Seg = string | null;

export interface Pattern {
  /** null: any type. '' for untyped patterns (agent IDs in `limits ... for`). */
  type: string | null;
  /** null: any value; else the segments of the value split at `/`. */
  segs: Seg[] | null;
}

export function splitFirstColon(s: string): [string, string] | null {
  const i = s.indexOf(':');
  return i < 0 ? null : [s.slice(0, i), s.slice(i + 1)];
}

export function parseValuePattern(value: string): Seg[] | null {
  if (value === '*') return null;
  return value.split('/').map((s) => (s === '*' ? null : s));
}

/** `type:value` pattern; returns null when there is no colon. */
export function parseTypedPattern(p: string): Pattern | null {
  const parts = splitFirstColon(p);
  if (!parts) return null;
  return { type: parts[0] === '*' ? null : parts[0], segs: parseValuePattern(parts[1]) };
}

export function parseAgentPattern(p: string): Pattern {
  return { type: '', segs: parseValuePattern(p) };
}

/** The pattern of what both patterns match, or null when nothing matches both. */
export function meetPatterns(a: Pattern, b: Pattern): Pattern | null {
  let type: string | null;
  if (a.type === null) type = b.type; else if (b.type === null || b.type === a.type) type = a.type; else return null;
  if (a.segs === null) return { type, segs: b.segs };
  if (b.segs === null) return { type, segs: a.segs };
  if (a.segs.length !== b.segs.length) return null;
  const segs: (string | null)[] = [];
  for (let i = 0; i < a.segs.length; i++) {
    const x = a.segs[i]!, y = b.segs[i]!;
    if (x === null) segs.push(y); else if (y === null || x === y) segs.push(x); else return null;
  }
  return { type, segs };
}

export function patternToString(p: Pattern): string {
  const v = p.segs === null ? '*' : p.segs.map((s) => (s === null ? '*' : s)).join('/');
  return p.type === '' ? v : `${p.type === null ? '*' : p.type}:${v}`;
}

export function matchValue(segs: Seg[] | null, value: string): boolean {
  if (segs === null) return true;
  if (segs.length === 1) return segs[0] === null ? value.length > 0 && !value.includes('/') : segs[0] === value;
  const parts = value.split('/');
  if (parts.length !== segs.length) return false;
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i];
    if (s === null ? parts[i]!.length === 0 : s !== parts[i]) return false;
  }
  return true;
}

/** Match a typed value (`agent:...`, `refund:r1`, `create:refunds`). */
export function matchTyped(p: Pattern, s: string): boolean {
  const i = s.indexOf(':');
  if (i < 0) return false;
  if (p.type !== null && p.type !== s.slice(0, i)) return false;
  return matchValue(p.segs, s.slice(i + 1));
}

/** A fast predicate for a pattern string: exact patterns compare strings. */
export function compileTypedMatcher(pattern: string): (s: string) => boolean {
  if (!pattern.includes('*')) return (s) => s === pattern;
  const p = parseTypedPattern(pattern)!;
  return (s) => matchTyped(p, s);
}

export function compileAgentMatcher(pattern: string): (id: string) => boolean {
  if (!pattern.includes('*')) return (s) => s === pattern;
  const segs = parseValuePattern(pattern);
  return (s) => matchValue(segs, s);
}

// ---- validation of pattern strings ---------------------------------------------

const NAME = /^[A-Za-z0-9_.\-]+$/;
const SUBJECT_TYPES = new Set(['agent', 'user', 'role', 'group']);

function checkValue(v: string, what: string): string | null {
  if (v.length === 0) return `${what} has an empty value`;
  if (/\s/.test(v)) return `${what} contains white space`;
  if (v === '*') return null;
  for (const seg of v.split('/')) if (seg !== '*' && seg.includes('*')) return `${what}: * must be a whole segment (between / or after :)`;
  return null;
}

/** `<action>:<kinds>`; with `wildcards`, either part may be `*`. */
export function checkPermissionKey(p: string, what: string, wildcards: boolean): string | null {
  const parts = splitFirstColon(p);
  if (!parts) return `${what} "${p}" is not a permission key <action>:<resource_kind>`;
  for (const part of parts) {
    if (wildcards && part === '*') continue;
    if (!NAME.test(part)) return `${what} "${p}" is not a permission key <action>:<resource_kind>${part.includes('*') && !wildcards ? ' (no wildcards here)' : ''}`;
  }
  return null;
}

export function checkSubjectPattern(p: string): string | null {
  const parts = splitFirstColon(p);
  if (!parts || parts[0] === '') return `subject "${p}" is not a pattern <type>:<id> such as agent:*`;
  if (!SUBJECT_TYPES.has(parts[0])) return `subject "${p}" has unknown type "${parts[0]}" (use agent:, user:, role: or group:)`;
  if (parts[0] === 'role') {
    if (parts[1].includes('*')) return `subject "${p}": a role is named exactly (no *)`;
    if (!ROLE_NAME.test(parts[1])) return `subject "${p}": a role name is 1 to 100 letters, digits and _ . : -`;
    return null;
  }
  if (parts[0] === 'group') {
    if (parts[1] === '') return `subject "${p}" has an empty value`;
    if (parts[1].includes('*')) return `subject "${p}": a group is named exactly (no *)`;
    return null;
  }
  return checkValue(parts[1], `subject "${p}"`);
}

export function checkObjectPattern(p: string): string | null {
  const parts = splitFirstColon(p);
  if (!parts || parts[0] === '') return `object "${p}" is not a pattern <kind>:<id> such as refund:*`;
  if (parts[0] !== '*' && !NAME.test(parts[0])) return `object "${p}" has a malformed kind "${parts[0]}"`;
  return checkValue(parts[1], `object "${p}"`);
}

export function checkAgentPattern(p: string): string | null {
  if (p.startsWith('agent:')) return `agent "${p}": write the agent ID without "agent:"`;
  return checkValue(p, `agent "${p}"`);
}

// ---- kinds and permissions -----------------------------------------------------

/** English plural, the inverse of `singularOf` for the kinds it handles (not for a name ending in a single `s`). */
export function englishPlural(singular: string): string {
  if (/[^aeiou]y$/.test(singular)) return singular.slice(0, -1) + 'ies';
  if (/(s|x|z|ch|sh)$/.test(singular)) return singular + 'es';
  return singular + 's';
}

/** English singular of a plural kind: refunds→refund, policies→policy, boxes→box, classes→class. */
export function singularOf(kinds: string): string {
  if (kinds.length > 3 && kinds.endsWith('ies')) return kinds.slice(0, -3) + 'y';
  if (kinds.endsWith('sses')) return kinds.slice(0, -2);
  if (/(x|z|ch|sh)es$/.test(kinds)) return kinds.slice(0, -2);
  if (kinds.length > 1 && kinds.endsWith('s') && !kinds.endsWith('ss')) return kinds.slice(0, -1);
  return kinds;
}

/**
 * Does `<action>:<kinds>` permission cover `action` on `resource`?
 * The permission's action and kinds equal the action's (either may be `*` in the
 * permission), and the resource's kind is the singular of the action's kinds.
 */
export function permissionCovers(permission: string, action: string, resource: string, singulars?: Record<string, string>): boolean {
  const ci = action.indexOf(':');
  if (ci <= 0) return false;
  const pi = permission.indexOf(':');
  if (pi <= 0) return false;
  const aVerb = action.slice(0, ci);
  const aKinds = action.slice(ci + 1);
  const pVerb = permission.slice(0, pi);
  const pKinds = permission.slice(pi + 1);
  if (pVerb !== '*' && pVerb !== aVerb) return false;
  if (pKinds !== '*' && pKinds !== aKinds) return false;
  const ri = resource.indexOf(':');
  if (ri <= 0) return false;
  const kind = resource.slice(0, ri);
  const singular = (singulars && Object.hasOwn(singulars, aKinds) ? singulars[aKinds] : undefined) ?? singularOf(aKinds);
  return kind === singular;
}
