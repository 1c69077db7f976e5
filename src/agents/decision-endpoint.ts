import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors, validationError } from '../errors.js';
import { agentKnown } from '../authz/agent-cache.js';
import { authorize } from '../authz/pipeline.js';
import { decisionAnswer, type DecisionAnswer } from '../authz/core.js';
import { actionFields } from './transaction-token.js';

const authorizeBody = z.object({
  agent_id: z.string().min(1, 'agent_id is required').max(1024),
  // Missing is not a 400: the decision is deny with reason invalid_transaction_token: missing.
  transaction_token: z.string().max(16_384).optional(),
  ...actionFields,
});

/**
 * POST /apis/regional/v1/agents/authorize, after the body is read: `{data: decision}`, or a
 * thrown ProtocolError. Step 1 comes first, even before the rest of the body is looked at: an
 * unknown or revoked agent is a 401. The rest is the decision pipeline's.
 */
export async function decisionEndpoint(ctx: AppContext, rawBody: unknown): Promise<{ data: DecisionAnswer }> {
  const rawAgentId = (rawBody as { agent_id?: unknown } | undefined)?.agent_id;
  if (typeof rawAgentId === 'string' && rawAgentId && !(await agentKnown(ctx, rawAgentId))) {
    throw errors.invalidClient('unknown or revoked agent');
  }
  const parsed = authorizeBody.safeParse(rawBody ?? {});
  if (!parsed.success) throw validationError(parsed.error);
  const { agent_id, transaction_token, action, resource, context } = parsed.data;

  const result = await authorize(ctx, { via: 'decision', agentId: agent_id, transactionToken: transaction_token, action, resource, context });
  if (result.outcome === 'unknown_agent') throw errors.invalidClient('unknown or revoked agent');
  return { data: decisionAnswer(result.decision, result.approvalId) };
}
