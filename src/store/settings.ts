import { bumpCounter, type ChangeFeed } from './changes.js';
import type { Sql } from './sql.js';

/** Key/value settings and the change counters that keep every process's caches right. */
export function settingsStore(sql: Sql, changes: ChangeFeed) {
  return {
    get: async (key: string): Promise<string | undefined> =>
      (await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [key]))?.value,
    set: async (key: string, value: string): Promise<void> => {
      await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);
    },
    /** true when this call wrote the value (first writer wins across processes) */
    setIfAbsent: async (key: string, value: string): Promise<boolean> =>
      (await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [key, value])).changes === 1,
    /** Marks a domain (`keys`, `agents`, `policy`, `applications`, ...) as changed, when the surrounding transaction commits. */
    bump: (domain: string): Promise<void> => bumpCounter(sql, changes, domain),
    /** The domain's change stamp, as the caches see it. */
    version: (domain: string): Promise<number> => changes.version(domain),
  };
}
export type SettingsStore = ReturnType<typeof settingsStore>;
