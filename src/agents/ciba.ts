import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { errors, ProtocolError } from '../errors.js';
import type { Agent } from '../store/agents.js';
import type { User } from '../store/users.js';
import { authenticateAgent } from './assertion.js';
import { agentAudience, issueAgentAccessToken, requestedCapabilities, sendTokenResponse } from './issue-token.js';
import { nowSeconds } from '../clock.js';
import { parseAuthorizationDetails } from '../oauth/authorization-details.js';

export const CIBA_GRANT_TYPE = 'urn:openid:params:grant-type:ciba';
export const CIBA_DEFAULT_EXPIRY = 300;
export const CIBA_MAX_EXPIRY = 3600;
export const CIBA_INTERVAL = 5;
const BINDING_MESSAGE_MAX = 256;
const ID_TOKEN_TTL = 900;
// Timers may fire a little early; a poll this close to the interval still counts as on time.
const POLL_TOLERANCE_MS = 100;

/** The errors of CIBA Core 1.0 section 11 and 13, all 400 unless named otherwise. */
const ciba = (error: string, description: string, status = 400) => new ProtocolError(status, error, description);

const one = (v: unknown, name: string): string | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw errors.invalidRequest(`${name} must be given once, as a string`);
  return v;
};

/** The audiences a client assertion may name here: the issuer, the token endpoint, this endpoint. */
export const cibaAudiences = (ctx: AppContext) => [ctx.urls.issuer, ctx.urls.agentToken, ctx.urls.backchannelAuthorize];

/**
 * POST /apis/regional/v1/ai/auth/backchannel-authorize (CIBA poll mode): a delegated agent
 * asks a named person to approve. Steps: authenticate the agent, check its mode, the scope,
 * find the person, check the binding message and expiry, record the request.
 */
export async function backchannelAuthorize(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const { agent } = await authenticateAgent(ctx, body, cibaAudiences(ctx), 'ciba:request');
  if (agent.mode !== 'delegated') {
    throw errors.unauthorizedClient('only a delegated agent may ask a person through CIBA; an autonomous agent uses client_credentials');
  }
  const { capabilities, openid } = requestedCapabilities(agent, one(body.scope, 'scope'));
  // Only the MCP gateway may be named as `resource`; the token is always for it.
  agentAudience(ctx, one(body.resource, 'resource'));
  const user = await findPerson(ctx, body);
  const bindingMessage = checkBindingMessage(one(body.binding_message, 'binding_message'));
  const expiresIn = requestedExpiry(body.requested_expiry);
  // RFC 9396 section 3 (CIBA): what the person approves, beyond the capabilities.
  const authorizationDetails = await parseAuthorizationDetails(ctx, body.authorization_details);

  const authReqId = randomToken();
  await ctx.store.agentAuth.createCiba({
    id: randomUUID(),
    agent_id: agent.agent_id,
    user_id: user.id,
    binding_message: bindingMessage,
    auth_req_hash: sha256(authReqId),
    auth_req_enc: ctx.box.seal(authReqId),
    scope: capabilities,
    openid,
    poll_interval: CIBA_INTERVAL,
    expires_at: nowSeconds(ctx.clock) + expiresIn,
    authorization_details: authorizationDetails ?? null,
  });
  sendTokenResponse(res, { auth_req_id: authReqId, expires_in: expiresIn, interval: CIBA_INTERVAL });
}

async function findPerson(ctx: AppContext, body: Record<string, unknown>): Promise<User> {
  const hints = (['login_hint', 'login_hint_token', 'id_token_hint'] as const).filter((h) => body[h] !== undefined && body[h] !== '');
  if (hints.length === 0) throw errors.invalidRequest('login_hint is required (the person\'s email or id)');
  if (hints.length > 1) throw errors.invalidRequest('give exactly one of login_hint, login_hint_token, id_token_hint');
  if (hints[0] !== 'login_hint') throw errors.invalidRequest(`${hints[0]} is not supported; use login_hint`);
  const hint = one(body.login_hint, 'login_hint')!.trim();
  const user = hint.includes('@') ? await ctx.store.users.getByEmail(hint) : ((await ctx.store.users.get(hint)) ?? (await ctx.store.users.getByEmail(hint)));
  if (!user) throw ciba('unknown_user_id', 'no person matches login_hint');
  return user;
}

