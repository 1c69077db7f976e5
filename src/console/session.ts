import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual, randomToken } from '../crypto/hash.js';
import type { User } from '../store/users.js';
import { CONSOLE_ROLE } from '../oauth/built-in-applications.js';
import { ACR_VALUES } from '../oauth/acr.js';
import { strengthMeets } from '../oauth/authorization-endpoint.js';
import { nowSeconds } from '../clock.js';
import { cookieFlags, cookieName } from '../oauth/cookies.js';

/**
 * The console's own cookies, all on path /console, HttpOnly, SameSite=Lax, Secure (and named `__Secure-...`) on a secure request (see src/oauth/cookies.ts):
 * - the sign-in flow (state, nonce, PKCE verifier, where to return), sealed, 10 minutes, single use;
 * - the console session (the person, their Gatehouse session, the CSRF token), sealed;
 * - a one-line message for the next page (escaped when shown).
 * Sealed means AES-256-GCM with the service's secret box: the browser can neither read nor forge them.
 */
const FLOW_COOKIE = 'gatehouse_console_flow';
const SESSION_COOKIE = 'gatehouse_console';
const FLASH_COOKIE = 'gatehouse_console_flash';
export const FLOW_TTL_SECONDS = 10 * 60;
/** A console session lasts at most this long, and never longer than the Gatehouse session it came from. */
export const CONSOLE_SESSION_TTL_SECONDS = 8 * 60 * 60;


export function consoleCookieOptions(ctx: AppContext, req: Request) {
  return cookieFlags(ctx, req, '/console');
}

/** A console cookie's name on this request (`__Secure-` on a secure one: the path is not `/`). */
const nameOf = (ctx: AppContext, req: Request, base: string): string => cookieName(ctx, req, base, '/console');

function cookie(ctx: AppContext, req: Request, base: string): string | undefined {
  const v = (req.cookies as Record<string, unknown> | undefined)?.[nameOf(ctx, req, base)];
  return typeof v === 'string' && v.length <= 4096 ? v : undefined;
}

/**
 * A sealed value names its purpose, so one kind of cookie (or sealed form field) cannot stand in
 * for another; it is refused after `exp`.
 */
export function seal(ctx: AppContext, purpose: string, data: object, exp: number): string {
  return ctx.box.seal(JSON.stringify({ purpose, exp, data }));
}

export function unseal<T>(ctx: AppContext, purpose: string, value: string | undefined): T | undefined {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(ctx.box.open(value)) as { purpose?: unknown; exp?: unknown; data?: unknown };
    if (parsed.purpose !== purpose || typeof parsed.exp !== 'number' || parsed.exp <= nowSeconds(ctx.clock)) return undefined;
    return parsed.data as T;
  } catch {
    return undefined;
  }
}

// ---- the sign-in flow -----------------------------------------------------------------

export interface SignInFlow {
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
}

export function startFlow(ctx: AppContext, res: Response, returnTo: string): SignInFlow {
  const flow: SignInFlow = { state: randomToken(), nonce: randomToken(), verifier: randomToken(48), returnTo };
  res.cookie(nameOf(ctx, res.req, FLOW_COOKIE), seal(ctx, 'console-flow', flow, nowSeconds(ctx.clock) + FLOW_TTL_SECONDS), {
    ...consoleCookieOptions(ctx, res.req),
    maxAge: FLOW_TTL_SECONDS * 1000,
  });
  return flow;
}

/** The flow this browser started, when `state` is its state; the cookie is spent either way. */
export function takeFlow(ctx: AppContext, req: Request, res: Response, state: string | undefined): SignInFlow | undefined {
  const flow = unseal<SignInFlow>(ctx, 'console-flow', cookie(ctx, req, FLOW_COOKIE));
  res.clearCookie(nameOf(ctx, res.req, FLOW_COOKIE), consoleCookieOptions(ctx, res.req));
  if (!flow || typeof state !== 'string' || !constantTimeEqual(flow.state, state)) return undefined;
  return flow;
}

