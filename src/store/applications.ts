import { bumpCounter, type ChangeFeed } from './changes.js';
import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export type ApplicationType = 'web' | 'spa' | 'native' | 'm2m' | 'api';

export interface Application {
  client_id: string;
  name: string;
  type: ApplicationType;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  confidential: boolean;
  refresh_tokens: boolean;
  first_party: boolean;
  /** RFC 9449 section 5.2: every access token is DPoP-bound; a token request without a proof is refused */
  dpop_bound_access_tokens: boolean;
  has_secret: boolean;
  /** authorization requests only through /oauth/par (RFC 9126 client metadata) */
  require_pushed_authorization_requests: boolean;
  created_at: number;
  updated_at: number;
}

/**
 * The terms of a grant on the AuthZEN API beyond asking: the agents whose enforcement point the
 * caller is (`*`: every agent), and the subject and resource types its searches may name
 * (absent: any).
 */
export interface AuthzenGrantTerms {
  enforcement_point_for?: string[] | '*';
  search_subject_types?: string[];
  search_resource_types?: string[];
}

interface Row {
  client_id: string;
  name: string;
  type: ApplicationType;
  redirect_uris: string;
  post_logout_redirect_uris: string;
  confidential: number;
  secret_hash: string | null;
  refresh_tokens: number;
  first_party: number;
  require_pushed_authorization_requests: number;
  dpop_bound_access_tokens: number;
  created_at: number;
  updated_at: number;
}

const toApp = (r: Row): Application => ({
  client_id: r.client_id,
  name: r.name,
  type: r.type,
  redirect_uris: parseJson(r.redirect_uris, []),
  post_logout_redirect_uris: parseJson(r.post_logout_redirect_uris, []),
  confidential: bool(r.confidential),
  refresh_tokens: bool(r.refresh_tokens),
  first_party: bool(r.first_party),
  dpop_bound_access_tokens: bool(r.dpop_bound_access_tokens),
  has_secret: r.secret_hash != null,
  require_pushed_authorization_requests: bool(r.require_pushed_authorization_requests),
  created_at: r.created_at,
  updated_at: r.updated_at,
});

export interface NewApplication {
  client_id: string;
  name: string;
  type: ApplicationType;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  confidential: boolean;
  secret_hash: string | null;
  refresh_tokens: boolean;
  first_party: boolean;
  require_pushed_authorization_requests?: boolean;
  /** absent: false on create, unchanged on update */
  dpop_bound_access_tokens?: boolean;
}

const BY_ID = 'SELECT * FROM applications WHERE client_id = ?';

const params = (a: Omit<NewApplication, 'secret_hash'>, t: number) => ({
  client_id: a.client_id,
  name: a.name,
  type: a.type,
  redirect_uris: JSON.stringify(a.redirect_uris),
  post_logout_redirect_uris: JSON.stringify(a.post_logout_redirect_uris),
  confidential: a.confidential ? 1 : 0,
  refresh_tokens: a.refresh_tokens ? 1 : 0,
  first_party: a.first_party ? 1 : 0,
  require_par: a.require_pushed_authorization_requests ? 1 : 0,
  dpop_bound_access_tokens: a.dpop_bound_access_tokens === undefined ? null : a.dpop_bound_access_tokens ? 1 : 0,
  t,
});

/** The change counter every write to applications and their grants moves (client authentication caches on it). */
export const APPLICATIONS_DOMAIN = 'applications';

