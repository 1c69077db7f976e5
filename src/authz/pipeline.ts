import { randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import { inSpan } from '../telemetry.js';
import type { AgentPrincipal } from './agent-access-token.js';
import { agentKnown } from './agent-cache.js';
import { beyondAuthorizationDetails } from './authorization-details.js';
import { actionKey, canonicalJson } from './canonical.js';
import { recordAudit } from './audit.js';
import { auditRecord, decideOn, denial, type PipelineDecision, type Via } from './core.js';
import { loadReferences } from './references.js';
import { entityAttributes, loadFacts, namedSubjectFacts, withProperties, withSubjectProperties } from './facts.js';
import type { PipelineCause } from './cause.js';
import { usageLimitsFor, type Attributes, type DecisionRequest, type PolicySet, type SubjectFacts } from './policy-interface.js';
import { relationshipGraph } from './relationships.js';
import { checkTransactionToken } from './transaction-tokens.js';
import { countersFor, peekUsage, peekValues, usageBatch, type Counter } from './budgets.js';
import { chainCounters, chainFacts, chainStates, decideChain, usageByAgent, type ChainRequest, type TokenChain } from './chain.js';
import type { AgentState } from './agent-cache.js';
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
 *   subject named by type and id. An unknown subject is a deny, not a 401. `observe`: the
 *   caller may ask but not act (an agent it is not the enforcement point of): decided and
 *   recorded, with the limits only read and no approval created or consumed.
 */
export type AuthorizeRequest =
  | ({ via: 'decision'; agentId: string; transactionToken: string | undefined } & Action)
  | ({ via: 'mcp'; principal: AgentPrincipal } & Action)
  | ({ via: 'bind'; principal: AgentPrincipal; txn: string } & Action)
  | ({ via: 'authzen'; caller: string; subject: NamedSubject; resourceProperties?: Attributes; facts?: SubjectLoader; observe?: boolean } & Action);

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
 * The decision order, written once; every mode below composes these steps:
 *   1. agent known     the agent exists and is not revoked (`agentKnown`, the one such check)
 *   2. token matches   the door's credential holds for this action: the transaction token at the
 *                      decision endpoint, the access token's capability at the gateway and binding
 *                      (`tokenMatches`)
 *   2½. details       the action stays within the access token's authorization details (RFC 9396,
 *                      `beyondAuthorizationDetails`): else deny `constraint_violated: authorization_details`
 *   3. limits          limits over time: read, and consumed by an allow (`decisionOrder`)
 *   4. deny rules, 5. grants, 6. approval rules, 7. allow: the policy's own order (`decideOn`),
 *                      then the approvals an approval rule asks for; the grants and conditions
 *                      that ask about relations read the process's relationship graph, current
 *                      with every change committed before this turn (`relationshipGraph`)
 * and then exactly one audit record (`record`). The modes: decide (every step; an allow
 * consumes), bind (steps 1–3; nothing consumed, only the limits can refuse; recorded as a
 * token), refuse (a request refused before step 3, by a door that could not map it: a deny,
 * recorded like any other), observe (an AuthZEN caller that is not the agent's enforcement
 * point: steps 3–7 with the limits only read and no approval created or consumed; recorded),
 * dry (search: steps 3–7 with the limits only read; nothing recorded, nothing consumed:
 * `decideDry`).
 * Anything unexpected is a deny, recorded like any other. A decision that cannot be recorded is
 * not given: when the record cannot be written, or the database is unavailable, it throws
 * StoreUnavailableError (the doors answer 503 with Retry-After), and nothing of it holds.
 */
