import type { JWTPayload } from 'jose';
import { decodeProtectedHeader } from 'jose';
import type { AppContext } from '../context.js';
import { accessCredential, type AccessCredential } from './bearer.js';
import { ACCESS_TOKEN_TYP } from './tokens.js';

export interface AccessTokenClaims extends JWTPayload {
  client_id?: string;
  scope?: string;
  sid?: string;
  groups?: string[];
  roles?: string[];
}

/**
 * An access token this service issued and that is still good: our key, our issuer,
 * `typ: at+jwt`, not expired. RS256 for people and services, EdDSA for agents.
 * Undefined for anything else (never throws).
 */
export async function verifyAccessToken(ctx: AppContext, token: string): Promise<AccessTokenClaims | undefined> {
  if (token.length > 8192 || token.split('.').length !== 3) return undefined;
  try {
    const header = decodeProtectedHeader(token);
    const alg = header.alg === 'EdDSA' ? 'EdDSA' : 'RS256';
    const { payload, protectedHeader } = await ctx.keys.verify(token, alg, { issuer: ctx.urls.issuer, typ: ACCESS_TOKEN_TYP });
    if (protectedHeader.typ !== ACCESS_TOKEN_TYP) return undefined;
    if (typeof payload.exp !== 'number' || typeof payload.sub !== 'string') return undefined;
    return payload as AccessTokenClaims;
  } catch {
    return undefined;
  }
}

/**
 * The access token of `Authorization: Bearer <token>` or `DPoP <token>`, or else the form field
 * of RFC 6750 2.2 (a bearer token).
 */
export function presentedToken(authorization: string | undefined, formValue: unknown): AccessCredential | undefined {
  if (authorization) return accessCredential(authorization);
  return typeof formValue === 'string' && formValue ? { scheme: 'Bearer', token: formValue } : undefined;
}
