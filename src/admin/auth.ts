import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';

/** The management API's bearer token, compared by hash in constant time. */
export function requireAdmin(ctx: AppContext): RequestHandler {
  return (req, _res, next) => {
    const header = req.get('authorization') ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m || !constantTimeEqual(sha256(m[1]!), ctx.adminTokenHash)) {
      next(errors.invalidToken(undefined, {}, { 'WWW-Authenticate': 'Bearer' }));
      return;
    }
    next();
  };
}
