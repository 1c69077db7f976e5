import { Router, type RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { agentRoutes } from './agents.js';
import { applicationRoutes } from './applications.js';
import { authorizationDetailsTypeRoutes } from './authorization-details-types.js';
import { auditRoutes } from './audit.js';
import { delegationRoutes } from './delegations.js';
import { entityRoutes } from './entities.js';
import { requireAdmin } from './auth.js';
import { keyRoutes } from './keys.js';
import { openApiDocument, registerOperation } from './openapi.js';
import { policyRoutes } from './policy.js';
import { relationshipRoutes } from './relationships.js';
import { roleRoutes } from './roles.js';
import { ruleRoutes } from './rules.js';
import { trustedIssuerRoutes } from './trusted-issuers.js';
import { usageRoutes } from './usage.js';
import { userRoutes } from './users.js';

/** Admin answers are never cached; a body that is not JSON is refused rather than read as a form. */
const adminRequest: RequestHandler = (req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (hasBody && !req.is(['application/json', 'application/*+json'])) {
    next(errors.invalidRequest('the request body must be JSON (Content-Type: application/json)'));
    return;
  }
  next();
};

/** The management API at /admin/v1. */
export function adminRouter(ctx: AppContext): Router {
  const router = Router();

  // The document is public: served before the token check.
  registerOperation({
    method: 'get', path: '/openapi.json', tags: ['meta'], auth: false,
    summary: 'This OpenAPI 3.1 document', responses: { 200: 'the document' },
  });
  router.get('/openapi.json', (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.json(openApiDocument(ctx.urls.issuer));
  });

  router.use(requireAdmin(ctx));
  router.use(adminRequest);
  applicationRoutes(router, ctx);
  authorizationDetailsTypeRoutes(router, ctx);
  userRoutes(router, ctx);
  delegationRoutes(router, ctx);
  roleRoutes(router, ctx);
  usageRoutes(router, ctx);
  agentRoutes(router, ctx);
  entityRoutes(router, ctx);
  relationshipRoutes(router, ctx);
  ruleRoutes(router, ctx);
  policyRoutes(router, ctx);
  keyRoutes(router, ctx);
  trustedIssuerRoutes(router, ctx);
  auditRoutes(router, ctx);
  return router;
}
