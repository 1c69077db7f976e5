import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import { validateJsonLimits } from '../policy/index.js';
import { parseObject, parseRelationshipJson, parseSubject } from '../policy/relations/tuple.js';
import { spiffeIdProblem } from './spiffe.js';
import { isJsonObject } from '../policy/own.js';

/**
 * The management API's request and response shapes. The same schemas validate requests,
 * validate the project file and generate the OpenAPI document.
 */

// ---- building blocks -------------------------------------------------------------

const BAD_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'blob:']);

function redirectUriProblem(uri: string): string | null {
  if (uri.includes('#')) return 'must not have a fragment';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (BAD_SCHEMES.has(url.protocol)) return `the scheme ${url.protocol} is not allowed`;
  if ((url.protocol === 'http:' || url.protocol === 'https:') && !url.hostname) return 'must name a host';
  return null;
}

export const redirectUri = z
  .string()
  .max(2000)
  .superRefine((v, c) => {
    const p = redirectUriProblem(v);
    if (p) c.addIssue({ code: 'custom', message: `${p}: ${JSON.stringify(v)}` });
  })
  .meta({ description: 'an absolute URL without a fragment', format: 'uri' });

/** `<action>:<resource_kind>`; roles may use `*` for either part. */
export const PERMISSION_KEY = /^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$/;
const PERMISSION_PATTERN = /^([A-Za-z0-9_.-]+|\*):([A-Za-z0-9_.-]+|\*)$/;

export const permission = z
  .string()
  .regex(PERMISSION_PATTERN, 'must be a permission <action>:<resource_kind>, such as create:refunds')
  .meta({ description: '`<action>:<resource_kind>`; `*` may stand for either part' });

export const capabilityName = z
  .string()
  .regex(PERMISSION_KEY, 'must be a permission key <action>:<resource_kind>, such as create:refunds');

const shortName = z.string().trim().min(1, 'must not be empty').max(200);
const tag = z.string().min(1, 'must not be empty').max(200);

/** A limits object, checked with the policy library's own rules. */
export const limits = z
  .record(z.string(), z.unknown())
  .superRefine((v, c) => {
    for (const d of validateJsonLimits(v)) c.addIssue({ code: 'custom', message: d.message });
  })
  .meta({
    description: '`{field: value | {max, min, in, not_in}}`: keys are context fields; a bare value must be equal',
  });

/** Why a JWK is not an Ed25519 public key, or null when it is one. */
function ed25519JwkProblem(jwk: Record<string, unknown>): string | null {
  if ('d' in jwk) return 'must be a public key: a private member "d" is not accepted';
  if (jwk.kty !== 'OKP') return 'kty must be "OKP" (an Ed25519 key)';
  if (jwk.crv !== 'Ed25519') return 'crv must be "Ed25519"';
  if (typeof jwk.x !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(jwk.x)) return 'x must be the 32-byte public key, base64url';
  if (jwk.alg !== undefined && jwk.alg !== 'EdDSA' && jwk.alg !== 'Ed25519') return 'alg must be "EdDSA" when given';
  if (jwk.use !== undefined && jwk.use !== 'sig') return 'use must be "sig" when given';
  if (jwk.kid !== undefined && typeof jwk.kid !== 'string') return 'kid must be a string when given';
  try {
    createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
  } catch {
    return 'is not a usable Ed25519 public key';
  }
  return null;
}

/** An Ed25519 public key as an OKP JWK; every problem is named at `public_jwk` itself. */
export const ed25519PublicJwk = z
  .record(z.string(), z.unknown())
  .superRefine((jwk, c) => {
    const p = ed25519JwkProblem(jwk);
    if (p) c.addIssue({ code: 'custom', message: p });
  })
  .meta({
    description: 'Ed25519 public key as an OKP JWK (RFC 8037), no private members',
    required: ['kty', 'crv', 'x'],
    properties: {
      kty: { const: 'OKP' },
      crv: { const: 'Ed25519' },
      x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
      kid: { type: 'string' },
      alg: { enum: ['EdDSA', 'Ed25519'] },
      use: { const: 'sig' },
    },
  });

