import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export type DeviceType = 'singleDevice' | 'multiDevice';

/** A registered passkey. */
export interface PasskeyCredential {
  /** the credential ID, base64url */
  id: string;
  user_id: string;
  /** the COSE public key, base64url */
  public_key: string;
  counter: number;
  transports: string[];
  device_type: DeviceType;
  backed_up: boolean;
  aaguid: string | null;
  name: string;
  created_at: number;
  last_used_at: number | null;
  suspended_at: number | null;
}

interface CredentialRow extends Omit<PasskeyCredential, 'transports' | 'backed_up'> {
  transports: string;
  backed_up: number;
}

const toCredential = (r: CredentialRow): PasskeyCredential => ({
  ...r,
  transports: parseJson<string[]>(r.transports, []),
  backed_up: bool(r.backed_up),
});

export type ChallengePurpose = 'authenticate' | 'register';

export interface Challenge {
  challenge: string;
  browser_hash: string;
  purpose: ChallengePurpose;
  user_id: string | null;
  request_id: string | null;
  created_at: number;
  expires_at: number;
}

export type NewCredential = Omit<PasskeyCredential, 'created_at' | 'last_used_at' | 'suspended_at'>;

const BY_ID = 'SELECT * FROM webauthn_credentials WHERE id = ?';

/** Passkeys, WebAuthn user handles, ceremony challenges and which passkey signed each session in. */
export function webauthnStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byId = async (id: string): Promise<PasskeyCredential | undefined> => {
    const r = await sql.get<CredentialRow>(BY_ID, [id]);
    return r && toCredential(r);
  };
  return {
    /** The person's WebAuthn user handle (base64url), made on first use. */
    async handleFor(userId: string, fresh: () => string): Promise<string> {
      await sql.run('INSERT INTO webauthn_user_handles (user_id, handle) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING', [userId, fresh()]);
      return (await sql.get<{ handle: string }>('SELECT handle FROM webauthn_user_handles WHERE user_id = ?', [userId]))!.handle;
    },
    userOfHandle: async (handle: string): Promise<string | undefined> =>
      (await sql.get<{ user_id: string }>('SELECT user_id FROM webauthn_user_handles WHERE handle = ?', [handle]))?.user_id,

    async add(c: NewCredential): Promise<PasskeyCredential> {
      await sql.run(
        `INSERT INTO webauthn_credentials (id, user_id, public_key, counter, transports, device_type, backed_up, aaguid, name, created_at)
         VALUES (@id, @user_id, @public_key, @counter, @transports, @device_type, @backed_up, @aaguid, @name, @created_at)`,
        { ...c, transports: JSON.stringify(c.transports), backed_up: c.backed_up ? 1 : 0, created_at: now() },
      );
      return (await byId(c.id))!;
    },
    get: byId,
    ofUser: async (userId: string): Promise<PasskeyCredential[]> =>
      (await sql.all<CredentialRow>('SELECT * FROM webauthn_credentials WHERE user_id = ? ORDER BY created_at, id', [userId])).map(toCredential),
    /** Passkeys that can still sign the person in (not suspended). */
    usableCount: async (userId: string): Promise<number> =>
      Number((await sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM webauthn_credentials WHERE user_id = ? AND suspended_at IS NULL', [userId]))!.n),
    rename: async (userId: string, id: string, name: string): Promise<boolean> =>
      (await sql.run('UPDATE webauthn_credentials SET name = ? WHERE id = ? AND user_id = ?', [name, id, userId])).changes === 1,
    remove: async (userId: string, id: string): Promise<boolean> =>
      (await sql.run('DELETE FROM webauthn_credentials WHERE id = ? AND user_id = ?', [id, userId])).changes === 1,
    /** After a verified sign-in: the new signature counter and backup state (false when suspended meanwhile). */
    recordUse: async (id: string, counter: number, backedUp: boolean): Promise<boolean> =>
      (
        await sql.run(
          'UPDATE webauthn_credentials SET counter = ?, backed_up = ?, last_used_at = ? WHERE id = ? AND suspended_at IS NULL',
          [counter, backedUp ? 1 : 0, now(), id],
        )
      ).changes === 1,
    /** Stops a passkey from signing in (its counter went backwards); true the first time. */
    suspend: async (id: string): Promise<boolean> =>
      (await sql.run('UPDATE webauthn_credentials SET suspended_at = ? WHERE id = ? AND suspended_at IS NULL', [now(), id])).changes === 1,

    /** Keeps a new challenge for this browser, and only its `keep` newest ones. */
    async putChallenge(c: Omit<Challenge, 'created_at' | 'expires_at'>, ttl: number, keep = 5): Promise<void> {
      const t = now();
      await sql.transaction(async (tx) => {
        await tx.run(
          `INSERT INTO webauthn_challenges (challenge, browser_hash, purpose, user_id, request_id, created_at, expires_at)
           VALUES (@challenge, @browser_hash, @purpose, @user_id, @request_id, @created_at, @expires_at)`,
          { ...c, created_at: t, expires_at: t + ttl },
        );
        // A browser keeps its newest few (several tabs, an autofill request beside a button press).
        // The one just made always stays: times are whole seconds, so several made in one second tie.
        await tx.run(
          `DELETE FROM webauthn_challenges WHERE browser_hash = ? AND challenge <> ? AND challenge NOT IN (
             SELECT kept.challenge FROM (
               SELECT challenge FROM webauthn_challenges WHERE browser_hash = ? AND challenge <> ? ORDER BY created_at DESC, challenge LIMIT ?
             ) kept)`,
          [c.browser_hash, c.challenge, c.browser_hash, c.challenge, Math.max(keep - 1, 0)],
        );
      });
    },
    /**
     * Spends a challenge: any presentation deletes it (one statement, so of racing uses at most
     * one sees it), whatever happens next. Returns it only when it was made for this browser
     * and purpose and has not expired.
     */
    async takeChallenge(challenge: string, browserHash: string, purpose: ChallengePurpose): Promise<Challenge | undefined> {
      const r = await sql.get<Challenge>('DELETE FROM webauthn_challenges WHERE challenge = ? RETURNING *', [challenge]);
      return r && r.browser_hash === browserHash && r.purpose === purpose && r.expires_at > now() ? r : undefined;
    },
    purgeExpiredChallenges: async (t = now()): Promise<number> =>
      (await sql.run('DELETE FROM webauthn_challenges WHERE expires_at <= ?', [t])).changes,

    /** Records which passkey signed the session in (a later sign-in on the same session replaces it). */
    linkSession: async (sid: string, credentialId: string): Promise<void> =>
      void (await sql.run(
        'INSERT INTO webauthn_session_credentials (sid, credential_id) VALUES (?, ?) ON CONFLICT (sid) DO UPDATE SET credential_id = excluded.credential_id',
        [sid, credentialId],
      )),
    /** The live sessions a passkey signed in. */
    liveSessionsOf: async (credentialId: string): Promise<string[]> =>
      (
        await sql.all<{ sid: string }>(
          `SELECT l.sid FROM webauthn_session_credentials l JOIN sessions s ON s.sid = l.sid
           WHERE l.credential_id = ? AND s.ended_at IS NULL AND s.expires_at > ? ORDER BY s.created_at, l.sid`,
          [credentialId, now()],
        )
      ).map((r) => r.sid),
    credentialOfSession: async (sid: string): Promise<string | undefined> =>
      (await sql.get<{ credential_id: string }>('SELECT credential_id FROM webauthn_session_credentials WHERE sid = ?', [sid]))?.credential_id,
  };
}
export type WebauthnStore = ReturnType<typeof webauthnStore>;
