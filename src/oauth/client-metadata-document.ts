import { request as httpsRequest } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { createLocalJWKSet, decodeJwt, jwtVerify, type JWTPayload } from 'jose';
import type { AppContext } from '../context.js';
import { errors, ProtocolError } from '../errors.js';
import { guardedLookup, OutboundRefused, outboundProblem } from '../outbound.js';
import type { Application } from '../store/applications.js';
import { nowSeconds } from '../clock.js';

/**
 * Clients that need no registration (OAuth Client ID Metadata Document): a `client_id` that is
 * an https URL names a JSON document the client publishes there. Steps: the URL's shape, the
 * stored copy while its cache time lasts, else a fetch (Node's standard TLS trust, so
 * NODE_EXTRA_CA_CERTS adds an operator's CA; public addresses only unless
 * GATEHOUSE_OUTBOUND_ALLOW_PRIVATE; at most 5 KB and 5 s; no redirects), the document's checks, and the application row kept from
 * it. Every failure is an OAuth error (`invalid_client` for the document, `invalid_request`
 * for the URL), never a 500.
 */

export const DOCUMENT_MAX_BYTES = 5 * 1024;
export const DOCUMENT_TIMEOUT_MS = 5000;
/** Cache bounds (seconds): what the document's headers ask, kept between these; one hour when they say nothing. */
export const CACHE_MIN_SECONDS = 60;
export const CACHE_MAX_SECONDS = 24 * 60 * 60;
export const CACHE_DEFAULT_SECONDS = 60 * 60;

const AUTH_METHODS = ['none', 'private_key_jwt'] as const;
type AuthMethod = (typeof AUTH_METHODS)[number];

const documentError = (description: string) => errors.invalidClient(`client metadata document: ${description}`);

/** Whether a client_id is meant as a metadata document URL (an https URL); its shape is checked by `documentUrlProblem`. */
export const isDocumentClientId = (clientId: string): boolean => /^https:\/\//i.test(clientId);

/** A client_id that looks like a metadata document URL but is plain http: never fetched. */
export const isPlainHttpClientId = (clientId: string): boolean => /^http:\/\//i.test(clientId);
const PLAIN_HTTP = 'a client_id URL must use https (a client metadata document is fetched only over https)';

/** What is wrong with a client_id URL (the draft's section 3 rules), or undefined. */
export function documentUrlProblem(clientId: string): string | undefined {
  if (clientId.length > 2000 || !URL.canParse(clientId)) return 'the client_id is not a valid URL';
  const url = new URL(clientId);
  if (url.protocol !== 'https:') return 'a client_id URL must use https';
  if (url.username || url.password) return 'a client_id URL must not contain credentials';
  if (url.hash || clientId.includes('#')) return 'a client_id URL must not contain a fragment';
  // Dot segments, also percent-encoded (`%2e%2e`) or between backslashes, which URL parsers
  // resolve away: the document fetched would be another path's than the client_id names.
  const rawPath = clientId.slice(clientId.indexOf('//') + 2).replace(/^[^/\\]*/, '').split('?', 1)[0]!;
  if (rawPath.split(/[/\\]/).some((segment) => /^(\.|%2e){1,2}$/i.test(segment))) return 'a client_id URL must not contain . or .. path segments';
  if (url.pathname === '/' || url.pathname === '') return 'a client_id URL must contain a path';
  // The URL must be the one the document names exactly: no normalisation is applied to compare.
  return undefined;
}

