import type { AuditInput } from '../store/audit.js';
import { renderCause, type PipelineCause } from './cause.js';
import { decide, type DecisionRequest, type DecisionValue, type PolicySet, type TraceStep, type UsageCheck } from './policy-interface.js';

/** A decision as the pipeline gives it: the answer, its cause, and the reason rendered from the cause. */
export interface PipelineDecision {
  decision: DecisionValue;
  cause: PipelineCause;
  reason: string;
  /** the policy version decided with ('' when there was none) */
  policyVersion: string;
  rule?: string;
  trace: TraceStep[];
  /** the limits over time checked (the usage read, and what an allow consumes) */
  usage?: UsageCheck[];
}

/** The decision object: `{data: {decision, reason, ...}}`. */
export interface DecisionAnswer {
  decision: 'allow' | 'deny' | 'approval_required';
  reason: string;
  policy_version: string;
  approval_id?: string;
}

export function decisionAnswer(decision: PipelineDecision, approvalId?: string): DecisionAnswer {
  const answer: DecisionAnswer = { decision: decision.decision, reason: decision.reason, policy_version: decision.policyVersion };
  if (approvalId !== undefined) answer.approval_id = approvalId;
  return answer;
}

/** Which door the request came through; it names the audit record's kind. */
export type Via = 'decision' | 'mcp' | 'bind' | 'authzen';

export function denial(cause: PipelineCause, policyVersion: string): PipelineDecision {
  return { decision: 'deny', cause, reason: renderCause(cause), policyVersion, trace: [] };
}

/**
 * The decision order on facts alone: no database, no clock, no audit write. The request carries
 * everything (subject, person, resource attributes, context, the time); `policy` null means no
 * policy has compiled, which denies. Never throws.
 */
export function evaluate(request: DecisionRequest, policy: PolicySet | null): { decision: PipelineDecision; audit: AuditInput } {
  const decision = decideOn(request, policy);
  return { decision, audit: auditRecord('decision', request, decision) };
}

/** `evaluate` without the record, for the pipeline, which records once the approvals step is done. */
export function decideOn(request: DecisionRequest, policy: PolicySet | null): PipelineDecision {
  // The policy's decision already has the pipeline's shape (its causes are a subset).
  if (!policy) return denial({ code: 'policy_unavailable' }, '');
  const d = decide(request, policy);
  if (d.decision !== 'deny' || d.cause.code !== 'not_granted') return d;
  // A relation that could not be resolved (too many hops, a condition without its parameter)
  // grants nothing: the deny says so, rather than only that nothing granted it.
  const unresolved = d.trace.find((t) => t.step === 'grants' && t.outcome === 'fail' && t.why?.startsWith(FAILS_CLOSED));
  return unresolved ? { ...d, reason: `${d.reason}; ${unresolved.check} could not be resolved: ${unresolved.why!.slice(FAILS_CLOSED.length)}` } : d;
}

/** How the grant step traces a relation it could not resolve. */
const FAILS_CLOSED = 'fails closed, grants nothing: ';

/** The grants a decision got through relations: who, and the relationships that granted it. */
export function grantsThroughRelations(d: Pick<PipelineDecision, 'trace'>): string[] {
  const out: string[] = [];
  for (const t of d.trace) if (t.step === 'grants' && t.outcome === 'pass' && t.path) out.push(`${t.check} (${t.path.join(', ')})`);
  return out;
}

/**
 * The one audit record of a decision (a refused or issued binding has kind `token`). `caller`:
 * the application that asked about someone else (an AuthZEN policy enforcement point).
 */
/**
 * The facts a decision was decided on, as its record keeps them for `policy replay`: the subject
 * and person (roles, groups, permissions, capabilities with their limits, attributes), the
 * object's attributes, the stored entities references led to, the usage of limits over time
 * read, whether an approval was already given, and the clock in milliseconds. Relationships are
 * not kept (a replay reads them as they are then, and says so).
 */
export interface AuditFacts {
  now: number;
  subject: DecisionRequest['subject'];
  person?: DecisionRequest['person'];
  resource_attributes?: Record<string, unknown>;
  usage?: Record<string, number>;
  approved?: boolean;
  entities?: Record<string, Record<string, unknown> | null>;
  /** a decision through a delegation chain: the chain as the request carried it */
  chain?: DecisionRequest['chain'];
}

export function auditFacts(request: Pick<DecisionRequest, 'subject' | 'person' | 'now' | 'resourceAttributes' | 'usage' | 'approved' | 'entities' | 'chain'>): AuditFacts {
  const f: AuditFacts = { now: request.now, subject: request.subject };
  if (request.person) f.person = request.person;
  if (request.resourceAttributes && Object.keys(request.resourceAttributes).length) f.resource_attributes = request.resourceAttributes;
  if (request.usage && Object.keys(request.usage).length) f.usage = request.usage;
  if (request.approved) f.approved = true;
  if (request.entities?.size) f.entities = Object.fromEntries(request.entities);
  if (request.chain) f.chain = request.chain;
  return f;
}

export function auditRecord(
  via: Via,
  request: Pick<DecisionRequest, 'subject' | 'person' | 'action' | 'resource' | 'context' | 'now' | 'chain'> & Partial<Pick<DecisionRequest, 'resourceAttributes' | 'usage' | 'approved' | 'entities'>>,
  d: PipelineDecision,
  issued?: string,
  caller?: string,
): AuditInput {
  const bind = via === 'bind';
  const chain = request.chain && request.chain.agents.length > 1 ? request.chain.agents.map((a) => a.id) : undefined;
  return {
    kind: bind ? 'token' : 'decision',
    time: Math.floor(request.now / 1000),
    // A person acting (an AuthZEN user subject) is the record's person, not an agent; an entity
    // subject of another type (AuthZEN) is named with its type, `identity:<id>`.
    agent_id: request.subject.type === 'user' ? null : request.subject.type === 'agent' ? request.subject.id : `${request.subject.type}:${request.subject.id}`,
    user_id: request.person && request.person.id !== '' ? request.person.id : null,
    action: request.action,
    resource: request.resource,
    context: request.context,
    decision: bind ? (d.decision === 'allow' ? 'issued' : 'refused') : d.decision,
    reason: bind && d.decision === 'allow' && issued !== undefined ? issued : withRelations(d),
    policy_version: d.policyVersion,
    ...(caller !== undefined ? { caller } : {}),
    ...(chain ? { chain } : {}),
    ...(bind ? {} : { facts: auditFacts(request) }),
  };
}

/** The reason as the record keeps it: an allow says which grants came through relations, and through what. */
function withRelations(d: PipelineDecision): string {
  if (d.decision !== 'allow') return d.reason;
  const through = grantsThroughRelations(d);
  return through.length ? `${d.reason}; granted through relations: ${through.join('; ')}` : d.reason;
}
