// AuthZEN names → Gatehouse names. A resource `{type, id}` is the object `<type>:<id>`; an
// action `a` on a resource of type `t` is the relation `<a>:<plural of t>`, the plural being the
// one whose singular (the policy's `kind` declarations first, else English) is `t`.

import { englishPlural, singularOf } from '../policy/index.js';

/**
 * The plural kinds of a resource type: the policy's declared plurals of it, else the English
 * plural. Declared singulars map plural → singular (`kind "people" singular "person"`).
 */
export function pluralOf(type: string, singulars: Record<string, string>): string {
  for (const plural in singulars) if (Object.hasOwn(singulars, plural) && singulars[plural] === type) return plural;
  const p = englishPlural(type);
  // An English rule that does not round-trip (rare) falls back to `<type>s`, which singularOf reads back.
  return singularOf(p) === type ? p : type + 's';
}

export const relationOf = (action: string, type: string, singulars: Record<string, string>): string =>
  `${action}:${pluralOf(type, singulars)}`;

export const objectOf = (type: string, id: string): string => `${type}:${id}`;

/** The action name of a relation (`can_read:todos` → `can_read`). */
export const actionOfRelation = (relation: string): string => relation.slice(0, relation.indexOf(':'));