export async function authorize(ctx: AppContext, req: AuthorizeRequest): Promise<AuthorizeResult> {
  const agentId = req.via === 'decision' ? req.agentId : req.via === 'authzen' ? req.subject.id : req.principal.agent.agent_id;
  const asked: Asked = {
    action: req.action,
    resource: req.resource,
    context: req.context,
    userId: req.via === 'mcp' || req.via === 'bind' ? req.principal.userId : null,
    ...(req.via === 'authzen' ? { caller: req.caller } : {}),
  };
  return inSpan('gatehouse.decision', { 'gatehouse.via': req.via, 'gatehouse.agent_id': agentId, 'gatehouse.action': typeof req.action === 'string' ? req.action : undefined }, async (span) => {
    const result = await measured(ctx, req.via, agentId, asked, () => (req.via === 'authzen' ? runNamed(ctx, req) : run(ctx, req, agentId)));
    span?.setAttribute('gatehouse.outcome', result.outcome === 'decided' ? String((result.decision as { decision?: unknown }).decision ?? 'decided') : result.outcome);
    return result;
  });
}

/** A step of the order as a child span of the decision (a plain call while tracing is off). */
function traced<A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return (...args: A) => inSpan(name, {}, () => fn(...args));
}

/** A request a door refused before the decision order (no such tool, arguments that do not map). */
export interface Refusal {
  via: 'mcp';
  principal: AgentPrincipal;
  action: string | null;
  resource: string;
  context: unknown;
  cause: PipelineCause;
}

/**
 * The refuse mode: a deny with the door's cause, recorded and counted like every decision. A
 * refusal that cannot be recorded is answered as the error it is, not as the door's refusal.
 */
export function refuse(ctx: AppContext, r: Refusal): Promise<AuthorizeResult> {
  const agentId = r.principal.agent.agent_id;
  return measured(ctx, r.via, agentId, { action: r.action, resource: r.resource, context: r.context, userId: r.principal.userId }, async () => {
    const version = (await ctx.policy.state()).set?.version ?? '';
    const facts = { ...early(agentId, r.principal.userId, { action: r.action as string, resource: r.resource, context: r.context as Record<string, unknown> }, ctx.clock.now()) };
    return record(ctx, r.via, facts, denial(r.cause, version));
  });
}

/** Who asked for what: the record of a decision that failed. */
interface Asked {
  action: string | null;
  resource: string;
  context: unknown;
  userId: string | null;
  caller?: string;
}

/** Every mode's frame: anything unexpected is a deny (fail closed), recorded; only the database's absence throws; every decision is counted. */
async function measured(ctx: AppContext, via: Via, agentId: string, asked: Asked, decideIt: () => Promise<AuthorizeResult>): Promise<AuthorizeResult> {
  const started = performance.now();
  let result: AuthorizeResult;
  try {
    result = await decideIt();
  } catch (err) {
    if (isStoreUnavailable(err)) throw err instanceof StoreUnavailableError ? err : new StoreUnavailableError('the decision could not be made: the database is unavailable', err);
    ctx.logger.error({ err, agent_id: agentId, action: asked.action }, 'decision failed');
    // The deny is recorded like any other decision (or, unrecordable, not given).
    const failed = denial({ code: 'error', message: 'the decision could not be made' }, ctx.policy.peek()?.set?.version ?? '');
    const facts = early(agentId, asked.userId, { action: asked.action as string, resource: asked.resource, context: asked.context as Record<string, unknown> }, ctx.clock.now());
    result = await record(ctx, via, facts, failed, undefined, undefined, asked.caller);
  }
  if (result.outcome === 'decided') {
    ctx.metrics.decisions.inc({ via, outcome: result.decision.decision, reason: result.decision.cause.code });
    ctx.metrics.decisionSeconds.observe({ via }, (performance.now() - started) / 1000);
  }
  return result;
}

