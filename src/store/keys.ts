import type { Db } from './db.js';

export interface SigningKeyRow {
  kid: string;
  alg: 'RS256' | 'EdDSA';
  public_jwk: string;
  private_enc: string;
  created_at: number;
  retired_at: number | null;
}

export function keysStore(db: Db) {
  const insert = db.prepare(
    'INSERT INTO signing_keys (kid, alg, public_jwk, private_enc, created_at, retired_at) VALUES (@kid, @alg, @public_jwk, @private_enc, @created_at, NULL)',
  );
  const retire = db.prepare('UPDATE signing_keys SET retired_at = ? WHERE alg = ? AND retired_at IS NULL AND kid != ?');
  const published = db.prepare<[number], SigningKeyRow>(
    'SELECT * FROM signing_keys WHERE retired_at IS NULL OR retired_at > ? ORDER BY created_at DESC, kid',
  );
  const active = db.prepare<[], SigningKeyRow>('SELECT * FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC');
  const purge = db.prepare('DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at <= ?');
  return {
    /** Adds a key and retires the alg's previous active key in one step. */
    add(row: Omit<SigningKeyRow, 'retired_at'>): void {
      db.transaction(() => {
        insert.run(row);
        retire.run(row.created_at, row.alg, row.kid);
      }).immediate();
    },
    active: (): SigningKeyRow[] => active.all(),
    /** Keys still in the JWK Set: active, or retired less than `keepSeconds` ago. */
    published: (nowSec: number, keepSeconds: number): SigningKeyRow[] => published.all(nowSec - keepSeconds),
    purgeRetiredBefore: (cutoff: number): number => purge.run(cutoff).changes,
  };
}
export type KeysStore = ReturnType<typeof keysStore>;
