import type { Response } from 'express';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { recordAuditOrLog } from '../authz/audit.js';
import type { AgentState } from '../authz/agent-cache.js';
import { chainStates, currentConsent, MAX_CHAIN_DEPTH, mayActAgents, tokenChainOf, type TokenChain } from '../authz/chain.js';
import { renderCause } from '../authz/cause.js';
import { verifyAccessToken, type AccessTokenClaims } from '../oauth/access-token.js';
import { checkAssertion, JWT_BEARER_ASSERTION_TYPE } from './assertion.js';
import { agentAudience, issueAgentAccessToken, sendTokenResponse } from './issue-token.js';
import { parseAuthorizationDetails } from '../oauth/authorization-details.js';
import { detailsBeyondApproved } from '../authz/authorization-details.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/**
 * Token exchange (RFC 8693) at the agent token endpoint: the authenticated agent gets a token
 * acting for the person of `subject_token`. The order, each refusal with its error:
 *   1. the request: `subject_token` and its type (an access token), `requested_token_type`
 *      when sent (an access token), `actor_token` when sent (this same agent's assertion,
 *      of type jwt)                                                            invalid_request
 *   2. the acting agent is a delegated agent                                  unauthorized_client
 *   3. the subject token: an access token of ours, unexpired, of a person (signed in,
 *      `sub` a stored person), or an exchanged agent token whose chain still holds   invalid_grant
 *   4. who may exchange it: for a person's token, the person lets this agent act for them
 *      (and, when the token carries `may_act`, it names this agent); for an agent's token,
 *      that agent lists this one among its sub-agents; the chain stays at most 5 agents deep
 *      and names no agent twice                                                  invalid_grant
 *   5. capabilities: what the subject token carries (for a person's token, what the person
 *      consented to), what this agent holds, and `scope` when sent: never wider   invalid_scope
 *   6. `resource`: the MCP gateway                                               invalid_target
 * The token: `sub` the person, `act` nested one level per agent (the outermost this agent),
 * `exp` never after the subject token's. Refusals past the assertion are recorded.
 */
export async function tokenExchangeGrant(ctx: AppContext, state: AgentState, body: Record<string, unknown>, res: Response, jkt?: string): Promise<void> {
  const agent = state.agent;
  let issued: Parameters<typeof issueAgentAccessToken>[1];
  try {
    issued = await exchange(ctx, state, body);
  } catch (err) {
    if (err instanceof ProtocolError) {
      await recordAuditOrLog(ctx, {
        kind: 'token',
        agent_id: agent.agent_id,
        action: 'token:token_exchange',
        decision: 'refused',
        reason: `${err.error}: ${err.description ?? ''}`,
      });
    }
    throw err;
  }
  // bound to the DPoP key of the request's proof, when one came
  const token = await issueAgentAccessToken(ctx, { ...issued, jkt });
  sendTokenResponse(res, {
    access_token: token.access_token,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: jkt ? 'DPoP' : 'Bearer',
    expires_in: token.expires_in,
    scope: token.scope,
  });
}

const text = (body: Record<string, unknown>, name: string): string | undefined => {
  const v = body[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw errors.invalidRequest(`${name} must be a string`);
  return v;
};

async function exchange(ctx: AppContext, state: AgentState, body: Record<string, unknown>): Promise<Parameters<typeof issueAgentAccessToken>[1]> {
  const agent = state.agent;
  // 1. The request.
  const subjectToken = text(body, 'subject_token');
  if (subjectToken === undefined) throw errors.invalidRequest('subject_token is required');
  const subjectType = text(body, 'subject_token_type');
  if (subjectType === undefined) throw errors.invalidRequest('subject_token_type is required');
  if (subjectType !== ACCESS_TOKEN_TYPE) throw errors.invalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  const requested = text(body, 'requested_token_type');
  if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE) throw errors.invalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  await checkActorToken(ctx, agent.agent_id, body);

  // 2. The acting agent acts for people.
  if (agent.mode !== 'delegated') throw errors.unauthorizedClient('an autonomous agent acts only for itself; token exchange is for delegated agents');

  // 3. The subject token.
  const claims = await verifyAccessToken(ctx, subjectToken);
  if (!claims) throw errors.invalidGrant('subject_token is not a valid access token of this issuer (or it expired)');
  const subject = await subjectOf(ctx, claims);

  // 4. Who may exchange it.
  const agents = [...subject.chain, agent.agent_id];
  if (agents.length > MAX_CHAIN_DEPTH) throw errors.invalidGrant(`a delegation chain is at most ${MAX_CHAIN_DEPTH} agents deep`);
  if (subject.chain.includes(agent.agent_id)) throw errors.invalidGrant('the agent is already in the delegation chain');
  let offered: string[];
  if (subject.chain.length === 0) {
    const mayAct = mayActAgents(claims.may_act);
    if (mayAct !== null && !mayAct.includes(agent.agent_id)) throw errors.invalidGrant('the subject token may not be exchanged by this agent (may_act)');
    const consent = await currentConsent(ctx, subject.userId, agent.agent_id);
    if (!consent) throw errors.invalidGrant('the person has not let this agent act for them');
    offered = consent.capabilities;
  } else {
    const parent = subject.states[subject.states.length - 1]!;
    if (!parent.agent.sub_agents.includes(agent.agent_id)) throw errors.invalidGrant(`agent ${parent.agent.agent_id} does not list this agent among its sub-agents`);
    offered = subject.capabilities;
  }

  // 5. Capabilities: only ever narrower.
  const held = new Set(agent.capabilities.map((c) => c.name));
  const available = offered.filter((c) => held.has(c));
  const scope = text(body, 'scope');
  const wanted = [...new Set((scope ?? '').split(' ').filter(Boolean))];
  let capabilities: string[];
  if (wanted.length) {
    const wider = wanted.filter((c) => !available.includes(c));
    if (wider.length) throw errors.invalidScope(`wider than the subject token and the agent allow: ${wider.join(', ')}`);
    capabilities = wanted;
  } else {
    capabilities = available;
  }
  if (!capabilities.length) throw errors.invalidScope('the subject token and the agent have no capability in common');

  // 6. The audience.
  const audience = agentAudience(ctx, body.resource);
  // What the person approved in detail (RFC 9396) goes down the chain: never wider. An exchange
  // may ask for narrower details (authorization_details), each within one the subject token carries.
  const approved = Array.isArray(claims.authorization_details) ? (claims.authorization_details as Record<string, unknown>[]) : undefined;
  const asked = await parseAuthorizationDetails(ctx, body.authorization_details);
  if (asked) {
    const why = detailsBeyondApproved(asked, approved);
    if (why) throw errors.invalidAuthorizationDetails(why);
  }
  const details = asked ?? approved;
  return {
    agent, userId: subject.userId, capabilities, audience,
    ...(details?.length ? { authorizationDetails: details } : {}),
    chain: { agents, sid: subject.sid, notAfter: claims.exp! },
  };
}