/** Seconds to keep a document, from Cache-Control (no-store, no-cache, max-age) or Expires, within the bounds. */
export function cacheSeconds(headers: IncomingMessage['headers'], nowMs: number): number {
  const cc = String(headers['cache-control'] ?? '').toLowerCase();
  let seconds: number | undefined;
  if (/(^|,)\s*(no-store|no-cache)\b/.test(cc)) seconds = 0;
  else {
    const m = /(^|,)\s*max-age\s*=\s*"?(\d+)"?/.exec(cc);
    if (m) seconds = Number(m[2]);
    else if (typeof headers.expires === 'string') {
      const at = Date.parse(headers.expires);
      seconds = Number.isFinite(at) ? Math.floor((at - nowMs) / 1000) : 0;
    }
  }
  return Math.min(CACHE_MAX_SECONDS, Math.max(CACHE_MIN_SECONDS, seconds ?? CACHE_DEFAULT_SECONDS));
}

interface Fetched {
  body: unknown;
  ttl: number;
}

/**
 * GET of a JSON document within the byte and time caps, under the outbound rules
 * (`./outbound.ts`: the host's addresses checked first, and again on the connection itself).
 */
export async function fetchJsonDocument(url: string, opts: { allowPrivate: boolean; maxBytes: number; timeoutMs: number; nowMs: number }): Promise<Fetched> {
  const problem = await outboundProblem(url, opts.allowPrivate);
  if (problem) throw documentError(problem);
  return new Promise<Fetched>((resolve, reject) => {
    let settled = false;
    const done = (err: ProtocolError | undefined, value?: Fetched) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(value!);
    };
    const req = httpsRequest(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      lookup: guardedLookup(opts.allowPrivate),
      agent: false,
    });
    const timer = setTimeout(() => {
      done(documentError(`no answer within ${opts.timeoutMs / 1000} s`));
      req.destroy();
    }, opts.timeoutMs);
    req.on('error', (err) => {
      if (err instanceof OutboundRefused) return done(documentError(err.message));
      done(documentError(`could not be fetched (${(err as NodeJS.ErrnoException).code ?? err.message})`));
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        req.destroy();
        return done(documentError(`the URL answered ${res.statusCode} (redirects are not followed)`));
      }
      const type = String(res.headers['content-type'] ?? '');
      if (!/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
        req.destroy();
        return done(documentError('the document must be served as application/json'));
      }
      const declared = Number(res.headers['content-length'] ?? 0);
      if (declared > opts.maxBytes) {
        req.destroy();
        return done(documentError(`the document is larger than ${opts.maxBytes} bytes`));
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBytes) {
          req.destroy();
          return done(documentError(`the document is larger than ${opts.maxBytes} bytes`));
        }
        chunks.push(chunk);
      });
      res.on('error', () => done(documentError('the answer broke off')));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return done(documentError('the document is not JSON'));
        }
        done(undefined, { body, ttl: cacheSeconds(res.headers, opts.nowMs) });
      });
    });
    req.end();
  });
}

