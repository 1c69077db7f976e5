import type { Request, RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errorPage } from '../pages/error.js';
import { MAX_STATE_LENGTH } from './authorization-endpoint.js';
import { sendPage } from '../pages/layout.js';
import { confirmSignOutPage, signedOutPage } from '../pages/signed-out.js';
import type { Application } from '../store/applications.js';
import { csrfToken, verifyCsrf } from './csrf.js';
import { single, type Params } from './params.js';
import { currentSession, endSession } from './session.js';

/**
 * Where an application may send a person after logout: exactly one of its registered
 * `post_logout_redirect_uris`. An application that registered none accepts any URI with the
 * scheme and host of one of its redirect URIs.
 */
export function allowedAfterLogout(app: Application, uri: string): boolean {
  if (app.post_logout_redirect_uris.length) return app.post_logout_redirect_uris.includes(uri);
  let target: URL;
  try {
    target = new URL(uri);
  } catch {
    return false;
  }
  if (target.protocol === 'javascript:' || target.protocol === 'data:') return false;
  return app.redirect_uris.some((r) => {
    try {
      const u = new URL(r);
      return u.protocol === target.protocol && u.host === target.host && u.host !== '';
    } catch {
      return false;
    }
  });
}

/** What an id_token_hint we signed says: its application and its person (expired ones too: the hint only names them). */
async function readHint(ctx: AppContext, hint: string | undefined): Promise<{ clientId: string; sub: string } | undefined> {
  if (!hint || hint.length > 8192) return undefined;
  try {
    const { payload } = await ctx.keys.verify(hint, 'RS256', { issuer: ctx.urls.issuer, clockTolerance: 365 * 24 * 3600 });
    const clientId = typeof payload.aud === 'string' ? payload.aud : Array.isArray(payload.aud) ? payload.aud[0] : undefined;
    return typeof clientId === 'string' && typeof payload.sub === 'string' ? { clientId, sub: payload.sub } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether another site started this request: the browser's `Sec-Fetch-Site` says so, or an
 * `Origin` or `Referer` of another origin does. A request the person made here (a link on our
 * pages, a typed address) or one without these headers (not a browser) is not.
 */
function fromAnotherSite(ctx: AppContext, req: Request): boolean {
  const site = req.get('sec-fetch-site');
  if (site === 'cross-site' || site === 'same-site') return true;
  const own = new URL(ctx.urls.issuer).origin;
  for (const header of ['origin', 'referer']) {
    const value = req.get(header);
    if (!value || value === 'null') continue;
    try {
      if (new URL(value).origin !== own) return true;
    } catch {
      return true;
    }
  }
  return false;
}

const CARRIED = ['client_id', 'post_logout_redirect_uri', 'state'] as const;

/**
 * GET and POST /oauth/logout (OpenID Connect RP-Initiated Logout), in this order:
 *   0. A `state` longer than 2048 characters is refused (400 invalid_request page): it could
 *      not be carried back in a redirect clients read.
 *   1. The application: `client_id`, else the audience of a valid `id_token_hint`; a hint for
 *      another application than `client_id` names none (and proves nothing).
 *   2. Confirmation: when this browser has a session and another site started the request
 *      without a valid `id_token_hint` for the person signed in, nothing ends yet: the person
 *      is shown a page asking them to confirm (a POST carrying the CSRF value); a cross-site
 *      link cannot sign anyone out.
 *   3. The session ends and its cookie goes (an unproven request that saw no session leaves
 *      the cookie alone).
 *   4. The person is sent to `post_logout_redirect_uri` (with `state`) when the application
 *      allows it (`allowedAfterLogout`); else they see a page saying they are signed out (and,
 *      when a return address was refused, that it was not registered).
 *   Refresh tokens are left alone (the application revokes them).
 */
export function logoutEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const q: Params = req.method === 'POST' ? ((req.body as Params) ?? {}) : (req.query as Params);
    const get = (name: string) => {
      try {
        return single(q, name);
      } catch {
        return undefined;
      }
    };
    // 0. A state longer than the authorization endpoint accepts could not be carried back in a
    // redirect clients read: refused before anything happens.
    if ((get('state')?.length ?? 0) > MAX_STATE_LENGTH) return sendPage(res, 400, errorPage('invalid_request', 'state is too long'));
    // 1. The application
    const named = get('client_id');
    const hint = await readHint(ctx, get('id_token_hint'));
    const hinted = hint && (named === undefined || named === hint.clientId) ? hint : undefined;
    const clientId = named ?? hinted?.clientId;
    const app = clientId ? await ctx.store.applications.get(clientId) : undefined;
    // 2. Confirmation, when another site asks without proof
    const signedIn = await currentSession(ctx, req);
    const confirmed = req.method === 'POST' && get('confirm') === 'yes' && verifyCsrf(ctx, req);
    const unproven = !confirmed && (signedIn ? hinted?.sub !== signedIn.user.id : !hinted) && (req.method === 'POST' || fromAnotherSite(ctx, req));
    if (signedIn && unproven) {
      const carried: Record<string, string> = {};
      for (const name of CARRIED) {
        const v = get(name);
        if (v !== undefined) carried[name] = v;
      }
      return sendPage(res, 200, confirmSignOutPage({ csrf: csrfToken(ctx, req, res), email: signedIn.user.email, ...(app ? { applicationName: app.name } : {}), carried }));
    }
    // 3. End the session. An unproven request that saw no session touches no cookie: a
    // cross-site POST does not carry the (SameSite=Lax) session cookie, yet its answer could
    // still remove it.
    if (!unproven) await endSession(ctx, req, res);
    // 4. Back to the application when allowed
    const target = get('post_logout_redirect_uri');
    if (app && target && allowedAfterLogout(app, target)) {
      const url = new URL(target);
      const state = get('state');
      if (state !== undefined) url.searchParams.append('state', state);
      res.setHeader('Cache-Control', 'no-store');
      return res.redirect(302, url.toString());
    }
    sendPage(res, 200, signedOutPage(target !== undefined && app !== undefined));
  };
}
