import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { secondsOf } from './util.js';

/** At most this many proofs are recorded by one statement (a bounded set of statement texts). */
const MAX_PROOFS_PER_COMMIT = 64;

interface PendingProof {
  keyHash: string;
  expiresAt: number;
  settle: (err: unknown, fresh: boolean) => void;
}

/**
 * DPoP state every process and instance shares: the proofs already used (RFC 9449 section
 * 11.1, single use) and the refresh families bound to a key (section 5).
 */
export function dpopStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);

  // Group commit: the proofs of the requests that reach this point in the same turn of the event
  // loop (and those that arrive while a commit is under way) are recorded by one statement in one
  // transaction. Every request still waits for the commit that holds its proof before it is
  // answered; a commit is what a proof cost, most of it the write itself, so sharing it keeps a
  // DPoP request close to a bearer one under load.
  const queue: PendingProof[] = [];
  let committing = false;
  let scheduled = false;

  const schedule = (): void => {
    if (scheduled || committing || queue.length === 0) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      void commitQueued();
    });
  };

  async function commitQueued(): Promise<void> {
    if (committing || queue.length === 0) return;
    committing = true;
    const batch = queue.splice(0, MAX_PROOFS_PER_COMMIT);
    try {
      const recorded = await recordProofs(batch);
      // Of one key hash twice in a batch, only the first is fresh: the second is a replay of it.
      const answered = new Set<string>();
      for (const p of batch) {
        const fresh = recorded.has(p.keyHash) && !answered.has(p.keyHash);
        answered.add(p.keyHash);
        p.settle(undefined, fresh);
      }
    } catch (err) {
      for (const p of batch) p.settle(err, false);
    } finally {
      committing = false;
      schedule();
    }
  }

  /** One statement: the key hashes it inserted (those not recorded before). */
  async function recordProofs(batch: readonly PendingProof[]): Promise<Set<string>> {
    const unique = new Map<string, number>();
    for (const p of batch) if (!unique.has(p.keyHash)) unique.set(p.keyHash, p.expiresAt);
    const values = Array.from(unique.keys(), () => '(?, ?)').join(', ');
    const params = [...unique].flat();
    // In a transaction of its own: on SQLite, the write lock is then asked for without the busy
    // wait that sleeps the whole process while another worker holds it.
    const rows = await sql.transaction((tx) =>
      tx.all<{ key_hash: string }>(`INSERT INTO dpop_proof_jtis (key_hash, expires_at) VALUES ${values} ON CONFLICT DO NOTHING RETURNING key_hash`, params),
    );
    return new Set(rows.map((r) => r.key_hash));
  }

  return {
    /**
     * Records a proof (by the hash of its key and jti) until `expiresAt`; false when it was
     * recorded before (a replay). Resolves once the record is committed. Of two racing uses,
     * in this process or any other sharing the database, exactly one is fresh: the insert of
     * the key, its primary key, decides.
     */
    useProof(keyHash: string, expiresAt: number): Promise<boolean> {
      // Inside a caller's transaction the record is part of it (a batch would wait for a later turn).
      if (sql.inTransaction) return recordProofs([{ keyHash, expiresAt, settle: () => {} }]).then((recorded) => recorded.has(keyHash));
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ keyHash, expiresAt, settle: (err, fresh) => (err === undefined ? resolve(fresh) : reject(err)) });
        schedule();
      });
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
