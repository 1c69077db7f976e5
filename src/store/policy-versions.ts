import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

/** One version of the policy that was in force: the files and live rules it was compiled from. */
export interface PolicyVersionRecord<F = unknown, R = unknown> {
  version: string;
  files: F[];
  rules: R[];
  first_seen: number;
}
interface Row { version: string; seq: number; files: string; rules: string; first_seen: number }

export function policyVersionsStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  return {
    /** Keeps a version the first time it is seen (every worker may try; the first one wins). */
    async record(version: string, files: unknown[], rules: unknown[]): Promise<void> {
      // `WHERE true` lets SQLite read ON CONFLICT as the upsert clause, not as part of the SELECT.
      await sql.run(
        `INSERT INTO policy_versions (version, seq, files, rules, first_seen)
         SELECT CAST(? AS TEXT), COALESCE(MAX(seq), 0) + 1, CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT) FROM policy_versions WHERE true
         ON CONFLICT (version) DO NOTHING`,
        [version, JSON.stringify(files), JSON.stringify(rules), now()],
      );
    },
    /** The versions, newest first. */
    list: (limit = 200): Promise<{ version: string; first_seen: number }[]> =>
      sql.all('SELECT version, first_seen FROM policy_versions ORDER BY seq DESC LIMIT ?', [Math.min(Math.max(limit, 1), 1000)]),
    async get<F, R>(version: string): Promise<PolicyVersionRecord<F, R> | undefined> {
      const r = await sql.get<Row>('SELECT * FROM policy_versions WHERE version = ?', [version]);
      return r && { version: r.version, files: parseJson<F[]>(r.files, []), rules: parseJson<R[]>(r.rules, []), first_seen: r.first_seen };
    },
  };
}
export type PolicyVersionsStore = ReturnType<typeof policyVersionsStore>;
