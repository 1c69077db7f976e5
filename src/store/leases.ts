import type { Sql } from './sql.js';

/**
 * Named leases over background work, shared by every process and instance on the database:
 * `acquire` takes a free (or expired) lease or renews one the owner holds, in one statement.
 * A lease lasts real time (the system clock, not the application's clock): it hands work over
 * between processes, which share only the real clock, and a stopped test clock must not hold a
 * lease for ever. Instances' clocks must agree to well within a lease.
 */
export function leasesStore(sql: Sql) {
  return {
    /** Takes or renews `name` for `ms` milliseconds; true when `owner` holds it now. */
    async acquire(name: string, owner: string, ms: number): Promise<boolean> {
      const t = Date.now();
      const row = await sql.get<{ owner: string }>(
        `INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
         WHERE leases.owner = excluded.owner OR leases.expires_at <= ?
         RETURNING owner`,
        [name, owner, t + ms, t],
      );
      return row?.owner === owner;
    },
    /** Gives the lease up (only its holder can). */
    release: async (name: string, owner: string): Promise<void> => {
      await sql.run('DELETE FROM leases WHERE name = ? AND owner = ?', [name, owner]);
    },
  };
}
export type LeasesStore = ReturnType<typeof leasesStore>;
