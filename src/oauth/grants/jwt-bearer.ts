import { randomUUID } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { AppContext } from '../../context.js';
import { nowSeconds } from '../../clock.js';
import { errors, ProtocolError } from '../../errors.js';
import { recordAudit, recordAuditOrLog } from '../../authz/audit.js';
import { authenticateAgent } from '../../agents/assertion.js';
import { agentAudience, issueAgentAccessToken } from '../../agents/issue-token.js';
import type { Agent } from '../../store/agents.js';
import type { TrustedIssuer } from '../../store/id-jag.js';
import type { User } from '../../store/users.js';
import { mayUseApplication } from '../built-in-applications.js';
import { authenticateClient, type AuthenticatedClient, type ClientRequest } from '../client-auth.js';
import { OutboundRefused } from '../../outbound.js';
import { required, type Params } from '../params.js';
import { ACCESS_TOKEN_TTL, ACCESS_TOKEN_TYP } from '../tokens.js';
import { issuerKeys } from '../trusted-issuer-keys.js';
import { ID_JAG_TYP } from './id-jag.js';
import { confirmation, tokenRequestBinding } from '../dpop.js';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

/** Clock skew allowed on `exp` and `iat`, in seconds. */
const SKEW = 30;
/** An ID-JAG valid for longer than this (exp − now) is refused: it is meant to be redeemed at once. */
const MAX_ASSERTION_LIFETIME = 3600;
/** Asymmetric algorithms only: no `none`, no HMAC. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface JwtBearerResponse {
  access_token: string;
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  scope?: string;
}

/** Who redeems: an agent (private_key_jwt, as at the agent token endpoint) or an application. */
export type Redeemer = { kind: 'agent'; agent: Agent; id: string } | { kind: 'application'; client: AuthenticatedClient; id: string };

async function redeemer(ctx: AppContext, req: ClientRequest, body: Params): Promise<Redeemer> {
  if (body.client_assertion_type !== undefined || body.client_assertion !== undefined) {
    const { agent } = await authenticateAgent(ctx, body, [ctx.urls.token, ctx.urls.issuer, ctx.urls.agentToken], 'token:jwt-bearer');
    return { kind: 'agent', agent, id: agent.agent_id };
  }
  const client = await authenticateClient(ctx, req, body);
  return { kind: 'application', client, id: client.app.client_id };
}

const grantError = (why: string) => errors.invalidGrant(why);

/** The ID-JAG's header and unverified issuer, before any key is looked for. */
function peek(assertion: string): { iss: string } {
  let header: ReturnType<typeof decodeProtectedHeader>;
  let claims: JWTPayload;
  try {
    header = decodeProtectedHeader(assertion);
    claims = decodeJwt(assertion);
  } catch {
    throw grantError('the assertion is not a JWT');
  }
  if (header.typ !== ID_JAG_TYP) throw grantError(`the assertion must have typ ${ID_JAG_TYP}`);
  if (typeof header.alg !== 'string' || !ALGORITHMS.includes(header.alg)) throw grantError('the assertion must be signed with an asymmetric algorithm');
  if (typeof claims.iss !== 'string' || !claims.iss) throw grantError('the assertion names no issuer');
  return { iss: claims.iss };
}

/** Signature, `typ`, `aud` = our issuer, `exp`, `iat` and the required claims; each failure named. */
async function verified(ctx: AppContext, assertion: string, issuer: TrustedIssuer): Promise<JWTPayload> {
  const options = {
    algorithms: ALGORITHMS,
    issuer: issuer.issuer,
    audience: ctx.urls.issuer,
    typ: ID_JAG_TYP,
    requiredClaims: ['sub', 'client_id', 'jti', 'exp', 'iat'],
    clockTolerance: SKEW,
    currentDate: new Date(ctx.clock.now()),
  };
  const attempt = async (fresh: boolean) => jwtVerify(assertion, await issuerKeys(ctx, issuer, fresh), options);
  try {
    try {
      return (await attempt(false)).payload;
    } catch (err) {
      // The issuer may have rotated its keys since they were fetched.
      if (err instanceof joseErrors.JWKSNoMatchingKey && issuer.jwks_uri) return (await attempt(true)).payload;
      throw err;
    }
  } catch (err) {
    if (err instanceof OutboundRefused) throw grantError(`the issuer's keys could not be fetched: ${err.message}`);
    if (err instanceof joseErrors.JWTExpired) throw grantError('the assertion has expired');
    if (err instanceof joseErrors.JWTClaimValidationFailed) {
      if (err.claim === 'aud') throw grantError('the assertion is not for this authorization server (aud)');
      throw grantError(`the assertion's ${err.claim} claim is not valid`);
    }
    throw grantError('the assertion signature does not verify with the issuer\'s keys');
  }
}