export const spiffeId = z
  .string()
  .max(2048)
  .superRefine((v, c) => {
    const p = spiffeIdProblem(v);
    if (p) c.addIssue({ code: 'custom', message: p });
  })
  .meta({ description: 'a SPIFFE ID, spiffe://<trust domain>/<path>' });

const timestamp = z.string().meta({ description: 'ISO 8601 time' });
const nullableTimestamp = z.string().nullable().meta({ description: 'ISO 8601 time' });

// ---- attributes and entities ------------------------------------------------------

/** Bounds on one `attributes` object: policy facts, not a document store. */
export const ATTRIBUTES_MAX_BYTES = 16_384;
export const ATTRIBUTES_MAX_DEPTH = 8;
const ATTRIBUTE_KEY_MAX = 200;

/**
 * Why a value is not an acceptable attributes object, or null. Depth counts the object itself
 * as 1 and each nested object or list as one more; the walk stops at the bound, so a
 * deeply nested body costs no more than the bound.
 */
export function attributesProblem(value: unknown): string | null {
  if (!isJsonObject(value)) return 'must be a JSON object';
  const walk = (v: unknown, depth: number, at: string): string | null => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return null;
    if (typeof v === 'number') return Number.isFinite(v) ? null : `${at} must be a finite number`;
    if (typeof v !== 'object') return `${at} is not a JSON value`;
    if (depth > ATTRIBUTES_MAX_DEPTH) return `must nest at most ${ATTRIBUTES_MAX_DEPTH} levels of objects and lists (${at} is deeper)`;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const p = walk(v[i], depth + 1, `${at}[${i}]`);
        if (p) return p;
      }
      return null;
    }
    for (const [k, item] of Object.entries(v)) {
      const key = at ? `${at}.${k}` : k;
      // A member named __proto__ would become a prototype wherever the object is copied naively.
      if (k === '__proto__') return `${key}: the name __proto__ is not allowed`;
      if (k.length === 0 || k.length > ATTRIBUTE_KEY_MAX) return `${at ? `${at}: ` : ''}a name must be 1 to ${ATTRIBUTE_KEY_MAX} characters`;
      const p = walk(item, depth + 1, key);
      if (p) return p;
    }
    return null;
  };
  const p = walk(value, 1, '');
  if (p) return p;
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > ATTRIBUTES_MAX_BYTES) return `must be at most ${ATTRIBUTES_MAX_BYTES} bytes as JSON (this is ${bytes})`;
  return null;
}

/**
 * Custom attributes: a JSON object, nested objects and lists allowed. Checked as it came
 * (not rebuilt member by member) so that what is stored is exactly what was sent.
 */
export const attributes = z
  .custom<Record<string, unknown>>()
  .superRefine((v, c) => {
    const p = attributesProblem(v);
    if (p) c.addIssue({ code: 'custom', message: p });
  })
  .meta({
    type: 'object',
    additionalProperties: true,
    description: `custom attributes for policy conditions: a JSON object (nested objects and lists allowed), at most ${ATTRIBUTES_MAX_BYTES} bytes as JSON and ${ATTRIBUTES_MAX_DEPTH} levels deep`,
  });

/** The kind of `<kind>:<id>` objects, as rules name it (`todo` in `todo:*`). */
export const entityType = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,100}$/, 'must be a kind name: 1 to 100 characters of letters, digits and _ . -');

/** The id of `<kind>:<id>`: visible ASCII without `*` (the wildcard of object patterns). */
export const entityId = z
  .string()
  .regex(/^[\x21-\x29\x2b-\x7e]{1,256}$/, 'must be 1 to 256 visible ASCII characters, without spaces or *');

/** The path of one entity: `/entities/{type}/{id}`. */
export const entityKey = z.object({ type: entityType, id: entityId });

export const entityPut = z.object({ attributes });

export const entityView = z.object({
  type: z.string(),
  id: z.string(),
  attributes: z.record(z.string(), z.unknown()),
  created_at: timestamp,
  updated_at: timestamp,
});

export const entityListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  offset: z.coerce.number().int().min(0).default(0),
});

/** The project file's entity: the key and the body of the PUT. */
export const projectEntity = entityKey.extend({ attributes });

// ---- applications ----------------------------------------------------------------

export const APPLICATION_TYPES = ['web', 'spa', 'native', 'm2m', 'api'] as const;

