import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { bearerToken } from '../oauth/bearer.js';

const isAdmin = (ctx: AppContext, authorization: string | undefined): boolean => {
  const token = bearerToken(authorization);
  return token !== undefined && constantTimeEqual(sha256(token), ctx.adminTokenHash);
};

/** The management API's bearer token, compared by hash in constant time. */
export function requireAdmin(ctx: AppContext): RequestHandler {
  return (req, _res, next) => {
    if (!isAdmin(ctx, req.get('authorization'))) {
      next(errors.invalidToken(undefined, {}, { 'WWW-Authenticate': 'Bearer' }));
      return;
    }
    next();
  };
}

/**
 * Ahead of the body parsers: a request that carries a body to the management API without its
 * token is answered 401 before a byte of the body is read (and the connection is closed, so
 * the rest is never read either). Requests without a body go on to their routes as before.
 */
export function adminBeforeBody(ctx: AppContext): RequestHandler {
  return (req, res, next) => {
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (!hasBody || isAdmin(ctx, req.get('authorization'))) return next();
    res.setHeader('Connection', 'close');
    next(errors.invalidToken(undefined, {}, { 'WWW-Authenticate': 'Bearer' }));
  };
}
