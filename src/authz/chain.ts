import type { AppContext } from '../context.js';
import type { Delegation } from '../store/delegations.js';
import { agentKnown, type AgentState } from './agent-cache.js';
import { countersFor, type Counter } from './budgets.js';
import type { PipelineCause } from './cause.js';
import { decideOn, type PipelineDecision } from './core.js';
import { chainAgents, decideOverChain, usageLimitsFor, type DecisionRequest, type PersonFacts, type PolicySet, type SubjectFacts, type UsageFacts } from './policy-interface.js';

/**
 * Delegation chains: a person lets an agent act for them (consent), that agent hands work to a
 * sub-agent it lists (`sub_agents`), and so on, at most MAX_CHAIN_DEPTH agents deep. A token
 * obtained by token exchange names the chain in its nested `act` claim (the outermost the
 * current actor) and carries `delegation: "consent"`; its decisions check, on every call:
 *   1. every agent of the chain exists, is not revoked and is still a delegated agent;
 *   2. the person still lets the first agent act for them, with the capability asked for;
 *   3. each agent still lists the next one among its sub-agents;
 *   4. the person's sign-in session the chain started from (`sid`) has not ended;
 * and then the decision order runs once per agent (each agent granted, each agent's limits,
 * its usage counted on its own counters and on those of every agent above it): allowed only
 * when every agent is. What is read here follows the `agents` and `delegations` change
 * counters, so a change committed on any instance applies to the next decision everywhere.
 */

export const DELEGATIONS_DOMAIN = 'delegations';
/** The most agents a chain may hold: the person's agent and four sub-agents below it. */
export const MAX_CHAIN_DEPTH = 5;
/** The marker claim of a token that stands on a person's consent (token exchange). */
export const DELEGATION_CLAIM = 'delegation';
export const DELEGATION_BY_CONSENT = 'consent';

/** A delegation chain as a token carries it. */
export interface TokenChain {
  /** agent IDs, first (acting for the person) to current */
  agents: string[];
  /** the person's sign-in session the chain started from (null when the person's token named none) */
  sid: string | null;
}

/**
 * The agents of a nested `act` claim (RFC 8693 §4.1), first to current; null when it is not
 * a chain of objects each with a string `sub`, or deeper than the limit.
 */
export function actChain(act: unknown): string[] | null {
  const out: string[] = [];
  let cur = act;
  while (cur !== undefined) {
    if (!cur || typeof cur !== 'object' || Array.isArray(cur)) return null;
    const { sub, act: inner } = cur as { sub?: unknown; act?: unknown };
    if (typeof sub !== 'string' || sub === '' || out.length >= MAX_CHAIN_DEPTH) return null;
    out.push(sub);
    cur = inner;
  }
  return out.length ? out.reverse() : null;
}

/** The nested `act` claim of a chain (agents first to current): the outermost is the current actor. */
export function nestedAct(agents: readonly string[]): { sub: string; act?: unknown } {
  let act: { sub: string; act?: unknown } | undefined;
  for (const sub of agents) act = act ? { sub, act } : { sub };
  if (!act) throw new Error('a chain has at least one agent');
  return act;
}

/** The chain a verified agent token names: only a token issued by token exchange has one. */
export function tokenChainOf(claims: Record<string, unknown>): TokenChain | null {
  if (claims[DELEGATION_CLAIM] !== DELEGATION_BY_CONSENT) return null;
  const agents = actChain(claims.act);
  if (!agents) return null;
  return { agents, sid: typeof claims.sid === 'string' && claims.sid ? claims.sid : null };
}

/**
 * The `may_act` claim of a person's access token (RFC 8693 §4.4): `{"sub": "<agent id>"}` when
 * one agent may act for them; with several, a list of such objects; undefined when none.
 */
export function mayActOf(consents: readonly Pick<Delegation, 'agent_id'>[]): { sub: string } | { sub: string }[] | undefined {
  if (!consents.length) return undefined;
  const parties = consents.map((d) => ({ sub: d.agent_id }));
  return parties.length === 1 ? parties[0] : parties;
}

/** The agents a `may_act` claim names (either shape); null when the claim is absent, [] when it names none. */
export function mayActAgents(claim: unknown): string[] | null {
  if (claim === undefined) return null;
  const parties = Array.isArray(claim) ? claim : [claim];
  return parties.flatMap((p) => (p && typeof p === 'object' && typeof (p as { sub?: unknown }).sub === 'string' ? [(p as { sub: string }).sub] : []));
}

/** The claims that carry a chain on (into a transaction token): `act`, the marker and the session. */
export function chainClaims(chain: TokenChain): Record<string, unknown> {
  return { act: nestedAct(chain.agents), [DELEGATION_CLAIM]: DELEGATION_BY_CONSENT, ...(chain.sid ? { sid: chain.sid } : {}) };
}

// ---- consents, as the decisions read them -------------------------------------------------

/** Consents cached per process, dropped whenever the `delegations` counter moves. */
class ConsentCache {
  private version = -1;
  private byKey = new Map<string, Promise<Delegation | null>>();

