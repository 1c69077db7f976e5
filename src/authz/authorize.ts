import { randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { AgentPrincipal } from '../agents/access-token.js';
import { agentCache } from '../agents/agent-cache.js';
import { actionKey, canonicalJson } from '../agents/canonical.js';
import { recordAudit } from './audit.js';
import { auditRecord, decideOn, denial, type PipelineDecision, type Via } from './core.js';
import { entityAttributes, loadFacts, namedSubjectFacts, withProperties } from './facts.js';
import { usageLimitsFor, type Attributes, type DecisionRequest, type PolicySet, type SubjectFacts } from './policy-interface.js';
import { checkTransactionToken } from './transaction-tokens.js';
import { countersFor, peekUsage, usageBatch, type Counter } from './usage.js';
import type { Store } from '../store/index.js';
import { isStoreUnavailable, StoreUnavailableError } from '../store/unavailable.js';

/** A pending approval waits this long for a person; once approved (or denied) it holds this long. */
export const APPROVAL_WINDOW_SECONDS = 600;

interface Action {
  action: string;
  resource: string;
  context: Record<string, unknown>;
}

/**
 * One request for a decision, by the door it came through:
 * - `decision`: the decision endpoint; the transaction token authenticates it.
 * - `mcp`: a tools/call of the MCP gateway, with the caller's verified access token.
 * - `bind`: the transaction-token endpoint; only the limits are checked (nothing is consumed)
 *   and an allowed binding is recorded as token `txn`.
 * - `authzen`: an AuthZEN evaluation, asked by an authenticated application (`caller`) about a
 *   subject named by type and id. An unknown subject is a deny, not a 401.
 */
export type AuthorizeRequest =
  | ({ via: 'decision'; agentId: string; transactionToken: string | undefined } & Action)
  | ({ via: 'mcp'; principal: AgentPrincipal } & Action)
  | ({ via: 'bind'; principal: AgentPrincipal; txn: string } & Action)
  | ({ via: 'authzen'; caller: string; subject: NamedSubject; resourceProperties?: Attributes; facts?: SubjectLoader } & Action);

/** How the AuthZEN door reads a named subject's facts (a batch passes one that reads each subject once). */
export type SubjectLoader = typeof namedSubjectFacts;

/** A subject by type (`user` or `agent`) and id, with attributes the request adds (a stored attribute wins a clash). */
export interface NamedSubject {
  type: string;
  id: string;
  properties?: Attributes;
}

export type AuthorizeResult =
  /** step 1 of the decision order: the caller answers 401 */
  | { outcome: 'unknown_agent' }
  | { outcome: 'decided'; decision: PipelineDecision; approvalId?: string };

/**
 * The one door to a decision. Steps: (1) the agent exists and is not revoked; the transaction
 * token holds (decision endpoint) or the access token carries the capability (gateway, binding);
 * (2–6) the decision order on fresh facts (limits, deny rules, grants, approval rules, allow),
 * with approvals created or consumed; then exactly one audit record. Anything unexpected is a
 * `deny` (fail closed). A decision that cannot be recorded is not given: when the record cannot
 * be written, or the database is unavailable, it throws StoreUnavailableError (the doors answer
 * 503 with Retry-After), and nothing of it holds.
 */
export async function authorize(ctx: AppContext, req: AuthorizeRequest): Promise<AuthorizeResult> {
  const started = performance.now();
  const agentId = req.via === 'decision' ? req.agentId : req.via === 'authzen' ? req.subject.id : req.principal.agent.agent_id;
  let result: AuthorizeResult;
  try {
    result = req.via === 'authzen' ? await runNamed(ctx, req) : await run(ctx, req, agentId);
  } catch (err) {
    if (isStoreUnavailable(err)) throw err instanceof StoreUnavailableError ? err : new StoreUnavailableError('the decision could not be made: the database is unavailable', err);
    ctx.logger.error({ err, agent_id: agentId, action: req.action }, 'decision failed');
    // The deny is recorded like any other decision (or, unrecordable, not given).
    const failed = denial({ code: 'error', message: 'the decision could not be made' }, ctx.policy.peek()?.set?.version ?? '');
    const userId = req.via === 'mcp' || req.via === 'bind' ? req.principal.userId : null;
    result = await record(ctx, req.via, early(agentId, userId, req, ctx.clock.now()), failed, undefined, undefined, req.via === 'authzen' ? req.caller : undefined);
  }
  if (result.outcome === 'decided') {
    ctx.metrics.decisions.inc({ via: req.via, outcome: result.decision.decision, reason: result.decision.cause.code });
    ctx.metrics.decisionSeconds.observe({ via: req.via }, (performance.now() - started) / 1000);
  }
  return result;
}

/** Facts known before the agent's are loaded: enough for the record of an early refusal. */
function early(agentId: string, userId: string | null, req: Action, now: number): Parameters<typeof auditRecord>[1] {
  return {
    subject: { type: 'agent', id: agentId, roles: [], groups: [], permissions: [], attributes: {} },
    person: userId !== null ? { id: userId, roles: [], groups: [], permissions: [], attributes: {} } : null,
    action: req.action,
    resource: req.resource,
    context: req.context,
    now,
  };
}

/** The AuthZEN door: the same decision order, approvals and record, for a subject the caller names. */
async function runNamed(ctx: AppContext, req: Extract<AuthorizeRequest, { via: 'authzen' }>): Promise<AuthorizeResult> {
  const { action, resource, context, caller } = req;
  const now = ctx.clock.now();
  const load = req.facts ?? namedSubjectFacts;
  const [named, policy, stored] = await Promise.all([load(ctx, req.subject.type, req.subject.id), ctx.policy.state(), entityAttributes(ctx, resource)]);
  const version = policy.set?.version ?? '';
  if (!named) {
    const subject: SubjectFacts = { type: req.subject.type === 'agent' ? 'agent' : 'user', id: req.subject.id, roles: [], groups: [], permissions: [], attributes: {} };
    const unknown = denial({ code: 'unknown_subject', type: req.subject.type, id: req.subject.id }, version);
    return record(ctx, 'authzen', { subject, person: null, action, resource, context, now }, unknown, undefined, undefined, caller);
  }
  const subject = req.subject.properties ? { ...named.subject, attributes: withProperties(named.subject.attributes, req.subject.properties) } : named.subject;
  // A person asked about directly is their own person: both read the same attributes.
  const person = named.person && subject.type === 'user' ? { ...named.person, attributes: subject.attributes } : named.person;
  const request: DecisionRequest = { subject, person, action, resource, resourceAttributes: withProperties(stored, req.resourceProperties), context, now };
  const counters = policy.set ? countersOf(request, policy.set) : [];
  if (counters.length) return decideOnCounters(ctx, 'authzen', policy.set!, request, counters, null, subject.name ?? subject.id, caller);
  let decision = decideOn(request, policy.set);
  let approvalId: string | undefined;
  if (decision.decision === 'approval_required' && policy.set) {
    ({ decision, approvalId } = await approvals(ctx, policy.set, request, decision, subject.name ?? subject.id));
  }
  return record(ctx, 'authzen', request, decision, undefined, approvalId, caller);
}

async function run(ctx: AppContext, req: Exclude<AuthorizeRequest, { via: 'authzen' }>, agentId: string): Promise<AuthorizeResult> {
  const { action, resource, context } = req;
  const now = ctx.clock.now();
  const state = await agentCache(ctx).active(agentId);
  const policy = await ctx.policy.state();
  const version = policy.set?.version ?? '';

  // 1. The agent, and the credential of this door.
  if (!state) {
    if (req.via === 'decision') return { outcome: 'unknown_agent' };
    // The access token was verified a moment ago: the agent was revoked in between.
    return record(ctx, req.via, early(agentId, req.principal.userId, req, now), denial({ code: 'agent_revoked' }, version));
  }
  let userId: string | null;
  let txn: string | null = null;
  if (req.via === 'decision') {
    const checked = await checkTransactionToken(ctx, req.transactionToken, { agentId, action, resource, context });
    if ('why' in checked) return record(ctx, req.via, early(agentId, null, req, now), denial({ code: 'invalid_transaction_token', why: checked.why }, version));
    userId = checked.userId;
    txn = checked.txn;
  } else {
    userId = req.principal.userId;
    // The token's capabilities bound what this sign-in may do, whatever the agent holds now.
    if (!req.principal.capabilities.includes(action)) {
      return record(ctx, req.via, early(agentId, userId, req, now), denial({ code: 'not_granted', action, missing: 'capability' }, version));
    }
  }

  // 2–6. The decision order on the current facts.
  const facts = await loadFacts(ctx, state, userId, resource);
  const request: DecisionRequest = { ...facts, action, resource, context, now };
  // Limits over time: the decision reads (and an allow consumes) the agent's counters.
  const counters = policy.set ? countersOf(request, policy.set) : [];
  if (counters.length && req.via !== 'bind') {
    return decideOnCounters(ctx, req.via, policy.set!, request, counters, txn, state.agent.name);
  }
  // A binding checks against the usage now, consuming nothing.
  if (counters.length) request.usage = await peekUsage(ctx.store, counters, Math.floor(now / 1000));
  let decision = decideOn(request, policy.set);

  if (req.via === 'bind') {
    // A binding checks the limits only; rules and grants are the decision's.
    if (decision.cause.code !== 'constraint_violated' && decision.cause.code !== 'policy_unavailable' && decision.cause.code !== 'error') {
      decision = { decision: 'allow', cause: { code: 'allowed' }, reason: 'allowed', policyVersion: decision.policyVersion, trace: decision.trace };
    }
    return record(ctx, 'bind', request, decision, `transaction token ${req.txn}`);
  }

  let approvalId: string | undefined;
  if (decision.decision === 'approval_required' && policy.set) {
    ({ decision, approvalId } = await approvals(ctx, policy.set, request, decision, state.agent.name));
  }
  return record(ctx, req.via, request, decision, undefined, approvalId);
}

/**
 * The counters of a request's limits over time: an agent's, for the capability (and the object
 * or person of a scoped limit). A person acting directly holds no capabilities, so none.
 */
export function countersOf(request: DecisionRequest, policy: PolicySet): Counter[] {
  if (request.subject.type !== 'agent') return [];
  const limits = usageLimitsFor(request, policy);
  if (!limits.length) return [];
  const personId = request.person && request.person.id !== '' ? request.person.id : null;
  return countersFor({ agentId: request.subject.id, capability: request.action, resource: request.resource, personId }, limits);
}

/**
 * Steps 2–6 under limits over time: the counters are read (locked), the decision made (with
 * its approvals), an allow consumed and the decision's audit record appended in one
 * transaction, shared with the other such decisions of this turn, so that concurrent
 * decisions on any process or instance never together pass a window, and what a decision
 * consumed is recorded with it or not at all. The same transaction token consumes once.
 */
async function decideOnCounters(
  ctx: AppContext,
  via: 'decision' | 'mcp' | 'authzen',
  policy: PolicySet,
  request: DecisionRequest,
  counters: Counter[],
  txn: string | null,
  agentName: string,
  caller?: string,
): Promise<AuthorizeResult> {
  let outcome: { decision: PipelineDecision; approvalId?: string };
  try {
    ({ outcome } = await usageBatch(ctx).run({
      counters,
      t: Math.floor(request.now / 1000),
      txn,
      async judge(usage, tx: Store) {
        const judged: DecisionRequest = { ...request, usage };
        const first = decideOn(judged, policy);
        if (first.decision !== 'approval_required') return { decision: first };
        return approvalStep(tx, policy, judged, first, agentName);
      },
      record: (done, changes) => ({ ...auditRecord(via, request, done.decision, undefined, caller), ...(changes.length ? { usage: changes } : {}) }),
    }));
  } catch (err) {
    // Nothing of the turn's transaction holds (no consumption, no record); without the database, no answer at all.
    if (isStoreUnavailable(err)) throw err;
    // Otherwise a deny, recorded on its own.
    ctx.logger.error({ err, agent_id: request.subject.id }, 'decision on counters failed');
    return record(ctx, via, request, denial({ code: 'error', message: 'the decision could not be made' }, policy.version), undefined, undefined, caller);
  }
  const { decision, approvalId } = outcome;
  return approvalId !== undefined ? { outcome: 'decided', decision, approvalId } : { outcome: 'decided', decision };
}

/** Writes the decision's one audit record; a decision that cannot be recorded is not given (StoreUnavailableError). */
async function record(
  ctx: AppContext,
  via: Via,
  request: Parameters<typeof auditRecord>[1],
  decision: PipelineDecision,
  issued?: string,
  approvalId?: string,
  caller?: string,
): Promise<AuthorizeResult> {
  try {
    await recordAudit(ctx, auditRecord(via, request, decision, issued, caller));
  } catch (err) {
    ctx.logger.error({ err, agent_id: request.subject.id }, 'audit append failed');
    throw new StoreUnavailableError('the decision could not be recorded', err);
  }
  return approvalId !== undefined ? { outcome: 'decided', decision, approvalId } : { outcome: 'decided', decision };
}

/**
 * Step 5 with its memory: an action that needs a person creates a pending approval (or finds
 * the pending one); once approved it is allowed once (consumed atomically, so two concurrent
 * calls cannot both use it); once denied it stays denied for the window.
 */
function approvals(
  ctx: AppContext,
  policy: PolicySet,
  request: DecisionRequest,
  first: PipelineDecision,
  agentName: string,
): Promise<{ decision: PipelineDecision; approvalId?: string }> {
  return ctx.store.transaction((tx) => approvalStep(tx, policy, request, first, agentName));
}

/** The approvals step inside the caller's transaction (its own, or the one that also holds the counters). */
async function approvalStep(
  tx: Store,
  policy: PolicySet,
  request: DecisionRequest,
  first: PipelineDecision,
  agentName: string,
): Promise<{ decision: PipelineDecision; approvalId?: string }> {
  const rule = first.rule ?? (first.cause.code === 'approval_required' ? first.cause.rule : '');
  const personId = request.person && request.person.id !== '' ? request.person.id : null;
  // An agent acting for one person does not inherit the approvals given for another.
  const key = actionKey(request.subject.id, request.action, request.resource, request.context, request.subject.type === 'agent' ? personId : null);
  const nowSeconds = Math.floor(request.now / 1000);
  {
    const store = tx.agentAuth;
    // Decisions about one action take turns, on every instance: one of them creates the approval request.
    await store.lockAction(key);
    const latest = await store.latestForAction(key);
    if (latest?.state === 'approved') {
      const approved = decideOn({ ...request, approved: true }, policy);
      if (approved.decision !== 'allow') return { decision: approved };
      // Allowed once: only the caller that consumes the approval gets the allow.
      if (await store.consume(latest.id)) return { decision: approved };
    } else if (latest?.state === 'denied') {
      return { decision: { ...denial({ code: 'approval_denied', rule }, first.policyVersion), trace: first.trace } };
    } else if (latest?.state === 'pending') {
      return { decision: first, approvalId: latest.id };
    }
    const created = await store.createAction({
      id: randomUUID(),
      agent_id: request.subject.id,
      user_id: personId,
      action: request.action,
      resource: request.resource,
      context: canonicalJson(request.context),
      action_key: key,
      rule: rule || null,
      binding_message: `${agentName} asks to ${request.action} on ${request.resource}`,
      expires_at: nowSeconds + APPROVAL_WINDOW_SECONDS,
    });
    return { decision: first, approvalId: created.id };
  }
}
