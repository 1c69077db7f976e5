import { bumpCounter, type ChangeFeed } from './changes.js';
import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { APPLICATIONS_DOMAIN, type ApplicationType } from './applications.js';
import { parseJson, secondsOf } from './util.js';

/** A declared authorization details type (RFC 9396): its JSON Schema and what it is for. */
export interface AuthorizationDetailsType {
  type: string;
  description: string;
  schema: Record<string, unknown>;
  created_at: number;
  updated_at: number;
}

/** A client known by the URL of its metadata document, as last fetched. */
export interface MetadataDocumentClient {
  client_id: string;
  document: Record<string, unknown>;
  auth_method: 'none' | 'private_key_jwt';
  jwks_uri: string | null;
  fetched_at: number;
  expires_at: number;
}

/** The application row a metadata document stands for (client_id = the document's URL). */
export interface DocumentApplication {
  client_id: string;
  name: string;
  type: ApplicationType;
  redirect_uris: string[];
  auth_method: 'none' | 'private_key_jwt';
  jwks_uri: string | null;
  document: Record<string, unknown>;
}

export type PushedRequestTake =
  | { ok: true; params: Record<string, unknown> }
  | { ok: false; reason: 'unknown' | 'expired' | 'other_client' };

type TypeRow = { type: string; description: string; schema: string; created_at: number; updated_at: number };
const toType = (r: TypeRow): AuthorizationDetailsType => ({ ...r, schema: parseJson<Record<string, unknown>>(r.schema, {}) });
type DocumentRow = { client_id: string; document: string; auth_method: 'none' | 'private_key_jwt'; jwks_uri: string | null; fetched_at: number; expires_at: number };

/**
 * Pushed authorization requests, declared authorization details types, and the clients known
 * by their metadata document.
 */
export function clientRequestsStore(sql: Sql, changes: ChangeFeed, clock: Clock) {
  const now = (): number => secondsOf(clock);
  return {
    async pushRequest(requestHash: string, clientId: string, params: Record<string, unknown>, ttl: number): Promise<void> {
      const t = now();
      await sql.run('INSERT INTO pushed_authorization_requests (request_hash, client_id, params, created_at, expires_at) VALUES (?, ?, ?, ?, ?)', [
        requestHash, clientId, JSON.stringify(params), t, t + ttl,
      ]);
      // Housekeeping on the way: requests past their lifetime are of no use to anyone.
      await sql.run('DELETE FROM pushed_authorization_requests WHERE expires_at <= ?', [t - 60]);
    },
    /**
     * Takes a pushed request: one DELETE, so of any number of concurrent uses (on any instance)
     * exactly one finds it. Spent whatever the outcome.
     */
    async takePushedRequest(requestHash: string, clientId: string): Promise<PushedRequestTake> {
      const r = await sql.get<{ client_id: string; params: string; expires_at: number }>(
        'DELETE FROM pushed_authorization_requests WHERE request_hash = ? RETURNING client_id, params, expires_at',
        [requestHash],
      );
      if (!r) return { ok: false, reason: 'unknown' };
      if (r.expires_at <= now()) return { ok: false, reason: 'expired' };
      if (r.client_id !== clientId) return { ok: false, reason: 'other_client' };
      return { ok: true, params: parseJson<Record<string, unknown>>(r.params, {}) };
    },

    putType(type: string, description: string, schema: Record<string, unknown>): Promise<{ created: boolean; value: AuthorizationDetailsType }> {
      return sql.transaction(async (tx) => {
      const t = now();
      const had = await tx.get('SELECT 1 AS x FROM authorization_details_types WHERE type = ?', [type]);
      await tx.run(
        `INSERT INTO authorization_details_types (type, description, schema, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (type) DO UPDATE SET description = excluded.description, schema = excluded.schema, updated_at = excluded.updated_at`,
        [type, description, JSON.stringify(schema), t, t],
      );
      await bumpCounter(tx, changes, AUTHORIZATION_DETAILS_TYPES_DOMAIN);
      const r = (await tx.get<TypeRow>('SELECT * FROM authorization_details_types WHERE type = ?', [type]))!;
      return { created: !had, value: toType(r) };
      });
    },
    async getType(type: string): Promise<AuthorizationDetailsType | undefined> {
      const r = await sql.get<TypeRow>('SELECT * FROM authorization_details_types WHERE type = ?', [type]);
      return r && toType(r);
    },
    listTypes: async (): Promise<AuthorizationDetailsType[]> =>
      (await sql.all<TypeRow>('SELECT * FROM authorization_details_types ORDER BY type')).map(toType),
    deleteType(type: string): Promise<boolean> {
      return sql.transaction(async (tx) => {
        const gone = (await tx.run('DELETE FROM authorization_details_types WHERE type = ?', [type])).changes === 1;
        if (gone) await bumpCounter(tx, changes, AUTHORIZATION_DETAILS_TYPES_DOMAIN);
        return gone;
      });
    },

    async getDocumentClient(clientId: string): Promise<MetadataDocumentClient | undefined> {
      const r = await sql.get<DocumentRow>('SELECT * FROM client_metadata_documents WHERE client_id = ?', [clientId]);
      return r && { ...r, document: parseJson<Record<string, unknown>>(r.document, {}) };
    },
    /** Whether `clientId` is a client known by its metadata document (anyone may sign in to one: nobody assigns people to it). */
    isDocumentClient: async (clientId: string): Promise<boolean> =>
      (await sql.get('SELECT 1 AS x FROM client_metadata_documents WHERE client_id = ?', [clientId])) !== undefined,
    /** Keeps a fetched, validated document and the application row it stands for, in one transaction. */
    saveDocumentClient(a: DocumentApplication, expiresAt: number): Promise<void> {
      return sql.transaction(async (tx) => {
        const t = now();
        await tx.run(
          `INSERT INTO applications (client_id, name, type, redirect_uris, post_logout_redirect_uris, confidential, secret_hash, refresh_tokens, first_party, created_at, updated_at)
           VALUES (?, ?, ?, ?, '[]', 0, NULL, 0, 0, ?, ?)
           ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, type = excluded.type, redirect_uris = excluded.redirect_uris, updated_at = excluded.updated_at`,
          [a.client_id, a.name, a.type, JSON.stringify(a.redirect_uris), t, t],
        );
        await tx.run(
          `INSERT INTO client_metadata_documents (client_id, document, auth_method, jwks_uri, fetched_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (client_id) DO UPDATE SET document = excluded.document, auth_method = excluded.auth_method, jwks_uri = excluded.jwks_uri,
             fetched_at = excluded.fetched_at, expires_at = excluded.expires_at`,
          [a.client_id, JSON.stringify(a.document), a.auth_method, a.jwks_uri, t, expiresAt],
        );
        await bumpCounter(tx, changes, APPLICATIONS_DOMAIN);
      });
    },
  };
}
export type ClientRequestsStore = ReturnType<typeof clientRequestsStore>;

/** The change counter declaring, changing or removing an authorization details type moves. */
export const AUTHORIZATION_DETAILS_TYPES_DOMAIN = 'authorization_details_types';