/** What a document stands for, checked. */
export interface CheckedDocument {
  name: string;
  redirect_uris: string[];
  auth_method: AuthMethod;
  jwks_uri: string | null;
  document: Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The draft's checks on a fetched document: a JSON object whose `client_id` is the URL exactly,
 * `redirect_uris` a non-empty list of absolute URLs without fragments, `token_endpoint_auth_method`
 * `none` or `private_key_jwt` (with an https `jwks_uri`): shared secrets cannot be published.
 */
export function checkDocument(url: string, body: unknown): CheckedDocument {
  if (!isObject(body)) throw documentError('the document must be a JSON object');
  if (body.client_id !== url) throw documentError('its client_id must equal the URL it is served from, exactly');
  const redirects = body.redirect_uris;
  if (!Array.isArray(redirects) || redirects.length === 0 || redirects.length > 20) throw documentError('redirect_uris must list 1 to 20 URLs');
  for (const r of redirects) {
    if (typeof r !== 'string' || r.length > 2000 || !URL.canParse(r) || r.includes('#')) throw documentError('each redirect URI must be an absolute URL without a fragment');
  }
  const method = body.token_endpoint_auth_method;
  if (!(AUTH_METHODS as readonly unknown[]).includes(method)) {
    throw documentError('token_endpoint_auth_method must be none or private_key_jwt (a published document holds no shared secret)');
  }
  let jwksUri: string | null = null;
  if (method === 'private_key_jwt') {
    if (typeof body.jwks_uri !== 'string' || !URL.canParse(body.jwks_uri) || new URL(body.jwks_uri).protocol !== 'https:') {
      throw documentError('private_key_jwt needs a jwks_uri (an https URL)');
    }
    jwksUri = body.jwks_uri;
  }
  for (const secretField of ['client_secret', 'client_secret_expires_at']) {
    if (body[secretField] !== undefined) throw documentError(`${secretField} must not appear in a published document`);
  }
  const host = new URL(url).host;
  const name = typeof body.client_name === 'string' && body.client_name.trim() ? body.client_name.trim().slice(0, 100) : host;
  return { name, redirect_uris: redirects as string[], auth_method: method as AuthMethod, jwks_uri: jwksUri, document: body };
}

const inflight = new WeakMap<AppContext, Map<string, Promise<void>>>();

/**
 * The application a metadata document URL stands for: the stored copy while it is fresh, else
 * fetched, checked and stored again (concurrent requests for one URL share one fetch). Throws
 * `invalid_request` for a URL of the wrong shape and `invalid_client` for a document that
 * cannot be fetched or fails a check.
 */
export async function documentClient(ctx: AppContext, clientId: string): Promise<Application> {
  const problem = documentUrlProblem(clientId);
  if (problem) throw errors.invalidRequest(problem);
  const stored = await ctx.store.clientRequests.getDocumentClient(clientId);
  if (!stored || stored.expires_at <= nowSeconds(ctx.clock)) {
    let byUrl = inflight.get(ctx);
    if (!byUrl) inflight.set(ctx, (byUrl = new Map()));
    let loading = byUrl.get(clientId);
    if (!loading) {
      loading = refresh(ctx, clientId).finally(() => byUrl.delete(clientId));
      byUrl.set(clientId, loading);
    }
    await loading;
  }
  const app = await ctx.store.applications.get(clientId);
  if (!app) throw documentError('the client is not known');
  return app;
}

async function refresh(ctx: AppContext, clientId: string): Promise<void> {
  const fetched = await fetchJsonDocument(clientId, {
    allowPrivate: ctx.config.outboundAllowPrivate,
    maxBytes: DOCUMENT_MAX_BYTES,
    timeoutMs: DOCUMENT_TIMEOUT_MS,
    nowMs: ctx.clock.now(),
  });
  const checked = checkDocument(clientId, fetched.body);
  await ctx.store.clientRequests.saveDocumentClient(
    {
      client_id: clientId,
      name: checked.name,
      // A public client signs in with PKCE in a browser or on a device; a key-holding one is a web server.
      type: checked.auth_method === 'none' ? 'native' : 'web',
      redirect_uris: checked.redirect_uris,
      auth_method: checked.auth_method,
      jwks_uri: checked.jwks_uri,
      document: checked.document,
    },
    nowSeconds(ctx.clock) + fetched.ttl,
  );
}

/**
 * The application behind a client_id at the people's authorization server: a registered one,
 * or (an https URL that is not registered, or one known from its document) the metadata
 * document's. Undefined when neither; an unregistered http URL is `invalid_request`.
 */
export async function resolveClient(ctx: AppContext, clientId: string): Promise<Application | undefined> {
  if (!isDocumentClientId(clientId)) {
    const registered = await ctx.store.applications.get(clientId);
    if (!registered && isPlainHttpClientId(clientId)) throw errors.invalidRequest(PLAIN_HTTP);
    return registered;
  }
  const registered = await ctx.store.applications.get(clientId);
  if (registered && !(await ctx.store.clientRequests.isDocumentClient(clientId))) return registered;
  return documentClient(ctx, clientId);
}

export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** The signing algorithms a document client's assertion may use. */
export const CLIENT_ASSERTION_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];
const JWKS_MAX_BYTES = 64 * 1024;
const ASSERTION_MAX_LIFETIME = 300;
const ASSERTION_SKEW = 30;
const jwksCache = new WeakMap<AppContext, Map<string, { keys: ReturnType<typeof createLocalJWKSet>; until: number }>>();