const applicationFields = {
  name: shortName,
  redirect_uris: z.array(redirectUri).max(100),
  post_logout_redirect_uris: z.array(redirectUri).max(100),
  confidential: z.boolean(),
  refresh_tokens: z.boolean(),
  first_party: z.boolean(),
  require_pushed_authorization_requests: z
    .boolean()
    .meta({ description: 'true: authorization requests only through the pushed authorization request endpoint (RFC 9126)' }),
  dpop_bound_access_tokens: z
    .boolean()
    .meta({ description: 'RFC 9449: every access token is bound to a DPoP key; a token request without a DPoP proof is refused' }),
  client_secret: z.string().min(32, 'a client secret must be at least 32 characters').max(512),
};

export const clientIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._~:@-]{1,200}$/, 'must be 1 to 200 characters of letters, digits and . _ ~ : @ -');

/** An authorization server the application may ask an ID-JAG for (token exchange), and its client ID there. */
export const idJagAudience = z.object({
  audience: z
    .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
    .max(2000)
    .meta({ description: "the other authorization server's issuer (the ID-JAG's `aud`)" }),
  client_id: z
    .string()
    .min(1)
    .max(2000)
    .nullable()
    .optional()
    .meta({ description: "the application's client ID at that server (the ID-JAG's `client_id`); absent: its client ID here" }),
});
export const idJagAudiences = z
  .array(idJagAudience)
  .max(100)
  .superRefine((list, c) => {
    const seen = new Set<string>();
    for (const [i, a] of list.entries()) {
      if (seen.has(a.audience)) c.addIssue({ code: 'custom', path: [i, 'audience'], message: `listed twice: ${a.audience}` });
      seen.add(a.audience);
    }
  })
  .meta({ description: 'the authorization servers this application may ask an ID-JAG for (none: it may ask for none)' });

export const applicationCreate = z.object({
  name: applicationFields.name,
  type: z.enum(APPLICATION_TYPES),
  redirect_uris: applicationFields.redirect_uris.default([]),
  post_logout_redirect_uris: applicationFields.post_logout_redirect_uris.default([]),
  confidential: applicationFields.confidential
    .optional()
    .meta({ description: 'default true for web, m2m and api; false for spa and native' }),
  refresh_tokens: applicationFields.refresh_tokens
    .optional()
    .meta({ description: 'default true for web, spa and native' }),
  first_party: applicationFields.first_party.default(true),
  require_pushed_authorization_requests: applicationFields.require_pushed_authorization_requests.optional().meta({ description: 'default false' }),
  dpop_bound_access_tokens: applicationFields.dpop_bound_access_tokens.optional().meta({ description: 'default false' }),
  client_id: clientIdSchema.optional(),
  client_secret: applicationFields.client_secret.optional(),
  id_jag_audiences: idJagAudiences.optional(),
});
export type ApplicationCreate = z.output<typeof applicationCreate>;

export const applicationPatch = z.object({
  name: applicationFields.name.optional(),
  type: z.enum(APPLICATION_TYPES).optional().meta({ description: 'cannot change; accepted when equal' }),
  redirect_uris: applicationFields.redirect_uris.optional(),
  post_logout_redirect_uris: applicationFields.post_logout_redirect_uris.optional(),
  confidential: applicationFields.confidential.optional(),
  refresh_tokens: applicationFields.refresh_tokens.optional(),
  first_party: applicationFields.first_party.optional(),
  require_pushed_authorization_requests: applicationFields.require_pushed_authorization_requests.optional(),
  dpop_bound_access_tokens: applicationFields.dpop_bound_access_tokens.optional(),
  client_secret: applicationFields.client_secret.optional().meta({ description: 'sets a new secret' }),
  rotate_secret: z.boolean().optional().meta({ description: 'true: generates a new secret, returned once' }),
  id_jag_audiences: idJagAudiences.optional().meta({ description: 'replaces the list' }),
});
export type ApplicationPatch = z.output<typeof applicationPatch>;

