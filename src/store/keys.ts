import type { Sql } from './sql.js';

/** A rotated key stays in the JWK Set this long: 24 hours. */
export const RETIRED_KEY_PUBLISHED_SECONDS = 24 * 60 * 60;

export interface SigningKeyRow {
  kid: string;
  alg: 'RS256' | 'EdDSA';
  public_jwk: string;
  private_enc: string;
  created_at: number;
  retired_at: number | null;
}

export function keysStore(sql: Sql) {
  return {
    /** Adds a key and retires the alg's previous active key in one step. */
    async add(row: Omit<SigningKeyRow, 'retired_at'>): Promise<void> {
      await sql.transaction(async (tx) => {
        await tx.run(
          'INSERT INTO signing_keys (kid, alg, public_jwk, private_enc, created_at, retired_at) VALUES (@kid, @alg, @public_jwk, @private_enc, @created_at, NULL)',
          row,
        );
        await tx.run('UPDATE signing_keys SET retired_at = ? WHERE alg = ? AND retired_at IS NULL AND kid != ?', [row.created_at, row.alg, row.kid]);
      });
    },
    active: (): Promise<SigningKeyRow[]> =>
      sql.all<SigningKeyRow>('SELECT * FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC, kid'),
    /** Keys still in the JWK Set: active, or retired less than `keepSeconds` ago. */
    published: (nowSec: number, keepSeconds: number): Promise<SigningKeyRow[]> =>
      sql.all<SigningKeyRow>('SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at > ? ORDER BY created_at DESC, kid', [nowSec - keepSeconds]),
    purgeRetiredBefore: async (cutoff: number): Promise<number> =>
      (await sql.run('DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at <= ?', [cutoff])).changes,
  };
}
export type KeysStore = ReturnType<typeof keysStore>;
