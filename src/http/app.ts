import express, { type Express, type RequestHandler } from 'express';
import cookieParser from 'cookie-parser';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { checkJsonDepth, expressErrorHandler, refuseAnnouncedOversize, FORM_BODY_LIMIT, JSON_BODY_LIMIT, requestFinished, requestIdOf } from './edge.js';
import { mountOperations } from './health.js';
import { resumeRequestSpan, startRequestSpan } from '../telemetry.js';
import { mountEdgeRoutes } from './routes.js';
import { discoveryRouter } from './discovery.js';
import { oauthRouter } from '../oauth/router.js';
import { accountRouter } from '../account/router.js';
import { adminRouter } from '../admin/router.js';
import { mcpRouter } from '../mcp/router.js';
import { mcpAdminRouter } from '../mcp/admin-router.js';
import { adminBeforeBody, requireAdmin } from '../admin/auth.js';
import { ssfRouter } from '../ssf/router.js';
import { samlRouter } from '../saml/router.js';
import { samlAdminRouter } from '../saml/admin-router.js';
import { agentsRouter } from '../agents/router.js';
import { adminApprovalsRouter } from '../agents/admin-approvals.js';
import { badPathEncoding, bareNotFound } from './error-shapes.js';
import { authzenMetadataRouter } from './authzen-metadata.js';
import { consoleRouter } from '../console/router.js';

declare module 'express-serve-static-core' {
  interface Request {
    id: string;
    log: import('pino').Logger;
  }
}

/** One child logger per request, bound to its id; every answer ends with the edge's log line and metrics. */
function requestContext(ctx: AppContext): RequestHandler {
  return (req, res, next) => {
    req.id = requestIdOf(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', req.id);
    const traced = startRequestSpan(req.method, req.path);
    const traceId = traced?.span.spanContext().traceId;
    req.log = ctx.logger.child(traceId ? { req_id: req.id, trace_id: traceId } : { req_id: req.id });
    const startNs = process.hrtime.bigint();
    const path = req.path;
    res.on('finish', () => {
      // The route pattern, not the path: ids stay out of the metrics.
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      requestFinished(ctx, req.log, { method: req.method, path, route, status: res.statusCode, startNs });
      if (traced) {
        traced.span.updateName(`${req.method} ${route}`);
        traced.span.setAttributes({ 'http.route': route, 'http.response.status_code': res.statusCode, 'gatehouse.request_id': req.id });
        if (res.statusCode >= 500) traced.span.setStatus({ code: 2 });
        traced.span.end();
      }
    });
    if (traced) {
      res.locals.traceRun = traced.run;
      traced.run(next);
    } else next();
  };
}

/** Every JSON body is bounded in depth before it is parsed (a 400 at the edge, for every endpoint). */
const boundedJson = express.json({
  limit: JSON_BODY_LIMIT,
  type: ['application/json', 'application/*+json'],
  verify: (_req, _res, buf) => checkJsonDepth(buf),
});

export function createApp(ctx: AppContext): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestContext(ctx));
  // The route table first (the decision endpoint is the hottest path), ahead of the body
  // parsers: each route asks who is calling before it reads its body.
  mountEdgeRoutes(ctx, app);
  app.use(authzenMetadataRouter(ctx));
  // The management API and the SSF stream API (the same token) authenticate before any body is read.
  app.use(['/admin/v1', '/v1/ssf'], adminBeforeBody(ctx));
  app.use(refuseAnnouncedOversize(Math.max(JSON_BODY_LIMIT, FORM_BODY_LIMIT)));
  app.use(boundedJson);
  app.use(express.urlencoded({ extended: false, limit: FORM_BODY_LIMIT, parameterLimit: 100 }));
  app.use(cookieParser());
  app.use(resumeRequestSpan);

  mountOperations(ctx, app);
  app.use(agentsRouter(ctx));
  app.use(discoveryRouter(ctx));
  app.use(oauthRouter(ctx));
  app.use(accountRouter(ctx));
  app.use('/admin/v1/mcp', requireAdmin(ctx), mcpAdminRouter(ctx));
  app.use('/admin/v1/approvals', requireAdmin(ctx), adminApprovalsRouter(ctx));
  app.use('/admin/v1/saml', requireAdmin(ctx), samlAdminRouter(ctx));
  app.use('/admin/v1', adminRouter(ctx));
  app.use('/mcp', mcpRouter(ctx));
  app.use(ssfRouter(ctx));
  app.use(samlRouter(ctx));
  app.use('/console', consoleRouter(ctx));

  app.use((_req, _res, next) => next(errors.notFound('no such endpoint')));
  app.use(['/admin/v1', '/v1/ssf'], bareNotFound);
  app.use(badPathEncoding);
  app.use(expressErrorHandler(ctx.logger));
  return app;
}