function checkBindingMessage(message: string | undefined): string | null {
  if (message === undefined || message === '') return null;
  // Shown to the person as is: short and printable only.
  // eslint-disable-next-line no-control-regex
  if (message.length > BINDING_MESSAGE_MAX || /[\u0000-\u001f\u007f]/.test(message)) {
    throw ciba('invalid_binding_message', `binding_message must be printable text of at most ${BINDING_MESSAGE_MAX} characters`);
  }
  return message;
}

function requestedExpiry(raw: unknown): number {
  if (raw === undefined || raw === '') return CIBA_DEFAULT_EXPIRY;
  const text = typeof raw === 'number' ? String(raw) : raw;
  if (typeof text !== 'string' || !/^\d{1,6}$/.test(text)) throw errors.invalidRequest('requested_expiry must be a positive integer (seconds)');
  const n = Number(text);
  if (n < 1) throw errors.invalidRequest('requested_expiry must be a positive integer (seconds)');
  // The OP chooses expires_in (CIBA 7.3): a longer wish is cut to the longest we keep a request.
  return Math.min(n, CIBA_MAX_EXPIRY);
}

/**
 * The CIBA grant at the agent token endpoint (poll mode). Steps: find the request by its
 * auth_req_id (the same agent's), record the poll, then answer by state: denied →
 * access_denied, expired → expired_token, pending → slow_down or authorization_pending,
 * approved → the token, once.
 */
export async function cibaGrant(ctx: AppContext, agent: Agent, body: Record<string, unknown>, res: Response, jkt?: string): Promise<void> {
  const authReqId = one(body.auth_req_id, 'auth_req_id');
  if (!authReqId) throw errors.invalidRequest('auth_req_id is required');
  const outcome = await ctx.store.agentAuth.poll(sha256(authReqId), ctx.clock.now(), POLL_TOLERANCE_MS);
  if (outcome.kind === 'unknown' || outcome.approval.agent_id !== agent.agent_id || outcome.approval.kind !== 'ciba') {
    throw errors.invalidGrant('unknown auth_req_id');
  }
  const request = outcome.approval;
  const t = nowSeconds(ctx.clock);
  if (request.state === 'consumed') throw errors.invalidGrant('the auth_req_id was already redeemed');
  if (request.state === 'denied') throw ciba('access_denied', 'the person denied the request');
  if (request.expires_at <= t) throw ciba('expired_token', 'the auth_req_id has expired; start a new request');
  if (request.state === 'pending') {
    // slow_down is a variant of authorization_pending (CIBA 11): only while still waiting.
    if (outcome.kind === 'too_soon') throw ciba('slow_down', `poll no more often than every ${request.poll_interval ?? CIBA_INTERVAL} seconds`);
    throw ciba('authorization_pending', 'the person has not answered yet');
  }

  // Approved: the token, exactly once.
  if (!(await ctx.store.agentAuth.consume(request.id))) throw errors.invalidGrant('the auth_req_id was already redeemed');
  const user = request.user_id ? await ctx.store.users.get(request.user_id) : undefined;
  if (!user) throw ciba('access_denied', 'the person no longer exists');
  // Capabilities removed since the request are not granted.
  const held = new Set(agent.capabilities.map((c) => c.name));
  const capabilities = request.scope.filter((c) => held.has(c));
  const authorizationDetails = request.authorization_details?.length ? request.authorization_details : undefined;
  const token = await issueAgentAccessToken(ctx, { agent, userId: user.id, capabilities, audience: ctx.urls.mcp, authorizationDetails, jkt });
  const response: Record<string, unknown> = {
    access_token: token.access_token,
    token_type: jkt ? 'DPoP' : 'Bearer',
    expires_in: token.expires_in,
    scope: [...(request.openid ? ['openid'] : []), ...capabilities].join(' '),
    ...(authorizationDetails ? { authorization_details: authorizationDetails } : {}),
  };
  if (request.openid) response.id_token = await idToken(ctx, agent, user, request.decided_at ?? t);
  sendTokenResponse(res, response);
}

async function idToken(ctx: AppContext, agent: Agent, user: User, authTime: number): Promise<string> {
  const iat = nowSeconds(ctx.clock);
  return ctx.keys.sign(
    'RS256',
    {
      iss: ctx.urls.issuer,
      sub: user.id,
      aud: agent.agent_id,
      exp: iat + ID_TOKEN_TTL,
      iat,
      auth_time: authTime,
      email: user.email,
      email_verified: user.email_verified,
      name: user.name,
      groups: user.groups,
      roles: user.roles,
    },
    'JWT',
  );
}