/** `actor_token`, when sent: an assertion of this same agent (RFC 7523), used once like the client assertion. */
async function checkActorToken(ctx: AppContext, agentId: string, body: Record<string, unknown>): Promise<void> {
  const actorToken = text(body, 'actor_token');
  const actorType = text(body, 'actor_token_type');
  if (actorToken === undefined) {
    if (actorType !== undefined) throw errors.invalidRequest('actor_token_type is sent without actor_token');
    return;
  }
  if (actorType !== JWT_TOKEN_TYPE) throw errors.invalidRequest(`actor_token_type must be ${JWT_TOKEN_TYPE}`);
  // The client assertion itself, sent again, names the same agent (and its jti is already used).
  if (actorToken === body.client_assertion) return;
  let actor: AgentState;
  try {
    actor = await checkAssertion(ctx, { client_assertion_type: JWT_BEARER_ASSERTION_TYPE, client_assertion: actorToken }, [ctx.urls.agentToken, ctx.urls.issuer]);
  } catch (err) {
    if (err instanceof ProtocolError) throw errors.invalidRequest(`actor_token: ${err.description ?? 'not a valid assertion'}`);
    throw err;
  }
  if (actor.agent.agent_id !== agentId) throw errors.invalidRequest('actor_token must be an assertion of the authenticated agent');
}

/** The subject token's person, the chain it already carries (with its agents' states) and its capabilities. */
async function subjectOf(
  ctx: AppContext,
  claims: AccessTokenClaims,
): Promise<{ userId: string; chain: string[]; states: AgentState[]; sid: string | null; capabilities: string[] }> {
  const userId = claims.sub!;
  if (claims.act === undefined) {
    // A person's token: `sub` a stored person (a service's token names its client), its session live.
    if (claims.client_id === userId || !(await ctx.store.users.get(userId))) throw errors.invalidGrant('subject_token is not the access token of a person');
    const sid = typeof claims.sid === 'string' && claims.sid ? claims.sid : null;
    if (sid !== null) {
      const session = await ctx.store.sessions.get(sid);
      if (!session || session.ended_at !== null) throw errors.invalidGrant("the person's sign-in session has ended");
    }
    return { userId, chain: [], states: [], sid, capabilities: [] };
  }
  // An agent's token: only one from token exchange carries a chain that can be extended.
  const chain: TokenChain | null = tokenChainOf(claims as Record<string, unknown>);
  if (!chain || chain.agents[chain.agents.length - 1] !== claims.client_id) {
    throw errors.invalidGrant('subject_token is an agent token not obtained by token exchange');
  }
  const held = await chainStates(ctx, chain, userId, null);
  if ('refused' in held) throw errors.invalidGrant(`the subject token's delegation chain no longer holds: ${renderCause(held.refused).replace(/^delegation_revoked: /, '')}`);
  const capabilities = Array.isArray(claims.capabilities) ? (claims.capabilities as unknown[]).filter((c): c is string => typeof c === 'string') : [];
  return { userId, chain: chain.agents, states: held.agents, sid: chain.sid, capabilities };
}
