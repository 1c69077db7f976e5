import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { displayState, type Approval } from '../store/agent-auth.js';
import type { Store } from '../store/index.js';
import { APPROVAL_WINDOW_SECONDS } from '../authz/pipeline.js';
import { iso, nowSeconds } from '../clock.js';

/** An approval as the management API and the approvals page show it. */
export interface ApprovalView {
  id: string;
  kind: 'ciba' | 'action';
  state: string;
  agent_id: string;
  user_id: string | null;
  binding_message: string | null;
  auth_req_id: string | null;
  scope: string[];
  action: string | null;
  resource: string | null;
  context: Record<string, unknown> | null;
  /** CIBA: the authorization details (RFC 9396) the person is asked to approve */
  authorization_details: Record<string, unknown>[] | null;
  created_at: string;
  expires_at: string;
  decided_at: string | null;
}


export function approvalView(ctx: AppContext, a: Approval): ApprovalView {
  let authReqId: string | null = null;
  if (a.auth_req_enc) {
    try {
      authReqId = ctx.box.open(a.auth_req_enc);
    } catch {
      authReqId = null;
    }
  }
  return {
    id: a.id,
    kind: a.kind,
    state: displayState(a, nowSeconds(ctx.clock)),
    agent_id: a.agent_id,
    user_id: a.user_id,
    binding_message: a.binding_message,
    auth_req_id: authReqId,
    scope: a.scope,
    action: a.action,
    resource: a.resource,
    context: a.context,
    authorization_details: a.authorization_details,
    created_at: iso(a.created_at)!,
    expires_at: iso(a.expires_at)!,
    decided_at: iso(a.decided_at),
  };
}

export type Answer = 'approve' | 'deny';

/**
 * A person's or an administrator's answer to a pending request. A person may answer only
 * their own. An approved action is then allowed once within the next 10 minutes; a denied
 * one stays denied for as long. A CIBA request keeps its expiry (the agent must redeem in time).
 */
export async function answerApproval(
  ctx: AppContext,
  id: string,
  answer: Answer,
  by: { admin: true } | { userId: string },
  /** a further audit record of who answered (the console's), in the answer's transaction */
  record?: (tx: Store, approval: Approval) => Promise<void>,
): Promise<Approval> {
  const approval = await ctx.store.agentAuth.get(id);
  if (!approval || ('userId' in by && approval.user_id !== by.userId)) throw errors.notFound('no such approval');
  const t = nowSeconds(ctx.clock);
  const shown = displayState(approval, t);
  if (shown !== 'pending') throw errors.conflict(`the request is ${shown}, not pending`);
  const expiresAt = approval.kind === 'action' ? t + APPROVAL_WINDOW_SECONDS : approval.expires_at;
  const state = answer === 'approve' ? 'approved' : 'denied';
  const who = 'admin' in by ? 'admin' : `user:${by.userId}`;
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.agentAuth.decide(id, state, who, expiresAt))) throw errors.conflict('the request is no longer pending');
    await tx.audit.append({
      kind: 'approval',
      agent_id: approval.agent_id,
      user_id: approval.user_id,
      action: approval.action ?? 'ciba',
      resource: approval.resource,
      context: approval.kind === 'action' ? approval.context : { scope: approval.scope },
      decision: state,
      reason: `${state} by ${who}`,
    });
    await record?.(tx, approval);
  });
  return (await ctx.store.agentAuth.get(id))!;
}