/** Facts known before the agent's are loaded: enough for the record of an early refusal. */
function early(agentId: string, userId: string | null, req: Action, now: number, chain?: TokenChain | null): Parameters<typeof auditRecord>[1] {
  return {
    subject: { type: 'agent', id: agentId, roles: [], groups: [], permissions: [], attributes: {} },
    person: userId !== null ? { id: userId, roles: [], groups: [], permissions: [], attributes: {} } : null,
    action: req.action,
    resource: req.resource,
    context: req.context,
    now,
    ...(chain ? { chain: { agents: chain.agents.map((id) => ({ type: 'agent', id, roles: [], groups: [], permissions: [], attributes: {} })) } } : {}),
  };
}

/** Who is deciding, for the steps after the credential: the door, its binding or caller, and a name for approvals. */
interface Mode {
  via: Via;
  /** the transaction token whose single use an allow consumes (decision endpoint) */
  txn: string | null;
  /** binding: the transaction token being issued */
  binding?: string;
  /** AuthZEN: the application that asked */
  caller?: string;
  /** who asks, as an approval request names them */
  name: string;
  /** AuthZEN, not the enforcement point: limits read, approvals neither created nor consumed */
  observe?: boolean;
}

/** The AuthZEN door: the same decision order, approvals and record, for a subject the caller names. */
async function runNamed(ctx: AppContext, req: Extract<AuthorizeRequest, { via: 'authzen' }>): Promise<AuthorizeResult> {
  const { action, resource, context, caller } = req;
  const now = ctx.clock.now();
  const load = req.facts ?? namedSubjectFacts;
  const [named, policy, stored, relationships] = await Promise.all([load(ctx, req.subject.type, req.subject.id), ctx.policy.state(), entityAttributes(ctx, resource), relationshipGraph(ctx).current()]);
  // 1. The subject is known (an unknown one is a deny, not a 401: the caller is the application).
  if (!named) {
    const subject: SubjectFacts = { type: req.subject.type === 'agent' ? 'agent' : 'user', id: req.subject.id, roles: [], groups: [], permissions: [], attributes: {} };
    const unknown = denial({ code: 'unknown_subject', type: req.subject.type, id: req.subject.id }, policy.set?.version ?? '');
    return record(ctx, 'authzen', { subject, person: null, action, resource, context, now }, unknown, undefined, undefined, caller);
  }
  const { subject, person } = withSubjectProperties(named, req.subject.properties);
  const request: DecisionRequest = { subject, person, action, resource, resourceAttributes: withProperties(stored, req.resourceProperties), context, now, relationships };
  return decisionOrder(ctx, { via: 'authzen', txn: null, caller, name: subject.name ?? subject.id, ...(req.observe ? { observe: true } : {}) }, policy.set, request);
}

async function run(ctx: AppContext, req: Exclude<AuthorizeRequest, { via: 'authzen' }>, agentId: string): Promise<AuthorizeResult> {
  const { action, resource, context } = req;
  const now = ctx.clock.now();
  const [state, policy] = await Promise.all([agentKnown(ctx, agentId), ctx.policy.state()]);
  const version = policy.set?.version ?? '';

  // 1. The agent is known.
  if (!state) {
    if (req.via === 'decision') return { outcome: 'unknown_agent' };
    // The access token was verified a moment ago: the agent was revoked in between.
    return record(ctx, req.via, early(agentId, req.principal.userId, req, now), denial({ code: 'agent_revoked' }, version));
  }
  // 2. The door's credential matches the action.
  const matched = await tokenMatches(ctx, req, agentId);
  if ('refused' in matched) return record(ctx, req.via, early(agentId, matched.userId, req, now), denial(matched.refused, version));
  // 2½. Within what the person approved: the access token's authorization details, checked
  // like a limit. (A transaction token is bound to one action, context and all, that was
  // checked here when it was bound.)
  if (req.via !== 'decision') {
    const why = beyondAuthorizationDetails(req.principal.claims.authorization_details, req);
    if (why !== undefined) {
      ctx.logger.debug({ agent_id: agentId, action, why }, 'beyond the token\'s authorization details');
      return record(ctx, req.via, early(agentId, matched.userId, req, now), denial(AUTHORIZATION_DETAILS_EXCEEDED, version));
    }
  }
  // A delegation chain still holds: every agent of it, the consent, the sub-agents, the session.
  let chain: AgentState[] | null = null;
  if (matched.chain && matched.userId !== null) {
    const held = await chainStates(ctx, matched.chain, matched.userId, action);
    if ('refused' in held) return record(ctx, req.via, early(agentId, matched.userId, req, now, matched.chain), denial(held.refused, version));
    chain = held.agents;
  }

  // 3–7. The decision order on the current facts (over every agent of a chain).
  const [facts, relationships] = await Promise.all([loadFacts(ctx, state, matched.userId, resource), relationshipGraph(ctx).current()]);
  const request: DecisionRequest = { ...facts, action, resource, context, now, relationships };
  if (chain && chain.length > 1) request.chain = { agents: chainFacts(chain, facts.person) };
  const binding = req.via === 'bind' ? `transaction token ${req.txn}` : undefined;
  return decisionOrder(ctx, { via: req.via, txn: matched.txn, binding, name: state.agent.name }, policy.set, request);
}

