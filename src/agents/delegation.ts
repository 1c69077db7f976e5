import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { EVENT_TYPES } from '../signals.js';
import type { Store } from '../store/index.js';
import type { Delegation } from '../store/delegations.js';
import { DELEGATIONS_DOMAIN, mayActOf } from '../authz/chain.js';
import { iso } from '../clock.js';

/**
 * A person's consent that an agent may act for them (the first hop of a delegation chain).
 * Every change moves the `delegations` counter in its transaction, so every process's
 * decisions see it on their next turn. What an agent may do for a person shrinking (a
 * withdrawn consent, fewer capabilities, the agent revoked or deleted) emits
 * token-claims-change with the person's new `may_act`, in the same transaction.
 */

export type Initiator = 'admin' | 'user';

/** Records (or replaces) a consent. The agent must exist, be a delegated agent, not be revoked, and hold each capability. */
export async function grantDelegation(ctx: AppContext, userId: string, agentId: string, capabilities: string[], by: Initiator): Promise<void> {
  const wanted = [...new Set(capabilities)];
  await ctx.store.transaction(async (tx) => {
    const user = await tx.users.get(userId);
    if (!user) throw errors.notFound(`no person ${userId}`);
    const agent = await tx.agents.get(agentId);
    if (!agent || agent.revoked) throw errors.notFound(`no agent ${agentId}`);
    if (agent.mode !== 'delegated') throw errors.invalidRequest(`agent_id: ${agentId} is an autonomous agent; only a delegated agent acts for a person`);
    const held = new Set(agent.capabilities.map((c) => c.name));
    const missing = wanted.filter((c) => !held.has(c));
    if (missing.length) throw errors.invalidRequest(`capabilities: not a capability of the agent: ${missing.join(', ')}`);
    const before = await tx.delegations.get(userId, agentId);
    await tx.delegations.put(userId, agentId, wanted);
    await tx.settings.bump(DELEGATIONS_DOMAIN);
    if (before && before.capabilities.some((c) => !wanted.includes(c))) await emitMayActChange(ctx, tx, userId, user.email, by);
  });
}

/** Withdraws a consent; false when there was none. */
export async function withdrawDelegation(ctx: AppContext, userId: string, agentId: string, by: Initiator): Promise<boolean> {
  return ctx.store.transaction(async (tx) => {
    const user = await tx.users.get(userId);
    if (!user) throw errors.notFound(`no person ${userId}`);
    if (!(await tx.delegations.delete(userId, agentId))) return false;
    await tx.settings.bump(DELEGATIONS_DOMAIN);
    await emitMayActChange(ctx, tx, userId, user.email, by);
    return true;
  });
}

/**
 * Inside the transaction that revokes or deletes an agent (before a delete, while its consents
 * still exist): every person who let it act for them is told their `may_act` changed.
 */
export async function agentLeavesChains(ctx: AppContext, tx: Store, agentId: string): Promise<void> {
  const consents = await tx.delegations.listForAgent(agentId);
  if (!consents.length) return;
  await tx.settings.bump(DELEGATIONS_DOMAIN);
  for (const d of consents) {
    const user = await tx.users.get(d.user_id);
    if (user) await emitMayActChange(ctx, tx, d.user_id, user.email, 'admin', agentId);
  }
}

async function emitMayActChange(ctx: AppContext, tx: Store, userId: string, email: string, by: Initiator, without?: string): Promise<void> {
  const left = (await tx.delegations.listForUser(userId)).filter((d) => d.agent_id !== without);
  await ctx.signals.emit(tx, {
    type: EVENT_TYPES.tokenClaimsChange,
    subject: { user_id: userId, email },
    payload: { claims: { may_act: mayActOf(left) ?? null } },
    initiatingEntity: by,
  });
}

export const delegationJson = (d: Delegation) => ({ agent_id: d.agent_id, capabilities: d.capabilities, created_at: iso(d.created_at) });
