import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { secondsOf } from './util.js';

export type SamlConnectionKind = 'sp' | 'idp';

/** A SAML connection: an SP that signs in through us (`sp`), or an external IdP we are the SP of (`idp`). */
export interface SamlConnection {
  name: string;
  kind: SamlConnectionKind;
  entity_id: string;
  acs_url: string | null;
  slo_url: string | null;
  name_id_format: string | null;
  idp_sso_url: string | null;
  idp_certificate: string | null;
  created_at: number;
  updated_at: number;
}
export type SamlConnectionFields = Omit<SamlConnection, 'created_at' | 'updated_at'>;

export interface SamlPendingRequest {
  id_hash: string;
  connection: string;
  request_id: string;
  relay_state: string | null;
  name_id_format: string;
  force_authn: number;
  created_at: number;
  expires_at: number;
}

const BY_NAME = 'SELECT * FROM saml_connections WHERE name = ?';

export function samlStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const get = (name: string) => sql.get<SamlConnection>(BY_NAME, [name]);
  return {
    async create(c: SamlConnectionFields): Promise<SamlConnection> {
      await sql.run(
        `INSERT INTO saml_connections (name, kind, entity_id, acs_url, slo_url, name_id_format, idp_sso_url, idp_certificate, created_at, updated_at)
         VALUES (@name, @kind, @entity_id, @acs_url, @slo_url, @name_id_format, @idp_sso_url, @idp_certificate, @t, @t)`,
        { ...c, t: now() },
      );
      return (await get(c.name))!;
    },
    /** Replaces every field but the name; undefined when there is no such connection. */
    async update(c: SamlConnectionFields): Promise<SamlConnection | undefined> {
      const r = await sql.run(
        `UPDATE saml_connections SET kind = @kind, entity_id = @entity_id, acs_url = @acs_url, slo_url = @slo_url,
           name_id_format = @name_id_format, idp_sso_url = @idp_sso_url, idp_certificate = @idp_certificate, updated_at = @t
         WHERE name = @name`,
        { ...c, t: now() },
      );
      if (r.changes !== 1) return undefined;
      return get(c.name);
    },
    get,
    spByEntityId: (entityId: string): Promise<SamlConnection | undefined> =>
      sql.get<SamlConnection>("SELECT * FROM saml_connections WHERE kind = 'sp' AND entity_id = ?", [entityId]),
    list: (): Promise<SamlConnection[]> => sql.all<SamlConnection>('SELECT * FROM saml_connections ORDER BY name'),
    delete: async (name: string): Promise<boolean> => (await sql.run('DELETE FROM saml_connections WHERE name = ?', [name])).changes === 1,

    async addPending(p: SamlPendingRequest): Promise<void> {
      await sql.run('DELETE FROM saml_pending_requests WHERE expires_at <= ?', [now()]);
      await sql.run(
        `INSERT INTO saml_pending_requests (id_hash, connection, request_id, relay_state, name_id_format, force_authn, created_at, expires_at)
         VALUES (@id_hash, @connection, @request_id, @relay_state, @name_id_format, @force_authn, @created_at, @expires_at)`,
        p,
      );
    },
    pending: (idHash: string): Promise<SamlPendingRequest | undefined> =>
      sql.get<SamlPendingRequest>('SELECT * FROM saml_pending_requests WHERE id_hash = ? AND expires_at > ?', [idHash, now()]),
    /** true for exactly one caller across every process and instance (single use). */
    consumePending: async (idHash: string): Promise<boolean> =>
      (await sql.run('DELETE FROM saml_pending_requests WHERE id_hash = ? AND expires_at > ?', [idHash, now()])).changes === 1,

    /** An AuthnRequest we sent as the SP of connection `name`. */
    async addSpRequest(requestId: string, name: string, returnTo: string | null, ttlSeconds: number): Promise<void> {
      const t = now();
      await sql.run('DELETE FROM saml_sp_requests WHERE expires_at <= ?', [t]);
      await sql.run('INSERT INTO saml_sp_requests (request_id, connection, return_to, expires_at) VALUES (?, ?, ?, ?)', [requestId, name, returnTo, t + ttlSeconds]);
    },
    /** The request a Response answers, removed as it is read: a Response is accepted once, anywhere. */
    takeSpRequest: (requestId: string, name: string): Promise<{ return_to: string | null } | undefined> =>
      sql.get<{ return_to: string | null }>('DELETE FROM saml_sp_requests WHERE request_id = ? AND connection = ? AND expires_at > ? RETURNING return_to', [
        requestId, name, now(),
      ]),
  };
}
export type SamlStore = ReturnType<typeof samlStore>;
