import { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { adminRoute, param, parseWith } from '../admin/route.js';
import { connectionCreate, connectionJson, connectionPut, connectionView, createConnection, deleteConnection, replaceConnection } from './connections.js';

const tags = ['SAML'];

/**
 * `/admin/v1/saml/connections`: SAML connections. Mounted at `/admin/v1/saml` behind requireAdmin;
 * the OpenAPI paths are the full ones.
 */
export function samlAdminRouter(ctx: AppContext): Router {
  const router = Router();
  const named = async (name: string) => {
    const c = await ctx.store.saml.get(name);
    if (!c) throw errors.notFound(`no SAML connection named ${name}`);
    return c;
  };

  adminRoute(
    router,
    {
      method: 'post', path: '/saml/connections', expressPath: '/connections', tags, summary: 'Create a SAML connection',
      request: connectionCreate,
      responses: { 201: { description: 'the connection', schema: connectionView }, 409: 'the name (or an sp entity_id) is taken' },
    },
    async (req, res) => {
      const body = parseWith(connectionCreate, req.body ?? {});
      res.status(201).json(connectionJson(ctx, await createConnection(ctx, body)));
    },
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/saml/connections', expressPath: '/connections', tags, summary: 'List the SAML connections',
      responses: { 200: { description: 'the connections', schema: z.object({ data: z.array(connectionView) }) } },
    },
    async (_req, res) => void res.json({ data: (await ctx.store.saml.list()).map((c) => connectionJson(ctx, c)) }),
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/saml/connections/{name}', expressPath: '/connections/:name', tags, summary: 'Read a SAML connection',
      responses: { 200: { description: 'the connection', schema: connectionView } },
    },
    async (req, res) => void res.json(connectionJson(ctx, await named(param(req, 'name')))),
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/saml/connections/{name}', expressPath: '/connections/:name', tags, summary: 'Replace a SAML connection (every field; `kind` defaults to the current one)',
      request: connectionPut,
      responses: { 200: { description: 'the connection', schema: connectionView }, 409: 'the sp entity_id is taken' },
    },
    async (req, res) => {
      const name = param(req, 'name');
      const current = await named(name);
      // `kind` may be left out: the connection keeps its kind
      const sent = req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? req.body : {};
      const body = parseWith(connectionPut, { kind: current.kind, ...sent });
      res.json(connectionJson(ctx, await replaceConnection(ctx, name, body)));
    },
  );

  adminRoute(
    router,
    {
      method: 'delete', path: '/saml/connections/{name}', expressPath: '/connections/:name', tags, summary: 'Delete a SAML connection',
      responses: { 204: 'deleted' },
    },
    async (req, res) => {
      await deleteConnection(ctx, param(req, 'name'));
      res.status(204).end();
    },
  );

  return router;
}
