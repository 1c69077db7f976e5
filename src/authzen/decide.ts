// The one place where AuthZEN meets the decision core. Everything else in src/authzen builds
// questions and reads answers; only this module knows how a decision is made and recorded.

import type { AppContext } from '../context.js';
import { decide, type DecisionRequest, type PolicySet } from '../policy/index.js';
import { currentPolicy } from '../agents/agent-cache.js';
import { decideActionBatched } from '../agents/decision.js';
import { appendAudit } from '../agents/audit-batch.js';
import type { Caller } from './caller.js';
import type { Attributes, PersonFacts, ResolvedSubject, SubjectFacts } from './facts.js';

/** One question in Gatehouse's terms. */
export interface Question {
  subject: ResolvedSubject;
  /** `<action>:<kinds>` */
  relation: string;
  /** `<kind>:<id>` */
  object: string;
  resourceAttributes: Attributes;
  context: Record<string, unknown>;
}

export interface Answer {
  decision: 'allow' | 'deny' | 'approval_required';
  reason: string;
  policyVersion: string;
  approvalId?: string;
}

const safeVersion = async (ctx: AppContext): Promise<string> => {
  try {
    return (await currentPolicy(ctx)).version;
  } catch {
    return '';
  }
};

/**
 * Decides through the same pipeline as the agents' decisions (approvals created and consumed,
 * limits checked) and writes the answer to the audit trail. Never throws: anything
 * unexpected is a deny.
 */
export async function decideAndRecord(ctx: AppContext, caller: Caller, q: Question): Promise<Answer> {
  try {
    if (!q.subject.found) {
      const answer: Answer = { decision: 'deny', reason: `not_granted: ${q.relation} (${q.subject.why})`, policyVersion: await safeVersion(ctx) };
      await appendAudit(ctx, { kind: 'decision', agent_id: null, user_id: null, action: q.relation, resource: q.object, context: q.context, decision: answer.decision, reason: answer.reason, policy_version: answer.policyVersion, caller: caller.clientId });
      return answer;
    }
    const { subject } = q.subject;
    if (subject.type === 'agent') {
      const state = await ctx.store.agents.get(subject.id);
      if (!state) return { decision: 'deny', reason: `not_granted: ${q.relation} (unknown subject)`, policyVersion: await safeVersion(ctx) };
      const d = await decideActionBatched(ctx, {
        principal: { agent: state, userId: null, capabilities: [q.relation], claims: {} },
        action: q.relation,
        resource: q.object,
        context: q.context,
        via: 'api',
      });
      return { decision: d.decision, reason: d.reason, policyVersion: d.policy_version, ...(d.approval_id ? { approvalId: d.approval_id } : {}) };
    }
    const answer = decideDry(await currentPolicy(ctx), q);
    await appendAudit(ctx, {
      kind: 'decision',
      agent_id: null,
      user_id: subject.id,
      action: q.relation,
      resource: q.object,
      context: q.context,
      decision: answer.decision,
      reason: answer.reason,
      policy_version: answer.policyVersion,
      caller: caller.clientId,
    });
    return answer;
  } catch (err) {
    ctx.logger.error({ err, action: q.relation }, 'authzen decision failed');
    return { decision: 'deny', reason: 'error: the decision could not be made', policyVersion: await safeVersion(ctx) };
  }
}

/** The policy's answer alone: no approval is created or consumed, nothing is recorded (for searches). */
export function decideDry(policy: PolicySet, q: Question): Answer {
  if (!q.subject.found) return { decision: 'deny', reason: `not_granted: ${q.relation} (${q.subject.why})`, policyVersion: policy.version };
  const d = decide(toCoreRequest(q.subject.subject, q.subject.person, q), policy);
  return { decision: d.decision, reason: d.reason, policyVersion: d.policyVersion };
}

/** The current core's request: a person is asked about as a principal holding their own permissions. */
function toCoreRequest(subject: SubjectFacts, person: PersonFacts | null, q: Question): DecisionRequest {
  return {
    agent: {
      id: subject.type === 'agent' ? subject.id : '',
      mode: subject.mode ?? 'autonomous',
      permissions: subject.permissions,
      capabilities: subject.capabilities ?? [{ name: q.relation }],
    },
    person: person ? { id: person.id, permissions: person.permissions } : null,
    action: q.relation,
    resource: q.object,
    context: q.context,
  };
}
