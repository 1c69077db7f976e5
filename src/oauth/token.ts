import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { authenticateClient, type ClientRequest } from './client-auth.js';
import { tokenRequestBinding } from './dpop.js';
import { authorizationCodeGrant } from './grants/authorization-code.js';
import { clientCredentialsGrant } from './grants/client-credentials.js';
import { idJagExchange, TOKEN_EXCHANGE_GRANT } from './grants/id-jag.js';
import { JWT_BEARER_GRANT, jwtBearerGrant } from './grants/jwt-bearer.js';
import { refreshTokenGrant } from './grants/refresh-token.js';
import { single, type Params } from './params.js';

const GRANTS = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
  client_credentials: clientCredentialsGrant,
  [TOKEN_EXCHANGE_GRANT]: idJagExchange,
} as const;
type GrantType = keyof typeof GRANTS;
const isGrantType = (v: string): v is GrantType => Object.hasOwn(GRANTS, v);

/** Grants whose client may be an agent (private_key_jwt) as well as an application: they authenticate it themselves. */
const SELF_AUTHENTICATING = {
  [JWT_BEARER_GRANT]: jwtBearerGrant,
} as const;
type SelfAuthenticatingGrant = keyof typeof SELF_AUTHENTICATING;
const isSelfAuthenticating = (v: string): v is SelfAuthenticatingGrant => Object.hasOwn(SELF_AUTHENTICATING, v);

/** The grant types this endpoint serves (the discovery document lists them). */
export const TOKEN_ENDPOINT_GRANT_TYPES = [...Object.keys(GRANTS), ...Object.keys(SELF_AUTHENTICATING)];

/**
 * The token endpoint's steps after the body is read: grant type, client authentication, the
 * DPoP proof (its key binds what is issued; required of a client with dpop_bound_access_tokens),
 * the grant.
 */
export async function tokenResponse(ctx: AppContext, req: ClientRequest, body: Params): Promise<object> {
  // 1. Grant type
  const grantType = single(body, 'grant_type');
  if (grantType === undefined) throw errors.invalidRequest('grant_type is required');
  if (isSelfAuthenticating(grantType)) return SELF_AUTHENTICATING[grantType](ctx, req, body);
  if (!isGrantType(grantType)) throw errors.unsupportedGrantType(`grant_type ${grantType.slice(0, 60)} is not supported`);
  // 2. Client authentication
  const client = await authenticateClient(ctx, req, body);
  // 3. The DPoP proof
  const jkt = await tokenRequestBinding(ctx, req, ctx.urls.token, client.app.dpop_bound_access_tokens);
  // 4. The grant
  return GRANTS[grantType](ctx, client, body, jkt);
}
