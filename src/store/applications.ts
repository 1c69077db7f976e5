import type { Db } from './db.js';
import { bool, now, parseJson } from './util.js';

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
  has_secret: boolean;
  created_at: number;
  updated_at: number;
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
  has_secret: r.secret_hash != null,
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
}

export function applicationsStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO applications (client_id, name, type, redirect_uris, post_logout_redirect_uris, confidential, secret_hash, refresh_tokens, first_party, created_at, updated_at)
     VALUES (@client_id, @name, @type, @redirect_uris, @post_logout_redirect_uris, @confidential, @secret_hash, @refresh_tokens, @first_party, @t, @t)`,
  );
  const byId = db.prepare<[string], Row>('SELECT * FROM applications WHERE client_id = ?');
  const list = db.prepare<[], Row>('SELECT * FROM applications ORDER BY created_at, client_id');
  const update = db.prepare(
    `UPDATE applications SET name = @name, type = @type, redirect_uris = @redirect_uris, post_logout_redirect_uris = @post_logout_redirect_uris,
       confidential = @confidential, refresh_tokens = @refresh_tokens, first_party = @first_party, updated_at = @t WHERE client_id = @client_id`,
  );
  const setSecret = db.prepare('UPDATE applications SET secret_hash = ?, updated_at = ? WHERE client_id = ?');
  const del = db.prepare('DELETE FROM applications WHERE client_id = ?');
  const putGrant = db.prepare(
    'INSERT INTO application_grants (client_id, api_client_id, scopes) VALUES (?, ?, ?) ON CONFLICT (client_id, api_client_id) DO UPDATE SET scopes = excluded.scopes',
  );
  const delGrant = db.prepare('DELETE FROM application_grants WHERE client_id = ? AND api_client_id = ?');
  const getGrant = db.prepare<[string, string], { scopes: string }>(
    'SELECT scopes FROM application_grants WHERE client_id = ? AND api_client_id = ?',
  );
  const listGrants = db.prepare<[string], { api_client_id: string; scopes: string }>(
    'SELECT api_client_id, scopes FROM application_grants WHERE client_id = ? ORDER BY api_client_id',
  );
  const putAssignment = db.prepare('INSERT OR IGNORE INTO application_assignments (client_id, user_id) VALUES (?, ?)');
  const delAssignment = db.prepare('DELETE FROM application_assignments WHERE client_id = ? AND user_id = ?');
  const isAssigned = db.prepare<[string, string], { x: number }>(
    'SELECT 1 AS x FROM application_assignments WHERE client_id = ? AND user_id = ?',
  );
  const listAssignments = db.prepare<[string], { user_id: string }>(
    'SELECT user_id FROM application_assignments WHERE client_id = ? ORDER BY user_id',
  );

  const params = (a: Omit<NewApplication, 'secret_hash'>) => ({
    client_id: a.client_id,
    name: a.name,
    type: a.type,
    redirect_uris: JSON.stringify(a.redirect_uris),
    post_logout_redirect_uris: JSON.stringify(a.post_logout_redirect_uris),
    confidential: a.confidential ? 1 : 0,
    refresh_tokens: a.refresh_tokens ? 1 : 0,
    first_party: a.first_party ? 1 : 0,
    t: now(),
  });

  return {
    create(a: NewApplication): Application {
      insert.run({ ...params(a), secret_hash: a.secret_hash });
      return toApp(byId.get(a.client_id)!);
    },
    get(clientId: string): Application | undefined {
      const r = byId.get(clientId);
      return r && toApp(r);
    },
    /** The application with its secret hash, for client authentication only. */
    getWithSecret(clientId: string): (Application & { secret_hash: string | null }) | undefined {
      const r = byId.get(clientId);
      return r && { ...toApp(r), secret_hash: r.secret_hash };
    },
    list: (): Application[] => list.all().map(toApp),
    update(a: Omit<NewApplication, 'secret_hash'>): Application | undefined {
      if (update.run(params(a)).changes === 0) return undefined;
      return toApp(byId.get(a.client_id)!);
    },
    setSecretHash: (clientId: string, hash: string | null): boolean => setSecret.run(hash, now(), clientId).changes === 1,
    delete: (clientId: string): boolean => del.run(clientId).changes === 1,
    putGrant: (clientId: string, apiClientId: string, scopes: string[]): void =>
      void putGrant.run(clientId, apiClientId, JSON.stringify(scopes)),
    deleteGrant: (clientId: string, apiClientId: string): boolean => delGrant.run(clientId, apiClientId).changes === 1,
    getGrant(clientId: string, apiClientId: string): { scopes: string[] } | undefined {
      const r = getGrant.get(clientId, apiClientId);
      return r && { scopes: parseJson(r.scopes, []) };
    },
    listGrants: (clientId: string) =>
      listGrants.all(clientId).map((r) => ({ api_client_id: r.api_client_id, scopes: parseJson<string[]>(r.scopes, []) })),
    assign: (clientId: string, userId: string): void => void putAssignment.run(clientId, userId),
    unassign: (clientId: string, userId: string): boolean => delAssignment.run(clientId, userId).changes === 1,
    isAssigned: (clientId: string, userId: string): boolean => isAssigned.get(clientId, userId) !== undefined,
    listAssignments: (clientId: string): string[] => listAssignments.all(clientId).map((r) => r.user_id),
  };
}
export type ApplicationsStore = ReturnType<typeof applicationsStore>;
