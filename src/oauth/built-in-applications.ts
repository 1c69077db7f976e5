import type { AppContext } from '../context.js';
import type { User } from '../store/users.js';

/** The console's own OAuth client: a public, first-party application Gatehouse creates at start-up. */
export const CONSOLE_CLIENT_ID = 'gatehouse-console';
/** The role a person needs to use the console. */
export const CONSOLE_ROLE = 'admin';

/** The one shape the console application may have: only its name is free. */
export function consoleApplicationShape(issuer: string) {
  return {
    type: 'web' as const,
    redirect_uris: [`${issuer}/console/callback`],
    post_logout_redirect_uris: [`${issuer}/console/signed-out`],
    confidential: false,
    refresh_tokens: false,
    first_party: true,
  };
}

export interface ApplicationShape {
  type: string;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  confidential: boolean;
  refresh_tokens: boolean;
  first_party: boolean;
  dpop_bound_access_tokens?: boolean;
}

/**
 * Why `next` is not a shape the console application may take, as the field and a message,
 * or null. Any other redirect URI would hand administrators' codes elsewhere; a secret, a
 * consent step or a DPoP requirement would break the console's own sign-in.
 */
export function builtInApplicationProblem(ctx: AppContext, clientId: string, next: ApplicationShape): { path: string; message: string } | null {
  if (clientId !== CONSOLE_CLIENT_ID) return null;
  const want = consoleApplicationShape(ctx.urls.issuer);
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((v, i) => v === b[i]);
  const fixed = 'is fixed for the built-in console application';
  if (next.type !== want.type) return { path: 'type', message: fixed };
  if (!same(next.redirect_uris, want.redirect_uris)) return { path: 'redirect_uris', message: `${fixed} (${want.redirect_uris[0]})` };
  if (!same(next.post_logout_redirect_uris, want.post_logout_redirect_uris)) return { path: 'post_logout_redirect_uris', message: fixed };
  if (next.confidential !== want.confidential) return { path: 'confidential', message: fixed };
  if (next.refresh_tokens !== want.refresh_tokens) return { path: 'refresh_tokens', message: fixed };
  if (next.first_party !== want.first_party) return { path: 'first_party', message: fixed };
  // The console signs in without DPoP proofs.
  if (next.dpop_bound_access_tokens) return { path: 'dpop_bound_access_tokens', message: fixed };
  return null;
}

/**
 * Who may sign in to an application: a person assigned to it, and, for the console, every
 * person holding the role `admin` (administrators need no assignment; the role is the grant);
 * anyone, for a client known by its metadata document.
 * Checked at authorize and at every token issue.
 */
export async function mayUseApplication(ctx: AppContext, clientId: string, user: User): Promise<boolean> {
  if (clientId === CONSOLE_CLIENT_ID && user.roles.includes(CONSOLE_ROLE)) return true;
  if (await ctx.store.applications.isAssigned(clientId, user.id)) return true;
  // A client known by its metadata document is nobody's to assign: every person may sign in
  // to it, after consenting (it is never first party).
  return ctx.store.clientRequests.isDocumentClient(clientId);
}
