import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQueryString } from 'node:querystring';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import type { ClientRequest } from './client-auth.js';
import { tokenResponse } from './token.js';

const MAX_BODY = 64 * 1024;
const FORM = /^application\/x-www-form-urlencoded\s*(;\s*charset="?utf-8"?\s*)?$/i;
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * POST /oauth/token without Express. The token endpoint is the service's hottest path and
 * RSA signing is most of its cost, so the rest of the request is kept to what it needs: the
 * same steps (tokenResponse), the same headers, the same error bodies as the Express route.
 * Anything unusual (another path, chunked or oversized bodies, another content type or
 * encoding) is left to Express by returning false, so there is one behaviour for it.
 */
export function tokenFastPath(ctx: AppContext): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'POST' || req.url !== '/oauth/token') return false;
    const length = Number(req.headers['content-length']);
    if (!Number.isInteger(length) || length < 0 || length > MAX_BODY) return false;
    if (!FORM.test(req.headers['content-type'] ?? '') || req.headers['content-encoding']) return false;

    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type');
    res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
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
      const respond = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
        const json = JSON.stringify(body);
        res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json) });
        res.end(json);
      };
      const fail = (err: unknown) => {
        if (err instanceof ProtocolError) return respond(err.status, err.body(), err.headers);
        ctx.logger.error({ err, req_id: requestId }, 'unhandled error');
        const e = errors.serverError('an unexpected error occurred');
        respond(e.status, e.body());
      };
      if (size !== length || size > MAX_BODY) return fail(errors.invalidRequest('the request body could not be read'));
      const body = parseQueryString(Buffer.concat(chunks).toString('utf8'), '&', '=', { maxKeys: 100 });
      const clientRequest: ClientRequest = {
        get: (name) => {
          const v = req.headers[name.toLowerCase()];
          return Array.isArray(v) ? v.join(', ') : v;
        },
        ip: req.socket.remoteAddress,
        socket: req.socket,
      };
      tokenResponse(ctx, clientRequest, { ...body }).then((answer) => respond(200, answer), fail);
    });
    return true;
  };
}
