import type { AppContext } from '../context.js';
import { createApplication } from '../admin/applications.js';
import type { Application } from '../store/applications.js';
import { accessApiUrl } from './metadata.js';

export const API_APPLICATION_NAME = 'AuthZEN API';
const API_PATH = '/access/v1';

/** A built-in AuthZEN application made under an earlier issuer (its client ID is that issuer's API URL). */
const isBuiltIn = (a: Application): boolean => a.type === 'api' && a.name === API_APPLICATION_NAME && a.client_id.endsWith(API_PATH);

/**
 * The built-in `api` application of the AuthZEN endpoints: client ID `{issuer}/access/v1`, the
 * audience of their callers' tokens. An m2m application gets such a token with
 * `client_credentials` and `resource={issuer}/access/v1` once it holds a grant on this one.
 * Made at start-up when absent (so the project file may grant on it); an existing one is left
 * as it is. It is a resource, not a client: public, no secret, no redirect URIs.
 *
 * When the issuer has changed since the last start, the previous built-in application is
 * replaced by the new one and its grants move with it (tokens for the old audience were
 * useless anyway: their issuer is not this one).
 */
export async function ensureApiApplication(ctx: AppContext): Promise<void> {
  const clientId = accessApiUrl(ctx);
  if (!(await ctx.store.applications.get(clientId))) {
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
  const apps = await ctx.store.applications.list();
  const stale = apps.filter((a) => isBuiltIn(a) && a.client_id !== clientId);
  if (!stale.length) return;
  await ctx.store.transaction(async (tx) => {
    for (const old of stale) {
      for (const app of apps) {
        const grant = await tx.applications.getGrant(app.client_id, old.client_id);
        if (grant && !(await tx.applications.getGrant(app.client_id, clientId))) await tx.applications.putGrant(app.client_id, clientId, grant.scopes, grant.authzen);
      }
      await tx.applications.delete(old.client_id);
    }
    await tx.settings.bump('applications');
  });
  ctx.logger.info({ replaced: stale.map((a) => a.client_id), client_id: clientId }, 'the issuer changed: the AuthZEN API application and its grants moved to the new one');
}