/** The person the assertion's subject names here, by the issuer's mapping. */
async function mappedPerson(ctx: AppContext, issuer: TrustedIssuer, claims: JWTPayload): Promise<User> {
  let user: User | undefined;
  if (issuer.subject_mapping === 'email') {
    const email = claims.email;
    if (typeof email !== 'string' || !email) throw grantError('the assertion carries no email claim (this issuer maps people by email)');
    if (claims.email_verified === false) throw grantError('the assertion\'s email is not verified');
    user = await ctx.store.users.getByEmail(email);
  } else {
    user = await ctx.store.users.get(String(claims.sub));
  }
  if (!user) throw grantError('no person here matches the assertion\'s subject');
  return user;
}

/** `scope` and `resource` claims: space-separated names, and one URI or a list. */
const scopeOf = (claims: JWTPayload): string[] | undefined =>
  typeof claims.scope === 'string' ? [...new Set(claims.scope.split(' ').filter(Boolean))] : undefined;
const resourcesOf = (claims: JWTPayload): string[] =>
  typeof claims.resource === 'string' ? [claims.resource] : Array.isArray(claims.resource) ? claims.resource.filter((r): r is string => typeof r === 'string') : [];

/**
 * An agent redeems: a delegated token (`sub` the person, `act` the agent) for the MCP gateway,
 * with the capabilities the assertion's scope names among the agent's (all of them when it
 * names none). Whether the person may do each thing is decided at each call, as for any
 * delegated token.
 */
async function agentToken(ctx: AppContext, agent: Agent, user: User, claims: JWTPayload, jkt: string | undefined): Promise<JwtBearerResponse> {
  const asked = resourcesOf(claims);
  const audience = agentAudience(ctx, asked.find((r) => r === ctx.urls.mcp) ?? (asked.length ? asked[0] : undefined));
  const held = agent.capabilities.map((c) => c.name);
  const scope = scopeOf(claims);
  const capabilities = scope ? scope.filter((s) => held.includes(s)) : held;
  if (scope && capabilities.length === 0) throw errors.invalidScope('the assertion\'s scope names none of this agent\'s capabilities');
  const issued = await issueAgentAccessToken(ctx, { agent, userId: user.id, capabilities, audience, grant: 'jwt-bearer', jkt });
  return { access_token: issued.access_token, token_type: jkt ? 'DPoP' : 'Bearer', expires_in: issued.expires_in, scope: issued.scope };
}

/** An application redeems: a person's access token, as the authorization code grant gives, for the resource named. */
async function applicationToken(ctx: AppContext, client: AuthenticatedClient, user: User, claims: JWTPayload, jkt: string | undefined): Promise<JwtBearerResponse> {
  const asked = resourcesOf(claims);
  if (asked.length > 1) throw errors.invalidTarget('the assertion names more than one resource; this server issues a token for one');
  const resource = asked[0];
  if (resource !== undefined && resource !== ctx.urls.mcp) {
    const api = await ctx.store.applications.get(resource);
    if (!api || api.type !== 'api') throw errors.invalidTarget('the assertion\'s resource is not an API of this project');
  }
  const scope = (scopeOf(claims) ?? []).filter((s) => s !== 'openid' && s !== 'offline_access');
  const iat = nowSeconds(ctx.clock);
  const jti = randomUUID();
  const audience = resource ?? client.app.client_id;
  const token = await ctx.keys.sign(
    'RS256',
    {
      iss: ctx.urls.issuer,
      sub: user.id,
      aud: audience,
      exp: iat + ACCESS_TOKEN_TTL,
      iat,
      jti,
      client_id: client.app.client_id,
      scope: scope.join(' '),
      ...(typeof claims.auth_time === 'number' ? { auth_time: claims.auth_time } : {}),
      ...(Array.isArray(claims.amr) ? { amr: claims.amr } : {}),
      ...(typeof claims.acr === 'string' ? { acr: claims.acr } : {}),
      groups: user.groups,
      roles: user.roles,
      ...confirmation(jkt),
    },
    ACCESS_TOKEN_TYP,
  );
  await recordAudit(ctx, {
    kind: 'token',
    user_id: user.id,
    action: 'token:jwt-bearer',
    resource: audience,
    context: { jti, scope: scope.join(' '), assertion_issuer: claims.iss, assertion_jti: claims.jti },
    decision: 'issued',
    reason: 'token issued',
    caller: client.app.client_id,
  });
  ctx.metrics.tokens.inc({ grant: 'jwt_bearer' });
  return { access_token: token, token_type: jkt ? 'DPoP' : 'Bearer', expires_in: ACCESS_TOKEN_TTL, scope: scope.join(' ') };
}

