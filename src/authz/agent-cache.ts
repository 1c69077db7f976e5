import { createPublicKey, type KeyObject } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { Agent } from '../store/agents.js';
import type { SubjectFacts } from './policy-interface.js';

/** An agent as the hot path needs it: its record, its permissions through roles, its public key. */
export interface AgentState {
  agent: Agent;
  permissions: string[];
  /** null when the registered JWK cannot be imported (then every assertion fails) */
  publicKey: KeyObject | null;
  /** the agent as a decision's subject (a delegated agent's groups are its person's, added per decision) */
  subject: SubjectFacts;
}

/**
 * Agent state cached in memory per process, dropped whenever the `agents` change stamp
 * moves (the management API bumps it on every agent, role and capability change), so every
 * process and instance sees a change on its next request after it commits, at the cost of
 * one small counter read per event-loop turn (none on PostgreSQL, where changes are pushed).
 */
export class AgentCache {
  private version = -1;
  private byId = new Map<string, Promise<AgentState | null>>();

  constructor(private readonly ctx: AppContext) {}

  private async sync(): Promise<void> {
    const v = await this.ctx.store.changes.version('agents');
    if (v !== this.version) {
      this.byId.clear();
      this.version = v;
    }
  }

  /** The agent's current state, or undefined when unknown. Revoked agents are returned (callers decide). */
  async get(agentId: string): Promise<AgentState | undefined> {
    await this.sync();
    let state = this.byId.get(agentId);
    if (state === undefined) {
      // The load itself is cached, so requests arriving together share one read.
      state = this.ctx.store.agents.get(agentId).then((agent) => (agent ? load(this.ctx, agent) : null));
      // Bounded: a flood of unknown IDs must not grow memory without limit.
      if (this.byId.size > 10_000) this.byId.clear();
      const loading = state;
      this.byId.set(agentId, loading);
      loading.catch(() => {
        if (this.byId.get(agentId) === loading) this.byId.delete(agentId);
      });
    }
    return (await state) ?? undefined;
  }

  /** The agent when it exists and is not revoked. */
  async active(agentId: string): Promise<AgentState | undefined> {
    const s = await this.get(agentId);
    return s && !s.agent.revoked ? s : undefined;
  }
}

async function load(ctx: AppContext, agent: Agent): Promise<AgentState> {
  let publicKey: KeyObject | null = null;
  try {
    const jwk = agent.public_jwk as { kty?: string; crv?: string; x?: string };
    if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519' && typeof jwk.x === 'string') {
      publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
    }
  } catch {
    publicKey = null;
  }
  const permissions = await ctx.store.roles.permissionsOf(agent.roles);
  const subject: SubjectFacts = Object.freeze({
    type: 'agent',
    id: agent.agent_id,
    name: agent.name,
    mode: agent.mode,
    roles: agent.roles,
    groups: [],
    permissions,
    attributes: agent.attributes,
    capabilities: agent.capabilities.map((c) => ({ name: c.name, limits: c.limits })),
  });
  return { agent, permissions, publicKey, subject };
}

const caches = new WeakMap<AppContext, AgentCache>();

/** The cache of one context (one per process; tests run several servers in one process). */
export function agentCache(ctx: AppContext): AgentCache {
  let c = caches.get(ctx);
  if (!c) caches.set(ctx, (c = new AgentCache(ctx)));
  return c;
}

/**
 * Step 1 of the decision order: the agent exists and is not revoked. Every door and step that
 * asks (the pipeline, the decision endpoint's early 401, a token's verification, a listing, a
 * named subject) asks here.
 */
export function agentKnown(ctx: AppContext, agentId: string): Promise<AgentState | undefined> {
  return agentCache(ctx).active(agentId);
}