export function applicationsStore(sql: Sql, changes: ChangeFeed, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byId = (clientId: string) => sql.get<Row>(BY_ID, [clientId]);
  /** A write and the counter's move, in one transaction. */
  const write = <T>(fn: (tx: Sql) => Promise<T>): Promise<T> =>
    sql.transaction(async (tx) => {
      const out = await fn(tx);
      await bumpCounter(tx, changes, APPLICATIONS_DOMAIN);
      return out;
    });
  return {
    async create(a: NewApplication): Promise<Application> {
      await write((tx) => tx.run(
        `INSERT INTO applications (client_id, name, type, redirect_uris, post_logout_redirect_uris, confidential, secret_hash, refresh_tokens, first_party, require_pushed_authorization_requests, dpop_bound_access_tokens, created_at, updated_at)
         VALUES (@client_id, @name, @type, @redirect_uris, @post_logout_redirect_uris, @confidential, @secret_hash, @refresh_tokens, @first_party, @require_par, COALESCE(CAST(@dpop_bound_access_tokens AS INTEGER), 0), @t, @t)`,
        { ...params(a, now()), secret_hash: a.secret_hash },
      ));
      return toApp((await byId(a.client_id))!);
    },
    async get(clientId: string): Promise<Application | undefined> {
      const r = await byId(clientId);
      return r && toApp(r);
    },
    /** The application with its secret hash, for client authentication only. */
    async getWithSecret(clientId: string): Promise<(Application & { secret_hash: string | null }) | undefined> {
      const r = await byId(clientId);
      return r && { ...toApp(r), secret_hash: r.secret_hash };
    },
    list: async (): Promise<Application[]> => (await sql.all<Row>('SELECT * FROM applications ORDER BY created_at, client_id')).map(toApp),
    async update(a: Omit<NewApplication, 'secret_hash'>): Promise<Application | undefined> {
      const r = await write((tx) => tx.run(
        `UPDATE applications SET name = @name, type = @type, redirect_uris = @redirect_uris, post_logout_redirect_uris = @post_logout_redirect_uris,
           confidential = @confidential, refresh_tokens = @refresh_tokens, first_party = @first_party, require_pushed_authorization_requests = @require_par,
           dpop_bound_access_tokens = COALESCE(CAST(@dpop_bound_access_tokens AS INTEGER), dpop_bound_access_tokens), updated_at = @t WHERE client_id = @client_id`,
        params(a, now()),
      ));
      if (r.changes === 0) return undefined;
      return toApp((await byId(a.client_id))!);
    },
    setSecretHash: async (clientId: string, hash: string | null): Promise<boolean> =>
      (await write((tx) => tx.run('UPDATE applications SET secret_hash = ?, updated_at = ? WHERE client_id = ?', [hash, now(), clientId]))).changes === 1,
    delete: async (clientId: string): Promise<boolean> =>
      (await write((tx) => tx.run('DELETE FROM applications WHERE client_id = ?', [clientId]))).changes === 1,
    putGrant: async (clientId: string, apiClientId: string, scopes: string[], authzen?: AuthzenGrantTerms): Promise<void> => {
      await write((tx) => tx.run(
        'INSERT INTO application_grants (client_id, api_client_id, scopes, authzen) VALUES (?, ?, ?, ?) ON CONFLICT (client_id, api_client_id) DO UPDATE SET scopes = excluded.scopes, authzen = excluded.authzen',
        [clientId, apiClientId, JSON.stringify(scopes), authzen && Object.keys(authzen).length ? JSON.stringify(authzen) : null],
      ));
    },
    deleteGrant: async (clientId: string, apiClientId: string): Promise<boolean> =>
      (await write((tx) => tx.run('DELETE FROM application_grants WHERE client_id = ? AND api_client_id = ?', [clientId, apiClientId]))).changes === 1,
    async getGrant(clientId: string, apiClientId: string): Promise<{ scopes: string[]; authzen?: AuthzenGrantTerms } | undefined> {
      const r = await sql.get<{ scopes: string; authzen: string | null }>('SELECT scopes, authzen FROM application_grants WHERE client_id = ? AND api_client_id = ?', [clientId, apiClientId]);
      return r && { scopes: parseJson(r.scopes, []), ...(r.authzen ? { authzen: parseJson<AuthzenGrantTerms>(r.authzen, {}) } : {}) };
    },
    listGrants: async (clientId: string) =>
      (
        await sql.all<{ api_client_id: string; scopes: string; authzen: string | null }>(
          'SELECT api_client_id, scopes, authzen FROM application_grants WHERE client_id = ? ORDER BY api_client_id',
          [clientId],
        )
      ).map((r) => ({ api_client_id: r.api_client_id, scopes: parseJson<string[]>(r.scopes, []), ...(r.authzen ? parseJson<AuthzenGrantTerms>(r.authzen, {}) : {}) })),
    assign: async (clientId: string, userId: string): Promise<void> => {
      await sql.run('INSERT INTO application_assignments (client_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [clientId, userId]);
    },
    unassign: async (clientId: string, userId: string): Promise<boolean> =>
      (await sql.run('DELETE FROM application_assignments WHERE client_id = ? AND user_id = ?', [clientId, userId])).changes === 1,
    isAssigned: async (clientId: string, userId: string): Promise<boolean> =>
      (await sql.get('SELECT 1 AS x FROM application_assignments WHERE client_id = ? AND user_id = ?', [clientId, userId])) !== undefined,
    listAssignments: async (clientId: string): Promise<string[]> =>
      (await sql.all<{ user_id: string }>('SELECT user_id FROM application_assignments WHERE client_id = ? ORDER BY user_id', [clientId])).map((r) => r.user_id),
  };
}
export type ApplicationsStore = ReturnType<typeof applicationsStore>;
