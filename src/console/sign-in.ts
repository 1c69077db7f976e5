import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual } from '../crypto/hash.js';
import { ProtocolError } from '../errors.js';
import { tokenResponse } from '../oauth/token.js';
import type { TokenResponse } from '../oauth/tokens.js';
import { appendChange } from './audit.js';
import { CONSOLE_CLIENT_ID, CONSOLE_ROLE, consoleApplicationShape } from '../oauth/built-in-applications.js';
import { consolePage, link, notice, sendConsolePage } from './html.js';
import { consoleAcrValues, endConsoleSession, startConsoleSession, startFlow, takeFlow } from './session.js';
import { strengthMeets } from '../oauth/authorization-endpoint.js';

/** Only console paths are returned to after sign-in. */
export function consoleReturnPath(value: unknown): string {
  if (typeof value !== 'string' || value.length > 500) return '/console';
  if (!/^\/console(\/[A-Za-z0-9._~%:@!$&'()*+,;=/-]*)?(\?[^\r\n\t\\#]*)?$/.test(value) || value.includes('//')) return '/console';
  return value;
}

const s256 = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

/** GET /console/login: the console, as an OAuth client, starts Gatehouse's authorization code flow with PKCE. */
export function startSignIn(ctx: AppContext, req: Request, res: Response): void {
  const flow = startFlow(ctx, res, consoleReturnPath(req.query.return_to));
  const accepted = consoleAcrValues(ctx);
  const url = new URL(ctx.urls.authorize);
  const params: Record<string, string> = {
    client_id: CONSOLE_CLIENT_ID,
    redirect_uri: consoleApplicationShape(ctx.urls.issuer).redirect_uris[0]!,
    response_type: 'code',
    scope: 'openid profile email',
    state: flow.state,
    nonce: flow.nonce,
    code_challenge: s256(flow.verifier),
    code_challenge_method: 'S256',
    // "Sign in as someone else": Gatehouse asks for the password even with a live session.
    ...(req.query.switch === '1' ? { prompt: 'login' } : {}),
    // The strength the console requires: Gatehouse steps a weaker session up (a code, a passkey).
    ...(accepted ? { acr_values: accepted.join(' ') } : {}),
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  res.setHeader('Cache-Control', 'no-store');
  res.redirect(302, url.toString());
}

function signInProblem(res: Response, status: number, title: string, text: string): void {
  sendConsolePage(
    res,
    status,
    consolePage({ title, body: `${notice(text)}<p>${link('/console/login', 'Sign in again')}</p>` }),
  );
}

/** The page a signed-in person without the role `admin` sees. */
export function refusedPage(email: string | undefined): string {
  return consolePage({
    title: 'No access to the console',
    body: `${notice(`The console is open to people holding the role ${CONSOLE_ROLE}.${email ? ` ${email} does not hold it.` : ''}`)}
<p>Ask an administrator to add the role to your account, then ${link('/console/login', 'sign in again')}.</p>
<p>${link('/console/login?switch=1', 'Sign in as someone else')}</p>`,
  });
}

const single = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * GET /console/callback: the authorization response. The code is exchanged through the token
 * endpoint's own core in this process (no HTTP round trip to the issuer's public URL, which
 * a server behind a proxy may not reach), then the ID token is verified like any client would:
 * signature, issuer, audience, expiry and the nonce of this browser's flow.
 */
export async function finishSignIn(ctx: AppContext, req: Request, res: Response): Promise<void> {
  res.setHeader('Cache-Control', 'no-store');
  const q = req.query as Record<string, unknown>;
  const flow = takeFlow(ctx, req, res, single(q.state));
  if (!flow) return signInProblem(res, 400, 'Sign-in expired', 'This sign-in was not started here, or took longer than ten minutes.');
  const iss = single(q.iss);
  if (iss !== undefined && iss !== ctx.urls.issuer) return signInProblem(res, 400, 'Sign-in failed', 'The answer came from another issuer.');

  const error = single(q.error);
  if (error === 'access_denied') return sendConsolePage(res, 403, refusedPage(undefined));
  if (error === 'unmet_authentication_requirements') {
    return signInProblem(res, 403, 'Stronger sign-in needed', `The console requires signing in with ${ctx.config.consoleSignInStrength === 'mfa' ? 'a one-time code or a user-verifying passkey' : 'a passkey'}, which this account has not set up. Set it up on your account page, then sign in again.`);
  }
  if (error !== undefined) {
    const why = single(q.error_description);
    return signInProblem(res, 400, 'Sign-in failed', `Gatehouse answered ${error}${why ? `: ${why}` : ''}.`);
  }
  const code = single(q.code);
  if (!code) return signInProblem(res, 400, 'Sign-in failed', 'The answer carried no code.');

  let tokens: TokenResponse;
  try {
    tokens = (await tokenResponse(
      ctx,
      { get: () => undefined, ip: req.ip, socket: req.socket },
      {
        grant_type: 'authorization_code',
        client_id: CONSOLE_CLIENT_ID,
        code,
        redirect_uri: consoleApplicationShape(ctx.urls.issuer).redirect_uris[0]!,
        code_verifier: flow.verifier,
      },
    )) as TokenResponse;
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    if (err.error === 'access_denied') return sendConsolePage(res, 403, refusedPage(undefined));
    return signInProblem(res, 400, 'Sign-in failed', `The code was refused: ${err.description ?? err.error}.`);
  }

  let claims: Record<string, unknown>;
  try {
    ({ payload: claims } = await ctx.keys.verify(tokens.id_token ?? '', 'RS256', {
      issuer: ctx.urls.issuer,
      audience: CONSOLE_CLIENT_ID,
      requiredClaims: ['sub', 'sid', 'nonce', 'exp', 'iat'],
    }));
  } catch {
    return signInProblem(res, 400, 'Sign-in failed', 'The ID token did not verify.');
  }
  if (typeof claims.nonce !== 'string' || !constantTimeEqual(claims.nonce, flow.nonce)) {
    return signInProblem(res, 400, 'Sign-in failed', 'The ID token belongs to another sign-in.');
  }

  const sub = String(claims.sub);
  const sid = String(claims.sid);
  const user = await ctx.store.users.get(sub);
  const session = await ctx.store.sessions.get(sid);
  if (!user || !session || session.ended_at !== null) return signInProblem(res, 400, 'Sign-in failed', 'The Gatehouse session ended during sign-in.');
  if (!user.roles.includes(CONSOLE_ROLE)) return sendConsolePage(res, 403, refusedPage(user.email));
  const accepted = consoleAcrValues(ctx);
  if (accepted && !strengthMeets(session.acr, accepted)) {
    return signInProblem(res, 403, 'Stronger sign-in needed', `The console requires signing in with ${ctx.config.consoleSignInStrength === 'mfa' ? 'a one-time code or a user-verifying passkey' : 'a passkey'}.`);
  }

  startConsoleSession(ctx, res, sub, sid, session.expires_at);
  await appendChange(ctx.store, { user, sid, csrf: '' }, { action: 'sign_in', target: `user:${user.id}`, details: { amr: claims.amr ?? null, acr: claims.acr ?? null } });
  res.redirect(303, flow.returnTo);
}

/** POST /console/logout: the console session ends, then the Gatehouse session (RP-initiated logout). */
export function signOut(ctx: AppContext, _req: Request, res: Response): void {
  endConsoleSession(ctx, res);
  const url = new URL(ctx.urls.logout);
  url.searchParams.set('client_id', CONSOLE_CLIENT_ID);
  url.searchParams.set('post_logout_redirect_uri', consoleApplicationShape(ctx.urls.issuer).post_logout_redirect_uris[0]!);
  res.redirect(303, url.toString());
}

export function signedOut(_ctx: AppContext, _req: Request, res: Response): void {
  sendConsolePage(
    res,
    200,
    consolePage({ title: 'Signed out', body: `<p>You are signed out of the console and of Gatehouse.</p><p>${link('/console/login', 'Sign in')}</p>` }),
  );
}

