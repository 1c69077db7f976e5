import type { Sql } from './sql.js';

/**
 * Per-domain change counters (`keys`, `agents`, `policy`, `applications`, ...) that keep every
 * process's in-memory caches right. A cache keeps the stamp it loaded at and reloads when
 * `version` answers another one.
 */
export interface ChangeFeed {
  /** The domain's current stamp: it moves whenever a change to the domain commits, in any process. */
  version(domain: string): Promise<number>;
  /** Called (inside the writing transaction) after the domain's counter moved to `version`. */
  bumped(sql: Sql, domain: string, version: number): Promise<void>;
  close(): Promise<void>;
}

const READ_ALL = 'SELECT domain, version FROM change_counters';

/** Moves a domain's counter in `sql`'s transaction (or on its own); caches see it once that commits. */
export async function bumpCounter(sql: Sql, changes: ChangeFeed, domain: string): Promise<void> {
  const row = await sql.get<{ version: number }>(
    `INSERT INTO change_counters (domain, version) VALUES (?, 1)
     ON CONFLICT (domain) DO UPDATE SET version = change_counters.version + 1 RETURNING version`,
    [domain],
  );
  await changes.bumped(sql, domain, Number(row!.version));
}

/**
 * The counters read from the database at most once per event-loop turn: every request of
 * one turn shares one read, and a change committed by another process is seen from the next
 * turn on (cheap on SQLite: one small read of a local file). A change committed here is seen
 * at once.
 */
export function perTurnFeed(sql: Sql): ChangeFeed {
  let snapshot: Promise<Map<string, number>> | undefined;
  const read = (): Promise<Map<string, number>> => {
    if (!snapshot) {
      snapshot = sql.all<{ domain: string; version: number }>(READ_ALL).then((rows) => new Map(rows.map((r) => [r.domain, Number(r.version)])));
      setImmediate(() => {
        snapshot = undefined;
      });
    }
    return snapshot;
  };
  return {
    version: async (domain) => (await read()).get(domain) ?? 0,
    async bumped(tx) {
      tx.afterCommit(() => {
        snapshot = undefined;
      });
    },
    async close() {},
  };
}
