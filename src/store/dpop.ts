import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { secondsOf } from './util.js';

/** At most this many proofs are recorded by one statement (a bounded set of statement texts). */
const MAX_PROOFS_PER_COMMIT = 64;

interface Proof {
  keyHash: string;
  expiresAt: number;
}
interface PendingProof extends Proof {
  settle: (err: unknown, fresh: boolean) => void;
}

/**
 * DPoP state every process and instance shares: the proofs already used (RFC 9449 section
 * 11.1, single use) and the refresh families bound to a key (section 5).
 *
 * A used proof is recorded, by the hash of its key and jti, until it is too old to be accepted
 * anyway. How depends on the database:
 * - PostgreSQL: `dpop_proof_jtis`, whose primary key refuses the second insert of a proof.
 * - SQLite: `dpop_proof_log`, appended to. A table keyed by the proof puts each proof on a page
 *   of its own (the keys are random), and writing those pages was most of what a proof cost;
 *   appended rows share pages, and with neither an index nor AUTOINCREMENT a commit writes the
 *   log's last page alone. Row numbers only grow: a new row takes the last one's number plus
 *   one, and housekeeping never deletes the last row. Each process keeps the recent log in memory: in the transaction
 *   that appends its proofs, holding the database's one write lock, it first reads the rows
 *   every other process and instance appended since it last looked, then appends only the
 *   proofs found in none of them. So every decision is made against every proof committed
 *   before it, as the primary key makes it on PostgreSQL.
 */
export function dpopStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const record = sql.dialect === 'sqlite' ? proofLog(sql, now) : proofTable(sql, now);

  // Group commit: the proofs of the requests that reach this point in the same turn of the event
  // loop (and those that arrive while a commit is under way) are recorded in one transaction.
  // Every request still waits for the commit that holds its proof before it is answered.
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
      const fresh = await record(batch);
      for (const p of batch) p.settle(undefined, fresh.has(p));
    } catch (err) {
      for (const p of batch) p.settle(err, false);
    } finally {
      committing = false;
      schedule();
    }
  }

  return {
    /**
     * Records a proof (by the hash of its key and jti) until `expiresAt`; false when it was
     * recorded before (a replay). Resolves once the record is committed. Of two racing uses,
     * in this process or any other sharing the database, exactly one is fresh.
     */
    useProof(keyHash: string, expiresAt: number): Promise<boolean> {
      const proof = { keyHash, expiresAt };
      // Inside a caller's transaction the record is part of it (a batch would wait for a later turn).
      if (sql.inTransaction) return record([proof]).then((fresh) => fresh.has(proof));
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ ...proof, settle: (err, fresh) => (err === undefined ? resolve(fresh) : reject(err)) });
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
      // The log's last row stays, expired or not: the next row's number follows it (see proofLog).
      const proofs = await sql.run(
        sql.dialect === 'sqlite'
          ? 'DELETE FROM dpop_proof_log WHERE expires_at < ? AND seq < (SELECT MAX(seq) FROM dpop_proof_log)'
          : 'DELETE FROM dpop_proof_jtis WHERE expires_at < ?',
        [t],
      );
      const bindings = await sql.run('DELETE FROM dpop_refresh_bindings WHERE family_id NOT IN (SELECT id FROM refresh_families)');
      return proofs.changes + bindings.changes;
    },
  };
}
export type DpopStore = ReturnType<typeof dpopStore>;

/** Records a batch of proofs in one transaction; answers those that were fresh (of one key hash twice, the first). */
type RecordProofs<P extends Proof = Proof> = (batch: readonly P[]) => Promise<Set<P>>;

/** The first of each key hash in `batch` that `isFresh` accepts. */
function firstFresh<P extends Proof>(batch: readonly P[], isFresh: (keyHash: string) => boolean): Set<P> {
  const fresh = new Set<P>();
  const taken = new Set<string>();
  for (const p of batch) {
    if (taken.has(p.keyHash)) continue;
    taken.add(p.keyHash);
    if (isFresh(p.keyHash)) fresh.add(p);
  }
  return fresh;
}

