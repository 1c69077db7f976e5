import type { Db } from './db.js';
import { now, parseJson } from './util.js';

/** One version of the policy that was in force: the files and live rules it was compiled from. */
export interface PolicyVersionRecord<F = unknown, R = unknown> {
  version: string;
  files: F[];
  rules: R[];
  first_seen: number;
}
interface Row { version: string; files: string; rules: string; first_seen: number }

export function policyVersionsStore(db: Db) {
  const insert = db.prepare(
    'INSERT INTO policy_versions (version, files, rules, first_seen) VALUES (?, ?, ?, ?) ON CONFLICT (version) DO NOTHING',
  );
  const list = db.prepare<[number], { version: string; first_seen: number }>(
    'SELECT version, first_seen FROM policy_versions ORDER BY first_seen DESC, version LIMIT ?',
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
