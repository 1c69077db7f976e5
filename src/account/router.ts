import { Router, type Request, type RequestHandler, type Response } from 'express';
import { grantDelegation, withdrawDelegation } from '../agents/delegation.js';
import { ProtocolError } from '../errors.js';
import type { AppContext } from '../context.js';
import { totpStep } from '../oauth/second-step.js';
import { csrfToken, verifyCsrf } from '../oauth/csrf.js';
import { formBody } from '../oauth/params.js';
import { currentSession, endSession, loginUrl, type SignedIn } from '../oauth/session.js';
import { accountPage, totpSetupPage, type AccountPageInput } from '../pages/account.js';
import { notice, renderPage, sendPage, SCRIPT_PAGE_CSP } from '../pages/layout.js';
import { signedOutPage } from '../pages/signed-out.js';
import { changeName, endSessions, enableTotp, removePasskey, removeTotp, renamePasskey, withdrawConsent } from './actions.js';
import { groupedSecret, newTotpSecret, otpauthUri, qrCodeDataUri, TOTP_SETUP_TTL_SECONDS } from './totp.js';
import { registrationOptions, verifyRegistration } from '../oauth/passkeys.js';
import { nowSeconds } from '../clock.js';

/**
 * Adding or removing a sign-in method (passkey, authenticator app) needs a sign-in within the
 * last 10 minutes, so a browser left signed in cannot be used to take the account over.
 */
export const FRESH_SIGN_IN_SECONDS = 10 * 60;

const RETURN_TO = '/account';
const isFresh = (ctx: AppContext, s: SignedIn) => nowSeconds(ctx.clock) - s.session.auth_time <= FRESH_SIGN_IN_SECONDS;

/** The outcome messages after a change, named in `?done=`. */
const DONE: Record<string, [string, 'info' | 'error']> = {
  'profile-saved': ['Your name was saved.', 'info'],
  'passkey-added': ['The passkey was added. You can sign in with it now.', 'info'],
  'passkey-renamed': ['The passkey was renamed.', 'info'],
  'passkey-removed': ['The passkey was removed. It no longer signs you in.', 'info'],
  'totp-enabled': ['Your authenticator app is set up.', 'info'],
  'totp-removed': ['One-time codes are turned off.', 'info'],
  'session-ended': ['The session was ended.', 'info'],
  'sessions-ended': ['Your other sessions were ended.', 'info'],
  'consent-withdrawn': ['The application no longer has access to your account.', 'info'],
  'agent-allowed': ['The agent may now act for you with the capabilities shown.', 'info'],
  'agent-refused': ['That agent cannot act for you: it does not exist, is not a delegated agent, or does not hold those capabilities.', 'error'],
  'agent-withdrawn': ['The agent no longer acts for you; its tokens stop at their next use.', 'info'],
  gone: ['That item no longer exists.', 'error'],
  'sign-in-again': ['Sign in again before changing how you sign in.', 'error'],
};

const done = (res: Response, what: string, anchor = '') => res.redirect(303, `${RETURN_TO}?done=${what}${anchor}`);

const REGISTRATION_FAILURE: Record<string, string> = {
  malformed: 'Adding a passkey needs JavaScript in your browser, and the passkey prompt must complete.',
  challenge: 'The passkey request expired or was already used. Try again.',
  invalid: 'The passkey could not be verified. Try again.',
  duplicate: 'This passkey is already registered.',
};

async function showAccount(ctx: AppContext, req: Request, res: Response, signedIn: SignedIn, status = 200, message?: AccountPageInput['message']): Promise<void> {
  const { user, session } = signedIn;
  const [passkeys, sessions, consents] = [
    await ctx.store.webauthn.ofUser(user.id),
    await ctx.store.sessions.activeForUser(user.id),
    await ctx.store.oauth.consentsOfUser(user.id),
  ];
  const byId = new Map(passkeys.map((c) => [c.id, c]));
  const sessionRows = [];
  for (const s of sessions) {
    const credential = await ctx.store.webauthn.credentialOfSession(s.sid);
    sessionRows.push({ session: s, current: s.sid === session.sid, passkeyName: credential ? byId.get(credential)?.name : undefined });
  }
  const delegationRows = [];
  for (const d of await ctx.store.delegations.listForUser(user.id)) {
    const agent = await ctx.store.agents.get(d.agent_id);
    delegationRows.push({ ...d, name: agent?.name ?? d.agent_id });
  }
  const consentRows = [];
  for (const c of consents) {
    const app = await ctx.store.applications.get(c.client_id);
    consentRows.push({ ...c, name: app?.name ?? c.client_id });
  }
  const doneKey = typeof req.query.done === 'string' ? req.query.done : undefined;
  const fromQuery = doneKey && DONE[doneKey] ? { text: DONE[doneKey][0], kind: DONE[doneKey][1] } : undefined;
  sendPage(res, status, accountPage({
    csrf: csrfToken(ctx, req, res),
    user,
    fresh: isFresh(ctx, signedIn),
    freshMinutes: FRESH_SIGN_IN_SECONDS / 60,
    passkeys,
    sessions: sessionRows,
    consents: consentRows,
    delegations: delegationRows,
    message: message ?? fromQuery,
  }), SCRIPT_PAGE_CSP);
}