  constructor(private readonly ctx: AppContext) {}

  async get(userId: string, agentId: string): Promise<Delegation | null> {
    const v = await this.ctx.store.changes.version(DELEGATIONS_DOMAIN);
    if (v !== this.version) {
      this.byKey.clear();
      this.version = v;
    }
    const key = JSON.stringify([userId, agentId]);
    let hit = this.byKey.get(key);
    if (!hit) {
      hit = this.ctx.store.delegations.get(userId, agentId).then((d) => d ?? null);
      if (this.byKey.size >= 10_000) this.byKey.clear();
      const loading = hit;
      this.byKey.set(key, loading);
      loading.catch(() => {
        if (this.byKey.get(key) === loading) this.byKey.delete(key);
      });
    }
    return hit;
  }
}

const consentCaches = new WeakMap<AppContext, ConsentCache>();

/** The person's consent that the agent act for them, as it stands now (null: none). */
export function currentConsent(ctx: AppContext, userId: string, agentId: string): Promise<Delegation | null> {
  let c = consentCaches.get(ctx);
  if (!c) consentCaches.set(ctx, (c = new ConsentCache(ctx)));
  return c.get(userId, agentId);
}

/**
 * Checks 1–4 of a chain for one action: the agents' current states, first to current, or the
 * cause that stops the chain. `action` null checks the chain alone (a token exchange).
 */
export async function chainStates(ctx: AppContext, chain: TokenChain, userId: string, action: string | null): Promise<{ agents: AgentState[] } | { refused: PipelineCause }> {
  const states = await Promise.all(chain.agents.map((id) => agentKnown(ctx, id)));
  const agents: AgentState[] = [];
  for (let i = 0; i < states.length; i++) {
    const s = states[i];
    if (!s) return { refused: { code: 'delegation_revoked', why: `agent ${chain.agents[i]} of the chain is unknown or revoked` } };
    if (s.agent.mode !== 'delegated') return { refused: { code: 'delegation_revoked', why: `agent ${s.agent.agent_id} of the chain is no longer a delegated agent` } };
    if (i > 0 && !agents[i - 1]!.agent.sub_agents.includes(s.agent.agent_id)) {
      return { refused: { code: 'delegation_revoked', why: `agent ${agents[i - 1]!.agent.agent_id} no longer lists ${s.agent.agent_id} among its sub-agents` } };
    }
    agents.push(s);
  }
  const consent = await currentConsent(ctx, userId, chain.agents[0]!);
  if (!consent) return { refused: { code: 'delegation_revoked', why: `the person no longer lets ${chain.agents[0]} act for them` } };
  if (action !== null && !consent.capabilities.includes(action)) {
    return { refused: { code: 'delegation_revoked', why: `the person no longer lets ${chain.agents[0]} use ${action}` } };
  }
  if (chain.sid !== null) {
    const session = await ctx.store.sessions.get(chain.sid);
    if (!session || session.ended_at !== null || session.user_id !== userId) return { refused: { code: 'delegation_revoked', why: "the person's sign-in session has ended" } };
  }
  return { agents };
}

/** The chain's agents as a decision's facts: each in the groups of the person it acts for. */
export function chainFacts(agents: readonly AgentState[], person: PersonFacts | null): SubjectFacts[] {
  return agents.map((a) => (person ? { ...a.subject, groups: person.groups } : a.subject));
}

// ---- the decision over a chain -----------------------------------------------------------

/** A request with each chain agent's usage (by agent ID): a chain's agents count on counters of the same usage key. */
export type ChainRequest = DecisionRequest & { chainUsage?: ReadonlyMap<string, UsageFacts> };

/**
 * Steps 2–6 over a chain (`decideOverChain`: every agent decided, each with its own usage);
 * without a chain, `decideOn`.
 */
export function decideChain(request: ChainRequest, policy: PolicySet | null): PipelineDecision {
  const usage = request.chainUsage;
  return decideOverChain(request, (r) => decideOn(r, policy), usage ? (id) => usage.get(id) ?? {} : undefined);
}

/** The counters of a chain's limits over time: every agent's own, for the same action (in id order, as a decision locks them). */
export function chainCounters(request: DecisionRequest, policy: PolicySet): Counter[] | null {
  const agents = chainAgents(request);
  if (!agents) return null;
  const personId = request.person && request.person.id !== '' ? request.person.id : null;
  const byId = new Map<string, Counter>();
  for (const a of agents) {
    const limits = usageLimitsFor({ ...request, subject: a }, policy);
    if (!limits.length) continue;
    for (const c of countersFor({ agentId: a.id, capability: request.action, resource: request.resource, personId }, limits)) byId.set(c.id, c);
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** Each chain agent's usage from the values read for `counters` (in their order). */
export function usageByAgent(counters: readonly Counter[], values: readonly number[]): Map<string, UsageFacts> {
  const out = new Map<string, UsageFacts>();
  counters.forEach((c, i) => {
    let facts = out.get(c.agent_id);
    if (!facts) out.set(c.agent_id, (facts = {}));
    facts[c.usage_key] = values[i]!;
  });
  return out;
}
