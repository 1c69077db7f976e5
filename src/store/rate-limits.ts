import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { secondsOf } from './util.js';

/** Fixed-window failure counters in the database, so every process and instance sees the same count. */
export function rateLimitsStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  return {
    /** Failures counted for `key` in the window that is still open (0 when it has closed). */
    async count(key: string, windowSeconds: number): Promise<number> {
      const r = await sql.get<{ count: number; window_start: number }>('SELECT count, window_start FROM rate_limits WHERE key = ?', [key]);
      return r && r.window_start > now() - windowSeconds ? r.count : 0;
    },
    /** Counts one failure for `key` and returns the count in the current window (one atomic statement). */
    async hit(key: string, windowSeconds: number): Promise<number> {
      const t = now();
      const expired = t - windowSeconds;
      const r = await sql.get<{ count: number }>(
        `INSERT INTO rate_limits (key, count, window_start) VALUES (?, 1, ?)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN rate_limits.window_start <= ? THEN 1 ELSE rate_limits.count + 1 END,
           window_start = CASE WHEN rate_limits.window_start <= ? THEN ? ELSE rate_limits.window_start END
         RETURNING count`,
        [key, t, expired, expired, t],
      );
      return r!.count;
    },
    clear: async (key: string): Promise<void> => {
      await sql.run('DELETE FROM rate_limits WHERE key = ?', [key]);
    },
    purgeOlderThan: async (t: number): Promise<number> => (await sql.run('DELETE FROM rate_limits WHERE window_start <= ?', [t])).changes,
  };
}
export type RateLimitsStore = ReturnType<typeof rateLimitsStore>;