const typeNames = z.array(z.string().min(1).max(200)).max(200);
/** The AuthZEN API's grant terms (accepted on a grant on that API only). */
const authzenGrantTerms = {
  enforcement_point_for: z
    .union([z.literal('*'), z.array(z.string().min(1).max(200)).max(10_000)])
    .optional()
    .meta({ description: "AuthZEN: the agents (ids, or `*` for every agent) whose enforcement point this application is: its evaluations about them consume limits and approvals and create approvals; any other evaluation about an agent is read-only" }),
  search_subject_types: typeNames.optional().meta({ description: 'AuthZEN: the subject types its searches may name (absent: any)' }),
  search_resource_types: typeNames.optional().meta({ description: 'AuthZEN: the resource types its searches may name (absent: any)' }),
};
export const grantBody = z.object({
  scopes: z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'must be a scope token (no spaces)')).max(200).default([]),
  ...authzenGrantTerms,
});

export const applicationView = z.object({
  client_id: z.string(),
  name: z.string(),
  type: z.enum(APPLICATION_TYPES),
  redirect_uris: z.array(z.string()),
  post_logout_redirect_uris: z.array(z.string()),
  confidential: z.boolean(),
  refresh_tokens: z.boolean(),
  first_party: z.boolean(),
  dpop_bound_access_tokens: z.boolean(),
  has_secret: z.boolean(),
  require_pushed_authorization_requests: z.boolean(),
  grants: z.array(z.object({ api_client_id: z.string(), scopes: z.array(z.string()), ...authzenGrantTerms })),
  assignments: z.array(z.string()).meta({ description: 'ids of the people assigned to the application' }),
  id_jag_audiences: z.array(z.object({ audience: z.string(), client_id: z.string().nullable() })),
  created_at: timestamp,
  updated_at: timestamp,
});
export const applicationCreated = applicationView.extend({
  client_secret: z.string().optional().meta({ description: 'shown once, for a confidential application' }),
});

/** The project file's application: the API's fields plus its grants and assignments. */
export const projectApplication = applicationCreate.extend({
  grants: z
    .array(
      z.object({
        // An API's client ID, or a URL one such as the AuthZEN API's `{issuer}/access/v1`.
        api_client_id: clientIdSchema.or(z.url({ protocol: /^https?$/ }).max(2000)),
        scopes: grantBody.shape.scopes,
        ...authzenGrantTerms,
      }),
    )
    .optional(),
  assignments: z.array(z.string().min(1)).optional().meta({ description: 'user ids or emails' }),
});

// ---- users -------------------------------------------------------------------------

export const userIdSchema = z.string().regex(/^[A-Za-z0-9._~:@|-]{1,200}$/, 'must be 1 to 200 characters of letters, digits and . _ ~ : @ | -');

// Any non-empty password is taken: the project decides its own password rules; brute force is
// met by the sign-in rate limits, and the hash is scrypt.
const password = z.string().min(1, 'must not be empty').max(1024);
const totpSecret = z
  .string()
  .superRefine((s, c) => {
    if (!/^[A-Za-z2-7 ]+=*$/.test(s)) c.addIssue({ code: 'custom', message: 'must be base32 (A-Z, 2-7)' });
    else if (s.replace(/[ =]/g, '').length < 16) c.addIssue({ code: 'custom', message: 'must be at least 16 base32 characters (80 bits)' });
  })
  .meta({ description: 'TOTP secret, base32 (RFC 6238)' });

const userFields = {
  email: z.email('must be an email address').max(320),
  name: shortName,
  email_verified: z.boolean(),
  picture: z.url('must be a URL').max(2000).nullable(),
  locale: z.string().regex(/^[A-Za-z]{2,8}([_-][A-Za-z0-9]{1,8})*$/, 'must be a BCP 47 language tag').nullable(),
  groups: z.array(tag).max(200),
  roles: z.array(tag).max(200),
  attributes,
};

export const userCreate = z.object({
  id: userIdSchema.optional().meta({ description: 'the `sub`; generated (a UUID) unless given' }),
  email: userFields.email,
  password,
  name: userFields.name,
  email_verified: userFields.email_verified.default(false),
  picture: userFields.picture.optional(),
  locale: userFields.locale.optional(),
  groups: userFields.groups.default([]),
  roles: userFields.roles.default([]),
  attributes: userFields.attributes.default({}),
  totp_secret: totpSecret.optional(),
});
export type UserCreate = z.output<typeof userCreate>;

