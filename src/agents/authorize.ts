import type { Request, Response } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, validationError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { AgentPrincipal } from './access-token.js';
import { agentCache, currentPolicy } from './agent-cache.js';
import { canonicalJson } from './canonical.js';
import { appendAudit } from './audit-batch.js';
import { decideActionBatched, type ActionDecision } from './decision.js';
import { actionFields, readTransactionToken } from './transaction-token.js';

const authorizeBody = z.object({
  agent_id: z.string().min(1, 'agent_id is required').max(1024),
  // Missing is not a 400: the decision is deny with reason invalid_transaction_token: missing.
  transaction_token: z.string().max(16_384).optional(),
  ...actionFields,
});

/**
 * POST /apis/regional/v1/agents/authorize: the decision order. Steps: (1) the agent exists and
 * is not revoked, else 401; the transaction token is ours, unexpired, the agent's and bound to
 * this very action, else deny; (2–6) the policy decision with the agent's current state.
 */
export async function authorizeAction(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const answer = await decisionAnswer(ctx, req.body, req.log);
  res.setHeader('Cache-Control', 'no-store');
  res.status(200).json(answer);
}

/** The decision endpoint's steps after the body is read: `{data: decision}`, or a thrown ProtocolError. */
export async function decisionAnswer(ctx: AppContext, rawBody: unknown, log: Logger): Promise<{ data: ActionDecision }> {
  // Step 1 comes first, even before the rest of the body is looked at: an unknown or revoked agent is a 401.
  const rawAgentId = (rawBody as { agent_id?: unknown } | undefined)?.agent_id;
  if (typeof rawAgentId === 'string' && rawAgentId && !(await agentCache(ctx).active(rawAgentId))) {
    throw errors.invalidClient('unknown or revoked agent');
  }
  const parsed = authorizeBody.safeParse(rawBody ?? {});
  if (!parsed.success) throw validationError(parsed.error);
  const { agent_id, transaction_token, action, resource, context } = parsed.data;

  const state = await agentCache(ctx).active(agent_id);
  if (!state) throw errors.invalidClient('unknown or revoked agent');

  const bound = transaction_token ? await readTransactionToken(ctx, transaction_token) : { why: 'missing' };
  const mismatch = 'why' in bound ? bound.why : bindingMismatch(bound.claims, agent_id, action, resource, context);
  let answer: ActionDecision;
  if (mismatch) {
    answer = { decision: 'deny', reason: `invalid_transaction_token: ${mismatch}`, policy_version: (await currentPolicy(ctx)).version };
    // Already a deny: when even its record fails, the answer stays deny (logged).
    await appendAudit(ctx, { kind: 'decision', agent_id, user_id: null, action, resource, context, ...answer }).catch((err: unknown) =>
      log.error({ err, agent_id }, 'audit append failed'),
    );
  } else {
    const claims = (bound as { claims: Record<string, unknown> }).claims;
    const sub = typeof claims.sub === 'string' ? claims.sub : agent_id;
    const principal: AgentPrincipal = {
      agent: state.agent,
      userId: sub !== agent_id ? sub : null,
      capabilities: [action],
      claims,
    };
    const txn = typeof claims.txn === 'string' ? claims.txn : null;
    answer = await decideActionBatched(ctx, { principal, action, resource, context, via: 'api', txn });
  }
  return { data: answer };
}

/** Why the token does not bind this action, or null when it does. */
function bindingMismatch(
  claims: Record<string, unknown>,
  agentId: string,
  action: string,
  resource: string,
  context: Record<string, unknown>,
): string | null {
  if (claims.req_wl !== agentId) return 'issued to another agent';
  const tctx = claims.tctx as { action?: unknown; resource?: unknown; context?: unknown } | undefined;
  if (!tctx || typeof tctx !== 'object') return 'no transaction context';
  if (tctx.action !== action || claims.scope !== action) return 'bound to another action';
  if (tctx.resource !== resource) return 'bound to another resource';
  if (canonicalJson(tctx.context ?? {}) !== canonicalJson(context)) return 'bound to other details (context)';
  return null;
}
