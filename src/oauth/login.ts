import type { Request, RequestHandler, Response } from 'express';
import type { AppContext } from '../context.js';
import { verifyPassword } from '../crypto/hash.js';
import { ACR_VALUES } from '../http/discovery.js';
import { sendPage } from '../pages/layout.js';
import { loginPage, type LoginPageInput } from '../pages/login.js';
import { continueAuthorization, redirectError, STRENGTH } from './authorize.js';
import { csrfToken, verifyCsrf } from './csrf.js';
import { errors } from '../errors.js';
import { formBody } from './params.js';
import { loadPending } from './pending.js';
import { signInLimiter } from './rate-limit.js';
import { currentSession, safeReturnTo, startSession } from './session.js';

const clientIp = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

function showLogin(ctx: AppContext, req: Request, res: Response, status: number, p: Omit<LoginPageInput, 'csrf'>): void {
  sendPage(res, status, loginPage({ ...p, csrf: csrfToken(ctx, req, res) }));
}

/** GET /login?request=<pending id> (or ?return_to=/path for the service's own pages). */
export function loginForm(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const q = req.query as Record<string, unknown>;
    if (q.request === undefined) {
      const returnTo = safeReturnTo(q.return_to) ?? '/';
      return showLogin(ctx, req, res, 200, { returnTo });
    }
    const pending = await loadPending(ctx, res, q.request);
    if (!pending) return;
    const app = await ctx.store.applications.get(pending.client_id);
    showLogin(ctx, req, res, 200, { requestId: pending.id, email: pending.params.login_hint, applicationName: app?.name });
  };
}

/**
 * POST /login: check the CSRF value, the rate limits and the password; then start the session
 * (or hold the person for the second step) and move the authorization request on.
 */
export function loginSubmit(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const body = formBody(req);
    const email = typeof body.email === 'string' ? body.email.trim().slice(0, 320) : '';
    const password = typeof body.password === 'string' ? body.password.slice(0, 1024) : '';
    const requestId = typeof body.request === 'string' ? body.request : undefined;
    const returnTo = requestId ? undefined : (safeReturnTo(body.return_to) ?? '/');

    // 1. The pending request (when signing in for an application)
    const pending = requestId ? await loadPending(ctx, res, requestId) : undefined;
    if (requestId && !pending) return;
    const appName = pending ? (await ctx.store.applications.get(pending.client_id))?.name : undefined;
    const again = (status: number, message: string) =>
      showLogin(ctx, req, res, status, { requestId, returnTo, email, applicationName: appName, message });

    // 2. The form came from our page
    if (!verifyCsrf(req)) return again(400, 'The form expired. Please sign in again.');
    if (!email || !password) return again(400, 'Enter your email and password.');

    // 3. Not too many failures for this account or address
    const limiter = signInLimiter(ctx);
    const ip = clientIp(req);
    if (await limiter.blocked(email, ip)) {
      res.setHeader('Retry-After', '900');
      return again(429, 'Too many failed sign-in attempts (rate_limited). Try again later.');
    }

    // 4. The password (always hashed, so timing does not tell whether the account exists)
    const account = await ctx.store.users.credentialsByEmail(email);
    const ok = await verifyPassword(password, account?.password_hash);
    if (!account || !ok) {
      await limiter.fail(email, ip);
      return again(200, 'The email or password is not correct.');
    }
    if (account.password_compromised) {
      return again(200, 'This password can no longer be used because it may be compromised. Reset your password to sign in.');
    }
    await limiter.succeed(email);

    // 5. Sign in: a session now, or the second step first
    const previous = (await currentSession(ctx, req))?.session;
    if (!pending) {
      await startSession(ctx, res, account.id, [...STRENGTH.oneFactor.amr], STRENGTH.oneFactor.acr, previous);
      return res.redirect(302, returnTo!);
    }
    if (pending.params.acr_required === ACR_VALUES.mfa) {
      if (!account.has_totp) {
        await ctx.store.oauth.deleteRequest(pending.id);
        return redirectError(ctx, res, pending.params.redirect_uri, pending.params.state,
          errors.unmetAuthenticationRequirements('a second factor is required and the person has none'));
      }
      await ctx.store.oauth.setRequestUser(pending.id, account.id);
      return res.redirect(302, `/login/otp?request=${encodeURIComponent(pending.id)}`);
    }
    const session = await startSession(ctx, res, account.id, [...STRENGTH.oneFactor.amr], STRENGTH.oneFactor.acr, previous);
    await ctx.store.oauth.markRequestFresh(pending.id);
    await continueAuthorization(ctx, req, res, { ...pending, fresh: true }, { session, user: account });
  };
}
