import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

export interface Session {
  sid: string;
  user_id: string;
  auth_time: number;
  amr: string[];
  acr: string;
  created_at: number;
  expires_at: number;
  ended_at: number | null;
}
interface Row extends Omit<Session, 'amr'> { amr: string; token_hash: string }
const toSession = (r: Row): Session => ({
  sid: r.sid,
  user_id: r.user_id,
  auth_time: r.auth_time,
  amr: parseJson(r.amr, []),
  acr: r.acr,
  created_at: r.created_at,
  expires_at: r.expires_at,
  ended_at: r.ended_at,
});

const BY_SID = 'SELECT * FROM sessions WHERE sid = ?';

export function sessionsStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const get = async (sid: string): Promise<Session | undefined> => {
    const r = await sql.get<Row>(BY_SID, [sid]);
    return r && toSession(r);
  };
  return {
    async create(s: { sid: string; user_id: string; token_hash: string; auth_time: number; amr: string[]; acr: string; ttl: number }): Promise<Session> {
      const t = now();
      await sql.run(
        `INSERT INTO sessions (sid, user_id, token_hash, auth_time, amr, acr, created_at, expires_at)
         VALUES (@sid, @user_id, @token_hash, @auth_time, @amr, @acr, @created_at, @expires_at)`,
        { sid: s.sid, user_id: s.user_id, token_hash: s.token_hash, auth_time: s.auth_time, amr: JSON.stringify(s.amr), acr: s.acr, created_at: t, expires_at: t + s.ttl },
      );
      return (await get(s.sid))!;
    },
    /** A live session by the hash of its cookie value. */
    async findByTokenHash(hash: string): Promise<Session | undefined> {
      const r = await sql.get<Row>('SELECT * FROM sessions WHERE token_hash = ? AND ended_at IS NULL AND expires_at > ?', [hash, now()]);
      return r && toSession(r);
    },
    get,
    activeForUser: async (userId: string): Promise<Session[]> =>
      (await sql.all<Row>('SELECT * FROM sessions WHERE user_id = ? AND ended_at IS NULL AND expires_at > ? ORDER BY created_at, sid', [userId, now()])).map(toSession),
    /** Records a stronger sign-in (a second factor) on an existing session. */
    update: async (sid: string, auth_time: number, amr: string[], acr: string): Promise<boolean> =>
      (await sql.run('UPDATE sessions SET auth_time = @auth_time, amr = @amr, acr = @acr WHERE sid = @sid', { sid, auth_time, amr: JSON.stringify(amr), acr })).changes === 1,
    end: async (sid: string): Promise<boolean> => (await sql.run('UPDATE sessions SET ended_at = ? WHERE sid = ? AND ended_at IS NULL', [now(), sid])).changes === 1,
  };
}
export type SessionsStore = ReturnType<typeof sessionsStore>;
