import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { AUTHORIZATION_DETAILS_TYPES_DOMAIN, type AuthorizationDetailsType } from '../store/client-requests.js';
import { validateJson } from './json-schema.js';

/** One authorization detail (RFC 9396 section 2): its `type` and the fields its type declares. */
export type AuthorizationDetail = Record<string, unknown> & { type: string };

/** At most this many details in one request, and this many characters of JSON. */
export const MAX_AUTHORIZATION_DETAILS = 20;
export const MAX_AUTHORIZATION_DETAILS_CHARS = 8192;

/** RFC 9396 section 2.2: the common fields, and the shape each has whatever the type. */
const COMMON_STRING_ARRAYS = ['locations', 'actions', 'datatypes', 'privileges'];

const invalid = (description: string) => errors.invalidAuthorizationDetails(description);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const declared = new WeakMap<AppContext, { version: number; types: Promise<Map<string, AuthorizationDetailsType>> }>();

/** The declared types, cached per process and reloaded when one is declared, changed or removed (on any instance). */
export async function declaredTypes(ctx: AppContext): Promise<Map<string, AuthorizationDetailsType>> {
  const version = await ctx.store.changes.version(AUTHORIZATION_DETAILS_TYPES_DOMAIN);
  let cached = declared.get(ctx);
  if (!cached || cached.version !== version) {
    const types = ctx.store.clientRequests.listTypes().then((list) => new Map(list.map((t) => [t.type, t])));
    types.catch(() => declared.get(ctx)?.types === types && declared.delete(ctx));
    declared.set(ctx, (cached = { version, types }));
  }
  return cached.types;
}

/**
 * The `authorization_details` parameter of a request (a JSON array as a string, or the array
 * itself from a JSON body), checked: each detail an object with a declared `type`, the common
 * fields shaped as RFC 9396 section 2.2 says, and the rest valid under its type's schema (the
 * schema sees the detail without `type`). Undefined when the parameter is absent; otherwise
 * 400 `invalid_authorization_details` naming what is wrong.
 */
export async function parseAuthorizationDetails(ctx: AppContext, raw: unknown): Promise<AuthorizationDetail[] | undefined> {
  if (raw === undefined || raw === '') return undefined;
  let value: unknown = raw;
  if (typeof raw === 'string') {
    if (raw.length > MAX_AUTHORIZATION_DETAILS_CHARS) throw invalid(`authorization_details may be at most ${MAX_AUTHORIZATION_DETAILS_CHARS} characters`);
    try {
      value = JSON.parse(raw);
    } catch {
      throw invalid('authorization_details must be a JSON array of objects');
    }
  } else if (JSON.stringify(raw).length > MAX_AUTHORIZATION_DETAILS_CHARS) {
    throw invalid(`authorization_details may be at most ${MAX_AUTHORIZATION_DETAILS_CHARS} characters`);
  }
  if (!Array.isArray(value)) throw invalid('authorization_details must be a JSON array of objects');
  if (value.length === 0) throw invalid('authorization_details must not be empty');
  if (value.length > MAX_AUTHORIZATION_DETAILS) throw invalid(`at most ${MAX_AUTHORIZATION_DETAILS} authorization details`);
  const types = await declaredTypes(ctx);
  return value.map((detail, i) => {
    if (!isObject(detail)) throw invalid(`authorization_details[${i}] must be an object`);
    if (typeof detail.type !== 'string' || detail.type === '') throw invalid(`authorization_details[${i}].type is required (a string)`);
    const declaredType = types.get(detail.type);
    if (!declaredType) throw invalid(`authorization_details[${i}]: the type ${detail.type.slice(0, 100)} is not declared here`);
    for (const field of COMMON_STRING_ARRAYS) {
      const v = detail[field];
      if (v !== undefined && (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))) throw invalid(`authorization_details[${i}].${field} must be an array of strings`);
    }
    if (detail.identifier !== undefined && typeof detail.identifier !== 'string') throw invalid(`authorization_details[${i}].identifier must be a string`);
    const { type: _type, ...rest } = detail;
    const problems = validateJson(declaredType.schema, rest);
    if (problems.length) throw invalid(`authorization_details[${i}] (${detail.type}) does not match its schema: ${problems.slice(0, 5).join('; ')}`);
    return detail as AuthorizationDetail;
  });
}
