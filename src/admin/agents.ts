import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Agent } from '../store/agents.js';
import { onDuplicate, onStillReferenced } from './conflict.js';
import { adminRoute, iso, param, parseWith } from './route.js';
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
    revoked: a.revoked,
    revoked_at: iso(a.revoked_at),
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
  };
}

function mustGet(ctx: AppContext, id: string): Agent {
  const a = ctx.store.agents.get(id);
  if (!a) throw errors.notFound(`no agent ${id}`);
  return a;
}

/** Only the public members are kept: a JWK is stored as the key, not as the request sent it. */
const publicJwk = (jwk: Record<string, unknown>) => {
  const out: Record<string, unknown> = { kty: jwk.kty, crv: jwk.crv, x: jwk.x };
  for (const k of ['kid', 'alg', 'use']) if (jwk[k] !== undefined) out[k] = jwk[k];
  return out;
};
const capabilities = (caps: AgentCreate['capabilities']) => caps.map((c) => ({ name: c.name, limits: c.limits ?? {} }));

/**
 * Every change to an agent or its capabilities moves the `agents` counter in the same
 * transaction: each worker's decision cache keys on it, so the next call sees the change.
 */
export function createAgent(ctx: AppContext, input: AgentCreate): Agent {
  const agentId = input.agent_id ?? defaultAgentId(ctx.config.issuerHost, input.name);
  const problem = spiffeIdProblem(agentId);
  if (problem) throw errors.invalidRequest(`agent_id: ${problem}`, { issues: [{ path: 'agent_id', message: problem, code: 'custom' }] });
  return onDuplicate(`an agent ${agentId} exists`, () =>
    ctx.store.transaction(() => {
      if (ctx.store.agents.get(agentId)) throw errors.conflict(`an agent ${agentId} exists`);
      const agent = ctx.store.agents.create(
        agentId,
        { name: input.name, mode: input.mode, public_jwk: publicJwk(input.public_jwk), roles: input.roles, attributes: input.attributes },
        capabilities(input.capabilities),
      );
      ctx.store.settings.bump('agents');
      return agent;
    }),
  );
}

export function updateAgent(ctx: AppContext, agentId: string, patch: AgentPatch): Agent {
  return ctx.store.transaction(() => {
    const cur = mustGet(ctx, agentId);
    const agent = ctx.store.agents.update(
      agentId,
      {
        name: patch.name ?? cur.name,
        mode: patch.mode ?? cur.mode,
        public_jwk: patch.public_jwk ? publicJwk(patch.public_jwk) : cur.public_jwk,
        roles: patch.roles ?? cur.roles,
        attributes: patch.attributes ?? cur.attributes,
      },
      patch.capabilities ? capabilities(patch.capabilities) : undefined,
    )!;
    ctx.store.settings.bump('agents');
    return agent;
  });
}

/** Adds or changes one capability; a changed limit applies to the agent's next call. */
export function putCapability(ctx: AppContext, agentId: string, name: string, limits: Record<string, unknown>): { name: string; limits: Record<string, unknown> } {
  ctx.store.transaction(() => {
    mustGet(ctx, agentId);
    ctx.store.agents.putCapability(agentId, name, limits);
    ctx.store.settings.bump('agents');
  });
  return { name, limits };
}

export function deleteCapability(ctx: AppContext, agentId: string, name: string): void {
  ctx.store.transaction(() => {
    mustGet(ctx, agentId);
    if (!ctx.store.agents.deleteCapability(agentId, name)) throw errors.notFound(`the agent has no capability ${name}`);
    ctx.store.settings.bump('agents');
  });
}

/** Final: the agent's tokens and assertions stop working. */
export function revokeAgent(ctx: AppContext, agentId: string): void {
  ctx.store.transaction(() => {
    mustGet(ctx, agentId);
    ctx.store.agents.revoke(agentId);
    ctx.store.settings.bump('agents');
  });
}

export function deleteAgent(ctx: AppContext, agentId: string): void {
  onStillReferenced(`agent ${agentId} still has records that refer to it; revoke it instead`, () =>
    ctx.store.transaction(() => {
      if (!ctx.store.agents.delete(agentId)) throw errors.notFound(`no agent ${agentId}`);
      ctx.store.settings.bump('agents');
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
    (req, res) => void res.status(201).json(agentJson(createAgent(ctx, parseWith(agentCreate, req.body)))),
  );

  adminRoute(
    router,
    { method: 'get', path: '/agents', tags, summary: 'List the agents', responses: { 200: { description: 'the agents', schema: listOf(agentView) } } },
    (_req, res) => void res.json({ data: ctx.store.agents.list().map(agentJson) }),
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
    (req, res) => {
      const agentId = param(req, 'agent_id');
      const name = parseWith(capabilityName, param(req, 'name'), 'name');
      const { limits } = parseWith(capabilityPut, req.body === undefined ? {} : req.body);
      res.json(putCapability(ctx, agentId, name, limits ?? {}));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/agents/{agent_id}/capabilities/{name}', expressPath: `${idPath}/capabilities/:name`, tags, summary: 'Remove a capability', responses: { 204: 'removed' } },
    (req, res) => {
      deleteCapability(ctx, param(req, 'agent_id'), param(req, 'name'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/agents/{agent_id}/revoke', expressPath: `${idPath}/revoke`, tags,
      summary: 'Revoke an agent: its tokens and assertions stop working', responses: { 204: 'revoked' },
    },
    (req, res) => {
      revokeAgent(ctx, param(req, 'agent_id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/agents/{agent_id}', expressPath: idPath, tags, summary: 'Read an agent', responses: { 200: { description: 'the agent', schema: agentView } } },
    (req, res) => void res.json(agentJson(mustGet(ctx, param(req, 'agent_id')))),
  );

  adminRoute(
    router,
    {
      method: 'patch', path: '/agents/{agent_id}', expressPath: idPath, tags,
      summary: 'Change an agent: name, mode, roles, capabilities and attributes (each replaced whole), public_jwk (key rotation)',
      request: agentPatch,
      responses: { 200: { description: 'the agent', schema: agentView } },
    },
    (req, res) => {
      const patch = parseWith(agentPatch, req.body);
      res.json(agentJson(updateAgent(ctx, param(req, 'agent_id'), patch)));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/agents/{agent_id}', expressPath: idPath, tags, summary: 'Delete an agent', responses: { 204: 'deleted' } },
    (req, res) => {
      deleteAgent(ctx, param(req, 'agent_id'));
      res.status(204).end();
    },
  );
}
