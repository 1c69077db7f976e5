import type { Express, Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Logger } from '../logger.js';
import { decisionEndpoint } from '../agents/authorize.js';
import { transactionTokenEndpoint } from '../agents/transaction-token.js';
import { OAUTH_CORS_HEADERS } from '../oauth/router.js';
import { tokenResponse } from '../oauth/token.js';
import { NO_STORE_HEADERS, writeJson } from './edge.js';

/** What an endpoint core sees of the request, on either transport. */
export interface EdgeRequest {
  get(name: string): string | undefined;
  ip: string | undefined;
  socket: { remoteAddress?: string | undefined };
  log: Logger;
}

/**
 * An endpoint whose core takes the parsed body and answers JSON (200), or throws a
 * ProtocolError. Declared once, served by the Express app and by the raw fast path alike,
 * always with no-store headers and `headers`.
 */
export interface EdgeRoute {
  path: string;
  body: 'form' | 'json';
  headers?: Readonly<Record<string, string>>;
  handle(ctx: AppContext, body: Record<string, unknown>, req: EdgeRequest): Promise<unknown>;
}

const OAUTH_GRANTS = new Set(['authorization_code', 'refresh_token', 'client_credentials']);

/** The route table of the hottest endpoints: token issue, binding, decision. */
export const EDGE_ROUTES: readonly EdgeRoute[] = [
  {
    path: '/oauth/token',
    body: 'form',
    headers: OAUTH_CORS_HEADERS,
    async handle(ctx, body, req) {
      const answer = await tokenResponse(ctx, req, body);
      const grant = body.grant_type;
      if (typeof grant === 'string' && OAUTH_GRANTS.has(grant)) ctx.metrics.tokens.inc({ grant });
      return answer;
    },
  },
  { path: '/apis/regional/v1/ai/auth/transaction-token', body: 'json', handle: (ctx, body, req) => transactionTokenEndpoint(ctx, body, req) },
  { path: '/apis/regional/v1/agents/authorize', body: 'json', handle: (ctx, body) => decisionEndpoint(ctx, body) },
];

const asObject = (b: unknown): Record<string, unknown> => (b && typeof b === 'object' ? (b as Record<string, unknown>) : {});

/** Mounts the route table on the Express app: the path for whatever the fast path leaves to Express. */
export function mountEdgeRoutes(ctx: AppContext, app: Express, routes: readonly EdgeRoute[] = EDGE_ROUTES): void {
  for (const route of routes) {
    app.post(route.path, async (req: Request, res: Response) => {
      for (const [k, v] of Object.entries({ ...route.headers, ...NO_STORE_HEADERS })) res.setHeader(k, v);
      if (route.body === 'form' && !req.is('application/x-www-form-urlencoded')) {
        throw errors.invalidRequest('the body must be application/x-www-form-urlencoded');
      }
      const answer = await route.handle(ctx, asObject(req.body), req as EdgeRequest);
      writeJson(res, 200, answer);
    });
  }
}
