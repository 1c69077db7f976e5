import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { presentedToken, verifyAccessToken } from './access-token.js';
import { checkSenderConstraint, refusedTokenChallenge } from './dpop.js';
import { formBody } from './params.js';

const challenge = (error?: string) => ({
  'WWW-Authenticate': error ? `Bearer realm="gatehouse", error="${error}"` : 'Bearer realm="gatehouse"',
});

/**
 * GET or POST /oauth/userinfo: the person's profile filtered by the token's scopes. The profile
 * is read on every call; groups and roles come from the access token.
 */
export function userinfoEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    // 1. The access token (Bearer or DPoP)
    const credential = presentedToken(req.get('authorization'), req.method === 'POST' ? formBody(req).access_token : undefined);
    if (!credential) throw errors.invalidToken('a bearer access token is required', {}, challenge());
    const claims = await verifyAccessToken(ctx, credential.token);
    // 2. A person's token (it carries a session id), for a person who still exists
    const user = claims?.sid ? await ctx.store.users.get(claims.sub!) : undefined;
    if (!claims || !user) {
      const description = 'the access token is not valid';
      throw errors.invalidToken(description, {}, refusedTokenChallenge(credential.scheme, description, challenge('invalid_token')['WWW-Authenticate']));
    }
    // 3. A DPoP-bound token with its proof for this request
    await checkSenderConstraint(ctx, req, credential, claims, { htm: req.method, htu: ctx.urls.userinfo });
    // 4. Filter by scope
    const scopes = new Set((claims.scope ?? '').split(' '));
    const info: Record<string, unknown> = { sub: user.id };
    if (scopes.has('email')) {
      info.email = user.email;
      info.email_verified = user.email_verified;
    }
    if (scopes.has('profile')) {
      info.name = user.name;
      if (user.picture != null) info.picture = user.picture;
      if (user.locale != null) info.locale = user.locale;
      info.groups = Array.isArray(claims.groups) ? claims.groups : [];
      info.roles = Array.isArray(claims.roles) ? claims.roles : [];
    }
    res.json(info);
  };
}
