import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQueryString } from 'node:querystring';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { FORM_BODY_LIMIT, isPlainRequestId, JSON_BODY_LIMIT, NO_STORE_HEADERS, parseJsonBody, requestFinished, requestIdOf, toProtocolError, writeError, writeJson } from './edge.js';
import type { EdgeRequest, EdgeRoute } from './routes.js';

// Within both of the edge's limits: a larger body takes the Express route, which bounds it per type.
const MAX_BODY = Math.min(FORM_BODY_LIMIT, JSON_BODY_LIMIT);
const FORM = /^application\/x-www-form-urlencoded\s*(;\s*charset="?utf-8"?\s*)?$/i;
const JSON_TYPE = /^application\/json\s*(;\s*charset="?utf-8"?\s*)?$/i;

/**
 * The route table on the raw Node request: Express's router, parsers and middleware were most
 * of what a request cost besides its cryptography. The edge is the same as Express's (request
 * id, no-store headers, the JSON depth bound, error writing, the log line and metrics); anything
 * unusual (another method or path, a query string, chunked or oversized bodies, another content
 * type or an encoding; an echoing route's request whose `X-Request-ID` is not a plain token) returns
 * false and goes through Express, so there is one behaviour for it. Who is calling is asked
 * before the body is parsed, as on Express.
 */
export function fastPaths(ctx: AppContext, routes: readonly EdgeRoute[]): (req: IncomingMessage, res: ServerResponse) => boolean {
  const byPath = new Map(routes.map((r) => [r.path, { route: r, headers: Object.entries({ ...r.headers, ...NO_STORE_HEADERS }) }]));
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const entry = byPath.get(req.url ?? '');
    if (!entry) return false;
    const { route } = entry;
    const length = Number(req.headers['content-length']);
    if (!Number.isInteger(length) || length < 0 || length > MAX_BODY) return false;
    if (!(route.body === 'form' ? FORM : JSON_TYPE).test(req.headers['content-type'] ?? '') || req.headers['content-encoding']) return false;
    // Echoed as it is on the Express route; only a plain id is the same on both.
    if (route.requestId === 'echo' && req.headers['x-request-id'] !== undefined && !isPlainRequestId(req.headers['x-request-id'])) return false;

    const startNs = process.hrtime.bigint();
    const requestId = requestIdOf(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    for (const [k, v] of entry.headers) res.setHeader(k, v);
    const log = ctx.logger.child({ req_id: requestId });
    res.on('finish', () => requestFinished(ctx, log, { method: 'POST', path: route.path, route: route.path, status: res.statusCode, startNs }));

    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const fail = (err: unknown) => writeError(res, toProtocolError(err, log));
      const edgeRequest: EdgeRequest = {
        get: (name) => {
          const v = req.headers[name.toLowerCase()];
          return Array.isArray(v) ? v.join(', ') : v;
        },
        ip: req.socket.remoteAddress,
        socket: req.socket,
        log,
      };
      const answer = async (): Promise<unknown> => {
        const caller = route.authenticate ? await route.authenticate(ctx, edgeRequest) : undefined;
        if (size !== length) throw errors.invalidRequest('the request body could not be read');
        const raw = Buffer.concat(chunks);
        const body = route.body === 'form' ? { ...parseQueryString(raw.toString('utf8'), '&', '=', { maxKeys: 100 }) } : parseJsonBody(raw);
        return route.handle(ctx, body, edgeRequest, caller);
      };
      answer()
        .then((body) => writeJson(res, 200, body), fail)
        .catch((err: unknown) => {
          // Only when answering itself failed (the client went away mid-write): never crash the worker.
          log.warn({ err }, 'could not answer');
          res.destroy();
        });
    });
    return true;
  };
}
