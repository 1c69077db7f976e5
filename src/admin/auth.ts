import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { bearerToken } from '../oauth/bearer.js';

/** The management API's bearer token, compared by hash in constant time. */
export function requireAdmin(ctx: AppContext): RequestHandler {
  return (req, _res, next) => {
    const token = bearerToken(req.get('authorization'));
    if (token === undefined || !constantTimeEqual(sha256(token), ctx.adminTokenHash)) {
      next(errors.invalidToken(undefined, {}, { 'WWW-Authenticate': 'Bearer' }));
      return;
    }
    next();
  };
}
