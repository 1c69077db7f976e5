import { createHash } from 'node:crypto';
import type { AppContext } from '../../context.js';
import { constantTimeEqual, randomToken, sha256 } from '../../crypto/hash.js';
import { errors } from '../../errors.js';
import type { CodeRecord } from '../../store/oauth.js';
import type { AuthenticatedClient } from '../client-auth.js';
import { required, single, type Params } from '../params.js';
import { personForIssue, personTokenResponse, REFRESH_TOKEN_TTL, type TokenResponse } from '../tokens.js';

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

const s256 = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

/** The bindings of a code (client, redirect URI, PKCE, DPoP key); a reason when one fails. */
function bindingMismatch(code: CodeRecord, clientId: string, redirectUri: string, verifier: string | undefined, jkt: string | undefined): string | undefined {
  if (code.client_id !== clientId) return 'the code was issued to another client';
  if (code.redirect_uri !== redirectUri) return 'redirect_uri does not match the one the code was issued to';
  if (code.dpop_jkt && code.dpop_jkt !== jkt) {
    return jkt ? 'the DPoP proof is by another key than the one the code is bound to (dpop_jkt)' : 'the code is bound to a DPoP key (dpop_jkt): send a DPoP proof by that key';
  }
  if (code.code_challenge) {
    if (!verifier) return 'code_verifier is required';
    if (!VERIFIER.test(verifier) || !constantTimeEqual(s256(verifier), code.code_challenge)) return 'the code_verifier does not match the code_challenge';
  } else if (verifier) {
    return 'no code_challenge was sent with the authorization request';
  }
  return undefined;
}

/** grant_type=authorization_code: a single-use, 5-minute code bound to client, redirect URI, PKCE and (when asked) a DPoP key. */
export async function authorizationCodeGrant(ctx: AppContext, client: AuthenticatedClient, body: Params, jkt?: string): Promise<TokenResponse> {
  // 1. Parameters
  const code = required(body, 'code');
  const redirectUri = required(body, 'redirect_uri');
  const verifier = single(body, 'code_verifier');
  if (client.app.type === 'm2m' || client.app.type === 'api') throw errors.unauthorizedClient('this application may not use the authorization code grant');

  // 2. Redeem: single use, and the refresh family starts in the same transaction
  const refreshToken = client.app.refresh_tokens ? randomToken() : undefined;
  const familyId = randomToken(16);
  const redemption = await ctx.store.oauth.redeemCode(
    sha256(code),
    (c) => bindingMismatch(c, client.app.client_id, redirectUri, verifier, jkt),
    refreshToken ? { familyId, tokenHash: sha256(refreshToken), ttl: REFRESH_TOKEN_TTL } : undefined,
  );
  if (!redemption.ok) {
    const why = {
      unknown: 'the code is not valid',
      expired: 'the code has expired',
      reused: 'the code was already used; the tokens issued from it are revoked',
      mismatch: redemption.reason === 'mismatch' ? redemption.detail : '',
    }[redemption.reason];
    throw errors.invalidGrant(why);
  }

  // 3. The person, checked again at issue; 4. tokens
  const grant = redemption.code;
  const user = await personForIssue(ctx, grant);
  // A public client's refresh tokens are bound to the proof's key (RFC 9449 section 5); a
  // confidential client's are bound to its authentication already.
  if (refreshToken && jkt && client.method === 'none') await ctx.store.dpop.bindRefreshFamily(familyId, jkt);
  return personTokenResponse(ctx, user, grant, { scope: grant.scope, nonce: grant.nonce, refreshToken, jkt });
}
