import { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { pdpMetadata } from '../authzen/metadata.js';
import { echoRequestId } from './edge.js';

/**
 * The AuthZEN PDP metadata (the evaluation and search endpoints are in the edge's route
 * table): the `X-Request-ID` a caller sends comes back unchanged, errors included.
 */
export function authzenMetadataRouter(ctx: AppContext): Router {
  const router = Router();
  // The metadata is at the well-known URI formed from the PDP identifier (RFC 8615): the suffix
  // inserted after the host, so an issuer with a path (`https://host/tenant`) is also served at
  // `/.well-known/authzen-configuration/tenant`.
  const issuerPath = new URL(ctx.urls.issuer).pathname.replace(/\/$/, '');
  const metadataPaths = ['/.well-known/authzen-configuration', ...(issuerPath ? [`/.well-known/authzen-configuration${issuerPath}`] : [])];
  router.get(metadataPaths, echoRequestId, (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.json(pdpMetadata(ctx));
  });
  router.all(metadataPaths, echoRequestId, (_req, res, next) => {
    res.setHeader('Allow', 'GET, HEAD');
    next(errors.methodNotAllowed('the PDP metadata takes GET'));
  });
  return router;
}
