import { Router, type RequestHandler } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { accessCredential } from '../oauth/bearer.js';
import { checkSenderConstraint, refusedTokenChallenge } from '../oauth/dpop.js';
import { verifyAgentAccessToken, type AgentPrincipal } from '../authz/agent-access-token.js';
import { agentKnown } from '../authz/agent-cache.js';
import { authorize } from '../authz/pipeline.js';
import { createGatewayServer, resolveToolCall } from './gateway-server.js';
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
  router.post('/', stepUp(ctx, pool), handlePost(ctx, pool, validator));
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
  res.setHeader('Access-Control-Expose-Headers', 'WWW-Authenticate, DPoP-Nonce, Mcp-Session-Id, Mcp-Protocol-Version');
  if (req.method !== 'OPTIONS') return next();
  res.setHeader('Access-Control-Allow-Methods', 'POST, GET, DELETE, OPTIONS');
  res.setHeader('Access-Control-Allow-Headers', 'Authorization, DPoP, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID');
  res.setHeader('Access-Control-Max-Age', '600');
  res.sendStatus(204);
};

/**
 * Steps: an access token (Bearer, or DPoP with its proof) → an agent access token of ours for
 * this resource, of an agent not revoked → a DPoP-bound token's proof for this request; else
 * 401 with the challenge.
 */
function requireAgentToken(ctx: AppContext): RequestHandler {
  // Exactly this challenge, so MCP clients find the protected-resource metadata; a token that
  // came under the DPoP scheme is refused with a DPoP challenge carrying the same metadata.
  const metadata = `resource_metadata="${ctx.urls.protectedResource}"`;
  const challenge = `Bearer ${metadata}`;
  const unauthorized = (description: string, scheme?: 'Bearer' | 'DPoP') =>
    new ProtocolError(401, 'invalid_token', description, {}, scheme ? refusedTokenChallenge(scheme, description, challenge, metadata) : { 'WWW-Authenticate': challenge });
  return async (req, res, next) => {
    const credential = accessCredential(req.get('authorization'));
    if (credential === undefined) return next(unauthorized('an agent access token for this resource is required'));
    let principal: AgentPrincipal;
    try {
      principal = await verifyAgentAccessToken(ctx, credential.token, ctx.urls.mcp);
    } catch (err) {
      if (err instanceof ProtocolError) return next(unauthorized(err.description ?? 'the access token is not valid', credential.scheme));
      return next(err);
    }
    try {
      await checkSenderConstraint(ctx, req, credential, principal.claims, {
        htm: req.method,
        htu: ctx.urls.mcp,
        extraChallenge: metadata,
      });
    } catch (err) {
      return next(err);
    }
    res.locals.mcpPrincipal = principal;
    next();
  };
}

interface JsonRpcMessage { method?: unknown; params?: { name?: unknown; arguments?: unknown } }

const messagesOf = (body: unknown): JsonRpcMessage[] =>
  (Array.isArray(body) ? body : [body]).filter((m): m is JsonRpcMessage => typeof m === 'object' && m !== null);

const quoted = (s: string) => s.replace(/[^\x20-\x7e]|["\\]/g, '');

/**
 * A tools/call whose tool needs a capability the agent holds but its token does not carry: 403
 * with `WWW-Authenticate: Bearer error="insufficient_scope", scope="<the capability>"` and the
 * protected-resource metadata, so an MCP client can
 * get a token with that capability and try again (step-up). The refusal is a decision like any
 * other (a deny in the audit trail). A capability the agent does not hold at all cannot be
 * stepped up to: that call goes on to the decision order and its tool error says why.
 */
function stepUp(ctx: AppContext, pool: UpstreamPool): RequestHandler {
  return async (req, res, next) => {
    const principal = res.locals.mcpPrincipal!;
    try {
      for (const m of messagesOf(req.body)) {
        if (m.method !== 'tools/call' || typeof m.params?.name !== 'string') continue;
        const resolved = await resolveToolCall(pool, m.params.name, m.params.arguments);
        if (!resolved) continue;
        const { action } = resolved.target;
        if (principal.capabilities.includes(action)) continue;
        const state = await agentKnown(ctx, principal.agent.agent_id);
        if (!state?.agent.capabilities.some((c) => c.name === action)) continue;
        const call = 'error' in resolved.mapped ? { ...resolved.target, context: {} } : resolved.mapped;
        const result = await authorize(ctx, { via: 'mcp', principal, ...call });
        const reason = result.outcome === 'decided' ? result.decision.reason : `not_granted: ${action} (capability)`;
        // RFC 6750 section 3.1: the scope this request needs; the client keeps what it holds besides.
        const scope = quoted(action);
        const description = `the access token does not carry the capability ${action}`;
        return next(
          new ProtocolError(403, 'insufficient_scope', description, { reason }, {
            'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}", resource_metadata="${ctx.urls.protectedResource}", error_description="${quoted(description)}"`,
          }),
        );
      }
    } catch (err) {
      return next(err);
    }
    next();
  };
}

/**
 * Steps: a server bound to the principal → a stateless transport → the SDK handles the JSON-RPC
 * message(s). A batch with a tools/call is answered as an event stream, so the upstream's
 * progress and log notifications reach the caller before the result; anything else as JSON.
 */
function handlePost(ctx: AppContext, pool: UpstreamPool, validator: jsonSchemaValidator): RequestHandler {
  return async (req, res, next) => {
    const principal = res.locals.mcpPrincipal!;
    const server = createGatewayServer(ctx, pool, principal, validator);
    const streams = messagesOf(req.body).some((m) => m.method === 'tools/call');
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !streams });
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
