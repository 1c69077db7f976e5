import type { Request, Response } from 'express';
import type { AppContext } from '../context.js';
import { constantTimeEqual, randomToken } from '../crypto/hash.js';
import { cookieName } from './cookies.js';
import { cookieOptions } from './session.js';

/**
 * Double-submit CSRF protection for the sign-in forms: a random value in an HttpOnly
 * cookie, repeated in a hidden `csrf` input. A cross-site page can post a form but cannot
 * read or set the cookie, so it cannot make the two agree.
 */
export const CSRF_COOKIE = 'gatehouse_csrf';
export const CSRF_FIELD = 'csrf';

/** The browser's CSRF value, set as a cookie when it has none. Put it in a hidden `csrf` input. */
export function csrfToken(ctx: AppContext, req: Request, res: Response): string {
  const name = cookieName(ctx, req, CSRF_COOKIE);
  const existing = (req.cookies as Record<string, unknown> | undefined)?.[name];
  if (typeof existing === 'string' && /^[\w-]{32,64}$/.test(existing)) return existing;
  const value = randomToken();
  res.cookie(name, value, cookieOptions(ctx, req));
  // Later calls in the same request see it too.
  ((req.cookies ??= {}) as Record<string, string>)[name] = value;
  return value;
}

/** true when the posted `csrf` field matches the cookie. */
export function verifyCsrf(ctx: AppContext, req: Request): boolean {
  const cookie = (req.cookies as Record<string, unknown> | undefined)?.[cookieName(ctx, req, CSRF_COOKIE)];
  const posted = (req.body as Record<string, unknown> | undefined)?.[CSRF_FIELD];
  return typeof cookie === 'string' && typeof posted === 'string' && cookie.length > 0 && constantTimeEqual(cookie, posted);
}
