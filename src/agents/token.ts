import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { recordAuditOrLog } from '../authz/audit.js';
import { authenticateAgent } from './assertion.js';
import { tokenRequestBinding } from '../oauth/dpop.js';
import { CIBA_GRANT_TYPE, cibaGrant } from './ciba.js';
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from './token-exchange.js';
import { agentAudience, issueAgentAccessToken, requestedCapabilities, sendTokenResponse } from './issue-token.js';
import { JWT_BEARER_GRANT, redeemIdJag } from '../oauth/grants/jwt-bearer.js';

export const AGENT_TOKEN_GRANT_TYPES = ['client_credentials', CIBA_GRANT_TYPE, JWT_BEARER_GRANT, TOKEN_EXCHANGE_GRANT];
const GRANTS = AGENT_TOKEN_GRANT_TYPES;

/**
 * POST /apis/regional/v1/ai/auth/token: agent sign-in (`client_credentials`, autonomous agents),
 * CIBA polling, ID-JAG redemption (jwt-bearer, delegated agents) and token exchange
 * (`token-exchange.ts`, delegated agents). Steps: check the grant type, authenticate the agent's
 * assertion, the DPoP proof (its key binds the token; required of an agent with
 * dpop_bound_access_tokens), run the grant.
 */
export async function agentToken(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const grantType = body.grant_type;
  if (grantType === undefined || grantType === '') throw errors.invalidRequest('grant_type is required');
  if (typeof grantType !== 'string' || !GRANTS.includes(grantType)) {
    throw errors.unsupportedGrantType(`grant_type must be one of ${GRANTS.join(', ')}`);
  }
  const state = await authenticateAgent(
    ctx,
    body,
    [ctx.urls.agentToken, ctx.urls.issuer],
    grantType === CIBA_GRANT_TYPE ? 'token:ciba' : grantType === JWT_BEARER_GRANT ? 'token:jwt-bearer' : grantType === TOKEN_EXCHANGE_GRANT ? 'token:token_exchange' : 'token:client_credentials',
  );
  const { agent } = state;
  const jkt = await tokenRequestBinding(ctx, req, ctx.urls.agentToken, agent.dpop_bound_access_tokens);
  if (grantType === TOKEN_EXCHANGE_GRANT) {
    await tokenExchangeGrant(ctx, state, body, res, jkt);
    return;
  }
  if (grantType === JWT_BEARER_GRANT) {
    // An ID-JAG from a trusted identity provider: a delegated token for the person it names.
    sendTokenResponse(res, { ...(await redeemIdJag(ctx, { kind: 'agent', agent, id: agent.agent_id }, body, jkt)) });
    return;
  }
  if (grantType === CIBA_GRANT_TYPE) {
    await cibaGrant(ctx, agent, body, res, jkt);
    return;
  }

  // client_credentials: the agent acting for itself. A refusal past the assertion is recorded too.
  let audience: string;
  let capabilities: string[];
  try {
    if (agent.mode !== 'autonomous') {
      throw errors.unauthorizedClient('a delegated agent gets its token through CIBA, not client_credentials');
    }
    audience = agentAudience(ctx, body.resource);
    ({ capabilities } = requestedCapabilities(agent, body.scope));
  } catch (err) {
    if (err instanceof ProtocolError) {
      await recordAuditOrLog(ctx, {
        kind: 'token',
        agent_id: agent.agent_id,
        action: 'token:client_credentials',
        decision: 'refused',
        reason: `${err.error}: ${err.description ?? ''}`,
      });
    }
    throw err;
  }
  const token = await issueAgentAccessToken(ctx, { agent, userId: null, capabilities, audience, jkt });
  sendTokenResponse(res, {
    access_token: token.access_token,
    token_type: jkt ? 'DPoP' : 'Bearer',
    expires_in: token.expires_in,
    scope: token.scope,
  });
}
