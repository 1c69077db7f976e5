// The decision interface shared with the policy library: the facts `decide()` is fed (who acts,
// for whom, on what, when) and the structured cause it answers with. Everything in src/authz
// imports these names from here and nowhere else.
//
// Until the policy library's second-edition `decide()` is in this tree, `decide` below adapts
// the first-edition evaluator to this shape. Once it is, this module re-exports the library's
// own definitions and the adapter goes.

import {
  decide as decideFirstEdition,
  type Decision as FirstEditionDecision,
  type DecisionValue,
  type JsonLimits,
  type PolicySet,
  type TraceStep,
} from '../policy/index.js';

export type { DecisionValue, JsonLimits, PolicySet, TraceStep };

export type Attributes = Record<string, unknown>;

/** Who acts: an agent or a person. */
export interface SubjectFacts {
  type: 'agent' | 'user';
  id: string;
  name?: string;
  mode?: 'delegated' | 'autonomous';
  email?: string;
  roles: string[];
  groups: string[];
  permissions: string[];
  attributes: Attributes;
  capabilities?: { name: string; limits?: JsonLimits | null }[];
}

/** The person a delegated agent acts for. */
export interface PersonFacts {
  id: string;
  email?: string;
  roles: string[];
  groups: string[];
  permissions: string[];
  attributes: Attributes;
}

export interface DecisionRequest {
  subject: SubjectFacts;
  person?: PersonFacts | null;
  action: string;
  resource: string;
  resourceAttributes?: Attributes;
  context: Record<string, unknown>;
  /** milliseconds since the Unix epoch */
  now: number;
  approved?: boolean;
}

export type DecisionCause =
  | { code: 'allowed'; approvedBy?: string }
  | { code: 'constraint_violated'; field: string | null; operator: string }
  | { code: 'rule_denied'; rule: string; ruleId?: string }
  | { code: 'not_granted'; action: string; missing: 'capability' | 'subject' | 'person' }
  | { code: 'approval_required'; rule: string; ruleId?: string }
  | { code: 'error'; message: string };

export interface ValueRead { path: string; value: unknown; present: boolean }

export interface Decision {
  decision: DecisionValue;
  reason: string;
  cause: DecisionCause;
  policyVersion: string;
  rule?: string;
  trace: TraceStep[];
}

/** The reason string of a cause: the stable codes agents and the audit trail see. */
export function renderReason(cause: DecisionCause): string {
  switch (cause.code) {
    case 'allowed':
      return cause.approvedBy !== undefined ? `allowed: approved ${cause.approvedBy}` : 'allowed';
    case 'constraint_violated':
      return cause.field === null ? 'constraint_violated: count' : `constraint_violated: ${cause.field} ${cause.operator}`;
    case 'rule_denied':
      return `rule_denied: ${cause.rule}`;
    case 'approval_required':
      return `approval_required: ${cause.rule}`;
    case 'not_granted':
      return `not_granted: ${cause.action}${cause.missing === 'capability' ? ' (capability)' : cause.missing === 'person' ? ' (person)' : ''}`;
    case 'error':
      return `error: ${cause.message}`;
  }
}

/** Runs the decision order on one request. Pure; never throws. */
export function decide(request: DecisionRequest, policySet: PolicySet): Decision {
  const { subject, person } = request;
  const first = decideFirstEdition(
    {
      agent: {
        id: subject.id,
        mode: subject.mode ?? 'autonomous',
        permissions: subject.permissions,
        // No capabilities (a person, a service) means no capability gating.
        capabilities: subject.capabilities ?? [{ name: request.action }],
      },
      person: person ? { id: person.id, permissions: person.permissions } : null,
      action: request.action,
      resource: request.resource,
      context: request.context,
      ...(request.approved !== undefined ? { approved: request.approved } : {}),
    },
    policySet,
  );
  return { ...first, cause: causeOf(first, request.action) };
}

/** The first edition answers with a reason only; its cause is read back from the trace and the reason. */
function causeOf(d: FirstEditionDecision, action: string): DecisionCause {
  const r = d.reason;
  if (d.decision === 'allow') return d.rule !== undefined ? { code: 'allowed', approvedBy: d.rule } : { code: 'allowed' };
  if (d.decision === 'approval_required') return { code: 'approval_required', rule: d.rule ?? r.slice('approval_required: '.length) };
  const failed = d.trace.find((s) => s.outcome === 'fail');
  if (failed?.step === 'limits') {
    const m = /^constraint_violated: (.*) (\S+)$/.exec(r);
    return m ? { code: 'constraint_violated', field: m[1]!, operator: m[2]! } : { code: 'constraint_violated', field: null, operator: 'count' };
  }
  if (failed?.step === 'deny_rules') return { code: 'rule_denied', rule: d.rule ?? r.slice('rule_denied: '.length) };
  if (failed?.step === 'grants') {
    const missing = r.endsWith(' (capability)') ? 'capability' : r.endsWith(' (person)') ? 'person' : 'subject';
    return { code: 'not_granted', action, missing };
  }
  return { code: 'error', message: r.startsWith('error: ') ? r.slice('error: '.length) : r };
}
