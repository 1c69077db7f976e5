import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import type { AuthenticatedClient } from '../client-auth.js';
import { parseScope, single, type Params } from '../params.js';
import { ACCESS_TOKEN_TTL, issueServiceAccessToken } from '../tokens.js';

export interface ClientCredentialsResponse {
  access_token: string;
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
}

/**
 * grant_type=client_credentials, for `m2m` applications only. `resource` names one API by
 * client ID that the caller holds a grant on; the token is for it, else for the caller.
 * Kept lean: the client row was read once by client authentication; one sign.
 */
export async function clientCredentialsGrant(
  ctx: AppContext,
  client: AuthenticatedClient,
  body: Params,
  jkt?: string,
): Promise<ClientCredentialsResponse> {
  // 1. Who may use it
  if (client.app.type !== 'm2m') throw errors.unauthorizedClient('only an m2m application may use client_credentials');
  if (client.method === 'none') throw errors.invalidClient('client_credentials needs a client secret');

  // 2. Audience
  const resource = single(body, 'resource');
  let audience = client.app.client_id;
  if (resource !== undefined) {
    if (!(await ctx.store.applications.getGrant(client.app.client_id, resource))) {
      throw errors.invalidTarget('resource is not an API this application holds a grant on');
    }
    audience = resource;
  }

  // 3. Scope carried unchanged (validated for syntax only)
  const scopeParam = single(body, 'scope');
  parseScope(scopeParam);

  // 4. Sign (bound to the DPoP key when a proof came)
  const accessToken = await issueServiceAccessToken(ctx, { clientId: client.app.client_id, audience, scope: scopeParam, jkt });
  return { access_token: accessToken, token_type: jkt ? 'DPoP' : 'Bearer', expires_in: ACCESS_TOKEN_TTL };
}