/** The cause of an action beyond the token's authorization details: `constraint_violated: authorization_details`. */
const AUTHORIZATION_DETAILS_EXCEEDED: PipelineCause = { code: 'constraint_violated', field: 'authorization_details', operator: '' };

/**
 * Step 2: the decision endpoint's transaction token holds for this action (and names the
 * person); at the gateway and binding the access token carries the capability: the token's
 * capabilities bound what this sign-in may do, whatever the agent holds now.
 */
async function tokenMatchesUntraced(
  ctx: AppContext,
  req: Exclude<AuthorizeRequest, { via: 'authzen' }>,
  agentId: string,
): Promise<{ userId: string | null; txn: string | null; chain: TokenChain | null } | { userId: string | null; refused: PipelineCause }> {
  const { action, resource, context } = req;
  if (req.via === 'decision') {
    const checked = await checkTransactionToken(ctx, req.transactionToken, { agentId, action, resource, context });
    if ('why' in checked) return { userId: null, refused: { code: 'invalid_transaction_token', why: checked.why } };
    return { userId: checked.userId, txn: checked.txn, chain: checked.chain };
  }
  const userId = req.principal.userId;
  if (!req.principal.capabilities.includes(action)) return { userId, refused: { code: 'not_granted', action, missing: 'capability' } };
  return { userId, txn: null, chain: req.principal.chain };
}

/**
 * Steps 3–7 for every mode, then the record. Decide: under limits over time the counters are
 * read and an allow consumes them, in one transaction with the record (`decideOnCounters`).
 * Bind: the usage is read, nothing consumed, and only the limits can refuse.
 */
async function decisionOrderUntraced(ctx: AppContext, mode: Mode, policy: PolicySet | null, request: DecisionRequest): Promise<AuthorizeResult> {
  await loadReferences(ctx, policy, request);
  const counters = policy ? countersOf(request, policy) : [];
  if (counters.length && mode.via !== 'bind' && !mode.observe) {
    return decideOnCounters(ctx, mode.via as 'decision' | 'mcp' | 'authzen', policy!, request, counters, mode.txn, mode.name, mode.caller);
  }
  if (counters.length) await readLimits(ctx, counters, request);
  let decision = decideChain(request, policy);

  if (mode.via === 'bind') {
    // A binding checks the limits only; rules and grants are the decision's.
    if (decision.cause.code !== 'constraint_violated' && decision.cause.code !== 'policy_unavailable' && decision.cause.code !== 'error') {
      decision = { decision: 'allow', cause: { code: 'allowed' }, reason: 'allowed', policyVersion: decision.policyVersion, trace: decision.trace };
    }
    return record(ctx, 'bind', request, decision, mode.binding);
  }

  let approvalId: string | undefined;
  if (decision.decision === 'approval_required' && policy && !mode.observe) {
    ({ decision, approvalId } = await approvals(ctx, policy, request, decision, mode.name));
  }
  return record(ctx, mode.via, request, decision, undefined, approvalId, mode.caller);
}

