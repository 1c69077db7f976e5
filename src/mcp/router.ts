import { Router } from 'express';
import type { AppContext } from '../context.js';
import { ProtocolError } from '../errors.js';

/** The MCP gateway. Every request needs an agent access token for this resource. */
export function mcpRouter(ctx: AppContext): Router {
  const router = Router();
  const challenge = `Bearer resource_metadata="${ctx.urls.protectedResource}"`;
  router.use(async (req, _res, next) => {
    const m = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    try {
      if (!m) throw new Error('no bearer token');
      await ctx.keys.verify(m[1]!, 'EdDSA', { issuer: ctx.urls.issuer, audience: ctx.urls.mcp, typ: 'at+jwt' });
    } catch {
      next(new ProtocolError(401, 'invalid_token', 'a valid agent access token for this resource is required', {}, { 'WWW-Authenticate': challenge }));
      return;
    }
    next();
  });
  return router;
}