async function documentKeys(ctx: AppContext, jwksUri: string) {
  let cache = jwksCache.get(ctx);
  if (!cache) jwksCache.set(ctx, (cache = new Map()));
  const hit = cache.get(jwksUri);
  if (hit && hit.until > ctx.clock.now()) return hit.keys;
  const fetched = await fetchJsonDocument(jwksUri, { allowPrivate: ctx.config.outboundAllowPrivate, maxBytes: JWKS_MAX_BYTES, timeoutMs: DOCUMENT_TIMEOUT_MS, nowMs: ctx.clock.now() });
  let keys: ReturnType<typeof createLocalJWKSet>;
  try {
    keys = createLocalJWKSet(fetched.body as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw documentError('the jwks_uri does not hold a JSON Web Key Set');
  }
  if (cache.size > 1000) cache.clear();
  cache.set(jwksUri, { keys, until: ctx.clock.now() + fetched.ttl * 1000 });
  return keys;
}

/**
 * private_key_jwt (RFC 7523 section 2.2) for a client known by its metadata document: the
 * assertion's `iss` and `sub` are the client_id, signed by a key of its `jwks_uri`, for this
 * issuer or endpoint, valid at most 5 minutes, its `jti` used once. Registered applications
 * authenticate with secrets, so an assertion from one is `invalid_client`.
 */
export async function authenticateWithAssertion(ctx: AppContext, body: Record<string, unknown>, audiences: string[]): Promise<Application> {
  const fail = (why: string) => errors.invalidClient(why);
  if (body.client_assertion_type !== JWT_BEARER_ASSERTION) throw errors.invalidRequest(`client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
  const assertion = body.client_assertion;
  if (typeof assertion !== 'string' || assertion.length > 8192) throw errors.invalidRequest('client_assertion must be given once');
  let clientId: unknown;
  try {
    clientId = decodeJwt(assertion).sub;
  } catch {
    throw fail('the client assertion is not a JWT');
  }
  if (typeof clientId !== 'string' || !isDocumentClientId(clientId)) throw fail('client assertions are taken from clients known by their metadata document');
  if (body.client_id !== undefined && body.client_id !== clientId) throw errors.invalidRequest('client_id differs from the client assertion');
  const app = await documentClient(ctx, clientId);
  const stored = await ctx.store.clientRequests.getDocumentClient(clientId);
  if (!stored || stored.auth_method !== 'private_key_jwt' || !stored.jwks_uri) throw fail('this client authenticates with none (its document says so)');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(assertion, await documentKeys(ctx, stored.jwks_uri), {
      algorithms: CLIENT_ASSERTION_ALGORITHMS,
      issuer: clientId,
      subject: clientId,
      audience: audiences,
      requiredClaims: ['exp', 'jti'],
      clockTolerance: ASSERTION_SKEW,
      currentDate: new Date(ctx.clock.now()),
    }));
  } catch (err) {
    if (err instanceof ProtocolError) throw err;
    throw fail('the client assertion is not valid (signature, audience or time)');
  }
  const t = nowSeconds(ctx.clock);
  if (payload.exp! - t > ASSERTION_MAX_LIFETIME + ASSERTION_SKEW) throw fail('the client assertion may be valid for at most 5 minutes');
  if (typeof payload.jti !== 'string' || !payload.jti || payload.jti.length > 512) throw fail('the client assertion needs a jti');
  if (!(await ctx.store.agentAuth.useJti(clientId, payload.jti, payload.exp! + ASSERTION_SKEW))) throw fail('the client assertion was already used');
  return app;
}
