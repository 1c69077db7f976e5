import type { ErrorRequestHandler } from 'express';
import { errors, ProtocolError } from '../errors.js';

/**
 * The management API's unknown id is exactly `{"error":"not_found"}`, whichever
 * router under /admin/v1 (or the SSF stream endpoints, which share its token) threw it. The
 * detail goes to the debug log instead of the body.
 */
export const bareNotFound: ErrorRequestHandler = (err, req, _res, next) => {
  if (err instanceof ProtocolError && err.error === 'not_found' && err.description !== undefined) {
    req.log?.debug({ detail: err.description }, 'not found');
    next(errors.notFound(undefined, undefined, err.headers));
    return;
  }
  next(err);
};

/**
 * A path parameter with broken percent-encoding (`/users/%E0%A4%A`): the router throws a
 * URIError marked 400 while decoding it. That is the caller's mistake, not a 500.
 */
export const badPathEncoding: ErrorRequestHandler = (err, _req, _res, next) => {
  const e = err as { status?: unknown } | undefined;
  if (err instanceof URIError && e?.status === 400) {
    next(errors.invalidRequest('the request path is not valid percent-encoding'));
    return;
  }
  next(err);
};
