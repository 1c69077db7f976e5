import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { validateRequest } from './authorization-endpoint.js';
import { authenticateClient } from './client-auth.js';
import { tokenRequestBinding } from './dpop.js';
import { formBody, single, type Params } from './params.js';

/**
 * Pushed authorization requests (RFC 9126). The client posts its authorization request to
 * /oauth/par, authenticated as at the token endpoint (a public client by its client_id), and
 * gets a `request_uri` to send the browser with: the request is checked when pushed, kept for
 * 60 seconds, and used once. Steps: client authentication, a DPoP proof when one is sent (its
 * key binds the code, like `dpop_jkt`), the parameters (the same checks as at authorize,
 * answered here as JSON), the stored request, 201.
 */

export const PUSHED_REQUEST_TTL = 60;
export const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';

/** Client authentication's own fields: not part of the authorization request. */
const CLIENT_AUTH_FIELDS = new Set(['client_secret', 'client_assertion', 'client_assertion_type']);

export function parEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    if (!req.is('application/x-www-form-urlencoded')) throw errors.invalidRequest('the body must be application/x-www-form-urlencoded');
    const body = formBody(req);
    // 1. The client, authenticated as at the token endpoint
    const { app } = await authenticateClient(ctx, req, body);
    // 1½. A DPoP proof sent with the request binds the code to its key, as `dpop_jkt` would
    // (RFC 9449 section 10.1); both given, they must name one key.
    const proofJkt = await tokenRequestBinding(ctx, req, ctx.urls.par, false);
    const askedJkt = single(body, 'dpop_jkt');
    if (proofJkt !== undefined && askedJkt !== undefined && askedJkt !== proofJkt) throw errors.invalidRequest('dpop_jkt is not the thumbprint of the DPoP proof\'s key');

    // 2. The request: the authorize checks, each failure a JSON error here
    if (single(body, 'request_uri') !== undefined) throw errors.invalidRequest('request_uri must not be pushed');
    const redirectUri = single(body, 'redirect_uri');
    if (redirectUri === undefined) throw errors.invalidRequest('redirect_uri is required');
    if (!app.redirect_uris.includes(redirectUri)) throw errors.invalidRequest('redirect_uri is not registered for this application');
    const params: Params = { client_id: app.client_id };
    for (const [k, v] of Object.entries(body)) {
      if (CLIENT_AUTH_FIELDS.has(k) || k === 'client_id') continue;
      if (typeof v !== 'string') throw errors.invalidRequest(`${k.slice(0, 40)} must be given once`);
      params[k] = v;
    }
    if (proofJkt !== undefined) params.dpop_jkt = proofJkt;
    await validateRequest(ctx, app, params, redirectUri);

    // 3. Kept 60 s, under the hash of its random part
    const handle = randomToken();
    await ctx.store.clientRequests.pushRequest(sha256(handle), app.client_id, params, PUSHED_REQUEST_TTL);
    res.status(201).json({ request_uri: `${REQUEST_URI_PREFIX}${handle}`, expires_in: PUSHED_REQUEST_TTL });
  };
}

/**
 * The parameters of a pushed request, taken (spent whatever the outcome): an unknown, used,
 * expired or another client's request_uri is `invalid_request_uri`.
 */
export async function takePushedRequest(ctx: AppContext, clientId: string, requestUri: string): Promise<Params> {
  if (!requestUri.startsWith(REQUEST_URI_PREFIX) || requestUri.length > 200) throw errors.invalidRequestUri('request_uri is not one this server issued');
  const taken = await ctx.store.clientRequests.takePushedRequest(sha256(requestUri.slice(REQUEST_URI_PREFIX.length)), clientId);
  if (taken.ok) return taken.params;
  const why = {
    unknown: 'request_uri is unknown or was already used',
    expired: 'request_uri has expired; push the request again',
    other_client: 'request_uri was issued to another client',
  }[taken.reason];
  throw errors.invalidRequestUri(why);
}

