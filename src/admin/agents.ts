import type { Router } from 'express';
import type { AppContext } from '../context.js';
import type { Store } from '../store/index.js';
import { errors } from '../errors.js';
import type { Agent } from '../store/agents.js';
import type { Recorder } from './audit.js';
import { onDuplicate, onStillReferenced } from './conflict.js';
import { adminRoute, param, parseWith } from './route.js';
import {
  agentCreate,
  agentPatch,
  agentView,
  capabilityName,
  capabilityPut,
  capabilityView,
  listOf,
  type AgentCreate,
  type AgentPatch,
} from './schemas.js';
import { defaultAgentId, spiffeIdProblem } from './spiffe.js';
import { iso } from '../clock.js';
import { agentLeavesChains } from '../agents/delegation.js';

export function agentJson(a: Agent) {
  return {
    agent_id: a.agent_id,
    client_id: a.agent_id,
    name: a.name,
    mode: a.mode,
    public_jwk: a.public_jwk,
    roles: a.roles,
    capabilities: a.capabilities,
    attributes: a.attributes,
    sub_agents: a.sub_agents,
    dpop_bound_access_tokens: a.dpop_bound_access_tokens,
    revoked: a.revoked,
    revoked_at: iso(a.revoked_at),
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
  };
}

async function mustGet(store: Store, id: string): Promise<Agent> {
  const a = await store.agents.get(id);
  if (!a) throw errors.notFound(`no agent ${id}`);
  return a;
}

/** Only the public members are kept: a JWK is stored as the key, not as the request sent it. */
const publicJwk = (jwk: Record<string, unknown>) => {
  const out: Record<string, unknown> = { kty: jwk.kty, crv: jwk.crv, x: jwk.x };
  for (const k of ['kid', 'alg', 'use']) if (jwk[k] !== undefined) out[k] = jwk[k];
  return out;
};
const uniqueIds = (ids: string[]): string[] => [...new Set(ids)];
const capabilities = (caps: AgentCreate['capabilities']) => caps.map((c) => ({ name: c.name, limits: c.limits ?? {} }));

/**
 * Every change to an agent or its capabilities moves the `agents` counter in the same
 * transaction: each worker's decision cache keys on it, so the next call sees the change.
 */
export function createAgent(ctx: AppContext, input: AgentCreate, record?: Recorder<Agent>): Promise<Agent> {
  const agentId = input.agent_id ?? defaultAgentId(ctx.config.issuerHost, input.name);
  const problem = spiffeIdProblem(agentId);
  if (problem) throw errors.invalidRequest(`agent_id: ${problem}`, { issues: [{ path: 'agent_id', message: problem, code: 'custom' }] });
  return onDuplicate(`an agent ${agentId} exists`, () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.agents.get(agentId)) throw errors.conflict(`an agent ${agentId} exists`);
      const agent = await tx.agents.create(
        agentId,
        { name: input.name, mode: input.mode, public_jwk: publicJwk(input.public_jwk), roles: input.roles, attributes: input.attributes, sub_agents: uniqueIds(input.sub_agents), dpop_bound_access_tokens: input.dpop_bound_access_tokens },
        capabilities(input.capabilities),
      );
      await tx.settings.bump('agents');
      await record?.(tx, agent);
      return agent;
    }),
  );
}

export function updateAgent(ctx: AppContext, agentId: string, patch: AgentPatch, record?: Recorder<Agent>): Promise<Agent> {
  return ctx.store.transaction(async (tx) => {
    const cur = await mustGet(tx, agentId);
    const agent = (await tx.agents.update(
      agentId,
      {
        name: patch.name ?? cur.name,
        mode: patch.mode ?? cur.mode,
        public_jwk: patch.public_jwk ? publicJwk(patch.public_jwk) : cur.public_jwk,
        roles: patch.roles ?? cur.roles,
        attributes: patch.attributes ?? cur.attributes,
        sub_agents: patch.sub_agents ? uniqueIds(patch.sub_agents) : cur.sub_agents,
        dpop_bound_access_tokens: patch.dpop_bound_access_tokens ?? cur.dpop_bound_access_tokens,
      },
      patch.capabilities ? capabilities(patch.capabilities) : undefined,
    ))!;
    await tx.settings.bump('agents');
    await record?.(tx, agent);
    return agent;
  });
}

/** Adds or changes one capability; a changed limit applies to the agent's next call. */
export async function putCapability(
  ctx: AppContext,
  agentId: string,
  name: string,
  limits: Record<string, unknown>,
  record?: Recorder<{ added: boolean }>,
): Promise<{ name: string; limits: Record<string, unknown> }> {
  await ctx.store.transaction(async (tx) => {
    const agent = await mustGet(tx, agentId);
    await tx.agents.putCapability(agentId, name, limits);
    await tx.settings.bump('agents');
    await record?.(tx, { added: !agent.capabilities.some((c) => c.name === name) });
  });
  return { name, limits };
}

