import type { AppContext } from '../context.js';
import { constantTimeEqual, sha256, verifyPassword } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { APPLICATIONS_DOMAIN, type Application } from '../store/applications.js';
import { single, type Params } from './params.js';
import { clientAuthLimiter } from './rate-limit.js';
import { authenticateWithAssertion, isDocumentClientId, isPlainHttpClientId, resolveClient } from './client-metadata-document.js';

export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none' | 'private_key_jwt';

export interface AuthenticatedClient {
  app: Application;
  method: ClientAuthMethod;
}

/** application/x-www-form-urlencoded decoding of the Basic credentials (RFC 6749 2.3.1). */
function formDecode(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}

interface Presented {
  clientId: string;
  secret: string | undefined;
  method: ClientAuthMethod;
}

/** What client authentication reads of a request: its headers and the peer address. */
export interface ClientRequest {
  get(name: string): string | undefined;
  ip?: string | undefined;
  socket: { remoteAddress?: string | undefined };
}

/** Reads the credentials from the Authorization header or the body; more than one method is refused. */
function presentedCredentials(req: ClientRequest, body: Params): Presented {
  const header = req.get('authorization');
  const bodyId = single(body, 'client_id');
  const bodySecret = single(body, 'client_secret');
  if (header !== undefined && /^basic\s/i.test(header)) {
    const basicErr = () => errors.invalidClient('malformed HTTP Basic credentials', {}, { 'WWW-Authenticate': 'Basic realm="gatehouse"' });
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 1) throw basicErr();
    let clientId: string;
    let secret: string;
    try {
      clientId = formDecode(decoded.slice(0, colon));
      secret = formDecode(decoded.slice(colon + 1));
    } catch {
      throw basicErr();
    }
    if (bodySecret !== undefined) throw errors.invalidRequest('use one client authentication method, not HTTP Basic and client_secret');
    if (bodyId !== undefined && bodyId !== clientId) throw errors.invalidRequest('client_id differs from the HTTP Basic credentials');
    return { clientId, secret, method: 'client_secret_basic' };
  }
  if (bodyId === undefined) throw errors.invalidClient('client authentication is required: send client_id');
  return { clientId: bodyId, secret: bodySecret, method: bodySecret !== undefined ? 'client_secret_post' : 'none' };
}

function secretMatches(presented: string, stored: string): boolean | Promise<boolean> {
  // Random secrets are kept as sha256; a scrypt hash (a hand-made secret) is accepted too.
  if (stored.startsWith('scrypt$')) return verifyPassword(presented, stored);
  return constantTimeEqual(sha256(presented), stored);
}

type StoredApplication = Application & { secret_hash: string | null };
const applications = new WeakMap<AppContext, { version: number; byId: Map<string, Promise<StoredApplication | undefined>> }>();

/**
 * Applications as client authentication reads them, cached per process and dropped whenever
 * the `applications` change counter moves (every write to an application moves it, on any
 * instance): the token endpoint reads no application row while nothing changed.
 */
async function applicationWithSecret(ctx: AppContext, clientId: string): Promise<StoredApplication | undefined> {
  const version = await ctx.store.changes.version(APPLICATIONS_DOMAIN);
  let cache = applications.get(ctx);
  if (!cache || cache.version !== version) applications.set(ctx, (cache = { version, byId: new Map() }));
  let app = cache.byId.get(clientId);
  if (!app) {
    // Bounded: a flood of unknown client IDs must not grow memory without limit.
    if (cache.byId.size > 10_000) cache.byId.clear();
    const loading = ctx.store.applications.getWithSecret(clientId);
    const byId = cache.byId;
    byId.set(clientId, loading);
    loading.catch(() => byId.get(clientId) === loading && byId.delete(clientId));
    app = loading;
  }
  return app;
}

/**
 * Client authentication of the token, introspection and revocation endpoints: an application
 * with a secret proves it (Basic or post); one without sends only its client_id (`none`).
 * Failures are counted per client and address and refused with 429 past the limit.
 */
export async function authenticateClient(
  ctx: AppContext,
  req: ClientRequest,
  body: Params,
  opts: { requireSecret?: boolean } = {},
): Promise<AuthenticatedClient> {
  // A client known by its metadata document: a key it publishes, or (public) its client_id alone.
  if (body.client_assertion_type !== undefined || body.client_assertion !== undefined) {
    const audiences = [ctx.urls.issuer, ctx.urls.token, ctx.urls.par, ctx.urls.introspect, ctx.urls.revoke];
    return { app: await authenticateWithAssertion(ctx, body, audiences), method: 'private_key_jwt' };
  }
  const presented = presentedCredentials(req, body);
  if ((isDocumentClientId(presented.clientId) || isPlainHttpClientId(presented.clientId)) && presented.method === 'none') {
    const app = await resolveClient(ctx, presented.clientId);
    const stored = app && (await ctx.store.clientRequests.getDocumentClient(app.client_id));
    if (stored && stored.auth_method !== 'none') throw errors.invalidClient('this client authenticates with private_key_jwt (its document says so)');
  }
  const limiter = clientAuthLimiter(ctx);
  const ip = req.ip ?? req.socket.remoteAddress ?? 'unknown';
  if (await limiter.blocked(presented.clientId, ip)) throw errors.rateLimited('too many failed client authentications; try again later', {}, { 'Retry-After': '300' });
  const headers: Record<string, string> = presented.method === 'client_secret_basic' ? { 'WWW-Authenticate': 'Basic realm="gatehouse"' } : {};
  const fail = async (why: string) => {
    await limiter.fail(presented.clientId, ip);
    return errors.invalidClient(why, {}, headers);
  };

  const app = await applicationWithSecret(ctx, presented.clientId);
  if (!app) throw await fail('unknown client');
  if (app.secret_hash) {
    if (presented.secret === undefined) throw await fail('the client secret is missing');
    if (!(await secretMatches(presented.secret, app.secret_hash))) throw await fail('the client secret is wrong');
  } else {
    if (presented.secret !== undefined) throw await fail('this client has no secret');
    if (opts.requireSecret) throw await fail('only an application with a secret may call this endpoint');
  }
  const { secret_hash: _omit, ...publicApp } = app;
  return { app: publicApp, method: presented.method };
}
