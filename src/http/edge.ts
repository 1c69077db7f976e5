import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { PolicyUnavailableError } from '../policy-service.js';
import type { Logger } from '../logger.js';
import { isUnstorableText } from '../store/sql.js';
import { isStoreUnavailable } from '../store/unavailable.js';

// The HTTP edge, written once for the Express app and the raw fast path: request ids, the
// no-store headers, the JSON body bound, how an answer and an error are written, and the log
// line and metrics every request ends with.

/** JSON bodies may nest this deep (objects and arrays); deeper is a 400 before anything parses it. */
export const MAX_JSON_DEPTH = 64;

export const NO_STORE_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'Cache-Control': 'no-store', Pragma: 'no-cache' });

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** The caller's `X-Request-Id` when it is a plain token, else a new one. */
export function requestIdOf(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** Whether `requestIdOf` keeps the caller's id as it is. */
export const isPlainRequestId = (incoming: string | string[] | undefined): boolean => typeof incoming === 'string' && REQUEST_ID.test(incoming);

/**
 * The `X-Request-ID` an AuthZEN caller sends comes back the same, whatever it holds: the
 * specification asks for the same identifier, and any value Node's parser accepted (visible
 * ASCII, spaces, tabs, Latin-1 bytes, bounded by the header size limit) is one Node can send back.
 */
const ECHOABLE_ID = /^[\t\x20-\x7e\x80-\xff]+$/;

/** Express middleware: the caller's `X-Request-ID` back on every answer, errors included. */
export const echoRequestId: RequestHandler = (req, res, next) => {
  const id = req.get('x-request-id');
  if (id !== undefined && ECHOABLE_ID.test(id)) res.setHeader('X-Request-ID', id);
  next();
};

/** The request body limits of the whole edge, both transports: JSON and forms. */
export const JSON_BODY_LIMIT = 256 * 1024;
export const FORM_BODY_LIMIT = 64 * 1024;

/**
 * Ahead of a body parser: a body announced larger than `limit` is refused with 413 at once,
 * and the connection closed. (The parser would refuse it too, but only after draining it.)
 */
export function refuseAnnouncedOversize(limit: number): RequestHandler {
  return (req, res, next) => {
    const length = Number(req.headers['content-length'] ?? 0);
    if (!(length > limit)) return next();
    res.setHeader('Connection', 'close');
    next(errors.payloadTooLarge(`the body is larger than ${limit} bytes`));
  };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether JSON text nests deeper than `max`, by one pass over its bytes (strings skipped).
 * Malformed text is left to the parser; this only bounds what a parser, a validator or a
 * canonicaliser would have to descend into.
 */
export function jsonNestsDeeperThan(body: Buffer | string, max = MAX_JSON_DEPTH): boolean {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

const tooDeep = () => errors.invalidRequest(`the JSON body nests deeper than ${MAX_JSON_DEPTH} levels`);

/** For express.json's `verify`: a plain error (body-parser decorates what it is given), mapped to the 400 below. */
export function checkJsonDepth(raw: Buffer): void {
  if (jsonNestsDeeperThan(raw)) throw Object.assign(new Error('JSON body too deep'), { type: TOO_DEEP, status: 400 });
}
const TOO_DEEP = 'gatehouse.json.too.deep';

/** A JSON request body as both transports read it: an object or array, bounded in depth, else a 400. */
export function parseJsonBody(raw: Buffer): Record<string, unknown> {
  if (raw.length === 0) return {};
  if (jsonNestsDeeperThan(raw)) throw tooDeep();
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw errors.invalidRequest('the request body is not valid JSON');
  }
  // Only objects and arrays, as express.json (strict) takes them; handlers then name bad fields.
  if (parsed === null || typeof parsed !== 'object') throw errors.invalidRequest('the request body is not valid JSON');
  return parsed as Record<string, unknown>;
}

interface BodyParserError { type?: string; status?: number; statusCode?: number; expose?: boolean }

/** Anything thrown while answering, as the ProtocolError the caller sees; the unexpected is logged and a bare 500. */
export function toProtocolError(err: unknown, log: Logger): ProtocolError {
  if (err instanceof ProtocolError) return err;
  const bp = err as BodyParserError | undefined;
  if (bp?.type === TOO_DEEP) return tooDeep();
  if (bp?.type === 'entity.parse.failed') return errors.invalidRequest('the request body is not valid JSON');
  if (bp?.type === 'entity.too.large') return errors.payloadTooLarge('the request body is too large');
  if (bp?.type === 'encoding.unsupported' || bp?.type === 'charset.unsupported') return errors.unsupportedMediaType('unsupported body encoding');
  if (typeof bp?.status === 'number' && bp.status >= 400 && bp.status < 500 && bp.expose) return errors.invalidRequest('the request body could not be read');
  if (err instanceof PolicyUnavailableError) return errors.temporarilyUnavailable('no policy is in force', {}, { 'Retry-After': '5' });
  if (isUnstorableText(err)) return errors.invalidRequest('a value holds the NUL character, which cannot be stored or looked up');
  if (isStoreUnavailable(err)) {
    log.warn({ err }, 'the database is unavailable');
    return errors.storeUnavailable();
  }
  log.error({ err }, 'unhandled error');
  return errors.serverError('an unexpected error occurred');
}

/** Writes a JSON answer (both transports; Express's response is a ServerResponse too). */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json) });
  res.end(json);
}

/** Writes an error in the OAuth form, never cached. */
export function writeError(res: ServerResponse, err: ProtocolError): void {
  writeJson(res, err.status, err.body(), { ...err.headers, ...NO_STORE_HEADERS });
}

/**
 * The end of every request, on either transport: a debug line (path only: query strings can
 * carry codes and tokens) and the latency and rate-limit metrics, by route pattern.
 */
export function requestFinished(
  ctx: AppContext,
  log: Logger,
  r: { method: string; path: string; route: string; status: number; startNs: bigint },
): void {
  const seconds = Number(process.hrtime.bigint() - r.startNs) / 1e9;
  ctx.metrics.httpSeconds.observe({ route: r.route, method: r.method, status: String(r.status) }, seconds);
  if (r.status === 429) ctx.metrics.rateLimited.inc({ route: r.route });
  if (log.isLevelEnabled('debug')) log.debug({ method: r.method, path: r.path, status: r.status, ms: seconds * 1000 }, 'request');
}

/** Express's last handler: the one error path, written as the fast path writes it. */
export function expressErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const log = (req as { log?: Logger }).log ?? logger;
    if (res.headersSent) {
      res.end();
      return;
    }
    try {
      writeError(res, toProtocolError(err, log));
    } catch (failed) {
      // The error path itself must never hand Express a stack trace to print.
      log.error({ err: failed }, 'could not write the error');
      if (!res.headersSent) writeJson(res, 500, { error: 'server_error' });
    }
  };
}
