import type { Db } from './db.js';
import { bool, now, parseJson } from './util.js';

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

/** Passkeys, WebAuthn user handles, ceremony challenges and which passkey signed each session in. */
export function webauthnStore(db: Db) {
  const tx = <T>(fn: () => T): T => (db.inTransaction ? fn() : db.transaction(fn).immediate());

  const insertHandle = db.prepare('INSERT INTO webauthn_user_handles (user_id, handle) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING');
  const handleOf = db.prepare<[string], { handle: string }>('SELECT handle FROM webauthn_user_handles WHERE user_id = ?');
  const userOfHandle = db.prepare<[string], { user_id: string }>('SELECT user_id FROM webauthn_user_handles WHERE handle = ?');

  const insertCredential = db.prepare(
    `INSERT INTO webauthn_credentials (id, user_id, public_key, counter, transports, device_type, backed_up, aaguid, name, created_at)
     VALUES (@id, @user_id, @public_key, @counter, @transports, @device_type, @backed_up, @aaguid, @name, @created_at)`,
  );
  const byId = db.prepare<[string], CredentialRow>('SELECT * FROM webauthn_credentials WHERE id = ?');
  const ofUser = db.prepare<[string], CredentialRow>('SELECT * FROM webauthn_credentials WHERE user_id = ? ORDER BY created_at, id');
  const usableCount = db.prepare<[string], { n: number }>(
    'SELECT COUNT(*) AS n FROM webauthn_credentials WHERE user_id = ? AND suspended_at IS NULL',
  );
  const rename = db.prepare('UPDATE webauthn_credentials SET name = ? WHERE id = ? AND user_id = ?');
  const remove = db.prepare('DELETE FROM webauthn_credentials WHERE id = ? AND user_id = ?');
  const recordUse = db.prepare(
    'UPDATE webauthn_credentials SET counter = @counter, backed_up = @backed_up, last_used_at = @t WHERE id = @id AND suspended_at IS NULL',
  );
  const suspend = db.prepare('UPDATE webauthn_credentials SET suspended_at = ? WHERE id = ? AND suspended_at IS NULL');

  const insertChallenge = db.prepare(
    `INSERT INTO webauthn_challenges (challenge, browser_hash, purpose, user_id, request_id, created_at, expires_at)
     VALUES (@challenge, @browser_hash, @purpose, @user_id, @request_id, @created_at, @expires_at)`,
  );
  const getChallenge = db.prepare<[string], Challenge>('SELECT * FROM webauthn_challenges WHERE challenge = ?');
  const deleteChallenge = db.prepare('DELETE FROM webauthn_challenges WHERE challenge = ?');
  // A browser keeps its newest few challenges (several tabs, an autofill request beside a button press).
  const trimChallenges = db.prepare(
    `DELETE FROM webauthn_challenges WHERE browser_hash = @browser_hash AND challenge NOT IN (
       SELECT challenge FROM webauthn_challenges WHERE browser_hash = @browser_hash ORDER BY created_at DESC, challenge LIMIT @keep)`,
  );
  const purgeChallenges = db.prepare('DELETE FROM webauthn_challenges WHERE expires_at <= ?');

  const linkSession = db.prepare(
    'INSERT INTO webauthn_session_credentials (sid, credential_id) VALUES (?, ?) ON CONFLICT (sid) DO UPDATE SET credential_id = excluded.credential_id',
  );
  const unlinkSession = db.prepare('DELETE FROM webauthn_session_credentials WHERE sid = ?');
  const sessionsOf = db.prepare<[string, number], { sid: string }>(
    `SELECT l.sid FROM webauthn_session_credentials l JOIN sessions s ON s.sid = l.sid
     WHERE l.credential_id = ? AND s.ended_at IS NULL AND s.expires_at > ? ORDER BY s.created_at`,
  );
  const credentialOfSession = db.prepare<[string], { credential_id: string }>(
    'SELECT credential_id FROM webauthn_session_credentials WHERE sid = ?',
  );

  return {
    /** The person's WebAuthn user handle (base64url), made on first use. */
    handleFor(userId: string, fresh: () => string): string {
      return tx(() => {
        insertHandle.run(userId, fresh());
        return handleOf.get(userId)!.handle;
      });
    },
    userOfHandle: (handle: string): string | undefined => userOfHandle.get(handle)?.user_id,

    add(c: NewCredential): PasskeyCredential {
      insertCredential.run({ ...c, transports: JSON.stringify(c.transports), backed_up: c.backed_up ? 1 : 0, created_at: now() });
      return toCredential(byId.get(c.id)!);
    },
    get(id: string): PasskeyCredential | undefined {
      const r = byId.get(id);
      return r && toCredential(r);
    },
    ofUser: (userId: string): PasskeyCredential[] => ofUser.all(userId).map(toCredential),
    /** Passkeys that can still sign the person in (not suspended). */
    usableCount: (userId: string): number => usableCount.get(userId)!.n,
    rename: (userId: string, id: string, name: string): boolean => rename.run(name, id, userId).changes === 1,
    remove: (userId: string, id: string): boolean => remove.run(id, userId).changes === 1,
    /** After a verified sign-in: the new signature counter and backup state. */
    recordUse: (id: string, counter: number, backedUp: boolean): boolean =>
      recordUse.run({ id, counter, backed_up: backedUp ? 1 : 0, t: now() }).changes === 1,
    /** Stops a passkey from signing in (its counter went backwards); true the first time. */
    suspend: (id: string): boolean => suspend.run(now(), id).changes === 1,

    /** Keeps a new challenge for this browser, and only its `keep` newest ones. */
    putChallenge(c: Omit<Challenge, 'created_at' | 'expires_at'>, ttl: number, keep = 5): void {
      tx(() => {
        const t = now();
        insertChallenge.run({ ...c, created_at: t, expires_at: t + ttl });
        trimChallenges.run({ browser_hash: c.browser_hash, keep });
      });
    },
    /**
     * Spends a challenge: any presentation deletes it, whatever happens next. Returns it only
     * when it was made for this browser and purpose and has not expired.
     */
    takeChallenge(challenge: string, browserHash: string, purpose: ChallengePurpose): Challenge | undefined {
      return tx(() => {
        const r = getChallenge.get(challenge);
        if (!r) return undefined;
        deleteChallenge.run(challenge);
        return r.browser_hash === browserHash && r.purpose === purpose && r.expires_at > now() ? r : undefined;
      });
    },
    purgeExpiredChallenges: (t = now()): number => purgeChallenges.run(t).changes,

    /** Records which passkey signed the session in (a later sign-in on the same session replaces it). */
    linkSession: (sid: string, credentialId: string): void => void linkSession.run(sid, credentialId),
    unlinkSession: (sid: string): void => void unlinkSession.run(sid),
    /** The live sessions a passkey signed in. */
    liveSessionsOf: (credentialId: string): string[] => sessionsOf.all(credentialId, now()).map((r) => r.sid),
    credentialOfSession: (sid: string): string | undefined => credentialOfSession.get(sid)?.credential_id,
  };
}
export type WebauthnStore = ReturnType<typeof webauthnStore>;
