import type { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { listCounters, type CapabilityLimits, type CounterView } from '../authz/budgets.js';
import { usageLimitsFor, type SubjectFacts } from '../authz/policy-interface.js';
import { jsonUsageLimits } from '../policy/usage.js';
import type { Agent } from '../store/agents.js';
import { adminRoute, param } from './route.js';
import { nowSeconds } from '../clock.js';

const counterView = z.object({
  id: z.string().meta({ description: 'the counter, for DELETE .../usage/{id}' }),
  capability: z.string(),
  kind: z.enum(['count', 'sum']),
  field: z.string().optional().meta({ description: 'the context field summed (a sum only)' }),
  per: z.string().meta({ description: 'the sliding window, as the limit writes it (`24h`)' }),
  scope: z.enum(['agent', 'resource', 'person']),
  key: z.string().optional().meta({ description: 'the object or person of a `resource` or `person` counter' }),
  max: z.number(),
  used: z.number().meta({ description: 'used in the window that ends now' }),
  remaining: z.number(),
});
const usageList = z.object({ data: z.array(counterView) });

/**
 * Each capability of the agent with its limits over time as decisions read them: its own
 * (management API), then the policy files' `limits` blocks that name the agent. Without a
 * policy in force (it failed to load), the capability's own.
 */
async function capabilityLimits(ctx: AppContext, agent: Agent): Promise<CapabilityLimits[]> {
  const { set } = await ctx.policy.state();
  const subject: SubjectFacts = { type: 'agent', id: agent.agent_id, roles: [], groups: [], permissions: [], attributes: {}, capabilities: agent.capabilities };
  return agent.capabilities.map((c) => ({
    capability: c.name,
    limits: set
      ? usageLimitsFor({ subject, action: c.name, resource: '', context: {}, now: ctx.clock.now() }, set)
      : jsonUsageLimits(c.limits ?? {}, `api:capability/${c.name}`).limits,
  }));
}


async function mustGetAgent(ctx: AppContext, agentId: string): Promise<Agent> {
  const agent = await ctx.store.agents.get(agentId);
  if (!agent) throw errors.notFound(`no agent ${agentId}`);
  return agent;
}

/** The agent's counters now (404 for an unknown agent). */
export async function agentUsage(ctx: AppContext, agentId: string): Promise<CounterView[]> {
  const agent = await mustGetAgent(ctx, agentId);
  return listCounters(ctx.store, agent.agent_id, await capabilityLimits(ctx, agent), nowSeconds(ctx.clock));
}

/**
 * Resets one of the agent's counters (as listed) to nothing used, and writes that to the audit
 * trail in the same transaction, naming the person who asked (`actor`) when one did (the
 * console). False when the agent has no such counter.
 */
export async function resetCounter(ctx: AppContext, agentId: string, id: string, actor: string | null = null): Promise<boolean> {
  const agent = await mustGetAgent(ctx, agentId);
  const t = nowSeconds(ctx.clock);
  const counter = (await listCounters(ctx.store, agent.agent_id, await capabilityLimits(ctx, agent), t)).find((c) => c.id === id);
  if (!counter) return false;
  await ctx.store.transaction(async (tx) => {
    await tx.usage.lock(id);
    await tx.usage.reset(id);
    await tx.audit.append({
      kind: 'usage',
      time: t,
      agent_id: agent.agent_id,
      action: counter.capability,
      resource: counter.key ?? null,
      context: { counter: id, kind: counter.kind, ...(counter.field ? { field: counter.field } : {}), per: counter.per, scope: counter.scope, max: counter.max, used: counter.used },
      decision: 'reset',
      actor,
      reason: `usage reset: ${counter.kind === 'sum' ? `${counter.field} sum` : 'count'} per ${counter.per}${counter.scope === 'agent' ? '' : ` per ${counter.scope}`} (used ${counter.used})`,
    });
  });
  return true;
}

/**
 * What an agent has used of its rates and budgets, and resetting one counter. The longer
 * paths are declared before the agent's own (whose wildcard would take them).
 */
export function usageRoutes(router: Router, ctx: AppContext): void {
  const tags = ['agents'];
  const idPath = '/agents/*agent_id';

  adminRoute(
    router,
    {
      method: 'delete', path: '/agents/{agent_id}/usage/{id}', expressPath: `${idPath}/usage/:id`, tags,
      summary: 'Reset one counter of a rate or budget to nothing used (written to the audit trail)',
      responses: { 204: 'reset', 404: 'no such agent, or no such counter' },
    },
    async (req, res) => {
      if (!(await resetCounter(ctx, param(req, 'agent_id'), param(req, 'id')))) throw errors.notFound('no such counter');
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/agents/{agent_id}/usage', expressPath: `${idPath}/usage`, tags,
      summary: "What the agent has used of each rate and budget of its capabilities, in the window that ends now",
      responses: { 200: { description: 'the counters', schema: usageList }, 404: 'no such agent' },
    },
    async (req, res) => {
      res.json({ data: await agentUsage(ctx, param(req, 'agent_id')) });
    },
  );
}
