import type { Request } from 'express';
import type { TLSSocket } from 'node:tls';
import type { AppContext } from '../context.js';

/**
 * The browser cookies' names and flags, per request. A request is secure when the issuer is
 * https, when it came over TLS to this server, or when it came from a trusted proxy
 * (GATEHOUSE_TRUSTED_PROXIES) that says X-Forwarded-Proto: https (a TLS-terminating proxy in
 * front of plain http). A secure request's cookies are `Secure` and carry the name prefix the
 * browser enforces: `__Host-` for those on path `/` (no Domain, so no other host sets them),
 * `__Secure-` for those on a narrower path. Over plain http (development, tests) they keep their
 * plain names without `Secure`, so sign-in works there too.
 */

const plain = (a: string): string => (a.startsWith('::ffff:') ? a.slice(7) : a);

export function isSecureRequest(ctx: AppContext, req: Request): boolean {
  if (ctx.config.issuer.startsWith('https:')) return true;
  if ((req.socket as TLSSocket | undefined)?.encrypted) return true;
  const proxies = ctx.config.agentRequestLimits.trustedProxies;
  if (!proxies.length || !proxies.includes(plain(req.socket?.remoteAddress ?? ''))) return false;
  // The first entry is the one the outermost proxy (where the browser connected) wrote.
  const proto = (req.get('x-forwarded-proto') ?? '').split(',')[0]?.trim().toLowerCase();
  return proto === 'https';
}

/** A cookie's name for this request: `base`, or with its prefix on a secure request. */
export function cookieName(ctx: AppContext, req: Request, base: string, path = '/'): string {
  if (!isSecureRequest(ctx, req)) return base;
  return path === '/' ? `__Host-${base}` : `__Secure-${base}`;
}

/** HttpOnly, SameSite=Lax, on `path`, Secure on a secure request. */
export function cookieFlags(ctx: AppContext, req: Request, path = '/') {
  return { httpOnly: true, sameSite: 'lax' as const, secure: isSecureRequest(ctx, req), path };
}

/** The value of this request's cookie named from `base`. */
export function readCookie(ctx: AppContext, req: Request, base: string, path = '/'): unknown {
  return (req.cookies as Record<string, unknown> | undefined)?.[cookieName(ctx, req, base, path)];
}
