import type { Request, RequestHandler, Response } from 'express';
import { Secret, TOTP } from 'otpauth';
import type { AppContext } from '../context.js';
import { sendPage } from '../pages/layout.js';
import { secondStepPage } from '../pages/second-step.js';
import type { PendingRequest } from '../store/oauth.js';
import type { UserCredentials } from '../store/users.js';
import { continueAuthorization, withOneTimeCode } from './authorization-endpoint.js';
import { csrfToken, verifyCsrf } from './csrf.js';
import { formBody } from './params.js';
import { loadPending } from './pending.js';
import { signInLimiter } from './rate-limit.js';
import { currentSession, startSession, type SignedIn } from './session.js';
import { nowSeconds } from '../clock.js';

const PERIOD = 30;

/**
 * Who is taking the second step: the person who just passed the password step of this request,
 * or (a step-up) the person of the current session.
 */
async function personOf(ctx: AppContext, req: Request, pending: PendingRequest): Promise<{ account: UserCredentials; signedIn?: SignedIn } | undefined> {
  const signedIn = await currentSession(ctx, req);
  const userId = pending.user_id ?? signedIn?.user.id;
  const account = userId ? await ctx.store.users.credentialsById(userId) : undefined;
  return account ? { account, signedIn } : undefined;
}

/**
 * The accepted time step of a 6-digit, 30-second TOTP code (RFC 6238), one step of clock skew
 * allowed. Exported for the account page, which confirms a new secret the same way.
 */
export function totpStep(ctx: AppContext, sealedSecret: string, otp: string): number | undefined {
  if (!/^\d{6}$/.test(otp)) return undefined;
  try {
    const secret = Secret.fromBase32(ctx.box.open(sealedSecret).replace(/\s+/g, '').toUpperCase());
    const totp = new TOTP({ secret, digits: 6, period: PERIOD, algorithm: 'SHA1' });
    const now = ctx.clock.now();
    const delta = totp.validate({ token: otp, timestamp: now, window: 1 });
    return delta === null ? undefined : Math.floor(now / 1000 / PERIOD) + delta;
  } catch {
    return undefined;
  }
}

function showForm(ctx: AppContext, req: Request, res: Response, status: number, requestId: string, message?: string): void {
  sendPage(res, status, secondStepPage({ csrf: csrfToken(ctx, req, res), requestId, message }));
}

/** GET /login/otp?request=<pending id>. */
export function secondStepForm(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const pending = await loadPending(ctx, res, (req.query as Record<string, unknown>).request);
    if (!pending) return;
    if (!(await personOf(ctx, req, pending))) return void res.redirect(302, `/login?request=${encodeURIComponent(pending.id)}`);
    showForm(ctx, req, res, 200, pending.id);
  };
}

/** POST /login/otp: the code, checked once (a used time step is refused), then the authorization moves on. */
export function secondStepSubmit(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const body = formBody(req);
    const pending = await loadPending(ctx, res, body.request);
    if (!pending) return;
    const who = await personOf(ctx, req, pending);
    if (!who) return void res.redirect(302, `/login?request=${encodeURIComponent(pending.id)}`);
    if (!verifyCsrf(ctx, req)) return showForm(ctx, req, res, 400, pending.id, 'The form expired. Please enter the code again.');

    const { account, signedIn } = who;
    const limiter = signInLimiter(ctx);
    const ip = req.ip ?? 'unknown';
    if (await limiter.blocked(account.email, ip)) {
      res.setHeader('Retry-After', '900');
      return showForm(ctx, req, res, 429, pending.id, 'Too many failed attempts (rate_limited). Try again later.');
    }
    const otp = typeof body.otp === 'string' ? body.otp.trim() : '';
    const step = account.totp_secret_enc ? totpStep(ctx, account.totp_secret_enc, otp) : undefined;
    if (step === undefined || !(await ctx.store.oauth.useTotpStep(account.id, step))) {
      await limiter.fail(account.email, ip);
      return showForm(ctx, req, res, 200, pending.id, 'The code is not correct. Enter the current code from your app.');
    }
    await limiter.succeed(account.email);

    // Both factors passed: a new session (after the password step) or a stronger one (a step-up
    // of this person's session: password + code is mfa, passkey + code is passkey_mfa).
    let session;
    if (pending.user_id || !signedIn || signedIn.user.id !== account.id) {
      const strength = withOneTimeCode(undefined);
      session = await startSession(ctx, res, account.id, strength.amr, strength.acr, signedIn?.session);
      await ctx.store.oauth.setRequestUser(pending.id, null);
    } else {
      const strength = withOneTimeCode(signedIn.session);
      const authTime = nowSeconds(ctx.clock);
      await ctx.store.sessions.update(signedIn.session.sid, authTime, strength.amr, strength.acr);
      session = { ...signedIn.session, auth_time: authTime, ...strength };
    }
    await ctx.store.oauth.markRequestFresh(pending.id);
    await continueAuthorization(ctx, req, res, { ...pending, user_id: null, fresh: true }, { session, user: account });
  };
}