export const userPatch = z.object({
  email: userFields.email.optional(),
  password: password.optional().meta({ description: 'a new password; also clears password_compromised' }),
  name: userFields.name.optional(),
  email_verified: userFields.email_verified.optional(),
  picture: userFields.picture.optional(),
  locale: userFields.locale.optional(),
  groups: userFields.groups.optional(),
  roles: userFields.roles.optional(),
  attributes: userFields.attributes.optional().meta({ description: 'replaces all attributes' }),
  totp_secret: totpSecret.nullable().optional().meta({ description: 'null removes the second factor' }),
});
export type UserPatch = z.output<typeof userPatch>;

export const userView = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  email_verified: z.boolean(),
  picture: z.string().nullable(),
  locale: z.string().nullable(),
  groups: z.array(z.string()),
  roles: z.array(z.string()),
  attributes: z.record(z.string(), z.unknown()),
  totp_enabled: z.boolean(),
  password_compromised: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const userListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  offset: z.coerce.number().int().min(0).default(0),
  email: z.string().optional(),
});

export const credentialCompromise = z.object({
  // RISC credential types; only `password` is one this service holds and stops.
  credential_type: z.enum([
    'password', 'pin', 'x509', 'fido2-platform', 'fido2-roaming', 'fido-u2f',
    'verifiable-credential', 'phone-voice', 'phone-sms', 'app',
  ]),
  reason: z.string().max(1000).optional(),
});

// ---- roles -------------------------------------------------------------------------

export const roleName = z.string().regex(/^[A-Za-z0-9_.:-]{1,100}$/, 'must be 1 to 100 characters of letters, digits and _ . : -');
export const roleCreate = z.object({ name: roleName, permissions: z.array(permission).max(500).default([]) });
export const rolePut = z.object({ name: roleName.optional(), permissions: z.array(permission).max(500) });
export const roleView = z.object({ name: z.string(), permissions: z.array(z.string()), created_at: timestamp, updated_at: timestamp });

// ---- agents ------------------------------------------------------------------------

export const agentName = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,100}$/, 'must be 1 to 100 characters of letters, digits and . _ - (it becomes part of the SPIFFE ID)')
  .refine((n) => n !== '.' && n !== '..', 'must not be "." or ".."');

export const capability = z.object({ name: capabilityName, limits: limits.optional() });

function uniqueCapabilities(caps: { name: string }[] | undefined, c: z.RefinementCtx): void {
  const seen = new Set<string>();
  caps?.forEach((cap, i) => {
    if (seen.has(cap.name)) c.addIssue({ code: 'custom', path: ['capabilities', i, 'name'], message: `duplicate capability ${cap.name}` });
    seen.add(cap.name);
  });
}

export const agentCreate = z
  .object({
    name: agentName,
    mode: z.enum(['delegated', 'autonomous']),
    public_jwk: ed25519PublicJwk,
    agent_id: spiffeId.optional().meta({ description: 'default spiffe://<issuer host>/agent/<name>' }),
    roles: z.array(tag).max(200).default([]),
    capabilities: z.array(capability).max(500).default([]),
    attributes: attributes.default({}),
    sub_agents: z.array(spiffeId).max(100).default([]).meta({ description: 'the agents it may hand work to by token exchange' }),
    dpop_bound_access_tokens: z
      .boolean()
      .optional()
      .meta({ description: 'default false. RFC 9449: every access token is bound to a DPoP key; a token request without a DPoP proof is refused' }),
  })
  .superRefine((a, c) => uniqueCapabilities(a.capabilities, c));
export type AgentCreate = z.output<typeof agentCreate>;

export const agentPatch = z
  .object({
    name: agentName.optional(),
    mode: z.enum(['delegated', 'autonomous']).optional(),
    public_jwk: ed25519PublicJwk.optional().meta({ description: 'a new key: key rotation' }),
    roles: z.array(tag).max(200).optional(),
    capabilities: z.array(capability).max(500).optional().meta({ description: 'replaces all capabilities' }),
    attributes: attributes.optional().meta({ description: 'replaces all attributes' }),
    sub_agents: z.array(spiffeId).max(100).optional().meta({ description: 'replaces the sub-agents it may hand work to' }),
    dpop_bound_access_tokens: z.boolean().optional(),
  })
  .superRefine((a, c) => uniqueCapabilities(a.capabilities, c));
