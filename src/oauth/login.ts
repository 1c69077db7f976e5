import type { Request, RequestHandler, Response } from 'express';
import { signInOptions, verifySignIn, type AllowList, type SignInFailure } from './passkeys.js';
import type { AppContext } from '../context.js';
import { sha256, verifyPassword } from '../crypto/hash.js';
import { ACR_VALUES } from './acr.js';
import { sendPage, SCRIPT_PAGE_CSP } from '../pages/layout.js';
import { loginPage, passkeyStepPage, type LoginPageInput } from '../pages/login.js';
import type { PendingRequest } from '../store/oauth.js';
import type { User } from '../store/users.js';
import {
  acceptedAcr, continueAuthorization, nextStrengthStep, redirectError, STRENGTH, unmetDescription, type Strength,
} from './authorization-endpoint.js';
import { csrfToken, verifyCsrf } from './csrf.js';
import { errors } from '../errors.js';
import { formBody } from './params.js';
import { loadPending } from './pending.js';
import { LIMITS, signInLimiter } from './rate-limit.js';
import { currentSession, safeReturnTo, startSession, type SignedIn } from './session.js';
import { nowSeconds } from '../clock.js';

const clientIp = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

function showLogin(ctx: AppContext, req: Request, res: Response, status: number, p: Omit<LoginPageInput, 'csrf'>): void {
  sendPage(res, status, loginPage({ ...p, csrf: csrfToken(ctx, req, res) }), SCRIPT_PAGE_CSP);
}

const PASSKEY_VALUES: readonly string[] = [ACR_VALUES.passkey, ACR_VALUES.passkeyMfa];
/** Every strength the request accepts needs a passkey. */
const onlyPasskeys = (pending: PendingRequest | undefined) => {
  const accepted = pending && acceptedAcr(pending.params);
  return !!accepted && accepted.every((a) => PASSKEY_VALUES.includes(a));
};

/** The sign-in page for a pending request (or a return path), with a message. */
async function loginAgain(
  ctx: AppContext, req: Request, res: Response, status: number,
  at: { pending?: PendingRequest; returnTo?: string; email?: string }, message?: string,
): Promise<void> {
  const app = at.pending ? await ctx.store.applications.get(at.pending.client_id) : undefined;
  showLogin(ctx, req, res, status, {
    requestId: at.pending?.id,
    returnTo: at.pending ? undefined : at.returnTo,
    email: at.email ?? at.pending?.params.login_hint,
    applicationName: app?.name,
    passkeyRequired: onlyPasskeys(at.pending),
    message,
  });
}

/** GET /login?request=<pending id> (or ?return_to=/path for the service's own pages). */
export function loginForm(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const q = req.query as Record<string, unknown>;
    if (q.request === undefined) return loginAgain(ctx, req, res, 200, { returnTo: safeReturnTo(q.return_to) ?? '/' });
    const pending = await loadPending(ctx, res, q.request);
    if (!pending) return;
    await loginAgain(ctx, req, res, 200, { pending });
  };
}

/**
 * POST /login: check the CSRF value, the rate limits and the password; then start the session
 * (or hold the person for the second step or the passkey) and move the authorization request on.
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
    const again = (status: number, message: string) => loginAgain(ctx, req, res, status, { pending, returnTo, email }, message);

    // 2. The form came from our page
    if (!verifyCsrf(ctx, req)) return again(400, 'The form expired. Please sign in again.');
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

    // 5. Sign in: a session now, or first the second step or a passkey
    const previous = (await currentSession(ctx, req))?.session;
    if (!pending) {
      await startSession(ctx, res, account.id, [...STRENGTH.oneFactor.amr], STRENGTH.oneFactor.acr, previous);
      return res.redirect(302, returnTo!);
    }
    const accepted = acceptedAcr(pending.params);
    const step = await nextStrengthStep(ctx, account, accepted, undefined);
    if (step === 'unmet') {
      await ctx.store.oauth.deleteRequest(pending.id);
      return redirectError(ctx, res, pending.params.redirect_uri, pending.params.state,
        errors.unmetAuthenticationRequirements(unmetDescription(accepted ?? [])));
    }
    if (step !== 'done') {
      // No session from the password alone: it does not reach the strength asked for.
      await ctx.store.oauth.setRequestUser(pending.id, account.id);
      return res.redirect(302, `${step === 'otp' ? '/login/otp' : '/login/passkey'}?request=${encodeURIComponent(pending.id)}`);
    }
    const session = await startSession(ctx, res, account.id, [...STRENGTH.oneFactor.amr], STRENGTH.oneFactor.acr, previous);
    await ctx.store.oauth.markRequestFresh(pending.id);
    await continueAuthorization(ctx, req, res, { ...pending, fresh: true }, { session, user: account });
  };
}

// ---- Passkeys ---------------------------------------------------------------------------------

/** Challenges asked for per client address (each is a row until it is used or expires). */
const OPTIONS_LIMIT = { max: 120, windowSeconds: 5 * 60 };
const optionsKey = (ip: string) => `webauthn:options:${sha256(ip)}`;
/**
 * Refused passkeys, counted per client address and per credential, apart from passwords. Past
 * `free` failures in the window, each further failure is answered 429 with a Retry-After that
 * doubles (at most `maxWaitSeconds`). A passkey that verifies is never refused for them: it
 * cannot be guessed, and failures someone else causes (from a shared address, with a removed
 * passkey or a cancelled prompt) must not lock its owner out.
 */
