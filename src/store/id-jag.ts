import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

/** How a trusted issuer's `sub` names a person here. */
export const SUBJECT_MAPPINGS = ['id', 'email'] as const;
export type SubjectMapping = (typeof SUBJECT_MAPPINGS)[number];

/** An identity provider whose ID-JAGs this server redeems. Exactly one of `jwks_uri` and `jwks` is set. */
export interface TrustedIssuer {
  issuer: string;
  jwks_uri: string | null;
  jwks: { keys: Record<string, unknown>[] } | null;
  subject_mapping: SubjectMapping;
  created_at: number;
  updated_at: number;
}

/** An authorization server an application may ask an ID-JAG for, and its client ID there (null: the same). */
export interface IdJagAudience {
  audience: string;
  client_id: string | null;
}

interface IssuerRow {
  issuer: string;
  jwks_uri: string | null;
  jwks: string | null;
  subject_mapping: SubjectMapping;
  created_at: number;
  updated_at: number;
}

const toIssuer = (r: IssuerRow): TrustedIssuer => ({
  issuer: r.issuer,
  jwks_uri: r.jwks_uri,
  jwks: r.jwks === null ? null : parseJson(r.jwks, { keys: [] }),
  subject_mapping: r.subject_mapping,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

/** Trusted issuers are read from the database at each redemption: a change holds on every instance at once. */
export function idJagStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byIssuer = (issuer: string) => sql.get<IssuerRow>('SELECT * FROM trusted_issuers WHERE issuer = ?', [issuer]);
  const write = <T>(fn: (tx: Sql) => Promise<T>): Promise<T> => sql.transaction(fn);
  return {
    async getIssuer(issuer: string): Promise<TrustedIssuer | undefined> {
      const r = await byIssuer(issuer);
      return r && toIssuer(r);
    },
    listIssuers: async (): Promise<TrustedIssuer[]> =>
      (await sql.all<IssuerRow>('SELECT * FROM trusted_issuers ORDER BY issuer')).map(toIssuer),
    /** Creates or replaces; `created` says which. */
    async putIssuer(i: Omit<TrustedIssuer, 'created_at' | 'updated_at'>): Promise<{ issuer: TrustedIssuer; created: boolean }> {
      const t = now();
      const created = await write(async (tx) => {
        const existed = (await tx.get('SELECT 1 AS x FROM trusted_issuers WHERE issuer = ?', [i.issuer])) !== undefined;
        await tx.run(
          `INSERT INTO trusted_issuers (issuer, jwks_uri, jwks, subject_mapping, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (issuer) DO UPDATE SET jwks_uri = excluded.jwks_uri, jwks = excluded.jwks, subject_mapping = excluded.subject_mapping, updated_at = excluded.updated_at`,
          [i.issuer, i.jwks_uri, i.jwks === null ? null : JSON.stringify(i.jwks), i.subject_mapping, t, t],
        );
        return !existed;
      });
      return { issuer: toIssuer((await byIssuer(i.issuer))!), created };
    },
    deleteIssuer: async (issuer: string): Promise<boolean> =>
      (await write((tx) => tx.run('DELETE FROM trusted_issuers WHERE issuer = ?', [issuer]))).changes === 1,

    /** Records an ID-JAG's (issuer, jti) until it expires; false when it was already recorded (a replay). */
    async useJti(issuer: string, jti: string, expiresAt: number): Promise<boolean> {
      const r = await sql.run('INSERT INTO id_jag_jtis (issuer, jti, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [issuer, jti, expiresAt]);
      return r.changes === 1;
    },
    purgeExpiredJtis: async (t: number = now()): Promise<number> =>
      (await sql.run('DELETE FROM id_jag_jtis WHERE expires_at < ?', [t])).changes,

    audiences: async (clientId: string): Promise<IdJagAudience[]> =>
      (
        await sql.all<{ audience: string; target_client_id: string | null }>(
          'SELECT audience, target_client_id FROM application_id_jag_audiences WHERE client_id = ? ORDER BY audience',
          [clientId],
        )
      ).map((r) => ({ audience: r.audience, client_id: r.target_client_id })),
    /** Replaces an application's list (call inside the application's write transaction). */
    async setAudiences(clientId: string, list: IdJagAudience[]): Promise<void> {
      await sql.run('DELETE FROM application_id_jag_audiences WHERE client_id = ?', [clientId]);
      for (const a of list) {
        await sql.run('INSERT INTO application_id_jag_audiences (client_id, audience, target_client_id) VALUES (?, ?, ?)', [clientId, a.audience, a.client_id]);
      }
    },
  };
}
export type IdJagStore = ReturnType<typeof idJagStore>;