export type AgentPatch = z.output<typeof agentPatch>;

export const capabilityPut = z.object({ limits: limits.optional() });

export const capabilityView = z.object({ name: z.string(), limits: z.record(z.string(), z.unknown()) });
export const agentView = z.object({
  agent_id: z.string(),
  client_id: z.string().meta({ description: 'the same as agent_id' }),
  name: z.string(),
  mode: z.enum(['delegated', 'autonomous']),
  public_jwk: z.record(z.string(), z.unknown()),
  roles: z.array(z.string()),
  capabilities: z.array(capabilityView),
  attributes: z.record(z.string(), z.unknown()),
  sub_agents: z.array(z.string()),
  dpop_bound_access_tokens: z.boolean(),
  revoked: z.boolean(),
  revoked_at: nullableTimestamp,
  created_at: timestamp,
  updated_at: timestamp,
});

// ---- rules -------------------------------------------------------------------------

export const CONDITION_OPS = ['gte', 'gt', 'lte', 'lt', 'eq', 'ne'] as const;
export const RULE_EFFECTS = ['deny', 'require_approval', 'permit'] as const;

const conditionValue = z.union([z.number(), z.string(), z.boolean()]);
/** A context field against a constant: `{field, op, value}`. */
export const ruleFieldCondition = z.object({ field: z.string().min(1, 'must not be empty').max(200), op: z.enum(CONDITION_OPS), value: conditionValue });
/** A condition in the policy file syntax: `{"expr": "resource.owner == person.email"}`. */
export const ruleExprCondition = z.object({ expr: z.string().min(1, 'must not be empty').max(4000) });

/**
 * A rule's condition as the API takes it: `{expr}` or `{field, op, value}`. One object schema
 * (not a union), so that a bad member is named by its own path (`condition.op`).
 */
export const ruleCondition = z
  .object({
    field: ruleFieldCondition.shape.field.optional(),
    op: ruleFieldCondition.shape.op.optional(),
    value: conditionValue.optional(),
    expr: ruleExprCondition.shape.expr.optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.expr !== undefined) {
      for (const k of ['field', 'op', 'value'] as const) if (c[k] !== undefined) ctx.addIssue({ code: 'custom', path: [k], message: 'give either expr, or field, op and value' });
      return;
    }
    for (const k of ['field', 'op', 'value'] as const) if (c[k] === undefined) ctx.addIssue({ code: 'custom', path: [k], message: 'required (or give expr)' });
  })
  .transform((c): z.output<typeof ruleFieldCondition> | z.output<typeof ruleExprCondition> =>
    c.expr !== undefined ? { expr: c.expr } : { field: c.field!, op: c.op!, value: c.value! })
  .meta({ description: '`{expr}` (a condition in the policy file syntax) or `{field, op, value}` (a context field against a constant)' });

const ruleFields = {
  name: z.string().min(1, 'must not be empty').max(200),
  effect: z.enum(RULE_EFFECTS),
  subjects: z.array(z.string().min(1, 'must not be empty').max(500)).min(1, 'must name at least one subject, such as agent:*').max(100),
  relation: z.string().min(1, 'must not be empty').max(200),
  object: z.string().min(1, 'must not be empty').max(500),
  condition: ruleCondition.nullable(),
};

export const ruleCreate = z.object({
  name: ruleFields.name,
  effect: ruleFields.effect,
  subjects: ruleFields.subjects,
  relation: ruleFields.relation,
  object: ruleFields.object,
  condition: ruleFields.condition.optional(),
});
export type RuleCreate = z.output<typeof ruleCreate>;

export const rulePatch = ruleCreate.partial();
export type RulePatch = z.output<typeof rulePatch>;

export const RULE_STATES = ['draft', 'live', 'disabled'] as const;
export const projectRule = ruleCreate.extend({
  id: z.string().regex(/^[A-Za-z0-9._:-]{1,100}$/, 'must be 1 to 100 characters of letters, digits and . _ : -').optional(),
  state: z.enum(RULE_STATES).optional(),
});

