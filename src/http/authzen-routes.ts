import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { fastPaths } from './fast-path.js';
import { checkJsonDepth, NO_STORE_HEADERS, writeJson } from './edge.js';
import { authenticateCaller } from '../authzen/caller.js';
import { evaluationAnswer, evaluationsAnswer } from '../authzen/evaluate.js';
import { AUTHZEN_PATHS, pdpMetadata } from '../authzen/metadata.js';
import { searchAnswer } from '../authzen/search.js';
import type { SearchKind } from '../authzen/request.js';

/**
 * The `X-Request-ID` a PEP sends comes back the same, whatever it holds: the specification asks
 * for the same identifier, and any value Node's parser accepted (visible ASCII, spaces, tabs,
 * Latin-1 bytes, bounded by the header size limit) is one Node can send back.
 */
const ECHOABLE_ID = /^[\t\x20-\x7e\x80-\xff]+$/;
/** The ids the shared fast path reuses as they are; others take the Express route, which echoes them too. */
const FAST_ID = /^[\w.:-]{1,128}$/;

type Core = (ctx: AppContext, req: Request) => Promise<unknown>;

const withCaller =
  (answer: (ctx: AppContext, caller: Awaited<ReturnType<typeof authenticateCaller>>, body: unknown) => Promise<unknown>): Core =>
  async (ctx, req) => {
    const caller = await authenticateCaller(ctx, req.get('authorization'));
    if (!req.is('application/json')) throw errors.invalidRequest('the request body must be application/json');
    return answer(ctx, caller, req.body);
  };

const search = (kind: SearchKind): Core => withCaller((ctx, caller, body) => searchAnswer(ctx, caller, kind, body));

/**
 * The AuthZEN endpoints and the PDP metadata. Mounted before the application's body parsers:
 * the `X-Request-ID` a caller sends comes back unchanged on every answer, errors included.
 */
export function authzenRouter(ctx: AppContext): Router {
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

  const json = express.json({ limit: '1mb', type: () => true, verify: (_req, _res, buf) => checkJsonDepth(buf) });
  const routes: [string, Core][] = [
    [AUTHZEN_PATHS.evaluation, withCaller(evaluationAnswer)],
    [AUTHZEN_PATHS.evaluations, withCaller(evaluationsAnswer)],
    [AUTHZEN_PATHS.searchSubject, search('subject')],
    [AUTHZEN_PATHS.searchResource, search('resource')],
    [AUTHZEN_PATHS.searchAction, search('action')],
  ];
  for (const [path, core] of routes) {
    router.all(path, echoRequestId, (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST') {
        res.setHeader('Allow', 'POST');
        return next(errors.methodNotAllowed(`${path} takes POST`));
      }
      // The body is read only for a JSON request; anything else is refused by the core (after authentication).
      if (req.is('application/json')) json(req, res, next);
      else next();
    }, (req: Request, res: Response, next: NextFunction) => {
      core(ctx, req).then((body) => {
        for (const [k, v] of Object.entries(NO_STORE_HEADERS)) res.setHeader(k, v);
        writeJson(res, 200, body);
      }, next);
    });
  }
  return router;
}

function echoRequestId(req: Request, res: Response, next: NextFunction): void {
  const id = req.get('x-request-id');
  if (id !== undefined && ECHOABLE_ID.test(id)) res.setHeader('X-Request-ID', id);
  next();
}

/**
 * The two evaluation endpoints on the raw Node request (the shared fast path: same steps,
 * same error bodies), for plain requests whose `X-Request-ID`, if any, the fast path echoes
 * as it is. Returns false for anything else, which the Express route then serves.
 */
export function authzenFastPath(ctx: AppContext): (req: IncomingMessage, res: ServerResponse) => boolean {
  const fast = fastPaths(ctx, [
    {
      path: AUTHZEN_PATHS.evaluation,
      body: 'json',
      handle: async (ctx, body, req) => evaluationAnswer(ctx, await authenticateCaller(ctx, req.get('authorization')), body),
    },
    {
      path: AUTHZEN_PATHS.evaluations,
      body: 'json',
      handle: async (ctx, body, req) => evaluationsAnswer(ctx, await authenticateCaller(ctx, req.get('authorization')), body),
    },
  ]);
  return (req, res) => {
    const id = req.headers['x-request-id'];
    if (id !== undefined && (typeof id !== 'string' || !FAST_ID.test(id))) return false;
    return fast(req, res);
  };
}
