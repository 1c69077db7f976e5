import type { Db } from './db.js';
import { now } from './util.js';

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

export function samlStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO saml_connections (name, kind, entity_id, acs_url, slo_url, name_id_format, idp_sso_url, idp_certificate, created_at, updated_at)
     VALUES (@name, @kind, @entity_id, @acs_url, @slo_url, @name_id_format, @idp_sso_url, @idp_certificate, @t, @t)`,
  );
  const update = db.prepare(
    `UPDATE saml_connections SET kind = @kind, entity_id = @entity_id, acs_url = @acs_url, slo_url = @slo_url,
       name_id_format = @name_id_format, idp_sso_url = @idp_sso_url, idp_certificate = @idp_certificate, updated_at = @t
     WHERE name = @name`,
  );
  const byName = db.prepare<[string], SamlConnection>('SELECT * FROM saml_connections WHERE name = ?');
  const spByEntity = db.prepare<[string], SamlConnection>("SELECT * FROM saml_connections WHERE kind = 'sp' AND entity_id = ?");
  const list = db.prepare<[], SamlConnection>('SELECT * FROM saml_connections ORDER BY name');
  const del = db.prepare('DELETE FROM saml_connections WHERE name = ?');

  const addPending = db.prepare(
    `INSERT INTO saml_pending_requests (id_hash, connection, request_id, relay_state, name_id_format, force_authn, created_at, expires_at)
     VALUES (@id_hash, @connection, @request_id, @relay_state, @name_id_format, @force_authn, @created_at, @expires_at)`,
  );
  const pending = db.prepare<[string, number], SamlPendingRequest>('SELECT * FROM saml_pending_requests WHERE id_hash = ? AND expires_at > ?');
  const consumePending = db.prepare('DELETE FROM saml_pending_requests WHERE id_hash = ? AND expires_at > ?');
  const purgePending = db.prepare('DELETE FROM saml_pending_requests WHERE expires_at <= ?');

  const addSpRequest = db.prepare('INSERT INTO saml_sp_requests (request_id, connection, return_to, expires_at) VALUES (?, ?, ?, ?)');
  const takeSpRequest = db.prepare<[string, string, number], { return_to: string | null }>(
    'DELETE FROM saml_sp_requests WHERE request_id = ? AND connection = ? AND expires_at > ? RETURNING return_to',
  );
  const purgeSpRequests = db.prepare('DELETE FROM saml_sp_requests WHERE expires_at <= ?');

  return {
    create(c: SamlConnectionFields): SamlConnection {
      insert.run({ ...c, t: now() });
      return byName.get(c.name)!;
    },
    /** Replaces every field but the name; undefined when there is no such connection. */
    update(c: SamlConnectionFields): SamlConnection | undefined {
      if (update.run({ ...c, t: now() }).changes !== 1) return undefined;
      return byName.get(c.name);
    },
    get: (name: string): SamlConnection | undefined => byName.get(name),
    spByEntityId: (entityId: string): SamlConnection | undefined => spByEntity.get(entityId),
    list: (): SamlConnection[] => list.all(),
    delete: (name: string): boolean => del.run(name).changes === 1,

    addPending(p: SamlPendingRequest): void {
      purgePending.run(now());
      addPending.run(p);
    },
    pending: (idHash: string): SamlPendingRequest | undefined => pending.get(idHash, now()),
    /** true for exactly one caller across every worker process (single use). */
    consumePending: (idHash: string): boolean => consumePending.run(idHash, now()).changes === 1,

    /** An AuthnRequest we sent as the SP of connection `name`. */
    addSpRequest(requestId: string, name: string, returnTo: string | null, ttlSeconds: number): void {
      const t = now();
      purgeSpRequests.run(t);
      addSpRequest.run(requestId, name, returnTo, t + ttlSeconds);
    },
    /** The request a Response answers, removed as it is read: a Response is accepted once, on any worker. */
    takeSpRequest(requestId: string, name: string): { return_to: string | null } | undefined {
      return takeSpRequest.get(requestId, name, now());
    },
  };
}
export type SamlStore = ReturnType<typeof samlStore>;
