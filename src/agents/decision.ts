import { randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { AuditInput } from '../store/audit.js';
import { appendAudit } from './audit-batch.js';
import { decide, usageLimitsFor, type Decision, type DecisionRequest, type PolicySet } from '../policy/index.js';
import type { UsageLimit } from '../policy/usage.js';
import { countersFor, UsageBatch, type CounterChange } from '../authz/usage.js';
import type { Store } from '../store/index.js';
import type { AgentPrincipal } from './access-token.js';
import { agentCache, personPermissions, type AgentState, currentPolicy } from './agent-cache.js';
import { actionKey, canonicalJson } from './canonical.js';

export interface ActionInput {
  principal: AgentPrincipal;
  action: string;
  resource: string;
  context: Record<string, unknown>;
  via: 'api' | 'mcp';
  /** the transaction token's `txn`, when the request came with one (it consumes limits over time once) */
  txn?: string | null;
}

export interface ActionDecision {
  decision: 'allow' | 'deny' | 'approval_required';
  reason: string;
  policy_version: string;
  approval_id?: string;
}

/** A pending approval waits this long for a person; once approved (or denied) it holds this long. */
export const APPROVAL_WINDOW_SECONDS = 600;

const now = () => Math.floor(Date.now() / 1000);

/**
 * The decision order from step 2 on, with the agent's current state: limits, deny rules,
 * grants (and the person's, for a delegated principal), approval rules (creating or
 * consuming an approval), allow. Every answer is written to the audit trail. Never throws:
 * anything unexpected is a `deny` (fail closed).
 */
export async function decideAction(ctx: AppContext, input: ActionInput): Promise<ActionDecision> {
  const { answer: result, usage } = await evaluateAction(ctx, input);
  try {
    await ctx.store.audit.append(auditRecord(input, result, usage));
  } catch (err) {
    return unrecorded(ctx, input, result, err);
  }
  return result;
}

/** decideAction for the HTTP endpoint: the audit record joins this turn's group commit. */
export async function decideActionBatched(ctx: AppContext, input: ActionInput): Promise<ActionDecision> {
  const { answer: result, usage } = await evaluateAction(ctx, input);
  try {
    await appendAudit(ctx, auditRecord(input, result, usage));
  } catch (err) {
    return unrecorded(ctx, input, result, err);
  }
  return result;
}

/** A decision that cannot be recorded is not given. */
function unrecorded(ctx: AppContext, input: ActionInput, result: ActionDecision, err: unknown): ActionDecision {
  ctx.logger.error({ err, agent_id: input.principal.agent.agent_id }, 'audit append failed');
  return { decision: 'deny', reason: 'error: the decision could not be recorded', policy_version: result.policy_version };
}

const auditRecord = (input: ActionInput, result: ActionDecision, usage?: CounterChange[]): AuditInput => ({
  ...(usage && usage.length ? { usage } : {}),
  kind: 'decision',
  agent_id: input.principal.agent.agent_id,
  user_id: input.principal.userId,
  action: input.action,
  resource: input.resource,
  context: input.context,
  decision: result.decision,
  reason: result.reason,
  policy_version: result.policy_version,
});

/** An answer, and what it did to the counters of limits over time (for the audit record). */
interface Evaluated { answer: ActionDecision; usage?: CounterChange[] }

/** Steps 2–6 with the agent's current state; never throws (anything unexpected is a deny). */
async function evaluateAction(ctx: AppContext, input: ActionInput): Promise<Evaluated> {
  const agentId = input.principal.agent.agent_id;
  try {
    const state = await agentCache(ctx).active(agentId);
    if (!state) return { answer: { decision: 'deny', reason: 'invalid_client: the agent is unknown or revoked', policy_version: await safeVersion(ctx) } };
    return await decideWithApprovals(ctx, await currentPolicy(ctx), await buildRequest(ctx, state, input), input);
  } catch (err) {
    ctx.logger.error({ err, agent_id: agentId, action: input.action }, 'decision failed');
    return { answer: { decision: 'deny', reason: 'error: the decision could not be made', policy_version: await safeVersion(ctx) } };
  }
}

/** Records a decision made before the policy runs (unknown agent, bad transaction token). */
export async function auditEarlyDecision(
  ctx: AppContext,
  r: { agent_id: string; user_id: string | null; action: string; resource: string; context: unknown; decision: string; reason: string },
): Promise<void> {
  await ctx.store.audit.append({ kind: 'decision', ...r, policy_version: await safeVersion(ctx) });
}

async function safeVersion(ctx: AppContext): Promise<string> {
  try {
    return (await currentPolicy(ctx)).version;
  } catch {
    return '';
  }
}

export async function buildRequest(ctx: AppContext, state: AgentState, input: Omit<ActionInput, 'via'>): Promise<DecisionRequest> {
  const { agent } = state;
  const userId = input.principal.userId;
  // A delegated agent acts only for a person; without one, the person grants nothing (fail closed).
  const person =
    userId != null
      ? { id: userId, permissions: await personPermissions(ctx, userId) }
      : agent.mode === 'delegated'
        ? { id: '', permissions: [] }
        : null;
  return {
    agent: {
      id: agent.agent_id,
      mode: agent.mode,
      permissions: state.permissions,
      capabilities: agent.capabilities.map((c) => ({ name: c.name, limits: c.limits })),
    },
    person,
    action: input.action,
    resource: input.resource,
    context: input.context,
  };
}

const toAnswer = (d: Decision): ActionDecision => ({ decision: d.decision, reason: d.reason, policy_version: d.policyVersion });

async function decideWithApprovals(ctx: AppContext, policySet: PolicySet, request: DecisionRequest, input: ActionInput): Promise<Evaluated> {
  const overTime = usageLimitsFor(request, policySet);
  if (overTime.length) return decideOnCounters(ctx, policySet, request, input, overTime);
  const first = decide(request, policySet);
  if (first.decision !== 'approval_required') return { answer: toAnswer(first) };
  return { answer: await ctx.store.transaction(async (tx) => (await approvalStep(tx, policySet, request, input, first)).answer) };
}

/**
 * A decision under limits over time: the counters are read, the decision made and an allow
 * consumed in one transaction (shared with the other such decisions of this turn), so that
 * concurrent decisions never together pass a window.
 */
async function decideOnCounters(ctx: AppContext, policySet: PolicySet, request: DecisionRequest, input: ActionInput, limits: UsageLimit[]): Promise<Evaluated> {
  const counters = countersFor(
    { agentId: request.agent.id, capability: input.action, resource: input.resource, personId: input.principal.userId },
    limits,
  );
  const { outcome, changes } = await usageBatch(ctx).run({
    counters,
    t: now(),
    txn: input.txn ?? null,
    async judge(usage, tx) {
      const judged = { ...request, usage };
      const first = decide(judged, policySet);
      if (first.decision !== 'approval_required') return { decision: first, answer: toAnswer(first) };
      return approvalStep(tx, policySet, judged, input, first);
    },
  });
  return { answer: outcome.answer, usage: changes };
}

const batches = new WeakMap<AppContext, UsageBatch<Store>>();

function usageBatch(ctx: AppContext): UsageBatch<Store> {
  let b = batches.get(ctx);
  if (!b) {
    b = new UsageBatch<Store>(ctx.store, {
      root: ctx.store,
      now: () => Date.now(),
      onError: (err) => ctx.logger.error({ err }, 'pruning idle usage counters failed'),
    });
    batches.set(ctx, b);
  }
  return b;
}

/**
 * Step 5 with its memory, inside the caller's transaction: a pending approval is created (or
 * found); an approved one allows once (the decision that allowed is returned, so that an
 * allow under limits over time consumes); a denied one stays denied.
 */
async function approvalStep(
  tx: Store,
  policySet: PolicySet,
  request: DecisionRequest,
  input: ActionInput,
  first: Decision,
): Promise<{ decision: Decision; answer: ActionDecision }> {
  const agentId = request.agent.id;
  const key = actionKey(agentId, input.action, input.resource, input.context);
  const approvals = tx.agentAuth;
  // Decisions about one action take turns, on every instance: one of them creates the approval request.
  await approvals.lockAction(key);
  const latest = await approvals.latestForAction(key);
  if (latest?.state === 'approved') {
    const approved = decide({ ...request, approved: true }, policySet);
    if (approved.decision !== 'allow') return { decision: approved, answer: toAnswer(approved) };
    // Allowed once: only the caller that consumes the approval gets the allow.
    if (await approvals.consume(latest.id)) return { decision: approved, answer: toAnswer(approved) };
  } else if (latest?.state === 'denied') {
    return {
      decision: first,
      answer: {
        decision: 'deny',
        reason: `rule_denied: ${first.rule ?? first.reason.replace(/^approval_required:\s*/, '')} (a person denied the approval)`,
        policy_version: first.policyVersion,
      },
    };
  } else if (latest?.state === 'pending') {
    return { decision: first, answer: { ...toAnswer(first), approval_id: latest.id } };
  }
  const created = await approvals.createAction({
    id: randomUUID(),
    agent_id: agentId,
    user_id: input.principal.userId,
    action: input.action,
    resource: input.resource,
    context: canonicalJson(input.context),
    action_key: key,
    rule: first.rule ?? null,
    binding_message: `${input.principal.agent.name} asks to ${input.action} on ${input.resource}`,
    expires_at: now() + APPROVAL_WINDOW_SECONDS,
  });
  return { decision: first, answer: { ...toAnswer(first), approval_id: created.id } };
}