type AccountHandler = (signedIn: SignedIn, body: Record<string, unknown>, req: Request, res: Response) => Promise<void>;

/**
 * A POST on the account page: signed in (else to the sign-in page and back), the CSRF value
 * matching (else 403), and for `fresh` a recent sign-in (else back with a message).
 */
function accountPost(ctx: AppContext, opts: { fresh: boolean }, handler: AccountHandler): RequestHandler {
  return async (req, res) => {
    const signedIn = await currentSession(ctx, req);
    if (!signedIn) return void res.redirect(303, loginUrl(RETURN_TO));
    if (!verifyCsrf(ctx, req)) {
      return sendPage(res, 403, renderPage('Your account', `${notice('The form has expired (CSRF check failed). Go back to your account page and try again.')}
<p><a href="/account">Back to your account</a></p>`));
    }
    if (opts.fresh && !isFresh(ctx, signedIn)) return done(res, 'sign-in-again');
    await handler(signedIn, formBody(req), req, res);
  };
}

const text = (v: unknown, max: number): string | undefined => {
  if (typeof v !== 'string') return undefined;
  const t = v.trim();
  return t.length > 0 && t.length <= max ? t : undefined;
};

/** `/account` and its forms: the person's own profile, sign-in methods, sessions and consents. */
export function accountRouter(ctx: AppContext): Router {
  const router = Router();

  router.get('/account', async (req, res) => {
    const signedIn = await currentSession(ctx, req);
    if (!signedIn) return void res.redirect(302, loginUrl(RETURN_TO));
    await showAccount(ctx, req, res, signedIn);
  });

  router.post('/account/profile', accountPost(ctx, { fresh: false }, async ({ user, ...rest }, body, req, res) => {
    const name = text(body.name, 200);
    if (!name) return showAccount(ctx, req, res, { user, ...rest }, 400, { text: 'Enter a name of 1 to 200 characters.', kind: 'error' });
    if (name !== user.name) await changeName(ctx, user.id, name);
    done(res, 'profile-saved', '#profile');
  }));

  // Passkeys: the ceremony's options (JSON, for the page's script), then the form with its answer.
  router.post('/account/passkeys/options', async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const signedIn = await currentSession(ctx, req);
    if (!signedIn || !isFresh(ctx, signedIn)) {
      return void res.status(401).json({ error: 'login_required', error_description: 'sign in again to add a passkey', login_url: loginUrl(RETURN_TO) });
    }
    if (!verifyCsrf(ctx, req)) return void res.status(403).json({ error: 'invalid_request', error_description: 'the CSRF value is missing or wrong; reload the page' });
    res.json(await registrationOptions(ctx, req, res, signedIn.user));
  });

  router.post('/account/passkeys', accountPost(ctx, { fresh: true }, async (signedIn, body, req, res) => {
    const count = (await ctx.store.webauthn.ofUser(signedIn.user.id)).length;
    const name = text(body.name, 64) ?? `Passkey ${count + 1}`;
    const result = await verifyRegistration(ctx, req, body.credential, signedIn.user, name);
    if (!result.ok) return showAccount(ctx, req, res, signedIn, 400, { text: REGISTRATION_FAILURE[result.reason]!, kind: 'error' });
    done(res, 'passkey-added', '#passkeys');
  }));

  router.post('/account/passkeys/rename', accountPost(ctx, { fresh: false }, async (signedIn, body, req, res) => {
    const id = text(body.id, 1400);
    const name = text(body.name, 64);
    if (!id || !name) return showAccount(ctx, req, res, signedIn, 400, { text: 'Give the passkey a name of 1 to 64 characters.', kind: 'error' });
    done(res, (await renamePasskey(ctx, signedIn.user, id, name)) ? 'passkey-renamed' : 'gone', '#passkeys');
  }));

  router.post('/account/passkeys/remove', accountPost(ctx, { fresh: true }, async (signedIn, body, _req, res) => {
    const id = text(body.id, 1400);
    const removed = id ? await removePasskey(ctx, signedIn.user, id, body.lost === '1', signedIn.session) : false;
    done(res, removed ? 'passkey-removed' : 'gone', '#passkeys');
  }));

  // TOTP: a new secret waits (sealed) until a code from it is confirmed.
  router.post('/account/totp/setup', accountPost(ctx, { fresh: true }, async ({ user }, _body, _req, res) => {
    await ctx.store.users.setPendingTotp(user.id, ctx.box.seal(newTotpSecret()), nowSeconds(ctx.clock) + TOTP_SETUP_TTL_SECONDS);
    res.redirect(303, '/account/totp');
  }));

  const showTotpSetup = async (req: Request, res: Response, signedIn: SignedIn, status: number, message?: string) => {
    const sealed = await ctx.store.users.pendingTotp(signedIn.user.id);
    if (!sealed || !isFresh(ctx, signedIn)) return done(res, sealed ? 'sign-in-again' : 'gone', '#totp');
    const secret = ctx.box.open(sealed);
    const uri = otpauthUri(ctx, signedIn.user, secret);
    sendPage(res, status, totpSetupPage({
      csrf: csrfToken(ctx, req, res),
      email: signedIn.user.email,
      qrDataUri: await qrCodeDataUri(uri),
      secretGrouped: groupedSecret(secret),
      otpauthUri: uri,
      replacing: signedIn.user.has_totp,
      message,
    }));
  };

  router.get('/account/totp', async (req, res) => {
    const signedIn = await currentSession(ctx, req);
    if (!signedIn) return void res.redirect(302, loginUrl(RETURN_TO));
    await showTotpSetup(req, res, signedIn, 200);
  });

  router.post('/account/totp/confirm', accountPost(ctx, { fresh: true }, async (signedIn, body, req, res) => {
    const { user, session } = signedIn;
    const sealed = await ctx.store.users.pendingTotp(user.id);
    if (!sealed) return done(res, 'gone', '#totp');
    const otp = typeof body.otp === 'string' ? body.otp.trim() : '';
    const step = totpStep(ctx, sealed, otp);
    // The confirming code is spent like a sign-in code: it cannot be replayed at the sign-in step.
    if (step === undefined || !(await ctx.store.oauth.useTotpStep(user.id, step))) {
      return showTotpSetup(req, res, signedIn, 400, 'The code is not correct. Enter the current code from your app.');
    }
    if (!(await enableTotp(ctx, user, sealed, session))) return done(res, 'gone', '#totp');
    done(res, 'totp-enabled', '#totp');
  }));

  router.post('/account/totp/remove', accountPost(ctx, { fresh: true }, async ({ user, session }, body, _req, res) => {
    done(res, (await removeTotp(ctx, user, body.lost === '1', session)) ? 'totp-removed' : 'gone', '#totp');
  }));

  // Sessions: one, all others, or all (then this browser is signed out too).
  router.post('/account/sessions/end', accountPost(ctx, { fresh: false }, async ({ user, session }, body, req, res) => {
    const sid = text(body.sid, 100);
    const ended = sid ? await endSessions(ctx, user, [sid]) : 0;
    if (sid === session.sid && ended) return signedOut(ctx, req, res);
    done(res, ended ? 'session-ended' : 'gone', '#sessions');
  }));

  router.post('/account/sessions/end-all', accountPost(ctx, { fresh: false }, async ({ user, session }, body, req, res) => {
    const keepCurrent = body.keep_current === '1';
    const sids = (await ctx.store.sessions.activeForUser(user.id)).map((s) => s.sid).filter((sid) => !keepCurrent || sid !== session.sid);
    await endSessions(ctx, user, sids);
    if (!keepCurrent) return signedOut(ctx, req, res);
    done(res, 'sessions-ended', '#sessions');
  }));

  router.post('/account/consents/withdraw', accountPost(ctx, { fresh: false }, async ({ user }, body, _req, res) => {
    const clientId = text(body.client_id, 200);
    done(res, clientId && (await withdrawConsent(ctx, user, clientId)) ? 'consent-withdrawn' : 'gone', '#applications');
  }));

  // Agents acting for the person: granting needs a recent sign-in, withdrawing does not.
  router.post('/account/agents/allow', accountPost(ctx, { fresh: true }, async ({ user }, body, _req, res) => {
    const agentId = text(body.agent_id, 512);
    const agent = agentId ? await ctx.store.agents.get(agentId) : undefined;
    if (!agent) return done(res, 'agent-refused', '#agents');
    const named = (text(body.capabilities, 4000) ?? '').split(/\s+/).filter(Boolean);
    try {
      await grantDelegation(ctx, user.id, agent.agent_id, named.length ? named : agent.capabilities.map((c) => c.name), 'user');
    } catch (err) {
      if (err instanceof ProtocolError && err.status < 500) return done(res, 'agent-refused', '#agents');
      throw err;
    }
    done(res, 'agent-allowed', '#agents');
  }));

  router.post('/account/agents/withdraw', accountPost(ctx, { fresh: false }, async ({ user }, body, _req, res) => {
    const agentId = text(body.agent_id, 512);
    done(res, agentId && (await withdrawDelegation(ctx, user.id, agentId, 'user')) ? 'agent-withdrawn' : 'gone', '#agents');
  }));

  return router;
}

/** This browser's session has ended: clear its cookie and say so. */
async function signedOut(ctx: AppContext, req: Request, res: Response): Promise<void> {
  await endSession(ctx, req, res);
  sendPage(res, 200, signedOutPage());
}
