import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQueryString } from 'node:querystring';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import type { Logger } from '../logger.js';

const MAX_BODY = 64 * 1024;
const FORM = /^application\/x-www-form-urlencoded\s*(;\s*charset="?utf-8"?\s*)?$/i;
const JSON_TYPE = /^application\/json\s*(;\s*charset="?utf-8"?\s*)?$/i;
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** What a fast handler sees of the request. */
export interface FastRequest {
  get(name: string): string | undefined;
  ip: string | undefined;
  socket: { remoteAddress?: string | undefined };
  log: Logger;
}

export interface FastRoute {
  path: string;
  body: 'form' | 'json';
  /** headers every answer carries (CORS, for example) */
  headers?: Record<string, string>;
  /** the answer's JSON body (status 200), or a thrown ProtocolError */
  handle(body: Record<string, unknown>, req: FastRequest): Promise<unknown>;
}

/**
 * The hottest endpoints (the token endpoint, the decision endpoint) on the raw Node request:
 * Express's router, parsers and middleware were most of what a request cost besides its
 * cryptography. A route gets the same steps, headers and error bodies as its Express twin;
 * anything unusual (another method or path, a query string, chunked or oversized bodies,
 * another content type or an encoding) returns false and goes through Express, so there is
 * one behaviour for it.
 */
export function fastPaths(ctx: AppContext, routes: FastRoute[]): (req: IncomingMessage, res: ServerResponse) => boolean {
  const byPath = new Map(routes.map((r) => [r.path, r]));
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const route = byPath.get(req.url ?? '');
    if (!route) return false;
    const length = Number(req.headers['content-length']);
    if (!Number.isInteger(length) || length < 0 || length > MAX_BODY) return false;
    if (!(route.body === 'form' ? FORM : JSON_TYPE).test(req.headers['content-type'] ?? '') || req.headers['content-encoding']) return false;

    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    for (const [k, v] of Object.entries(route.headers ?? {})) res.setHeader(k, v);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Pragma', 'no-cache');

    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const log = ctx.logger.child({ req_id: requestId });
      const respond = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
        const json = JSON.stringify(body);
        res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json) });
        res.end(json);
      };
      const fail = (err: unknown) => {
        if (err instanceof ProtocolError) return respond(err.status, err.body(), err.headers);
        log.error({ err }, 'unhandled error');
        const e = errors.serverError('an unexpected error occurred');
        respond(e.status, e.body());
      };
      if (size !== length) return fail(errors.invalidRequest('the request body could not be read'));
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown>;
      if (route.body === 'form') {
        body = { ...parseQueryString(text, '&', '=', { maxKeys: 100 }) };
      } else {
        try {
          const parsed: unknown = text === '' ? {} : JSON.parse(text);
          // express.json is strict: only objects and arrays; the handlers then name bad fields.
          if (parsed === null || typeof parsed !== 'object') return fail(errors.invalidRequest('the request body is not valid JSON'));
          body = parsed as Record<string, unknown>;
        } catch {
          return fail(errors.invalidRequest('the request body is not valid JSON'));
        }
      }
      const fastRequest: FastRequest = {
        get: (name) => {
          const v = req.headers[name.toLowerCase()];
          return Array.isArray(v) ? v.join(', ') : v;
        },
        ip: req.socket.remoteAddress,
        socket: req.socket,
        log,
      };
      route
        .handle(body, fastRequest)
        .then((answer) => respond(200, answer), fail)
        .catch((err: unknown) => {
          // Only when answering itself failed (the client went away mid-write): never crash the worker.
          log.warn({ err }, 'could not answer');
          res.destroy();
        });
    });
    return true;
  };
}
