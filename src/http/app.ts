import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler } from 'express';
import cookieParser from 'cookie-parser';
import type { AppContext } from '../context.js';
import { errorHandler, errors } from '../errors.js';
import { discoveryRouter } from './discovery.js';
import { oauthRouter } from '../oauth/router.js';
import { adminRouter } from '../admin/router.js';
import { mcpRouter } from '../mcp/router.js';
import { mcpAdminRouter } from '../mcp/admin-router.js';
import { requireAdmin } from '../admin/auth.js';
import { ssfRouter } from '../ssf/router.js';
import { samlRouter } from '../saml/router.js';
import { samlAdminRouter } from '../saml/admin-router.js';
import { agentsRouter } from '../agents/router.js';
import { adminApprovalsRouter } from '../agents/admin-approvals.js';
import { badPathEncoding, bareNotFound } from './error-shapes.js';
import { consoleRouter } from '../console/router.js';

declare module 'express-serve-static-core' {
  interface Request {
    id: string;
    log: import('pino').Logger;
  }
}

/** One child logger per request, bound to its id (an incoming `X-Request-Id` is reused, else made). */
function requestContext(ctx: AppContext): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    req.id = incoming && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', req.id);
    req.log = ctx.logger.child({ req_id: req.id });
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      // Path only: query strings can carry codes and tokens. Debug level keeps hot paths quiet.
      req.log.debug(
        { method: req.method, path: req.path, status: res.statusCode, ms: Number(process.hrtime.bigint() - start) / 1e6 },
        'request',
      );
    });
    next();
  };
}

export function createApp(ctx: AppContext): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestContext(ctx));
  app.use(express.json({ limit: '256kb', type: ['application/json', 'application/*+json'] }));
  app.use(express.urlencoded({ extended: false, limit: '64kb', parameterLimit: 100 }));
  app.use(cookieParser());

  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  // The agent endpoints first: the decision endpoint is the hottest path.
  app.use(agentsRouter(ctx));
  app.use(discoveryRouter(ctx));
  app.use(oauthRouter(ctx));
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
  app.use(errorHandler(ctx.logger));
  return app;
}
