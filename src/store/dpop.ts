import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { secondsOf } from './util.js';

/**
 * DPoP state every process and instance shares: the proofs already used (RFC 9449 section
 * 11.1, single use) and the refresh families bound to a key (section 5).
 */
export function dpopStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  return {
    /**
     * Records a proof (by the hash of its key and jti) until `expiresAt`; false when it was
     * recorded before (a replay). One statement: of two racing uses, exactly one wins.
     */
    async useProof(keyHash: string, expiresAt: number): Promise<boolean> {
      // In a transaction of its own: on SQLite, the write lock is then asked for without the busy
      // wait that sleeps the whole process while another worker holds it (every DPoP request writes).
      const r = await sql.transaction((tx) => tx.run('INSERT INTO dpop_proof_jtis (key_hash, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING', [keyHash, expiresAt]));
      return r.changes === 1;
    },
    /** Binds a refresh family to a key thumbprint (once; a family keeps its first key). */
    async bindRefreshFamily(familyId: string, jkt: string): Promise<void> {
      await sql.run('INSERT INTO dpop_refresh_bindings (family_id, jkt, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [familyId, jkt, now()]);
    },
    /** The key thumbprint a refresh family is bound to, if any. */
    async refreshFamilyKey(familyId: string): Promise<string | undefined> {
      return (await sql.get<{ jkt: string }>('SELECT jkt FROM dpop_refresh_bindings WHERE family_id = ?', [familyId]))?.jkt;
    },
    /** Drops the proofs too old to be accepted again and the bindings of families that are gone. */
    async purgeExpired(t = now()): Promise<number> {
      const proofs = await sql.run('DELETE FROM dpop_proof_jtis WHERE expires_at < ?', [t]);
      const bindings = await sql.run('DELETE FROM dpop_refresh_bindings WHERE family_id NOT IN (SELECT id FROM refresh_families)');
      return proofs.changes + bindings.changes;
    },
  };
}
export type DpopStore = ReturnType<typeof dpopStore>;
