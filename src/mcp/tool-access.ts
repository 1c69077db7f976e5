import type { AppContext } from '../context.js';
import type { AgentPrincipal } from '../authz/agent-access-token.js';
import { agentCache } from '../authz/agent-cache.js';
import { personFacts } from '../authz/facts.js';
import { permissionCovers } from '../policy/index.js';

/**
 * Whether an agent may see a tool in tools/list: the capability named by the action is in its
 * token and still on the agent, and its role permissions (and, for a delegated agent, the
 * person's) cover the action on the mapped resource. Listing is a convenience: every call is
 * still put to the full decision order.
 */
export async function toolAccess(ctx: AppContext, principal: AgentPrincipal): Promise<(action: string, resource: string) => boolean> {
  const state = await agentCache(ctx).active(principal.agent.agent_id);
  if (!state) return () => false;
  const tokenCaps = new Set(principal.capabilities);
  const agentCaps = new Set(state.agent.capabilities.map((c) => c.name));
  const singulars = await policySingulars(ctx);
  const agentPerms = state.permissions;
  const personPerms =
    state.agent.mode === 'delegated' ? (principal.userId ? (await personFacts(ctx, principal.userId)).permissions : []) : null;
  const covers = (perms: string[], action: string, resource: string) =>
    perms.some((p) => permissionCovers(p, action, resource, singulars));
  return (action, resource) =>
    tokenCaps.has(action) &&
    agentCaps.has(action) &&
    covers(agentPerms, action, resource) &&
    (personPerms === null || covers(personPerms, action, resource));
}

/** Kind singulars a policy file declares (`refunds` → `refund` by default), read from the compiled policy. */
async function policySingulars(ctx: AppContext): Promise<Record<string, string> | undefined> {
  const { set } = await ctx.policy.state();
  return (set?.compiled as { singulars?: Record<string, string> } | undefined)?.singulars;
}
