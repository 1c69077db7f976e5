import type { Db } from './db.js';
import { now } from './util.js';

/** Fixed-window failure counters in SQLite, so every worker process sees the same count. */
export function rateLimitsStore(db: Db) {
  const get = db.prepare<[string], { count: number; window_start: number }>(
    'SELECT count, window_start FROM rate_limits WHERE key = ?',
  );
  const hit = db.prepare<[string, number, number, number, number], { count: number }>(
    `INSERT INTO rate_limits (key, count, window_start) VALUES (?, 1, ?)
     ON CONFLICT (key) DO UPDATE SET
       count = CASE WHEN window_start <= ? THEN 1 ELSE count + 1 END,
       window_start = CASE WHEN window_start <= ? THEN ? ELSE window_start END
     RETURNING count`,
  );
  const clear = db.prepare('DELETE FROM rate_limits WHERE key = ?');
  const purge = db.prepare('DELETE FROM rate_limits WHERE window_start <= ?');
  return {
    /** Failures counted for `key` in the window that is still open (0 when it has closed). */
    count(key: string, windowSeconds: number): number {
      const r = get.get(key);
      return r && r.window_start > now() - windowSeconds ? r.count : 0;
    },
    /** Counts one failure for `key` and returns the count in the current window. */
    hit(key: string, windowSeconds: number): number {
      const t = now();
      const expired = t - windowSeconds;
      return hit.get(key, t, expired, expired, t)!.count;
    },
    clear: (key: string): void => void clear.run(key),
    purgeOlderThan: (t: number): number => purge.run(t).changes,
  };
}
export type RateLimitsStore = ReturnType<typeof rateLimitsStore>;
