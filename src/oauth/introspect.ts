import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { verifyAccessToken } from './access-token.js';
import { authenticateClient } from './client-auth.js';
import { formBody, single } from './params.js';

const INACTIVE = JSON.stringify({ active: false });

/**
 * POST /oauth/token/introspect (RFC 7662): an application with a secret asks about an access
 * token. Active for any good access token of this project (the description: "true when the
 * token is a good access token"), as Keycloak and node-oidc-provider answer any confidential
 * client, so a resource server can check a public SPA's token; any other token gets exactly
 * {"active": false}.
 */
export function introspectEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    // 1. The caller
    const body = formBody(req);
    await authenticateClient(ctx, req, body, { requireSecret: true });
    // 2. The token
    const token = single(body, 'token');
    if (token === undefined) throw errors.invalidRequest('token is required');
    const claims = await verifyAccessToken(ctx, token);
    // 3. The answer (the caller was authenticated with its secret above)
    if (!claims) {
      res.type('application/json').send(INACTIVE);
      return;
    }
    res.json({
      active: true,
      scope: claims.scope ?? '',
      client_id: claims.client_id,
      sub: claims.sub,
      iss: claims.iss,
      exp: claims.exp,
      iat: claims.iat,
      token_type: 'Bearer',
      aud: claims.aud,
      ...(claims.jti ? { jti: claims.jti } : {}),
    });
  };
}
