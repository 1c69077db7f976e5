import type { Db } from './db.js';
import { now, parseJson } from './util.js';

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

export function sessionsStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO sessions (sid, user_id, token_hash, auth_time, amr, acr, created_at, expires_at)
     VALUES (@sid, @user_id, @token_hash, @auth_time, @amr, @acr, @created_at, @expires_at)`,
  );
  const byHash = db.prepare<[string, number], Row>(
    'SELECT * FROM sessions WHERE token_hash = ? AND ended_at IS NULL AND expires_at > ?',
  );
  const bySid = db.prepare<[string], Row>('SELECT * FROM sessions WHERE sid = ?');
  const activeForUser = db.prepare<[string, number], Row>(
    'SELECT * FROM sessions WHERE user_id = ? AND ended_at IS NULL AND expires_at > ? ORDER BY created_at',
  );
  const end = db.prepare('UPDATE sessions SET ended_at = ? WHERE sid = ? AND ended_at IS NULL');
  const update = db.prepare('UPDATE sessions SET auth_time = @auth_time, amr = @amr, acr = @acr WHERE sid = @sid');
  return {
    create(s: { sid: string; user_id: string; token_hash: string; auth_time: number; amr: string[]; acr: string; ttl: number }): Session {
      const t = now();
      insert.run({ ...s, amr: JSON.stringify(s.amr), created_at: t, expires_at: t + s.ttl });
      return toSession(bySid.get(s.sid)!);
    },
    /** A live session by the hash of its cookie value. */
    findByTokenHash(hash: string): Session | undefined {
      const r = byHash.get(hash, now());
      return r && toSession(r);
    },
    get(sid: string): Session | undefined {
      const r = bySid.get(sid);
      return r && toSession(r);
    },
    activeForUser: (userId: string): Session[] => activeForUser.all(userId, now()).map(toSession),
    /** Records a stronger sign-in (a second factor) on an existing session. */
    update: (sid: string, auth_time: number, amr: string[], acr: string): boolean =>
      update.run({ sid, auth_time, amr: JSON.stringify(amr), acr }).changes === 1,
    end: (sid: string): boolean => end.run(now(), sid).changes === 1,
  };
}
export type SessionsStore = ReturnType<typeof sessionsStore>;
