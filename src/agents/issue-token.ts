import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { AppContext } from '../context.js';
import type { Agent } from '../store/agents.js';
import { errors } from '../errors.js';
import type { JWTPayload } from 'jose';
import { recordAudit } from '../authz/audit.js';
import { AGENT_ACCESS_TOKEN_TTL, AGENT_ACCESS_TOKEN_TYP, rememberIssued } from '../authz/agent-access-token.js';
import { nowSeconds } from '../clock.js';
import { DELEGATION_BY_CONSENT, DELEGATION_CLAIM, nestedAct } from '../authz/chain.js';
import { confirmation } from '../oauth/dpop.js';

/**
 * The capabilities a token carries: all of the agent's, or the requested `scope` narrowed to
 * them (an unknown name is `invalid_scope`). `openid` is not a capability and is reported apart.
 */
export function requestedCapabilities(agent: Agent, scope: unknown): { capabilities: string[]; openid: boolean } {
  if (scope !== undefined && typeof scope !== 'string') throw errors.invalidRequest('scope must be a string');
  const names = [...new Set((scope ?? '').split(' ').filter(Boolean))];
  const openid = names.includes('openid');
  const wanted = names.filter((n) => n !== 'openid');
  const held = agent.capabilities.map((c) => c.name);
  if (wanted.length === 0) return { capabilities: held, openid };
  const unknown = wanted.filter((n) => !held.includes(n));
  if (unknown.length) throw errors.invalidScope(`not a capability of this agent: ${unknown.join(', ')}`);
  return { capabilities: wanted, openid };
}

/** The audience of an agent token: the MCP gateway, the only `resource` accepted. */
export function agentAudience(ctx: AppContext, resource: unknown): string {
  if (resource === undefined || resource === '') return ctx.urls.mcp;
  if (resource !== ctx.urls.mcp) throw errors.invalidTarget('resource must be the MCP gateway URL');
  return resource;
}

export interface IssuedAgentToken { access_token: string; expires_in: number; scope: string; jti: string }

/**
 * An agent access token (EdDSA, `typ: at+jwt`); `userId` makes it a delegated token (`sub` the
 * person, `act` the agent). `chain`: a token exchange's, with the agents before this one (its
 * `act` nests them), the person's session and the subject token's expiry (never outlived).
 */
export async function issueAgentAccessToken(
  ctx: AppContext,
  p: {
    agent: Agent;
    userId: string | null;
    capabilities: string[];
    audience: string;
    grant?: string;
    authorizationDetails?: Record<string, unknown>[];
    chain?: { agents: string[]; sid: string | null; notAfter: number };
    jkt?: string | undefined;
  },
): Promise<IssuedAgentToken> {
  const iat = nowSeconds(ctx.clock);
  const jti = randomUUID();
  const scope = p.capabilities.join(' ');
  const exp = p.chain ? Math.min(iat + AGENT_ACCESS_TOKEN_TTL, p.chain.notAfter) : iat + AGENT_ACCESS_TOKEN_TTL;
  const claims = {
    iss: ctx.urls.issuer,
    sub: p.userId ?? p.agent.agent_id,
    aud: p.audience,
    exp,
    iat,
    jti,
    client_id: p.agent.agent_id,
    scope,
    capabilities: p.capabilities,
    ...(p.chain
      ? { act: nestedAct(p.chain.agents), [DELEGATION_CLAIM]: DELEGATION_BY_CONSENT, ...(p.chain.sid ? { sid: p.chain.sid } : {}) }
      : p.userId ? { act: { sub: p.agent.agent_id } } : {}),
    // RFC 9396: what the person approved; every decision on this token stays within it
    ...(p.authorizationDetails?.length ? { authorization_details: p.authorizationDetails } : {}),
    ...confirmation(p.jkt),
  };
  const grant = p.grant ?? (p.chain ? 'token_exchange' : p.userId ? 'ciba' : 'client_credentials');
  const token = await ctx.keys.sign('EdDSA', claims, AGENT_ACCESS_TOKEN_TYP);
  rememberIssued(ctx, token, p.audience, JSON.parse(JSON.stringify(claims)) as JWTPayload);
  await recordAudit(ctx, {
    kind: 'token',
    agent_id: p.agent.agent_id,
    user_id: p.userId,
    action: `token:${grant}`,
    resource: p.audience,
    context: { jti, scope },
    ...(p.chain && p.chain.agents.length > 1 ? { chain: p.chain.agents } : {}),
    decision: 'issued',
    reason: 'token issued',
  });
  ctx.metrics.tokens.inc({ grant: grant === 'client_credentials' ? 'agent_client_credentials' : grant.replace(/-/g, '_') });
  return { access_token: token, expires_in: exp - iat, scope, jti };
}

export function sendTokenResponse(res: Response, body: Record<string, unknown>): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Pragma', 'no-cache');
  res.status(200).json(body);
}