export async function deleteCapability(ctx: AppContext, agentId: string, name: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await mustGet(tx, agentId);
    if (!(await tx.agents.deleteCapability(agentId, name))) throw errors.notFound(`the agent has no capability ${name}`);
    await tx.settings.bump('agents');
    await record?.(tx);
  });
}

/** Final: the agent's tokens and assertions stop working. */
export async function revokeAgent(ctx: AppContext, agentId: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await mustGet(tx, agentId);
    await tx.agents.revoke(agentId);
    await tx.settings.bump('agents');
    await agentLeavesChains(ctx, tx, agentId);
    await record?.(tx);
  });
}

export async function deleteAgent(ctx: AppContext, agentId: string, record?: Recorder): Promise<void> {
  await onStillReferenced(`agent ${agentId} still has records that refer to it; revoke it instead`, () =>
    ctx.store.transaction(async (tx) => {
      // Its consents go with it (told to their people first).
      await agentLeavesChains(ctx, tx, agentId);
      if (!(await tx.agents.delete(agentId))) throw errors.notFound(`no agent ${agentId}`);
      await tx.settings.bump('agents');
      await record?.(tx);
    }),
  );
}

export function agentRoutes(router: Router, ctx: AppContext): void {
  const tags = ['agents'];
  // Agent IDs are URLs: sent URL-encoded they are one path segment; a wildcard also takes them unencoded.
  const idPath = '/agents/*agent_id';

  adminRoute(
    router,
    {
      method: 'post', path: '/agents', tags, summary: 'Register an agent',
      request: agentCreate,
      responses: { 201: { description: 'the agent; `agent_id` is its SPIFFE ID', schema: agentView }, 409: 'the agent_id is taken' },
    },
    async (req, res) => void res.status(201).json(agentJson(await createAgent(ctx, parseWith(agentCreate, req.body)))),
  );

  adminRoute(
    router,
    { method: 'get', path: '/agents', tags, summary: 'List the agents', responses: { 200: { description: 'the agents', schema: listOf(agentView) } } },
    async (_req, res) => void res.json({ data: (await ctx.store.agents.list()).map(agentJson) }),
  );

  // The longer paths first: the wildcard of the shorter one would take them too.
  adminRoute(
    router,
    {
      method: 'put', path: '/agents/{agent_id}/capabilities/{name}', expressPath: `${idPath}/capabilities/:name`, tags,
      summary: "Add or change a capability and its limits (a changed limit applies to the agent's next call)",
      request: capabilityPut,
      responses: { 200: { description: 'the capability', schema: capabilityView } },
    },
    async (req, res) => {
      const agentId = param(req, 'agent_id');
      const name = parseWith(capabilityName, param(req, 'name'), 'name');
      const { limits } = parseWith(capabilityPut, req.body === undefined ? {} : req.body);
      res.json(await putCapability(ctx, agentId, name, limits ?? {}));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/agents/{agent_id}/capabilities/{name}', expressPath: `${idPath}/capabilities/:name`, tags, summary: 'Remove a capability', responses: { 204: 'removed' } },
    async (req, res) => {
      await deleteCapability(ctx, param(req, 'agent_id'), param(req, 'name'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/agents/{agent_id}/revoke', expressPath: `${idPath}/revoke`, tags,
      summary: 'Revoke an agent: its tokens and assertions stop working', responses: { 204: 'revoked' },
    },
    async (req, res) => {
      await revokeAgent(ctx, param(req, 'agent_id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/agents/{agent_id}', expressPath: idPath, tags, summary: 'Read an agent', responses: { 200: { description: 'the agent', schema: agentView } } },
    async (req, res) => void res.json(agentJson(await mustGet(ctx.store, param(req, 'agent_id')))),
  );

  adminRoute(
    router,
    {
      method: 'patch', path: '/agents/{agent_id}', expressPath: idPath, tags,
      summary: 'Change an agent: name, mode, roles, capabilities and attributes (each replaced whole), public_jwk (key rotation)',
      request: agentPatch,
      responses: { 200: { description: 'the agent', schema: agentView } },
    },
    async (req, res) => {
      const patch = parseWith(agentPatch, req.body);
      res.json(agentJson(await updateAgent(ctx, param(req, 'agent_id'), patch)));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/agents/{agent_id}', expressPath: idPath, tags, summary: 'Delete an agent', responses: { 204: 'deleted' } },
    async (req, res) => {
      await deleteAgent(ctx, param(req, 'agent_id'));
      res.status(204).end();
    },
  );
}