// ---- the console session --------------------------------------------------------------

interface SessionData {
  sub: string;
  sid: string;
  csrf: string;
}

/** The person using the console: an administrator with a live Gatehouse session. */
export interface Person {
  user: User;
  sid: string;
  csrf: string;
}

export function startConsoleSession(ctx: AppContext, res: Response, sub: string, sid: string, gatehouseSessionExpires: number): void {
  const exp = Math.min(nowSeconds(ctx.clock) + CONSOLE_SESSION_TTL_SECONDS, gatehouseSessionExpires);
  const data: SessionData = { sub, sid, csrf: randomToken() };
  res.cookie(nameOf(ctx, res.req, SESSION_COOKIE), seal(ctx, 'console-session', data, exp), {
    ...consoleCookieOptions(ctx, res.req),
    maxAge: Math.max(exp - nowSeconds(ctx.clock), 0) * 1000,
  });
}

export function endConsoleSession(ctx: AppContext, res: Response): void {
  res.clearCookie(nameOf(ctx, res.req, SESSION_COOKIE), consoleCookieOptions(ctx, res.req));
}

/**
 * The acr values the console asks Gatehouse for (undefined: any sign-in): `mfa` is a one-time
 * code after the password or passkey, or a user-verifying passkey; `passkey` is a passkey.
 */
export function consoleAcrValues(ctx: AppContext): string[] | undefined {
  switch (ctx.config.consoleSignInStrength) {
    case 'mfa':
      return [ACR_VALUES.mfa, ACR_VALUES.passkeyMfa];
    case 'passkey':
      return [ACR_VALUES.passkey];
    default:
      return undefined;
  }
}

export type PersonLookup = { person: Person } | { refused: User } | { none: true };

/**
 * Who is using the console, read fresh on every request: the session cookie, the person
 * (who must still exist and still hold `admin`), and their Gatehouse session (which must still
 * be live: signing out of Gatehouse, or an administrator revoking the sessions, ends the console's too).
 */
export async function currentPerson(ctx: AppContext, req: Request): Promise<PersonLookup> {
  const data = unseal<SessionData>(ctx, 'console-session', cookie(ctx, req, SESSION_COOKIE));
  if (!data) return { none: true };
  const session = await ctx.store.sessions.get(data.sid);
  if (!session || session.ended_at !== null || session.expires_at <= nowSeconds(ctx.clock) || session.user_id !== data.sub) return { none: true };
  const user = await ctx.store.users.get(data.sub);
  if (!user) return { none: true };
  if (!user.roles.includes(CONSOLE_ROLE)) return { refused: user };
  // A session weaker than the console requires (required since, or a federated one) signs in again: the step-up.
  const accepted = consoleAcrValues(ctx);
  if (accepted && !strengthMeets(session.acr, accepted)) return { none: true };
  return { person: { user, sid: data.sid, csrf: data.csrf } };
}

/** true when the form's `csrf` field is this session's token. */
export function csrfMatches(person: Person, posted: unknown): boolean {
  return typeof posted === 'string' && posted.length > 0 && constantTimeEqual(posted, person.csrf);
}

// ---- one message for the next page -----------------------------------------------------

export function setFlash(ctx: AppContext, res: Response, text: string): void {
  // res.cookie encodes the value and cookie-parser decodes it.
  res.cookie(nameOf(ctx, res.req, FLASH_COOKIE), text.slice(0, 300), { ...consoleCookieOptions(ctx, res.req), maxAge: 60_000 });
}

export function takeFlash(ctx: AppContext, req: Request, res: Response): string | undefined {
  const v = cookie(ctx, req, FLASH_COOKIE);
  if (v === undefined) return undefined;
  res.clearCookie(nameOf(ctx, res.req, FLASH_COOKIE), consoleCookieOptions(ctx, res.req));
  return v.slice(0, 300);
}