const PASSKEY_FAILURES = { free: 10, windowSeconds: LIMITS.address.windowSeconds, maxWaitSeconds: 900 };
const passkeyFailureKey = (ip: string) => `webauthn:fail:${sha256(ip)}`;
const credentialFailureKey = (id: string) => `webauthn:fail:cred:${sha256(id)}`;

/** The credential ID an answer names (unverified), to count its failures. */
function answeredCredentialId(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length > 65_536) return undefined;
  try {
    const id = (JSON.parse(raw) as { id?: unknown }).id;
    return typeof id === 'string' && id.length > 0 && id.length <= 1024 ? id : undefined;
  } catch {
    return undefined;
  }
}

const FAILURE_TEXT: Record<SignInFailure, string> = {
  malformed: 'The answer from your passkey could not be read. Try again.',
  challenge: 'The passkey request expired or was already used. Try again.',
  unknown_credential: 'This passkey is not registered here. Sign in with your password or another passkey.',
  wrong_person: 'This passkey belongs to another account.',
  suspended: 'This passkey has been suspended because it may have been copied. Sign in another way and remove it from your account.',
  cloned: 'This passkey has been suspended because it may have been copied. Sign in another way and remove it from your account.',
  invalid: 'The passkey could not be verified. Try again.',
};

/**
 * The person a passkey step is for: the one who passed the password step of this request, or
 * (a step-up) the person of the current session.
 */
async function stepPerson(ctx: AppContext, req: Request, pending: PendingRequest): Promise<{ user: User; signedIn?: SignedIn } | undefined> {
  const signedIn = await currentSession(ctx, req);
  const userId = pending.user_id ?? signedIn?.user.id;
  const user = userId ? await ctx.store.users.get(userId) : undefined;
  return user ? { user, signedIn } : undefined;
}

const jsonError = (res: Response, status: number, error: string, description: string) =>
  void res.status(status).setHeader('Cache-Control', 'no-store').json({ error, error_description: description });

/**
 * POST /login/passkey/options (JSON `{csrf, request?, return_to?, mode, email?}`): a sign-in
 * challenge. `mode` `autofill` or `button` without an email: discoverable passkeys; `button`
 * with an email: that account's passkeys (email first); `step`: the passkeys of the person the
 * request's passkey step is for.
 */
export function passkeyOptions(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const body = formBody(req);
    if (!verifyCsrf(ctx, req)) return jsonError(res, 403, 'invalid_request', 'the CSRF value is missing or wrong; reload the page');
    const ip = clientIp(req);
    if ((await ctx.store.rateLimits.hit(optionsKey(ip), OPTIONS_LIMIT.windowSeconds)) > OPTIONS_LIMIT.max) {
      res.setHeader('Retry-After', String(OPTIONS_LIMIT.windowSeconds));
      return jsonError(res, 429, 'rate_limited', 'too many passkey requests; try again later');
    }
    const mode = body.mode;
    if (mode !== 'autofill' && mode !== 'button' && mode !== 'step') return jsonError(res, 400, 'invalid_request', 'mode must be autofill, button or step');
    const requestId = body.request === undefined ? undefined : body.request;
    if (requestId !== undefined && typeof requestId !== 'string') return jsonError(res, 400, 'invalid_request', 'request must be a string');
    const pending = requestId ? await ctx.store.oauth.getRequest(requestId.slice(0, 100)) : undefined;
    if (requestId && !pending) return jsonError(res, 400, 'invalid_request', 'this sign-in request has expired; go back to the application and start again');

    let allow: AllowList = { kind: 'any' };
    if (mode === 'step') {
      const who = pending && (await stepPerson(ctx, req, pending));
      if (!who) return jsonError(res, 400, 'invalid_request', 'no passkey step is waiting for this browser');
      allow = { kind: 'person', user: who.user };
    } else if (mode === 'button' && typeof body.email === 'string' && body.email.trim()) {
      const email = body.email.trim().slice(0, 320);
      allow = { kind: 'email', email, user: await ctx.store.users.getByEmail(email) };
    }
    const options = await signInOptions(ctx, req, res, allow, pending?.id);
    res.setHeader('Cache-Control', 'no-store');
    res.json(options);
  };
}

