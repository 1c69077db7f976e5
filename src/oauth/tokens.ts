import { createHash, randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Grant } from '../store/oauth.js';
import type { User } from '../store/users.js';
import { mayUseApplication } from './built-in-applications.js';
import { nowSeconds } from '../clock.js';
import { mayActOf } from '../authz/chain.js';
import { confirmation } from './dpop.js';

/** Lifetimes in seconds (access tokens 900 s; the others are listed in docs/sign-in.md). */
export const ACCESS_TOKEN_TTL = 900;
export const ID_TOKEN_TTL = 3600;
export const REFRESH_TOKEN_TTL = 30 * 24 * 60 * 60;
export const CODE_TTL = 5 * 60;

export const ACCESS_TOKEN_TYP = 'at+jwt';


/** A service's token (client credentials): no person claims. */
export async function issueServiceAccessToken(
  ctx: AppContext,
  t: { clientId: string; audience: string; scope: string | undefined; jkt?: string | undefined },
): Promise<string> {
  const iat = nowSeconds(ctx.clock);
  return ctx.keys.sign(
    'RS256',
    {
      iss: ctx.urls.issuer,
      sub: t.clientId,
      aud: t.audience,
      exp: iat + ACCESS_TOKEN_TTL,
      iat,
      jti: randomUUID(),
      client_id: t.clientId,
      ...(t.scope !== undefined ? { scope: t.scope } : {}),
      ...confirmation(t.jkt),
    },
    ACCESS_TOKEN_TYP,
  );
}

/**
 * A person's access token: `aud` is the resource asked for, else the client; `jkt` binds it to a
 * DPoP key. `may_act` names the agents the person lets act for them (token exchange), when
 * there are any.
 */
export async function issuePersonAccessToken(ctx: AppContext, user: User, grant: Grant, scope: string[], jkt?: string): Promise<string> {
  const iat = nowSeconds(ctx.clock);
  const mayAct = mayActOf(await ctx.store.delegations.listForUser(user.id));
  return ctx.keys.sign(
    'RS256',
    {
      iss: ctx.urls.issuer,
      sub: user.id,
      aud: grant.resource ?? grant.client_id,
      exp: iat + ACCESS_TOKEN_TTL,
      iat,
      jti: randomUUID(),
      client_id: grant.client_id,
      scope: scope.join(' '),
      sid: grant.sid,
      auth_time: grant.auth_time,
      amr: grant.amr,
      acr: grant.acr,
      groups: user.groups,
      roles: user.roles,
      ...(mayAct ? { may_act: mayAct } : {}),
      // RFC 9396 section 9.1: what the person approved, for the resource server to enforce.
      ...(grant.authorization_details?.length ? { authorization_details: grant.authorization_details } : {}),
      ...confirmation(jkt),
    },
    ACCESS_TOKEN_TYP,
  );
}

/** OIDC at_hash: the left half of the SHA-256 of the access token, base64url. */
export function atHash(accessToken: string): string {
  const digest = createHash('sha256').update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** The ID token: always carries email, email_verified, name, groups and roles, whatever scopes were asked for. */
export async function issueIdToken(
  ctx: AppContext,
  user: User,
  grant: Grant,
  accessToken: string,
  nonce: string | null | undefined,
): Promise<string> {
  const iat = nowSeconds(ctx.clock);
  return ctx.keys.sign('RS256', {
    iss: ctx.urls.issuer,
    sub: user.id,
    aud: grant.client_id,
    exp: iat + ID_TOKEN_TTL,
    iat,
    auth_time: grant.auth_time,
    ...(nonce ? { nonce } : {}),
    at_hash: atHash(accessToken),
    sid: grant.sid,
    amr: grant.amr,
    acr: grant.acr,
    email: user.email,
    email_verified: user.email_verified,
    name: user.name,
    groups: user.groups,
    roles: user.roles,
  });
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  id_token?: string;
  refresh_token?: string;
  scope?: string;
  /** RFC 9396 section 7: the authorization details the token carries */
  authorization_details?: Record<string, unknown>[];
}

/**
 * The person checks made at every issue (the assignment is checked at each issue),
 * returning the person's current profile.
 */
export async function personForIssue(ctx: AppContext, grant: Grant): Promise<User> {
  const user = await ctx.store.users.get(grant.user_id);
  if (!user) throw errors.invalidGrant('the person no longer exists');
  if (!(await mayUseApplication(ctx, grant.client_id, user))) {
    throw errors.accessDenied('the person is not assigned to this application');
  }
  // A password sign-in whose password was since marked compromised no longer yields tokens.
  if (user.password_compromised && grant.amr.includes('pwd')) {
    throw errors.insufficientUserAuthentication('the password used to sign in was marked compromised; sign in again');
  }
  return user;
}

/** The response of the authorization code and refresh grants. */
export async function personTokenResponse(
  ctx: AppContext,
  user: User,
  grant: Grant,
  opts: { scope: string[]; nonce?: string | null; refreshToken?: string; jkt?: string | undefined },
): Promise<TokenResponse> {
  const accessToken = await issuePersonAccessToken(ctx, user, grant, opts.scope, opts.jkt);
  const body: TokenResponse = { access_token: accessToken, token_type: opts.jkt ? 'DPoP' : 'Bearer', expires_in: ACCESS_TOKEN_TTL };
  if (opts.scope.includes('openid')) body.id_token = await issueIdToken(ctx, user, grant, accessToken, opts.nonce);
  if (opts.refreshToken) body.refresh_token = opts.refreshToken;
  body.scope = opts.scope.join(' ');
  if (grant.authorization_details?.length) body.authorization_details = grant.authorization_details;
  return body;
}
