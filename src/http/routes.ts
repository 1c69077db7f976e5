import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Logger } from '../logger.js';
import { decisionEndpoint } from '../agents/decision-endpoint.js';
import { transactionTokenEndpoint } from '../agents/transaction-token.js';
import { limitAgentRequest } from '../agents/request-limits.js';
import { authenticateCaller, type Caller } from '../authzen/caller.js';
import { evaluationAnswer, evaluationsAnswer } from '../authzen/evaluate.js';
import { AUTHZEN_PATHS } from '../authzen/metadata.js';
import type { SearchKind } from '../authzen/request.js';
import { searchAnswer } from '../authzen/search.js';
import { OAUTH_CORS_HEADERS } from '../oauth/router.js';
import { tokenResponse } from '../oauth/token.js';
import { resumeRequestSpan } from '../telemetry.js';
import { checkJsonDepth, echoRequestId, refuseAnnouncedOversize, FORM_BODY_LIMIT, JSON_BODY_LIMIT, NO_STORE_HEADERS, writeJson } from './edge.js';

/** What an endpoint core sees of the request, on either transport. */
export interface EdgeRequest {
  get(name: string): string | undefined;
  ip: string | undefined;
  socket: { remoteAddress?: string | undefined };
  log: Logger;
}

/**
 * An endpoint whose core takes the parsed body and answers JSON (200), or throws a
 * ProtocolError. Declared once, served by the Express app and by the raw fast path alike, on
 * POST, with the edge's body limits, always with no-store headers and `headers`.
 */
export interface EdgeRoute {
  path: string;
  body: 'form' | 'json';
  headers?: Readonly<Record<string, string>>;
  /**
   * Who is calling, asked before the body is parsed: a caller who may not ask costs no parse.
   * Its answer is the core's `caller`.
   */
  authenticate?(ctx: AppContext, req: EdgeRequest): Promise<unknown>;
  /** `echo`: the caller's `X-Request-ID` comes back as it is (AuthZEN asks for the same id), not only a plain one */
  requestId?: 'echo';
  /** `refuse`: another method is a 405 naming POST (else it is left to the rest of the app) */
  otherMethods?: 'refuse';
  /** the body may also come as a form (the agents' JSON endpoints have always read one: their fields are strings) */
  formToo?: true;
  handle(ctx: AppContext, body: Record<string, unknown>, req: EdgeRequest, caller: unknown): Promise<unknown>;
}

const OAUTH_GRANTS = new Set(['authorization_code', 'refresh_token', 'client_credentials']);

/** An AuthZEN endpoint: the calling application's token first, then a JSON body, then the core. */
function authzenRoute(path: string, answer: (ctx: AppContext, caller: Caller, body: unknown) => Promise<unknown>): EdgeRoute {
  return {
    path,
    body: 'json',
    requestId: 'echo',
    otherMethods: 'refuse',
    authenticate: (ctx, req) => authenticateCaller(ctx, req.get('authorization'), { get: (name) => req.get(name), htu: `${ctx.urls.issuer}${path}` }),
    handle(ctx, body, req, caller) {
      if (!isJson(req.get('content-type'))) throw errors.invalidRequest('the request body must be application/json');
      return answer(ctx, caller as Caller, body);
    },
  };
}
const search = (kind: SearchKind) => (ctx: AppContext, caller: Caller, body: unknown) => searchAnswer(ctx, caller, kind, body);
const isJson = (type: string | undefined) => type !== undefined && /^application\/json[ \t]*(;|$)/i.test(type);

/** The route table of the edge: token issue, binding, decision, and the AuthZEN evaluations and searches. */
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
  {
    path: '/apis/regional/v1/ai/auth/transaction-token',
    body: 'json',
    formToo: true,
    handle(ctx, body, req) {
      limitAgentRequest(ctx, req, undefined);
      return transactionTokenEndpoint(ctx, body, req);
    },
  },
  {
    path: '/apis/regional/v1/agents/authorize',
    body: 'json',
    formToo: true,
    handle(ctx, body, req) {
      limitAgentRequest(ctx, req, typeof body.agent_id === 'string' ? body.agent_id : undefined);
      return decisionEndpoint(ctx, body);
    },
  },
  authzenRoute(AUTHZEN_PATHS.evaluation, evaluationAnswer),
  authzenRoute(AUTHZEN_PATHS.evaluations, evaluationsAnswer),
  authzenRoute(AUTHZEN_PATHS.searchSubject, search('subject')),
  authzenRoute(AUTHZEN_PATHS.searchResource, search('resource')),
  authzenRoute(AUTHZEN_PATHS.searchAction, search('action')),
];

const asObject = (b: unknown): Record<string, unknown> => (b && typeof b === 'object' ? (b as Record<string, unknown>) : {});

const parsers: Record<EdgeRoute['body'], RequestHandler> = {
  json: express.json({ limit: JSON_BODY_LIMIT, type: ['application/json', 'application/*+json'], verify: (_req, _res, buf) => checkJsonDepth(buf) }),
  form: express.urlencoded({ extended: false, limit: FORM_BODY_LIMIT, parameterLimit: 100 }),
};

/**
 * Mounts the route table on the Express app, ahead of its body parsers: the path for whatever
 * the fast path leaves to Express. Steps per route: the request id, the method, who is calling,
 * the body (bounded), the core, the answer.
 */
export function mountEdgeRoutes(ctx: AppContext, app: Express, routes: readonly EdgeRoute[] = EDGE_ROUTES): void {
  for (const route of routes) {
    const steps: RequestHandler[] = [];
    if (route.requestId === 'echo') steps.push(echoRequestId);
    steps.push((req, res, next) => {
      if (req.method === 'POST') return next();
      if (route.otherMethods !== 'refuse') return next('route');
      res.setHeader('Allow', 'POST');
      next(errors.methodNotAllowed(`${route.path} takes POST`));
    });
    if (route.authenticate) {
      const authenticate = route.authenticate;
      steps.push((req: Request, res: Response, next: NextFunction) => {
        authenticate(ctx, req as EdgeRequest).then((caller) => {
          res.locals.edgeCaller = caller;
          next();
        }, next);
      });
    }
    // A JSON body sent to a form route is still read with the depth bound, so that a hostile
    // body is refused for what it is (too deep) before it is refused for its type.
    steps.push(refuseAnnouncedOversize(Math.max(JSON_BODY_LIMIT, FORM_BODY_LIMIT)));
    if (route.body === 'form') steps.push(parsers.json);
    steps.push(parsers[route.body]);
    if (route.formToo) steps.push(parsers.form);
    steps.push(resumeRequestSpan);
    steps.push(async (req: Request, res: Response) => {
      for (const [k, v] of Object.entries({ ...route.headers, ...NO_STORE_HEADERS })) res.setHeader(k, v);
      if (route.body === 'form' && !req.is('application/x-www-form-urlencoded')) {
        throw errors.invalidRequest('the body must be application/x-www-form-urlencoded');
      }
      const answer = await route.handle(ctx, asObject(req.body), req as EdgeRequest, res.locals.edgeCaller);
      writeJson(res, 200, answer);
    });
    app.all(route.path, ...steps);
  }
}
