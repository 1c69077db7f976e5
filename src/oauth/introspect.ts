import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { verifyAccessToken } from './access-token.js';
import { authenticateClient } from './client-auth.js';
import { boundKey } from './dpop.js';
import { formBody, single } from './params.js';

const INACTIVE = JSON.stringify({ active: false });

/**
 * POST /oauth/token/introspect (RFC 7662): an application with a secret asks about an access
 * token. Active only for a good access token whose client or audience is the caller; any
 * other token gets exactly {"active": false}.
 */
export function introspectEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    // 1. The caller
    const body = formBody(req);
    const caller = await authenticateClient(ctx, req, body, { requireSecret: true });
    // 2. The token
    const token = single(body, 'token');
    if (token === undefined) throw errors.invalidRequest('token is required');
    const claims = await verifyAccessToken(ctx, token);
    // 3. Only the token's client or audience may see it
    const aud = Array.isArray(claims?.aud) ? claims.aud : claims?.aud !== undefined ? [claims.aud] : [];
    const callerId = caller.app.client_id;
    if (!claims || (claims.client_id !== callerId && !aud.includes(callerId))) {
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
      // RFC 9449 section 6.2: a DPoP-bound token says so, with its key's thumbprint.
      ...(boundKey(claims) ? { token_type: 'DPoP', cnf: { jkt: boundKey(claims) } } : { token_type: 'Bearer' }),
      aud: claims.aud,
      ...(claims.jti ? { jti: claims.jti } : {}),
      // The delegation the token carries: who acts (nested per hop, RFC 8693), who may act.
      ...(claims.act !== undefined ? { act: claims.act } : {}),
      ...(claims.may_act !== undefined ? { may_act: claims.may_act } : {}),
      ...(claims.authorization_details !== undefined ? { authorization_details: claims.authorization_details } : {}),
    });
  };
}