/** GET /login/passkey?request=<pending id>: the passkey step for a person already known. */
export function passkeyStepForm(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const pending = await loadPending(ctx, res, (req.query as Record<string, unknown>).request);
    if (!pending) return;
    await showPasskeyStep(ctx, req, res, pending, 200);
  };
}

async function showPasskeyStep(ctx: AppContext, req: Request, res: Response, pending: PendingRequest, status: number, message?: string): Promise<void> {
  const who = await stepPerson(ctx, req, pending);
  if (!who) return void res.redirect(302, `/login?request=${encodeURIComponent(pending.id)}`);
  const app = await ctx.store.applications.get(pending.client_id);
  sendPage(res, status, passkeyStepPage({
    csrf: csrfToken(ctx, req, res), requestId: pending.id, email: who.user.email, applicationName: app?.name, message,
  }), SCRIPT_PAGE_CSP);
}

/**
 * POST /login/passkey (form: `csrf`, `request` or `return_to`, `credential` = the browser's
 * answer as JSON, `mode`): verifies the passkey, then signs in like the password form does.
 * The same person's session is stepped up (same `sid`); anyone else gets a new session.
 */
export function passkeySubmit(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    const body = formBody(req);
    const requestId = typeof body.request === 'string' ? body.request : undefined;
    const returnTo = requestId ? undefined : (safeReturnTo(body.return_to) ?? '/');
    const pending = requestId ? await loadPending(ctx, res, requestId) : undefined;
    if (requestId && !pending) return;
    const step = body.mode === 'step' && pending !== undefined;
    const again = (status: number, message: string) =>
      step ? showPasskeyStep(ctx, req, res, pending!, status, message) : loginAgain(ctx, req, res, status, { pending, returnTo }, message);

    if (!verifyCsrf(ctx, req)) return again(400, 'The form expired. Please try again.');
    const ip = clientIp(req);

    const result = await verifySignIn(ctx, req, body.credential, pending?.id);
    if (!result.ok) {
      const credentialId = answeredCredentialId(body.credential);
      const failures = Math.max(
        await ctx.store.rateLimits.hit(passkeyFailureKey(ip), PASSKEY_FAILURES.windowSeconds),
        credentialId ? await ctx.store.rateLimits.hit(credentialFailureKey(credentialId), PASSKEY_FAILURES.windowSeconds) : 0,
      );
      req.log.info({ reason: result.reason, user_id: result.userId, failures }, 'passkey sign-in refused');
      if (failures > PASSKEY_FAILURES.free) {
        const wait = Math.min(PASSKEY_FAILURES.maxWaitSeconds, 2 ** Math.min(failures - PASSKEY_FAILURES.free, 10));
        res.setHeader('Retry-After', String(wait));
        return again(429, 'Too many failed sign-in attempts (rate_limited). Try again later.');
      }
      return again(result.reason === 'challenge' || result.reason === 'malformed' ? 400 : 200, FAILURE_TEXT[result.reason]);
    }
    const { user, credential, strength } = result;
    const signedIn = await currentSession(ctx, req);
    const session = await passkeySession(ctx, res, user, strength, signedIn);
    await ctx.store.webauthn.linkSession(session.sid, credential.id);
    if (!pending) return res.redirect(302, returnTo!);
    await ctx.store.oauth.setRequestUser(pending.id, null);
    await ctx.store.oauth.markRequestFresh(pending.id);
    await continueAuthorization(ctx, req, res, { ...pending, user_id: null, fresh: true }, { session, user });
  };
}

/** The session after a passkey: the same person's session gets the new strength, anyone else a new one. */
async function passkeySession(ctx: AppContext, res: Response, user: User, strength: Strength, signedIn: SignedIn | undefined) {
  if (signedIn && signedIn.user.id === user.id) {
    const authTime = nowSeconds(ctx.clock);
    await ctx.store.sessions.update(signedIn.session.sid, authTime, strength.amr, strength.acr);
    return { ...signedIn.session, auth_time: authTime, amr: strength.amr, acr: strength.acr };
  }
  return startSession(ctx, res, user.id, strength.amr, strength.acr, signedIn?.session);
}
