/**
 * Whether an action stays within the authorization details (RFC 9396) its token carries. Pure:
 * the details and the action in, the first reason it goes beyond them out.
 *
 * An action is within when at least one detail covers it. A detail covers an action when:
 *   1. `actions`, when the detail lists them, include the action's name;
 *   2. `locations`, when listed, include the action's resource;
 *   3. every other field of the detail (`type` aside) that the action's context also has holds
 *      for the context's value:
 *        - a number is a maximum: the context's value is a number no greater;
 *        - a string, boolean or null must be equal;
 *        - an array lists what is allowed: the context's value is one of its elements, or an
 *          array whose every element is one of them (so `datatypes` and `privileges` narrow
 *          the context's fields of the same name);
 *        - an object is compared field by field, the same way, recursively.
 * A field the context does not have is not constrained, and a context field the detail does
 * not name is not either. A token without authorization details is not limited by this step.
 */

export interface AskedAction {
  action: string;
  resource: string;
  context: Record<string, unknown>;
}

const COMMON_SCOPE = new Set(['type', 'actions', 'locations']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
  }
  return false;
}

/** Why `given` (the context's) goes beyond `approved` (the detail's) at `path`; undefined when it does not. */
function beyond(approved: unknown, given: unknown, path: string): string | undefined {
  if (typeof approved === 'number') {
    if (typeof given !== 'number') return `${path} must be a number (at most ${approved})`;
    return given > approved ? `${path} ${given} is above the approved ${approved}` : undefined;
  }
  if (Array.isArray(approved)) {
    const items = Array.isArray(given) ? given : [given];
    const outside = items.find((g) => !approved.some((a) => sameJson(a, g)));
    return outside === undefined && items.length > 0 ? undefined : `${path} ${JSON.stringify(outside ?? given).slice(0, 60)} is not among the approved values`;
  }
  if (isObject(approved)) {
    if (!isObject(given)) return `${path} must be an object`;
    for (const [k, v] of Object.entries(approved)) {
      if (!Object.hasOwn(given, k)) continue;
      const why = beyond(v, given[k], `${path}.${k}`);
      if (why) return why;
    }
    return undefined;
  }
  return sameJson(approved, given) ? undefined : `${path} differs from the approved ${JSON.stringify(approved).slice(0, 60)}`;
}

/** Why one detail does not cover the action; undefined when it does. */
function uncovered(detail: Record<string, unknown>, asked: AskedAction): string | undefined {
  const type = typeof detail.type === 'string' ? detail.type : '?';
  if (Array.isArray(detail.actions) && !detail.actions.includes(asked.action)) return `${type}: the action ${asked.action} is not among its actions`;
  if (Array.isArray(detail.locations) && !detail.locations.includes(asked.resource)) return `${type}: the resource ${asked.resource} is not among its locations`;
  for (const [field, approved] of Object.entries(detail)) {
    if (COMMON_SCOPE.has(field) || !Object.hasOwn(asked.context, field)) continue;
    const why = beyond(approved, asked.context[field], field);
    if (why) return `${type}: ${why}`;
  }
  return undefined;
}

/**
 * The reason the action goes beyond the token's `authorization_details` claim (the first
 * detail's, when none covers it), or undefined when it stays within them. A claim that is
 * absent or an empty list limits nothing; a claim that is not a list of objects covers nothing
 * (fail closed).
 */
export function beyondAuthorizationDetails(claim: unknown, asked: AskedAction): string | undefined {
  if (claim === undefined || claim === null) return undefined;
  if (!Array.isArray(claim)) return 'the token\'s authorization_details are malformed';
  if (claim.length === 0) return undefined;
  let first: string | undefined;
  for (const detail of claim) {
    if (!isObject(detail)) return 'the token\'s authorization_details are malformed';
    const why = uncovered(detail, asked);
    if (why === undefined) return undefined;
    first ??= why;
  }
  return first;
}

/**
 * Why the details asked for go beyond those approved (a token exchange may only narrow them), or
 * undefined when each asked detail lies within an approved one of its type: the actions and
 * locations it lists are among the approved ones (and it lists them where the approved one does),
 * and every other field the approved detail names is there and within it (a number no greater, an
 * array's elements among the approved ones, a string, boolean or null equal, objects field by
 * field). No approved details: anything asked only narrows.
 */
export function detailsBeyondApproved(asked: Record<string, unknown>[], approved: unknown): string | undefined {
  if (!Array.isArray(approved) || approved.length === 0) return undefined;
  for (const [i, detail] of asked.entries()) {
    let first: string | undefined;
    const within = approved.some((a) => {
      if (!isObject(a)) return false;
      const why = detailBeyond(detail, a);
      first ??= why;
      return why === undefined;
    });
    if (!within) return `authorization_details[${i}] is wider than the subject token's: ${first ?? 'no approved detail of its type'}`;
  }
  return undefined;
}

function detailBeyond(asked: Record<string, unknown>, approved: Record<string, unknown>): string | undefined {
  if (asked.type !== approved.type) return `type ${String(asked.type)} is not approved`;
  for (const list of ['actions', 'locations'] as const) {
    const a = approved[list];
    if (!Array.isArray(a)) continue;
    const b = asked[list];
    if (!Array.isArray(b)) return `${list} must be listed (within ${JSON.stringify(a).slice(0, 60)})`;
    const outside = b.find((x) => !a.includes(x));
    if (outside !== undefined) return `${list} ${JSON.stringify(outside).slice(0, 60)} is not approved`;
  }
  for (const [field, value] of Object.entries(approved)) {
    if (COMMON_SCOPE.has(field)) continue;
    if (!Object.hasOwn(asked, field)) return `${field} must be stated (within the approved ${JSON.stringify(value).slice(0, 60)})`;
    const why = beyond(value, asked[field], field);
    if (why) return why;
  }
  return undefined;
}