export const ruleView = z.object({
  id: z.string(),
  name: z.string(),
  effect: z.enum(RULE_EFFECTS),
  subjects: z.array(z.string()),
  relation: z.string(),
  object: z.string(),
  condition: z.union([ruleFieldCondition, ruleExprCondition]).nullable(),
  state: z.enum(RULE_STATES),
  validated: z.boolean().meta({ description: 'the current content passed validate' }),
  created_at: timestamp,
  updated_at: timestamp,
});
export const ruleValidation = z.object({ valid: z.boolean(), errors: z.array(z.string()) });

// ---- policy, keys, audit -------------------------------------------------------------

export const policyView = z.object({
  version: z.string(),
  sources: z.array(
    z.object({ path: z.string(), policy: z.string().optional(), version: z.number().optional(), hash: z.string() }),
  ),
});
export const policyReloadError = z.object({ error: z.string(), error_description: z.string(), errors: z.array(z.string()) });

export const keysRotate = z.object({ alg: z.enum(['RS256', 'EdDSA']).optional().meta({ description: 'default: both' }) });
export const keysRotated = z.object({ keys: z.array(z.object({ kid: z.string(), alg: z.enum(['RS256', 'EdDSA']) })) });

/** A time in a query: ISO 8601 or unix seconds, as unix seconds. */
const auditTime = z
  .string()
  .transform((v, c) => {
    const t = /^\d{1,12}$/.test(v) ? Number(v) : Math.floor(Date.parse(v) / 1000);
    if (!Number.isFinite(t)) {
      c.addIssue({ code: 'custom', message: 'must be an ISO 8601 time or unix seconds' });
      return z.NEVER;
    }
    return t;
  });

export const auditQuery = z.object({
  agent_id: z.string().optional(),
  user_id: z.string().optional(),
  caller: z.string().optional().meta({ description: 'the client ID of the application that asked (an AuthZEN caller)' }),
  decision: z.enum(['allow', 'deny', 'approval_required']).optional(),
  kind: z.string().optional().meta({ description: '`decision` (the default), `token`, `approval`, `admin` (changes made in the console), or `all`' }),
  reason: z
    .string()
    .regex(/^[a-z_]{1,64}$/, 'must be a reason code such as constraint_violated')
    .optional()
    .meta({ description: 'the reason code: `constraint_violated` matches `constraint_violated: amount max`' }),
  since: auditTime.optional().meta({ description: 'records at or after this time (ISO 8601 or unix seconds)' }),
  until: auditTime.optional().meta({ description: 'records at or before this time (ISO 8601 or unix seconds)' }),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  before: z.coerce.number().int().min(1).optional().meta({ description: 'the `next_before` of the previous page' }),
});
export const auditPage = z.object({
  data: z.array(
    z.object({
      id: z.number(),
      time: timestamp,
      kind: z.string(),
      agent_id: z.string().nullable(),
      user_id: z.string().nullable(),
      action: z.string().nullable(),
      resource: z.string().nullable(),
      context: z.unknown(),
      decision: z.string().nullable(),
      reason: z.string().nullable(),
      policy_version: z.string().nullable(),
      actor: z.string().nullable().meta({ description: 'the person (user id) who made a change in the console' }),
      caller: z.string().nullable().meta({ description: 'the client ID of the application that asked; null for an agent\'s own request' }),
      usage: z
        .array(z.object({ id: z.string(), counter: z.string(), key: z.string().optional(), max: z.number(), before: z.number(), after: z.number() }))
        .optional()
        .meta({ description: 'a decision under rates and budgets: each counter read, its value before and after the decision' }),
    }),
  ),
  next_before: z.number().nullable(),
});

/** `{data: [...]}` */
export const listOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item) });

// ---- relationships ---------------------------------------------------------------

/** At most this many writes and deletes in one request (each), and contextual relationships in one question. */
export const RELATIONSHIPS_MAX_PER_REQUEST = 1000;

const problemOf = (p: unknown): string | null => (typeof p === 'string' ? p : null);

/**
 * The most UTF-8 bytes an object or a subject may take: the stored key (both, and the relation)
 * must fit one PostgreSQL index entry, which holds about 2,700 bytes.
 */
const REF_MAX_BYTES = 1024;
const refTooLong = (v: string): string | null =>
  Buffer.byteLength(v, 'utf8') > REF_MAX_BYTES ? `must be at most ${REF_MAX_BYTES} bytes in UTF-8` : null;

