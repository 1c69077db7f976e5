import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { recordAuditOrLog } from '../authz/audit.js';
import { agentKnown, type AgentState } from '../authz/agent-cache.js';
import { nowSeconds } from '../clock.js';
import { countUnknownAgentRefusal } from './refusal-summary.js';

export const JWT_BEARER_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** A client assertion may be valid for at most this long (exp − now), plus the clock skew allowed. */
export const MAX_ASSERTION_LIFETIME = 300;
export const CLOCK_SKEW = 10;

const fail = (why: string) => errors.invalidClient(why);

/**
 * `private_key_jwt` (RFC 7523) for agents: an EdDSA assertion with `iss` = `sub` = the agent ID,
 * `aud` one of `audiences`, `exp` at most 5 minutes ahead, `iat`, and a `jti` used once
 * (recorded in the database until the assertion expires). Every failure is `invalid_client` (401) and
 * is written to the audit trail (kind `token`, decision `refused`, `action` = `purpose`) under
 * the agent ID the assertion claimed, when that agent exists; refusals for agents that do not
 * are counted and summed up (`countUnknownAgentRefusal`).
 */
export async function authenticateAgent(
  ctx: AppContext,
  body: Record<string, unknown>,
  audiences: string[],
  purpose: string,
): Promise<AgentState> {
  try {
    return await checkAssertion(ctx, body, audiences);
  } catch (err) {
    if (err instanceof ProtocolError) {
      const claimed = claimedAgent(body.client_assertion);
      // Refusals under an agent ID that names no agent are counted and summed up, not each recorded.
      if (claimed === null || !(await ctx.store.agents.get(claimed))) {
        countUnknownAgentRefusal(ctx, claimed, purpose);
        throw err;
      }
      await recordAuditOrLog(ctx, {
        kind: 'token',
        agent_id: claimed,
        action: purpose,
        decision: 'refused',
        reason: `${err.error}: ${err.description ?? ''}`,
      });
    }
    throw err;
  }
}

/** The `iss` an assertion claims, unverified (only for the record of a refusal). */
export function claimedAgent(assertion: unknown): string | null {
  if (typeof assertion !== 'string') return null;
  try {
    const iss = decodeJwt(assertion).iss;
    return typeof iss === 'string' && iss ? iss.slice(0, 256) : null;
  } catch {
    return null;
  }
}

/** The assertion checks alone (no audit record): for an `actor_token` sent beside the client assertion. */
export async function checkAssertion(ctx: AppContext, body: Record<string, unknown>, audiences: string[]): Promise<AgentState> {
  const assertionType = body.client_assertion_type;
  const assertion = body.client_assertion;
  if (assertionType !== JWT_BEARER_ASSERTION_TYPE) {
    throw fail('client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
  }
  if (typeof assertion !== 'string' || !assertion) throw fail('client_assertion is required');

  // 1. The header: EdDSA only (no `none`, no HMAC keyed with the public key, no RSA/EC), under its
  // older name or the fully specified `Ed25519` (RFC 9864) that openid-client writes.
  let claims: JWTPayload;
  try {
    const header = decodeProtectedHeader(assertion);
    if (header.alg !== 'EdDSA' && header.alg !== 'Ed25519') throw new Error('alg');
    claims = decodeJwt(assertion);
  } catch {
    throw fail('the client assertion must be a JWT signed with EdDSA');
  }

  // 2. Which agent: iss = sub = the agent ID (and client_id, when sent, the same).
  const agentId = claims.iss;
  if (typeof agentId !== 'string' || !agentId || claims.sub !== agentId) throw fail('the client assertion needs iss = sub = the agent ID');
  if (body.client_id !== undefined && body.client_id !== agentId) throw fail('client_id does not match the client assertion');
  const state = await agentKnown(ctx, agentId);
  if (!state || !state.publicKey) throw fail('unknown or revoked agent');

  // 3. Signature with the agent's registered key, audience, times.
  let verified: JWTPayload;
  try {
    ({ payload: verified } = await jwtVerify(assertion, state.publicKey, {
      algorithms: ['EdDSA', 'Ed25519'],
      issuer: agentId,
      subject: agentId,
      audience: audiences,
      requiredClaims: ['exp', 'iat', 'jti'],
      clockTolerance: CLOCK_SKEW,
      currentDate: new Date(ctx.clock.now()),
    }));
  } catch {
    throw fail('the client assertion is not valid (signature, audience or time)');
  }
  const t = nowSeconds(ctx.clock);
  const exp = verified.exp!;
  if (exp - t > MAX_ASSERTION_LIFETIME + CLOCK_SKEW) throw fail('the client assertion may be valid for at most 5 minutes');
  if (typeof verified.iat !== 'number' || verified.iat > t + CLOCK_SKEW) throw fail('the client assertion iat is in the future');
  const jti = verified.jti;
  if (typeof jti !== 'string' || !jti || jti.length > 512) throw fail('the client assertion needs a jti');

  // 4. Single use, across restarts and worker processes.
  if (!(await ctx.store.agentAuth.useJti(agentId, jti, exp + CLOCK_SKEW))) throw fail('the client assertion was already used');
  return state;
}
