import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { delegationJson, grantDelegation, withdrawDelegation } from '../agents/delegation.js';
import { adminRoute, param, parseWith } from './route.js';
import { delegationPut, delegationView, listOf } from './schemas.js';

/** A person's consents that agents act for them: `/users/{id}/delegations[/{agent_id}]`. */
export function delegationRoutes(router: Router, ctx: AppContext): void {
  const tags = ['users'];
  // Agent IDs are URLs: sent URL-encoded they are one path segment; a wildcard also takes them unencoded.
  const agentPath = '/users/:id/delegations/*agent_id';

  adminRoute(
    router,
    {
      method: 'get', path: '/users/{id}/delegations', tags, summary: 'The agents a person lets act for them, with the capabilities each may use',
      responses: { 200: { description: 'the consents', schema: listOf(delegationView) } },
    },
    async (req, res) => {
      const id = param(req, 'id');
      if (!(await ctx.store.users.get(id))) throw errors.notFound(`no person ${id}`);
      res.json({ data: (await ctx.store.delegations.listForUser(id)).map(delegationJson) });
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/users/{id}/delegations/{agent_id}', expressPath: agentPath, tags,
      summary: 'Let a delegated agent act for the person with these capabilities (each one the agent holds); narrowing emits token-claims-change',
      request: delegationPut,
      responses: { 204: 'recorded' },
    },
    async (req, res) => {
      const { capabilities } = parseWith(delegationPut, req.body);
      await grantDelegation(ctx, param(req, 'id'), param(req, 'agent_id'), capabilities, 'admin');
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'delete', path: '/users/{id}/delegations/{agent_id}', expressPath: agentPath, tags,
      summary: "Withdraw a person's consent: every token of a chain through it stops at its next decision; emits token-claims-change",
      responses: { 204: 'withdrawn' },
    },
    async (req, res) => {
      const userId = param(req, 'id');
      const agentId = param(req, 'agent_id');
      if (!(await withdrawDelegation(ctx, userId, agentId, 'admin'))) throw errors.notFound(`the person has not let ${agentId} act for them`);
      res.status(204).end();
    },
  );
}