/**
 * The dry mode (search): the same order on the same facts, with the limits over time read as
 * they stand; no approval is created or consumed, nothing counted, nothing recorded.
 */
export async function decideDry(ctx: AppContext, policy: PolicySet, request: DecisionRequest): Promise<PipelineDecision> {
  await loadReferences(ctx, policy, request);
  const counters = countersOf(request, policy);
  if (counters.length) await readLimits(ctx, counters, request);
  // The same relationships as a decision's, so that asking agrees with acting.
  request.relationships ??= await relationshipGraph(ctx).current();
  return decideChain(request, policy);
}

/** Step 3 without consuming (bind, dry): the usage now, for the policy's limits to read. */
async function readLimitsUntraced(ctx: AppContext, counters: Counter[], request: ChainRequest): Promise<void> {
  const t = Math.floor(request.now / 1000);
  if (request.chain) request.chainUsage = usageByAgent(counters, await peekValues(ctx.store, counters, t));
  else request.usage = await peekUsage(ctx.store, counters, t);
}

/**
 * The counters of a request's limits over time: an agent's, for the capability (and the object
 * or person of a scoped limit). A person acting directly holds no capabilities, so none.
 */
export function countersOf(request: DecisionRequest, policy: PolicySet): Counter[] {
  if (request.subject.type !== 'agent') return [];
  // A chain's: every agent's counters, so that a sub-agent's use counts against each agent above it.
  const chained = chainCounters(request, policy);
  if (chained) return chained;
  const limits = usageLimitsFor(request, policy);
  if (!limits.length) return [];
  const personId = request.person && request.person.id !== '' ? request.person.id : null;
  return countersFor({ agentId: request.subject.id, capability: request.action, resource: request.resource, personId }, limits);
}

/**
 * Steps 3–7 under limits over time: the counters are read (locked), the decision made (with
 * its approvals), an allow consumed and the decision's audit record appended in one
 * transaction, shared with the other such decisions of this turn, so that concurrent
 * decisions on any process or instance never together pass a window, and what a decision
 * consumed is recorded with it or not at all. The same transaction token consumes once.
 */
async function decideOnCountersUntraced(
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
  // The usage the decision read, kept with its record for replay.
  let usageRead: DecisionRequest['usage'];
  try {
    ({ outcome } = await usageBatch(ctx).run({
      counters,
      t: Math.floor(request.now / 1000),
      txn,
      async judge(usage, tx: Store, read) {
        const judged: ChainRequest = { ...request, usage, ...(request.chain ? { chainUsage: usageByAgent(read.counters, read.values) } : {}) };
        usageRead = usage;
        const first = decideChain(judged, policy);
        if (first.decision !== 'approval_required') return { decision: first };
        return approvalStep(tx, policy, judged, first, agentName);
      },
      record: (done, changes) => ({ ...auditRecord(via, { ...request, usage: usageRead }, done.decision, undefined, caller), ...(changes.length ? { usage: changes } : {}) }),
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
async function recordUntraced(
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
 * Step 6 with its memory: an action that needs a person creates a pending approval (or finds
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
async function approvalStepUntraced(
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
      const approved = decideChain({ ...request, approved: true }, policy);
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
const tokenMatches = traced('gatehouse.step.token_matches', tokenMatchesUntraced);
const decisionOrder = traced('gatehouse.step.decision_order', decisionOrderUntraced);
const readLimits = traced('gatehouse.step.limits', readLimitsUntraced);
const decideOnCounters = traced('gatehouse.step.decide', decideOnCountersUntraced);
const record = traced('gatehouse.step.record', recordUntraced);
const approvalStep = traced('gatehouse.step.approval', approvalStepUntraced);