/**
 * grant_type=jwt-bearer with an ID-JAG: Gatehouse as the authorization server of a resource
 * redeems an identity provider's grant for a person. Steps: the client (an agent or an
 * application) → the assertion's header and issuer (trusted, not ourselves) → signature and
 * claims → `client_id` = the client → the person (mapped) → single use of `jti` → the token.
 * Every refusal of the assertion is `invalid_grant`.
 */
export async function jwtBearerGrant(ctx: AppContext, req: ClientRequest, body: Params): Promise<JwtBearerResponse> {
  const who = await redeemer(ctx, req, body);
  // A DPoP proof binds the token (and is required of a client with dpop_bound_access_tokens).
  const required = who.kind === 'agent' ? who.agent.dpop_bound_access_tokens : who.client.app.dpop_bound_access_tokens;
  return redeemIdJag(ctx, who, body, await tokenRequestBinding(ctx, req, ctx.urls.token, required));
}

/**
 * The grant's steps after the client is authenticated (also run by the agent token endpoint).
 * A refusal is in the audit trail (kind `token`, decision `refused`), under the agent or the
 * application that asked.
 */
export async function redeemIdJag(ctx: AppContext, who: Redeemer, body: Params, jkt?: string): Promise<JwtBearerResponse> {
  try {
    return await redeem(ctx, who, body, jkt);
  } catch (err) {
    if (err instanceof ProtocolError) {
      await recordAuditOrLog(ctx, {
        kind: 'token',
        ...(who.kind === 'agent' ? { agent_id: who.id } : { caller: who.id }),
        action: 'token:jwt-bearer',
        decision: 'refused',
        reason: `${err.error}: ${err.description ?? ''}`,
      });
    }
    throw err;
  }
}

async function redeem(ctx: AppContext, who: Redeemer, body: Params, jkt: string | undefined): Promise<JwtBearerResponse> {
  // 1. The assertion
  const assertion = required(body, 'assertion');
  if (assertion.length > 16_384) throw grantError('the assertion is too large');

  // 2. The issuer: trusted, and never this server (its own ID-JAGs are for other servers)
  const { iss } = peek(assertion);
  if (iss === ctx.urls.issuer) throw grantError('an ID-JAG this server issued is redeemed elsewhere, not here');
  const issuer = await ctx.store.idJag.getIssuer(iss);
  if (!issuer) throw grantError('the assertion\'s issuer is not trusted here');

  // 3. Signature and claims
  const claims = await verified(ctx, assertion, issuer);
  const t = nowSeconds(ctx.clock);
  if (claims.exp! - t > MAX_ASSERTION_LIFETIME + SKEW) throw grantError('the assertion is valid for too long (at most an hour)');
  if (claims.iat! > t + SKEW) throw grantError('the assertion\'s iat is in the future');
  if (claims.client_id !== who.id) throw grantError('the assertion was issued for another client (client_id)');
  const jti = claims.jti!;
  if (typeof jti !== 'string' || !jti || jti.length > 512) throw grantError('the assertion needs a jti');

  // 4. The person, and whether this client may act for them
  const user = await mappedPerson(ctx, issuer, claims);
  if (who.kind === 'agent' && who.agent.mode !== 'delegated') throw errors.unauthorizedClient('only a delegated agent acts for a person; this agent is autonomous');
  if (who.kind === 'application' && !(await mayUseApplication(ctx, who.client.app.client_id, user))) throw grantError('the person is not assigned to this application');

  // 5. Once only, on every instance sharing the database
  if (!(await ctx.store.idJag.useJti(iss, jti, claims.exp! + SKEW))) throw grantError('the assertion was already used');

  // 6. The token
  return who.kind === 'agent' ? agentToken(ctx, who.agent, user, claims, jkt) : applicationToken(ctx, who.client, user, claims, jkt);
}
