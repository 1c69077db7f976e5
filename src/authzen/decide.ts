// The one place where AuthZEN meets the decision core. Everything else in src/authzen builds
// questions and reads answers; only this module knows how a decision is made and recorded.

import type { AppContext } from '../context.js';
import { authorize, decideDry as decideDryOn } from '../authz/pipeline.js';
import type { DecisionRequest, PolicySet } from '../authz/policy-interface.js';
import { enforcesFor, type Caller } from './caller.js';
import type { FactsMemo } from './facts.js';
import type { Properties, Subject } from './request.js';

/** One question in Gatehouse's terms. */
export interface Question {
  subject: Subject;
  /** `<action>:<kinds>` */
  relation: string;
  /** `<kind>:<id>` */
  object: string;
  /** the resource's request properties (its stored entity's attributes are the pipeline's to read) */
  resourceProperties: Properties | undefined;
  context: Record<string, unknown>;
}

export interface Answer {
  decision: 'allow' | 'deny' | 'approval_required';
  reason: string;
  policyVersion: string;
  approvalId?: string;
  /** The decision could not be made (a store failure, say): a deny that is an error, not a verdict. */
  failed?: true;
}

/**
 * Decides through the decision pipeline, the same as the agents' decisions: the facts read
 * fresh, approvals created and consumed, limits counted, and one audit record naming the
 * caller. About an agent, only its enforcement point acts so: anyone else's evaluation observes
 * (the limits read, no approval created or consumed; still recorded), so that one application
 * cannot spend what another enforces. Never throws: the pipeline answers anything unexpected
 * with a deny.
 */
export async function decideAndRecord(ctx: AppContext, caller: Caller, memo: FactsMemo, q: Question): Promise<Answer> {
  const observe = q.subject.type === 'agent' && !enforcesFor(caller, q.subject.id);
  const result = await authorize(ctx, {
    via: 'authzen',
    caller: caller.clientId,
    ...(observe ? { observe } : {}),
    subject: q.subject,
    facts: memo.load,
    ...(q.resourceProperties ? { resourceProperties: q.resourceProperties } : {}),
    action: q.relation,
    resource: q.object,
    context: q.context,
  });
  // The AuthZEN door has no step 1 of its own: an unknown subject is decided (a deny).
  if (result.outcome !== 'decided') return { decision: 'deny', reason: 'unknown_subject', policyVersion: '' };
  const { decision } = result;
  return {
    decision: decision.decision,
    reason: decision.reason,
    policyVersion: decision.policyVersion,
    ...(result.approvalId ? { approvalId: result.approvalId } : {}),
    ...(decision.cause.code === 'error' ? { failed: true as const } : {}),
  };
}

/**
 * The policy's answer alone, on the same facts: no approval is created or consumed, no limit
 * counted (limits over time are read as they stand), nothing recorded (for searches, which
 * ask rather than act).
 */
export async function decideDry(ctx: AppContext, policy: PolicySet, memo: FactsMemo, q: Question): Promise<Answer['decision']> {
  const [named, resourceAttributes] = await Promise.all([memo.subject(q.subject), memo.resource(...splitObject(q.object), q.resourceProperties)]);
  if (!named.found) return 'deny';
  const request: DecisionRequest = { subject: named.subject, person: named.person, action: q.relation, resource: q.object, resourceAttributes, context: q.context, now: ctx.clock.now() };
  return (await decideDryOn(ctx, policy, request)).decision;
}

const splitObject = (object: string): [string, string] => {
  const i = object.indexOf(':');
  return [object.slice(0, i), object.slice(i + 1)];
};
