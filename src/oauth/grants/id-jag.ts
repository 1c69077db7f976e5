import { randomUUID } from 'node:crypto';
import { errors as joseErrors } from 'jose';
import type { AppContext } from '../../context.js';
import { nowSeconds } from '../../clock.js';
import { errors } from '../../errors.js';
import { recordAudit } from '../../authz/audit.js';
import type { AuthenticatedClient } from '../client-auth.js';
import { mayUseApplication } from '../built-in-applications.js';
import { parseScope, required, single, type Params } from '../params.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';
export const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';
/** The JWT `typ` of an ID-JAG (explicit typing keeps it from passing for any other token). */
export const ID_JAG_TYP = 'oauth-id-jag+jwt';
/** An ID-JAG is a short-lived grant: redeemed at once, never kept. */
export const ID_JAG_TTL = 300;

export interface IdJagResponse {
  issued_token_type: typeof ID_JAG_TOKEN_TYPE;
  access_token: string;
  token_type: 'N_A';
  expires_in: number;
  scope?: string;
}

/** The `resource` parameter(s): absent, one URI, or several (RFC 8707 allows repeating it). */
function resources(body: Params): string[] {
  const v = body.resource;
  if (v === undefined || v === '') return [];
  const list = Array.isArray(v) ? v : [v];
  for (const r of list) {
    if (typeof r !== 'string' || !URL.canParse(r) || new URL(r).hash) throw errors.invalidTarget('resource must be an absolute URI without a fragment');
  }
  return [...new Set(list as string[])];
}

/** The subject token: an ID token this server issued to the authenticated client, still valid. */
async function verifiedIdToken(ctx: AppContext, token: string, clientId: string) {
  try {
    const { payload, protectedHeader } = await ctx.keys.verify(token, 'RS256', {
      issuer: ctx.urls.issuer,
      requiredClaims: ['sub', 'exp', 'iat', 'aud'],
    });
    // ID tokens carry no `typ` (access tokens and ID-JAGs do, and are not identity assertions).
    if (protectedHeader.typ !== undefined && protectedHeader.typ.toUpperCase() !== 'JWT') throw new Error('typ');
    const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (!aud.includes(clientId)) return { error: 'the subject_token was issued to another client' as const };
    return { payload };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) return { error: 'the subject_token has expired' as const };
    return { error: 'the subject_token is not an ID token of this issuer' as const };
  }
}

/**
 * grant_type=token-exchange with requested_token_type=id-jag: Gatehouse as the enterprise's
 * identity provider vouches for a signed-in person at another authorization server.
 * Steps: the client (confidential) → the parameters → the ID token (ours, issued to this
 * client) → the person (exists, assigned to the client) → the audience (on the client's
 * allow-list) → the ID-JAG, signed with our RS256 key.
 */
export async function idJagExchange(ctx: AppContext, client: AuthenticatedClient, body: Params): Promise<IdJagResponse> {
  // 1. Only a client that proves itself may carry a person's identity elsewhere.
  if (client.method === 'none') throw errors.unauthorizedClient('an ID-JAG is issued to confidential clients only');

  // 2. Parameters
  const requested = required(body, 'requested_token_type');
  if (requested !== ID_JAG_TOKEN_TYPE) throw errors.invalidRequest(`requested_token_type must be ${ID_JAG_TOKEN_TYPE}`);
  const subjectToken = required(body, 'subject_token');
  if (required(body, 'subject_token_type') !== ID_TOKEN_TYPE) throw errors.invalidRequest(`subject_token_type must be ${ID_TOKEN_TYPE}`);
  if (body.actor_token !== undefined || body.actor_token_type !== undefined) throw errors.invalidRequest('actor_token is not used to ask for an ID-JAG');
  const audience = required(body, 'audience');
  const resource = resources(body);
  const scope = parseScope(single(body, 'scope'));

  // 3. The ID token
  const checked = await verifiedIdToken(ctx, subjectToken, client.app.client_id);
  if ('error' in checked) throw errors.invalidGrant(checked.error);
  const idToken = checked.payload;

  // 4. The person, as of now
  const user = await ctx.store.users.get(String(idToken.sub));
  if (!user) throw errors.invalidGrant('the person no longer exists');
  if (!(await mayUseApplication(ctx, client.app.client_id, user))) throw errors.invalidGrant('the person is not assigned to this application');

  // 5. The audience: an authorization server this application may reach (never this one)
  const allowed = (await ctx.store.idJag.audiences(client.app.client_id)).find((a) => a.audience === audience);
  if (!allowed || audience === ctx.urls.issuer) throw errors.invalidTarget('audience is not an authorization server this application may ask an ID-JAG for');

  // 6. The grant
  const iat = nowSeconds(ctx.clock);
  const claims = {
    iss: ctx.urls.issuer,
    sub: user.id,
    aud: audience,
    client_id: allowed.client_id ?? client.app.client_id,
    jti: randomUUID(),
    exp: iat + ID_JAG_TTL,
    iat,
    ...(resource.length ? { resource: resource.length === 1 ? resource[0] : resource } : {}),
    ...(scope?.length ? { scope: scope.join(' ') } : {}),
    ...(typeof idToken.auth_time === 'number' ? { auth_time: idToken.auth_time } : {}),
    ...(typeof idToken.acr === 'string' ? { acr: idToken.acr } : {}),
    ...(Array.isArray(idToken.amr) ? { amr: idToken.amr } : {}),
    // Lets the other server find a person it knows by email (a trusted issuer's `email` mapping).
    email: user.email,
    email_verified: user.email_verified,
  };
  const token = await ctx.keys.sign('RS256', claims, ID_JAG_TYP);
  // Whom the enterprise vouched for, where and to which client: in the audit trail like any token issue.
  await recordAudit(ctx, {
    kind: 'token',
    user_id: user.id,
    action: 'token:id-jag',
    resource: audience,
    context: { jti: claims.jti, client_id: claims.client_id, ...(claims.scope ? { scope: claims.scope } : {}) },
    decision: 'issued',
    reason: 'token issued',
    caller: client.app.client_id,
  });
  ctx.metrics.tokens.inc({ grant: 'id_jag' });
  return {
    issued_token_type: ID_JAG_TOKEN_TYPE,
    access_token: token,
    token_type: 'N_A',
    expires_in: ID_JAG_TTL,
    ...(scope?.length ? { scope: scope.join(' ') } : {}),
  };
}
