import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import type { Session } from '../store/sessions.js';
import type { User } from '../store/users.js';
import { nowSeconds } from '../clock.js';
import { cookieFlags, cookieName, readCookie } from './cookies.js';

/** The browser's sign-in session: a random value whose sha256 is sessions.token_hash (`__Host-gatehouse_session` on a secure request). */
export const SESSION_COOKIE = 'gatehouse_session';
/** How long a sign-in session lives : 12 hours. */
export const SESSION_TTL_SECONDS = 12 * 60 * 60;

export interface SignedIn {
  session: Session;
  user: User;
}

/** Cookie options on path `/`: HttpOnly, SameSite=Lax, Secure on a secure request (see cookies.ts). */
export function cookieOptions(ctx: AppContext, req: Request) {
  return cookieFlags(ctx, req);
}

/** The live session of this browser and its person, or undefined. Exported for other pages (approvals). */
export async function currentSession(ctx: AppContext, req: Request): Promise<SignedIn | undefined> {
  const value = readCookie(ctx, req, SESSION_COOKIE);
  if (typeof value !== 'string' || value.length < 20 || value.length > 200) return undefined;
  const session = await ctx.store.sessions.findByTokenHash(sha256(value));
  if (!session) return undefined;
  const user = await ctx.store.users.get(session.user_id);
  if (!user) return undefined;
  return { session, user };
}

/** Starts a session for a person and sets its cookie. Ends `previous` (no session fixation). */
export async function startSession(
  ctx: AppContext,
  res: Response,
  userId: string,
  amr: string[],
  acr: string,
  previous?: Session,
): Promise<Session> {
  if (previous) await ctx.store.sessions.end(previous.sid);
  const value = randomToken();
  const session = await ctx.store.sessions.create({
    sid: randomToken(16),
    user_id: userId,
    token_hash: sha256(value),
    auth_time: nowSeconds(ctx.clock),
    amr,
    acr,
    ttl: SESSION_TTL_SECONDS,
  });
  res.cookie(cookieName(ctx, res.req, SESSION_COOKIE), value, { ...cookieOptions(ctx, res.req), maxAge: SESSION_TTL_SECONDS * 1000 });
  return session;
}

/** Ends this browser's session (if any) and removes its cookie. */
export async function endSession(ctx: AppContext, req: Request, res: Response): Promise<Session | undefined> {
  const current = await currentSession(ctx, req);
  if (current) await ctx.store.sessions.end(current.session.sid);
  res.clearCookie(cookieName(ctx, req, SESSION_COOKIE), cookieOptions(ctx, req));
  return current?.session;
}

/**
 * Where to send a browser that must sign in first, then come back to `returnTo` (a path on
 * the issuer, e.g. `/approvals`).
 */
export function loginUrl(returnTo: string): string {
  return `/login?return_to=${encodeURIComponent(returnTo)}`;
}

/** Only same-site paths are followed after sign-in: `/x`, never `//host` or `https://...`. */
export function safeReturnTo(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 500) return undefined;
  if (!value.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return undefined;
  if (/[\r\n\t]/.test(value)) return undefined;
  return value;
}
