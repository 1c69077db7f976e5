import { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { adminRoute, param, parseWith } from '../admin/route.js';
import {
  createUpstream,
  deleteUpstream,
  isValidUpstreamName,
  publicView,
  putUpstream,
  toolMappingSchema,
  upstreamCreateSchema,
  upstreamPutSchema,
} from './upstream-config.js';

const upstreamView = z.object({
  name: z.string(),
  url: z.string(),
  header_names: z.array(z.string()),
  timeout_ms: z.number().int(),
  tools: z.record(z.string(), toolMappingSchema),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const TAGS = ['MCP gateway'];

/**
 * `/admin/v1/mcp/upstreams`: the upstream MCP servers behind `/mcp`. Mounted at `/admin/v1/mcp`
 * behind requireAdmin (so the guard covers only these paths); OpenAPI paths are the full ones.
 */
export function mcpAdminRouter(ctx: AppContext): Router {
  const router = Router();
  const named = async (name: string) => {
    const row = isValidUpstreamName(name) ? await ctx.store.mcp.get(name) : undefined;
    if (!row) throw errors.notFound(`no upstream named ${name}`);
    return row;
  };

  adminRoute(
    router,
    {
      method: 'post',
      path: '/mcp/upstreams',
      expressPath: '/upstreams',
      summary: 'Register an upstream MCP server',
      tags: TAGS,
      request: upstreamCreateSchema,
      responses: { 201: { description: 'the upstream', schema: upstreamView }, 409: 'an upstream with this name exists' },
    },
    async (req, res) => {
      const body = parseWith(upstreamCreateSchema, req.body ?? {});
      res.status(201).json(publicView(ctx, await createUpstream(ctx, body)));
    },
  );

  adminRoute(
    router,
    {
      method: 'get',
      path: '/mcp/upstreams',
      expressPath: '/upstreams',
      summary: 'List the upstream MCP servers',
      tags: TAGS,
      responses: { 200: { description: 'the upstreams', schema: z.object({ data: z.array(upstreamView) }) } },
    },
    async (_req, res) => {
      res.json({ data: (await ctx.store.mcp.list()).map((r) => publicView(ctx, r)) });
    },
  );

  adminRoute(
    router,
    {
      method: 'get',
      path: '/mcp/upstreams/{name}',
      expressPath: '/upstreams/:name',
      summary: 'One upstream MCP server',
      tags: TAGS,
      responses: { 200: { description: 'the upstream', schema: upstreamView } },
    },
    async (req, res) => {
      res.json(publicView(ctx, await named(param(req, 'name'))));
    },
  );

  adminRoute(
    router,
    {
      method: 'put',
      path: '/mcp/upstreams/{name}',
      expressPath: '/upstreams/:name',
      summary: 'Create or replace an upstream MCP server (absent `headers` keep the stored ones)',
      tags: TAGS,
      request: upstreamPutSchema,
      responses: { 200: { description: 'replaced', schema: upstreamView }, 201: { description: 'created', schema: upstreamView } },
    },
    async (req, res) => {
      const name = param(req, 'name');
      const body = parseWith(upstreamPutSchema, req.body ?? {});
      if (!isValidUpstreamName(name)) {
        throw errors.invalidRequest('name: letters, digits and single - or _ between them', {
          issues: [{ path: 'name', message: 'letters, digits and single - or _ between them', code: 'invalid_format' }],
        });
      }
      const { upstream, created } = await putUpstream(ctx, name, body);
      res.status(created ? 201 : 200).json(publicView(ctx, upstream));
    },
  );

  adminRoute(
    router,
    {
      method: 'delete',
      path: '/mcp/upstreams/{name}',
      expressPath: '/upstreams/:name',
      summary: 'Remove an upstream MCP server',
      tags: TAGS,
      responses: { 204: 'removed' },
    },
    async (req, res) => {
      const name = param(req, 'name');
      if (!isValidUpstreamName(name) || !(await deleteUpstream(ctx, name))) throw errors.notFound(`no upstream named ${name}`);
      res.status(204).end();
    },
  );

  return router;
}
