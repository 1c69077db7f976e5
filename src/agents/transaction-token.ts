import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { errors as joseErrors, type JWTPayload } from 'jose';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, ProtocolError, validationError } from '../errors.js';
import { decide, usageLimitsFor } from '../policy/index.js';
import { countersFor, peekUsage } from '../authz/usage.js';
import { verifyAgentAccessToken } from './access-token.js';
import { agentCache, currentPolicy } from './agent-cache.js';
import { buildRequest } from './decision.js';
import { verifiedTokens } from './verified-tokens.js';
import { appendAudit } from './audit-batch.js';

export const TRANSACTION_TOKEN_TTL = 60;
export const TRANSACTION_TOKEN_TYP = 'txntoken+jwt';

/** The action an agent asks about: the body of both the transaction-token and the decision endpoints. */
export const actionFields = {
  action: z.string().min(1, 'action is required').max(512),
  resource: z.string().min(1, 'resource is required').max(1024),
  context: z.record(z.string(), z.unknown()).default({}),
};
const bindBody = z.object(actionFields);

const now = () => Math.floor(Date.now() / 1000);

export function bearerToken(req: Request): string {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
  if (!m) throw errors.invalidToken('an agent access token is required (Authorization: Bearer)', {}, { 'WWW-Authenticate': 'Bearer' });
  return m[1]!;
}

/**
 * POST /apis/regional/v1/ai/auth/transaction-token. Steps: authenticate the agent's access
 * token, validate the body, check the action is one of the token's capabilities, check the
 * limits (403 constraint_violated, nothing bound), sign the transaction token.
 */
export async function transactionToken(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const principal = await verifyAgentAccessToken(ctx, bearerToken(req));
  const parsed = bindBody.safeParse(req.body ?? {});
  if (!parsed.success) throw validationError(parsed.error);
  const { action, resource, context } = parsed.data;

  if (!principal.capabilities.includes(action)) {
    throw errors.insufficientScope(`${action} is not one of the token's capabilities`, {}, {
      'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${action.replace(/[^\x20-\x7e]|["\\]/g, '')}"`,
    });
  }

  const state = await agentCache(ctx).active(principal.agent.agent_id);
  if (!state) throw errors.invalidToken('the agent is unknown or revoked');
  const policy = await currentPolicy(ctx);
  const request = await buildRequest(ctx, state, { principal, action, resource, context });
  // Limits over time are checked against the usage now, consuming nothing.
  const overTime = usageLimitsFor(request, policy);
  if (overTime.length) {
    const counters = countersFor({ agentId: request.agent.id, capability: action, resource, personId: principal.userId }, overTime);
    request.usage = await peekUsage(ctx.store, counters, now());
  }
  const check = decide(request, policy);
  if (check.reason.startsWith('constraint_violated') || check.trace.some((s) => s.step === 'limits' && s.outcome === 'fail')) {
    throw new ProtocolError(403, 'invalid_body', 'constraint_violated');
  }

  const iat = now();
  const txn = randomUUID();
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
  };
  const token = await ctx.keys.sign('EdDSA', claims, TRANSACTION_TOKEN_TYP);
  // We just signed it: this process need not verify it again (the decision usually comes here next).
  verifiedTokens(ctx, 'txn').set(token, JSON.parse(JSON.stringify(claims)) as JWTPayload, { alg: 'EdDSA', typ: TRANSACTION_TOKEN_TYP });
  // Every token issued to an agent is in the audit trail.
  await appendAudit(ctx, {
    kind: 'token',
    agent_id: principal.agent.agent_id,
    user_id: principal.userId,
    action,
    resource,
    context,
    decision: 'issued',
    reason: `transaction token ${txn}`,
    policy_version: check.policyVersion,
  });
  res.setHeader('Cache-Control', 'no-store');
  res.status(200).json({ data: { transaction_token: token, expires_in: TRANSACTION_TOKEN_TTL } });
}

/** A transaction token's claims, or why it is not good (the reason after `invalid_transaction_token: `). */
export async function readTransactionToken(ctx: AppContext, token: string): Promise<{ claims: JWTPayload } | { why: string }> {
  const cache = verifiedTokens(ctx, 'txn');
  const hit = cache.get(token, now());
  if (hit) return { claims: hit.payload };
  try {
    const { payload, protectedHeader } = await ctx.keys.verify(token, 'EdDSA', {
      issuer: ctx.urls.issuer,
      audience: ctx.urls.issuer,
      typ: TRANSACTION_TOKEN_TYP,
      requiredClaims: ['exp', 'iat', 'txn', 'req_wl', 'tctx'],
    });
    cache.set(token, payload, protectedHeader as Record<string, unknown>);
    return { claims: payload };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) return { why: 'expired' };
    if (err instanceof joseErrors.JWTClaimValidationFailed) return { why: `claim ${err.claim} is not valid` };
    return { why: 'not a transaction token of this issuer' };
  }
}
