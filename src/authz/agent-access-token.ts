import type { JWTPayload } from 'jose';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import type { Agent } from '../store/agents.js';
import { agentKnown } from './agent-cache.js';
import { verifiedTokens } from './verified-tokens.js';
import { nowSeconds } from '../clock.js';
import { DELEGATION_CLAIM, tokenChainOf, type TokenChain } from './chain.js';

/** Who is calling with an agent access token: the agent, the person it acts for (if any), its capabilities. */
export interface AgentPrincipal {
  agent: Agent;
  userId: string | null;
  capabilities: string[];
  claims: JWTPayload;
  /** a token exchange's delegation chain (checked again at every decision); null for any other token */
  chain: TokenChain | null;
}

/** Agent access tokens live 900 seconds (the default access-token lifetime). */
export const AGENT_ACCESS_TOKEN_TTL = 900;
export const AGENT_ACCESS_TOKEN_TYP = 'at+jwt';

/**
 * Verifies an agent access token of ours: EdDSA, `typ: at+jwt`, our issuer, unexpired, for
 * `audience` (default the MCP gateway), of an agent that exists and is not revoked.
 * Throws `invalid_token` (401) otherwise.
 */
export async function verifyAgentAccessToken(ctx: AppContext, token: string, audience: string = ctx.urls.mcp): Promise<AgentPrincipal> {
  const claims = await verifySignature(ctx, token, audience);
  const clientId = claims.client_id;
  if (typeof clientId !== 'string' || !clientId) throw invalidToken('the token names no agent');
  const state = await agentKnown(ctx, clientId);
  if (!state) throw invalidToken('the agent is unknown or revoked');

  let userId: string | null = null;
  const act = claims.act as { sub?: unknown } | undefined;
  if (act !== undefined) {
    // A delegated token: the person is `sub`, the agent acts for them (RFC 8693 `act`).
    if (!act || act.sub !== clientId || typeof claims.sub !== 'string') throw invalidToken('the token has a malformed act claim');
    userId = claims.sub;
  } else if (claims.sub !== clientId) {
    throw invalidToken('the token subject is not the agent');
  }
  // A token exchange's token names its whole chain, ending with this agent.
  let chain: TokenChain | null = null;
  if (claims[DELEGATION_CLAIM] !== undefined) {
    chain = tokenChainOf(claims);
    if (!chain || userId === null || chain.agents[chain.agents.length - 1] !== clientId) throw invalidToken('the token has a malformed delegation chain');
  }
  const capabilities = Array.isArray(claims.capabilities) ? claims.capabilities.filter((c): c is string => typeof c === 'string') : [];
  return { agent: state.agent, userId, capabilities, claims, chain };
}

/** A token this process just signed counts as verified here (no second Ed25519 verify). */
export function rememberIssued(ctx: AppContext, token: string, audience: string, claims: JWTPayload): void {
  verifiedTokens(ctx, `at:${audience}`).set(token, claims);
}

async function verifySignature(ctx: AppContext, token: string, audience: string): Promise<JWTPayload> {
  const cache = verifiedTokens(ctx, `at:${audience}`);
  const hit = cache.get(token, nowSeconds(ctx.clock));
  if (hit) return hit.payload;
  try {
    const { payload } = await ctx.keys.verify(token, 'EdDSA', {
      issuer: ctx.urls.issuer,
      audience,
      typ: AGENT_ACCESS_TOKEN_TYP,
      requiredClaims: ['exp', 'iat', 'sub'],
    });
    cache.set(token, payload);
    return payload;
  } catch {
    throw invalidToken('the access token is invalid, expired or not for this resource');
  }
}

function invalidToken(description: string): ProtocolError {
  return errors.invalidToken(description, {}, { 'WWW-Authenticate': `Bearer error="invalid_token"` });
}
