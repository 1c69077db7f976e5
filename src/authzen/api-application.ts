import type { AppContext } from '../context.js';
import { createApplication } from '../admin/applications.js';
import { accessApiUrl } from './metadata.js';

export const API_APPLICATION_NAME = 'AuthZEN API';

/**
 * The built-in `api` application of the AuthZEN endpoints: client ID `{issuer}/access/v1`, the
 * audience of their callers' tokens. An m2m application gets such a token with
 * `client_credentials` and `resource={issuer}/access/v1` once it holds a grant on this one.
 * Made at start-up when absent (so the project file may grant on it); an existing one is left
 * as it is. It is a resource, not a client: public, no secret, no redirect URIs.
 */
export async function ensureApiApplication(ctx: AppContext): Promise<void> {
  const clientId = accessApiUrl(ctx);
  if (await ctx.store.applications.get(clientId)) return;
  try {
    await createApplication(ctx, {
      client_id: clientId,
      name: API_APPLICATION_NAME,
      type: 'api',
      redirect_uris: [],
      post_logout_redirect_uris: [],
      confidential: false,
      first_party: true,
    });
  } catch (err) {
    // Another process made it first: what matters is that it exists.
    if (!(await ctx.store.applications.get(clientId))) throw err;
  }
}
