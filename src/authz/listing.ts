import type { AppContext } from '../context.js';
import type { AgentPrincipal } from './agent-access-token.js';
import { agentKnown, type AgentState } from './agent-cache.js';
import { chainStates, currentConsent } from './chain.js';
import { personFacts } from './facts.js';
import { permissionCovers } from '../policy/index.js';

/**
 * The listing mode of the pipeline (the MCP gateway's tools/list): whether an agent may see an
 * action on a resource listed. Steps 1 and 2 of the decision order (the agent is known, the
 * capability is in its token and still on the agent), then the grants: its role permissions
 * (and, for a delegated agent, the person's; for a delegation chain, every agent's above it and
 * the person's consent) cover the action on the resource. Listing is a
 * convenience: every call is still put to the full decision order.
 */
export async function mayList(ctx: AppContext, principal: AgentPrincipal): Promise<(action: string, resource: string) => boolean> {
  const state = await agentKnown(ctx, principal.agent.agent_id);
  if (!state) return () => false;
  const tokenCaps = new Set(principal.capabilities);
  const agentCaps = new Set(state.agent.capabilities.map((c) => c.name));
  const singulars = await policySingulars(ctx);
  const agentPerms = state.permissions;
  const personPerms =
    state.agent.mode === 'delegated' ? (principal.userId ? (await personFacts(ctx, principal.userId)).permissions : []) : null;
  const covers = (perms: string[], action: string, resource: string) =>
    perms.some((p) => permissionCovers(p, action, resource, singulars));
  // A delegation chain: it must still hold, the person's consent cover the action, and every
  // agent above this one hold the capability and a permission too.
  let above: AgentState[] = [];
  let consented: Set<string> | null = null;
  if (principal.chain && principal.userId !== null) {
    const held = await chainStates(ctx, principal.chain, principal.userId, null);
    if ('refused' in held) return () => false;
    above = held.agents.slice(0, -1);
    consented = new Set((await currentConsent(ctx, principal.userId, principal.chain.agents[0]!))?.capabilities ?? []);
  }
  return (action, resource) =>
    tokenCaps.has(action) &&
    agentCaps.has(action) &&
    covers(agentPerms, action, resource) &&
    (personPerms === null || covers(personPerms, action, resource)) &&
    (consented === null || consented.has(action)) &&
    above.every((a) => a.agent.capabilities.some((c) => c.name === action) && covers(a.permissions, action, resource));
}

/** Kind singulars a policy file declares (`refunds` → `refund` by default), read from the compiled policy. */
async function policySingulars(ctx: AppContext): Promise<Record<string, string> | undefined> {
  const { set } = await ctx.policy.state();
  return (set?.compiled as { singulars?: Record<string, string> } | undefined)?.singulars;
}
