import { errors as joseErrors, type JWTPayload } from 'jose';
import type { AppContext } from '../context.js';
import { sameJson } from './canonical.js';
import { verifiedTokens } from './verified-tokens.js';
import { nowSeconds } from '../clock.js';
import { DELEGATION_CLAIM, tokenChainOf, type TokenChain } from './chain.js';

export const TRANSACTION_TOKEN_TTL = 60;
export const TRANSACTION_TOKEN_TYP = 'txntoken+jwt';

/** A transaction token's claims, or why it is not good (the text after `invalid_transaction_token: `). */
export async function readTransactionToken(ctx: AppContext, token: string): Promise<{ claims: JWTPayload } | { why: string }> {
  const cache = verifiedTokens(ctx, 'txn');
  const hit = cache.get(token, nowSeconds(ctx.clock));
  if (hit) return { claims: hit.payload };
  try {
    const { payload } = await ctx.keys.verify(token, 'EdDSA', {
      issuer: ctx.urls.issuer,
      audience: ctx.urls.issuer,
      typ: TRANSACTION_TOKEN_TYP,
      requiredClaims: ['exp', 'iat', 'txn', 'req_wl', 'tctx'],
    });
    cache.set(token, payload);
    return { claims: payload };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) return { why: 'expired' };
    if (err instanceof joseErrors.JWTClaimValidationFailed) return { why: `claim ${err.claim} is not valid` };
    return { why: 'not a transaction token of this issuer' };
  }
}

/**
 * The transaction-token check of the decision endpoint: the token must be ours, unexpired, of
 * this agent and bound to this very action, resource and context. Answers the person it was
 * issued for (`sub` ≠ the agent: a delegated agent's person) and its `txn`, or why it does not hold.
 */
export async function checkTransactionToken(
  ctx: AppContext,
  token: string | undefined,
  bound: { agentId: string; action: string; resource: string; context: Record<string, unknown> },
): Promise<{ userId: string | null; txn: string | null; chain: TokenChain | null } | { why: string }> {
  if (!token) return { why: 'missing' };
  const read = await readTransactionToken(ctx, token);
  if ('why' in read) return read;
  const { claims } = read;
  if (claims.req_wl !== bound.agentId) return { why: 'issued to another agent' };
  const tctx = claims.tctx as { action?: unknown; resource?: unknown; context?: unknown } | undefined;
  if (!tctx || typeof tctx !== 'object') return { why: 'no transaction context' };
  if (tctx.action !== bound.action || claims.scope !== bound.action) return { why: 'bound to another action' };
  if (tctx.resource !== bound.resource) return { why: 'bound to another resource' };
  if (!sameJson(tctx.context ?? {}, bound.context)) return { why: 'bound to other details (context)' };
  const sub = typeof claims.sub === 'string' ? claims.sub : bound.agentId;
  let chain: TokenChain | null = null;
  if (claims[DELEGATION_CLAIM] !== undefined) {
    chain = tokenChainOf(claims);
    if (!chain || sub === bound.agentId || chain.agents[chain.agents.length - 1] !== bound.agentId) return { why: 'malformed delegation chain' };
  }
  return { userId: sub !== bound.agentId ? sub : null, txn: typeof claims.txn === 'string' ? claims.txn : null, chain };
}
