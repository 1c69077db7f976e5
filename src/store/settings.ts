import type { Db } from './db.js';

/** Key/value settings and the change counters that keep every worker's caches right. */
export function settingsStore(db: Db) {
  const get = db.prepare<[string], { value: string }>('SELECT value FROM settings WHERE key = ?');
  const set = db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value');
  const setIfAbsent = db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING');
  const bump = db.prepare(
    'INSERT INTO change_counters (domain, version) VALUES (?, 1) ON CONFLICT (domain) DO UPDATE SET version = version + 1',
  );
  const all = db.prepare<[], { domain: string; version: number }>('SELECT domain, version FROM change_counters');
  return {
    get: (key: string): string | undefined => get.get(key)?.value,
    set: (key: string, value: string): void => void set.run(key, value),
    /** true when this call wrote the value (first writer wins across processes) */
    setIfAbsent: (key: string, value: string): boolean => setIfAbsent.run(key, value).changes === 1,
    /** Marks a domain (`keys`, `agents`, `policy`, `applications`, ...) as changed. */
    bump: (domain: string): void => void bump.run(domain),
    /** One cheap read: a string that changes whenever any counter does. */
    versions: (): string =>
      all
        .all()
        .map((r) => `${r.domain}=${r.version}`)
        .join(','),
    version: (domain: string): number => all.all().find((r) => r.domain === domain)?.version ?? 0,
  };
}
export type SettingsStore = ReturnType<typeof settingsStore>;