const valuesList = (n: number) => Array.from({ length: n }, () => '(?, ?)').join(', ');

/**
 * PostgreSQL: one insert; the rows it returns are the proofs not recorded before. A row whose
 * proof is past its window (housekeeping has not dropped it yet) is taken over, as the log
 * forgets it on SQLite: a jti is refused while a proof with it could still be accepted.
 */
function proofTable(sql: Sql, now: () => number): RecordProofs {
  return async (batch) => {
    const unique = firstFresh(batch, () => true);
    const params = [...[...unique].flatMap((p) => [p.keyHash, p.expiresAt]), now()];
    // One statement, its own transaction: no BEGIN and COMMIT round trips around it.
    const rows = await sql.all<{ key_hash: string }>(
      `INSERT INTO dpop_proof_jtis (key_hash, expires_at) VALUES ${valuesList(unique.size)}
       ON CONFLICT (key_hash) DO UPDATE SET expires_at = excluded.expires_at WHERE dpop_proof_jtis.expires_at < ?
       RETURNING key_hash`,
      params,
    );
    const inserted = new Set(rows.map((r) => r.key_hash));
    return new Set([...unique].filter((p) => inserted.has(p.keyHash)));
  };
}

/** SQLite: the append-only log, with this process's copy of its recent rows (see dpopStore). */
function proofLog(sql: Sql, now: () => number): RecordProofs {
  /** key hash → expires_at, of every proof in the log not yet expired, in about the order they expire */
  const seen = new Map<string, number>();
  /** the last row of the log this process has read; undefined before the first read */
  let lastSeq: number | undefined;
  let sweptAt = 0;

  const remember = (keyHash: string, expiresAt: number, t: number) => {
    if (expiresAt >= t) seen.set(keyHash, expiresAt);
  };
  // Entries go in about the order they expire: the sweep stops at the first one still good, so a
  // few stay a little longer (a jti used again a little later is refused, as a replay would be).
  const sweep = (t: number) => {
    if (t === sweptAt) return;
    sweptAt = t;
    for (const [keyHash, expiresAt] of seen) {
      if (expiresAt >= t) break;
      seen.delete(keyHash);
    }
  };

  return async (batch) => {
    const t = now();
    sweep(t);
    return sql.transaction(async (tx) => {
      // Holding the write lock: every row committed so far is visible, and no other can be added.
      const rows =
        lastSeq === undefined
          ? await tx.all<{ seq: number; key_hash: string; expires_at: number }>('SELECT seq, key_hash, expires_at FROM dpop_proof_log WHERE expires_at >= ? ORDER BY seq', [t])
          : await tx.all<{ seq: number; key_hash: string; expires_at: number }>('SELECT seq, key_hash, expires_at FROM dpop_proof_log WHERE seq > ? ORDER BY seq', [lastSeq]);
      for (const r of rows) remember(r.key_hash, r.expires_at, t);
      if (lastSeq === undefined) lastSeq = (await tx.get<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM dpop_proof_log'))?.seq ?? 0;
      else if (rows.length > 0) lastSeq = rows[rows.length - 1]!.seq;

      const fresh = firstFresh(batch, (keyHash) => !seen.has(keyHash));
      if (fresh.size === 0) return fresh;
      const appended = await tx.all<{ seq: number }>(
        `INSERT INTO dpop_proof_log (key_hash, expires_at) VALUES ${valuesList(fresh.size)} RETURNING seq`,
        [...fresh].flatMap((p) => [p.keyHash, p.expiresAt]),
      );
      // Known as used once committed (a rollback leaves them unrecorded, and the next read finds
      // them in no row). Our rows follow every row read above: no other process could append between.
      tx.afterCommit(() => {
        for (const p of fresh) remember(p.keyHash, p.expiresAt, t);
        lastSeq = Math.max(lastSeq ?? 0, ...appended.map((r) => r.seq));
      });
      return fresh;
    });
  };
}
