import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { authenticateClient } from './client-auth.js';
import { formBody, single } from './params.js';

/**
 * POST /oauth/token/revoke (RFC 7009): a refresh token's whole family is revoked when it
 * belongs to the calling application. Access tokens, unknown tokens and other applications'
 * tokens are left alone. Always 200 with an empty body.
 */
export function revokeEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    // 1. The caller: a public app sends client_id, one with a secret authenticates
    const body = formBody(req);
    const caller = await authenticateClient(ctx, req, body);
    // 2. The token
    const token = single(body, 'token');
    if (token === undefined) throw errors.invalidRequest('token is required');
    // 3. Its family, when it is this application's refresh token
    if (token.length <= 512) {
      const family = await ctx.store.oauth.familyOfRefresh(sha256(token));
      if (family && family.client_id === caller.app.client_id) await ctx.store.oauth.revokeFamily(family.id);
    }
    res.status(200).end();
  };
}
