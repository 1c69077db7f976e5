import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

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
  /** idp: the email domains it may sign in (lower case; null: any) */
  allowed_email_domains: string[] | null;
  /** idp: whether it may sign in administrators (holders of the console role) */
  admit_administrators: boolean;
  created_at: number;
  updated_at: number;
}
export type SamlConnectionFields = Omit<SamlConnection, 'created_at' | 'updated_at'>;

type ConnectionRow = Omit<SamlConnection, 'allowed_email_domains' | 'admit_administrators'> & { allowed_email_domains: string | null; admit_administrators: number | boolean };
const toConnection = (r: ConnectionRow | undefined): SamlConnection | undefined =>
  r && { ...r, allowed_email_domains: r.allowed_email_domains ? parseJson<string[]>(r.allowed_email_domains, []) : null, admit_administrators: bool(r.admit_administrators) };
const toRow = (c: SamlConnectionFields) => ({
  ...c,
  allowed_email_domains: c.allowed_email_domains ? JSON.stringify(c.allowed_email_domains) : null,
  admit_administrators: c.admit_administrators ? 1 : 0,
});

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
  const get = async (name: string) => toConnection(await sql.get<ConnectionRow>(BY_NAME, [name]));
  return {
    async create(c: SamlConnectionFields): Promise<SamlConnection> {
      await sql.run(
        `INSERT INTO saml_connections (name, kind, entity_id, acs_url, slo_url, name_id_format, idp_sso_url, idp_certificate, allowed_email_domains, admit_administrators, created_at, updated_at)
         VALUES (@name, @kind, @entity_id, @acs_url, @slo_url, @name_id_format, @idp_sso_url, @idp_certificate, @allowed_email_domains, @admit_administrators, @t, @t)`,
        { ...toRow(c), t: now() },
      );
      return (await get(c.name))!;
    },
    /** Replaces every field but the name; undefined when there is no such connection. */
    async update(c: SamlConnectionFields): Promise<SamlConnection | undefined> {
      const r = await sql.run(
        `UPDATE saml_connections SET kind = @kind, entity_id = @entity_id, acs_url = @acs_url, slo_url = @slo_url,
           name_id_format = @name_id_format, idp_sso_url = @idp_sso_url, idp_certificate = @idp_certificate,
           allowed_email_domains = @allowed_email_domains, admit_administrators = @admit_administrators, updated_at = @t
         WHERE name = @name`,
        { ...toRow(c), t: now() },
      );
      if (r.changes !== 1) return undefined;
      return get(c.name);
    },
    get,
    spByEntityId: async (entityId: string): Promise<SamlConnection | undefined> =>
      toConnection(await sql.get<ConnectionRow>("SELECT * FROM saml_connections WHERE kind = 'sp' AND entity_id = ?", [entityId])),
    list: async (): Promise<SamlConnection[]> => (await sql.all<ConnectionRow>('SELECT * FROM saml_connections ORDER BY name')).map((r) => toConnection(r)!),
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
