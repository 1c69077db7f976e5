import { Router, type RequestHandler } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { verifyAgentAccessToken, type AgentPrincipal } from '../agents/access-token.js';
import { createGatewayServer } from './gateway-server.js';
import { UpstreamPool } from './upstream-pool.js';

declare module 'express-serve-static-core' {
  interface Locals {
    mcpPrincipal?: AgentPrincipal;
  }
}

/**
 * The MCP gateway at `/mcp` (Streamable HTTP, stateless: every POST carries its own bearer
 * token and gets a fresh MCP server bound to it, so any worker process can answer any request).
 * GET (a standalone event stream) and DELETE (ending a session) have nothing to serve: 405.
 */
export function mcpRouter(ctx: AppContext): Router {
  const router = Router();
  const pool = new UpstreamPool(ctx);
  const validator = new AjvJsonSchemaValidator();
  router.use(cors);
  router.use(requireAgentToken(ctx));
  router.post('/', handlePost(ctx, pool, validator));
  router.all('/', (_req, _res, next) =>
    next(errors.methodNotAllowed('this stateless MCP endpoint serves POST only', {}, { Allow: 'POST' })),
  );
  return router;
}

/**
 * Browser-based MCP clients (an inspector, a web agent) call cross-origin: the preflight needs
 * no token, and the 401's WWW-Authenticate must be readable for them to find the metadata.
 * Bearer tokens, not cookies, so any origin is fine.
 */
const cors: RequestHandler = (req, res, next) => {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Expose-Headers', 'WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version');
  if (req.method !== 'OPTIONS') return next();
  res.setHeader('Access-Control-Allow-Methods', 'POST, GET, DELETE, OPTIONS');
  res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID');
  res.setHeader('Access-Control-Max-Age', '600');
  res.sendStatus(204);
};

/** Steps: a bearer token → an agent access token of ours for this resource, of an agent not revoked; else 401 with the challenge. */
function requireAgentToken(ctx: AppContext): RequestHandler {
  // CONTRACT 6: exactly this challenge, so MCP clients find the protected-resource metadata.
  const challenge = `Bearer resource_metadata="${ctx.urls.protectedResource}"`;
  const unauthorized = (description: string) =>
    new ProtocolError(401, 'invalid_token', description, {}, { 'WWW-Authenticate': challenge });
  return async (req, res, next) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
    if (!m) return next(unauthorized('an agent access token for this resource is required'));
    try {
      res.locals.mcpPrincipal = await verifyAgentAccessToken(ctx, m[1]!, ctx.urls.mcp);
    } catch (err) {
      if (err instanceof ProtocolError) return next(unauthorized(err.description ?? 'the access token is not valid'));
      return next(err);
    }
    next();
  };
}

/** Steps: a server bound to the principal → a stateless transport → the SDK handles the JSON-RPC message(s). */
function handlePost(ctx: AppContext, pool: UpstreamPool, validator: jsonSchemaValidator): RequestHandler {
  return async (req, res, next) => {
    const principal = res.locals.mcpPrincipal!;
    const server = createGatewayServer(ctx, pool, principal, validator);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      req.log.error({ err }, 'mcp request failed');
      if (!res.headersSent) next(errors.serverError('the MCP request could not be handled'));
    }
  };
}