/** `<type>:<id>`. */
const objectRef = z.string().superRefine((v, c) => {
  const p = refTooLong(v) ?? problemOf(parseObject(v));
  if (p) c.addIssue({ code: 'custom', message: p });
}).meta({ description: 'an object, `<type>:<id>`', example: 'document:1' });

/** `<type>:<id>`, `<type>:<id>#<relation>` or `<type>:*`. */
const subjectRef = z.string().superRefine((v, c) => {
  const p = refTooLong(v) ?? problemOf(parseSubject(v));
  if (p) c.addIssue({ code: 'custom', message: p });
}).meta({ description: 'an entity `<type>:<id>`, a userset `<type>:<id>#<relation>` or a wildcard `<type>:*`', example: 'group:eng#member' });

const relationName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]*$/, 'must be a relation name (letters, digits, _ and -, not starting with a digit)').max(200);

/** One relationship in its JSON form; the model (types, relations, conditions) is checked by the endpoint. */
export const relationship = z
  .object({
    object: objectRef,
    relation: relationName,
    subject: subjectRef,
    condition: z.object({ name: relationName, context: attributes.optional() }).strict().optional()
      .meta({ description: 'a condition the policy declares, with the context stored with the relationship (its values win over a request\'s)' }),
  })
  .strict()
  .superRefine((v, c) => {
    const p = problemOf(parseRelationshipJson(v));
    if (p) c.addIssue({ code: 'custom', message: p });
  })
  .meta({ description: 'who relates to what: `{object, relation, subject, condition?}`' });

const relationshipList = z.array(relationship).max(RELATIONSHIPS_MAX_PER_REQUEST);

export const relationshipWrite = z.object({
  writes: relationshipList.default([]),
  deletes: relationshipList.default([]),
}).strict();

export const relationshipWriteResult = z.object({ written: z.number().int(), deleted: z.number().int() });

export const relationshipListQuery = z.object({
  object: z.string().max(1024).regex(/^[A-Za-z_][A-Za-z0-9_-]*:[^\s#@\0]*$/, 'must be an object `<type>:<id>`, or `<type>:` for every object of a type').optional(),
  relation: relationName.optional(),
  subject: z.string().max(1024).regex(/^[A-Za-z_][A-Za-z0-9_-]*:[^\s#@\0]*(#[A-Za-z_][A-Za-z0-9_-]*)?$/, 'must be a subject `<type>:<id>`, `<type>:<id>#<relation>`, `<type>:*`, or `<type>:` for every subject of a type').optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  page_token: z.string().max(4096).optional(),
});

export const relationshipPage = z.object({ data: z.array(relationship), next_page_token: z.string().nullable() });

/** What every relationship question may add: the request's context, and relationships that hold for it alone. */
const questionExtras = {
  context: attributes.optional().meta({ description: 'values for conditions (a relationship\'s stored context wins)' }),
  contextual_relationships: relationshipList.optional().meta({ description: 'relationships that hold for this question only' }),
};

export const relationshipCheck = z.object({ object: objectRef, relation: relationName, subject: subjectRef, ...questionExtras }).strict();
export const relationshipCheckResult = z.object({ allowed: z.boolean(), path: z.array(relationship) });

export const relationshipListObjects = z.object({
  subject: subjectRef,
  relation: relationName,
  type: z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]*$/, 'must be a type name').max(200),
  ...questionExtras,
}).strict();
export const relationshipObjects = z.object({ objects: z.array(z.string()) });

export const relationshipListSubjects = z.object({
  object: objectRef,
  relation: relationName,
  subject_type: z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]*(#[A-Za-z_][A-Za-z0-9_-]*)?$/, 'must be `<type>` or `<type>#<relation>`').max(400),
  ...questionExtras,
}).strict();
export const relationshipSubjects = z.object({ subjects: z.array(z.string()) });

// ---- delegations ---------------------------------------------------------------------------

export const delegationPut = z.object({
  capabilities: z.array(capabilityName).max(500).meta({ description: 'the capabilities the agent may use for the person (each one the agent holds)' }),
});
export const delegationView = z.object({ agent_id: z.string(), capabilities: z.array(z.string()), created_at: timestamp });
