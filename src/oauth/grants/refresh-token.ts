import type { AppContext } from '../../context.js';
import { randomToken, sha256 } from '../../crypto/hash.js';
import { errors } from '../../errors.js';
import type { AuthenticatedClient } from '../client-auth.js';
import { parseScope, required, single, type Params } from '../params.js';
import { personForIssue, personTokenResponse, REFRESH_TOKEN_TTL, type TokenResponse } from '../tokens.js';

/**
 * grant_type=refresh_token, as a state table: the current token becomes used and
 * a new one is returned; a used token presented again revokes the family. `scope` may narrow
 * the new access token, never widen it; sid, amr, auth_time stay those of the sign-in.
 */
export async function refreshTokenGrant(ctx: AppContext, client: AuthenticatedClient, body: Params, jkt?: string): Promise<TokenResponse> {
  // 1. Parameters
  const presented = required(body, 'refresh_token');
  const asked = parseScope(single(body, 'scope'));
  if (!client.app.refresh_tokens) throw errors.unauthorizedClient('this application may not use refresh tokens');

  // 2. A refresh token bound to a DPoP key is used only with a proof by that key (RFC 9449
  // section 5), checked before rotating so that a thief's attempt spends nothing.
  const family = await ctx.store.oauth.familyOfRefresh(sha256(presented));
  const boundTo = family && family.client_id === client.app.client_id ? await ctx.store.dpop.refreshFamilyKey(family.id) : undefined;
  if (boundTo !== undefined) {
    if (jkt === undefined) throw errors.invalidDpopProof('this refresh token is bound to a DPoP key: send a DPoP proof by that key');
    if (jkt !== boundTo) throw errors.invalidGrant('the refresh token is bound to another DPoP key');
  }

  // 3. Rotate in one transaction (exactly one of racing requests wins)
  const next = randomToken();
  const rotation = await ctx.store.oauth.rotateRefresh(sha256(presented), sha256(next), REFRESH_TOKEN_TTL, (family) => {
    if (family.client_id !== client.app.client_id) return 'wrong_client';
    if (asked && !asked.every((s) => family.scope.includes(s))) return 'invalid_scope';
    return 'ok';
  });
  if (!rotation.ok) {
    if (rotation.reason === 'invalid_scope') throw errors.invalidScope('scope asks for more than was granted');
    const why = {
      unknown: 'the refresh token is not valid',
      wrong_client: 'the refresh token was issued to another client',
      revoked: 'the refresh token was revoked',
      reused: 'the refresh token was already used; every refresh token of this sign-in is revoked',
      expired: 'the refresh token has expired',
    }[rotation.reason];
    throw errors.invalidGrant(why);
  }

  // 4. The person, checked again; 5. tokens with the sign-in's sid/amr/auth_time
  const rotated = rotation.family;
  const user = await personForIssue(ctx, rotated);
  const scope = asked ?? rotated.scope;
  // A public client's family first used with a proof is bound from then on.
  if (boundTo === undefined && jkt !== undefined && client.method === 'none') await ctx.store.dpop.bindRefreshFamily(rotated.id, jkt);
  return personTokenResponse(ctx, user, rotated, { scope, refreshToken: next, jkt });
}
