import { timeOrderedId } from '../crypto/time-ordered-id.js';
import type { JWTPayload } from 'jose';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, ProtocolError, validationError } from '../errors.js';
import { accessCredential, type AccessCredential } from '../oauth/bearer.js';
import { checkSenderConstraint, refusedTokenChallenge } from '../oauth/dpop.js';
import { authorize } from '../authz/pipeline.js';
import { recordAuditOrLog } from '../authz/audit.js';
import { TRANSACTION_TOKEN_TTL, TRANSACTION_TOKEN_TYP } from '../authz/transaction-tokens.js';
import { chainClaims } from '../authz/chain.js';
import { verifyAgentAccessToken } from '../authz/agent-access-token.js';
import { verifiedTokens } from '../authz/verified-tokens.js';
import { nowSeconds } from '../clock.js';

export { TRANSACTION_TOKEN_TTL, TRANSACTION_TOKEN_TYP };

/** The action an agent asks about: the body of both the transaction-token and the decision endpoints. */
const contextRecord = z.record(z.string(), z.unknown());

export const actionFields = {
  action: z.string().min(1, 'action is required').max(512),
  resource: z.string().min(1, 'resource is required').max(1024),
  // Checked as a record but kept as it came: rebuilt member by member, a member named `__proto__` would be lost.
  context: z
    .custom<Record<string, unknown>>()
    .superRefine((v, c) => {
      const checked = contextRecord.safeParse(v);
      if (!checked.success) for (const issue of checked.error.issues) c.addIssue({ ...issue } as Parameters<typeof c.addIssue>[0]);
    })
    .default({}),
};
const bindBody = z.object(actionFields);

/** The access token of the Authorization header (Bearer, or DPoP with its proof), or 401. */
function requiredBearer(req: { get(name: string): string | undefined }): AccessCredential {
  const token = accessCredential(req.get('authorization'));
  if (token === undefined) throw errors.invalidToken('an agent access token is required (Authorization: Bearer)', {}, { 'WWW-Authenticate': 'Bearer' });
  return token;
}

const headerSafe = (s: string) => s.replace(/[^\x20-\x7e]|["\\]/g, '');

/**
 * POST /apis/regional/v1/ai/auth/transaction-token, after the body is read. Steps: authenticate
 * the agent's access token, validate the body, then the decision pipeline's binding check (the
 * action is one of the token's capabilities, else 403 insufficient_scope; the limits hold, else
 * 403 constraint_violated with the field and operator in `reason`; nothing is bound either way),
 * then sign the transaction token. Refusals and issued tokens are in the audit trail.
 */
export async function transactionTokenEndpoint(
  ctx: AppContext,
  rawBody: unknown,
  req: { get(name: string): string | undefined },
): Promise<{ data: { transaction_token: string; expires_in: number } }> {
  const credential = requiredBearer(req);
  const principal = await verifyAgentAccessToken(ctx, credential.token).catch((err: unknown) => {
    // A token refused under the DPoP scheme gets a DPoP challenge (RFC 9449 section 7.1).
    if (credential.scheme === 'DPoP' && err instanceof ProtocolError && err.error === 'invalid_token') {
      throw errors.invalidToken(err.description, err.extra, refusedTokenChallenge('DPoP', err.description, ''));
    }
    throw err;
  });
  await checkSenderConstraint(ctx, req, credential, principal.claims, { htm: 'POST', htu: ctx.urls.transactionToken });
  const parsed = bindBody.safeParse(rawBody ?? {});
  if (!parsed.success) {
    const err = validationError(parsed.error);
    await recordAuditOrLog(ctx, {
      kind: 'token',
      agent_id: principal.agent.agent_id,
      user_id: principal.userId,
      action: 'token:transaction',
      decision: 'refused',
      reason: `invalid_request: ${err.description ?? 'bad body'}`.slice(0, 1000),
    });
    throw err;
  }
  const { action, resource, context } = parsed.data;

  // Time-ordered: the ids a decision records as consumed go in at the end of their index.
  const txn = timeOrderedId(ctx.clock.now());
  const result = await authorize(ctx, { via: 'bind', principal, action, resource, context, txn });
  if (result.outcome === 'unknown_agent') throw errors.invalidToken('the agent is unknown or revoked');
  const { decision } = result;
  if (decision.decision !== 'allow') {
    const reason = { reason: decision.reason };
    switch (decision.cause.code) {
      case 'not_granted':
        throw errors.insufficientScope(`${action} is not one of the token's capabilities`, reason, {
          'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${headerSafe(action)}"`,
        });
      case 'constraint_violated':
        // The description's body, plus the field and operator that failed.
        throw new ProtocolError(403, 'invalid_body', 'constraint_violated', reason);
      case 'agent_revoked':
        throw errors.invalidToken('the agent is unknown or revoked', {}, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
      case 'delegation_revoked':
        throw errors.invalidToken(decision.reason, reason, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
      case 'policy_unavailable':
        throw errors.temporarilyUnavailable('no policy is in force', reason, { 'Retry-After': '5' });
      default:
        throw errors.serverError('the binding could not be checked', reason);
    }
  }

  const iat = nowSeconds(ctx.clock);
  const claims = {
    iss: ctx.urls.issuer,
    aud: ctx.urls.issuer,
    iat,
    exp: iat + TRANSACTION_TOKEN_TTL,
    txn,
    sub: principal.userId ?? principal.agent.agent_id,
    req_wl: principal.agent.agent_id,
    scope: action,
    tctx: { action, resource, context },
    // A delegation chain goes with the call: the decision checks it again.
    ...(principal.chain ? chainClaims(principal.chain) : {}),
  };
  const token = await ctx.keys.sign('EdDSA', claims, TRANSACTION_TOKEN_TYP);
  // We just signed it: neither this process nor the other workers need verify it again.
  verifiedTokens(ctx, 'txn').set(token, claims);
  ctx.metrics.tokens.inc({ grant: 'transaction_token' });
  return { data: { transaction_token: token, expires_in: TRANSACTION_TOKEN_TTL } };
}
