import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { sendPage } from '../pages/layout.js';
import { signedOutPage } from '../pages/signed-out.js';
import type { Application } from '../store/applications.js';
import { single, type Params } from './params.js';
import { endSession } from './session.js';

/** Listed in post_logout_redirect_uris, or the scheme and host of a registered redirect URI. */
function allowedAfterLogout(app: Application, uri: string): boolean {
  if (app.post_logout_redirect_uris.includes(uri)) return true;
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

/** The client of an id_token_hint we signed (expired ones too: the hint only names the application). */
async function clientFromHint(ctx: AppContext, hint: string | undefined): Promise<string | undefined> {
  if (!hint || hint.length > 8192) return undefined;
  try {
    const { payload } = await ctx.keys.verify(hint, 'RS256', { issuer: ctx.urls.issuer, clockTolerance: 365 * 24 * 3600 });
    return typeof payload.aud === 'string' ? payload.aud : Array.isArray(payload.aud) ? payload.aud[0] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * GET /oauth/logout, in four rules: the session ends and its cookie goes; the
 * person is sent to an allowed post_logout_redirect_uri (with state), else sees a signed-out
 * page; refresh tokens are left alone (the application revokes them).
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
    // 1. End the session
    await endSession(ctx, req, res);
    // 2. Back to the application when allowed
    const clientId = get('client_id') ?? (await clientFromHint(ctx, get('id_token_hint')));
    const target = get('post_logout_redirect_uri');
    const app = clientId ? await ctx.store.applications.get(clientId) : undefined;
    if (app && target && allowedAfterLogout(app, target)) {
      const url = new URL(target);
      const state = get('state');
      if (state !== undefined) url.searchParams.append('state', state);
      res.setHeader('Cache-Control', 'no-store');
      return res.redirect(302, url.toString());
    }
    // 3. Otherwise a page
    sendPage(res, 200, signedOutPage());
  };
}
