import type { Db } from './db.js';
import { now, parseJson } from './util.js';

/** One version of the policy that was in force: the files and live rules it was compiled from. */
export interface PolicyVersionRecord<F = unknown, R = unknown> {
  version: string;
  files: F[];
  rules: R[];
  first_seen: number;
}
interface Row { version: string; seq: number; files: string; rules: string; first_seen: number }

export function policyVersionsStore(db: Db) {
  // `WHERE true` lets SQLite read ON CONFLICT as the upsert clause, not as part of the SELECT.
  const insert = db.prepare(
    `INSERT INTO policy_versions (version, seq, files, rules, first_seen)
     SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM policy_versions WHERE true
     ON CONFLICT (version) DO NOTHING`,
  );
  const list = db.prepare<[number], { version: string; first_seen: number }>(
    'SELECT version, first_seen FROM policy_versions ORDER BY seq DESC LIMIT ?',
  );
  const get = db.prepare<[string], Row>('SELECT * FROM policy_versions WHERE version = ?');
  return {
    /** Keeps a version the first time it is seen (every worker may try; the first one wins). */
    record(version: string, files: unknown[], rules: unknown[]): void {
      insert.run(version, JSON.stringify(files), JSON.stringify(rules), now());
    },
    /** The versions, newest first. */
    list: (limit = 200): { version: string; first_seen: number }[] => list.all(Math.min(Math.max(limit, 1), 1000)),
    get<F, R>(version: string): PolicyVersionRecord<F, R> | undefined {
      const r = get.get(version);
      return r && { version: r.version, files: parseJson<F[]>(r.files, []), rules: parseJson<R[]>(r.rules, []), first_seen: r.first_seen };
    },
  };
}
export type PolicyVersionsStore = ReturnType<typeof policyVersionsStore>;
