import type { Db } from './db.js';
import { now, parseJson } from './util.js';

/** The validated parameters of an authorization request, kept while the person signs in. */
export interface AuthorizationParams {
  client_id: string;
  redirect_uri: string;
  scope: string[];
  state?: string;
  nonce?: string;
  code_challenge?: string;
  prompt: string[];
  max_age?: number;
  /** the sign-in strengths (acr values) the request accepts, ours only, in the order asked */
  acr_values?: string[];
  /** the single strength a request kept before `acr_values` existed */
  acr_required?: string;
  login_hint?: string;
  resource?: string;
}

export interface PendingRequest {
  id: string;
  client_id: string;
  params: AuthorizationParams;
  user_id: string | null;
  fresh: boolean;
  consented: boolean;
  expires_at: number;
}

/** What a code or a refresh family carries from the sign-in into every token. */
export interface Grant {
  client_id: string;
  user_id: string;
  sid: string;
  scope: string[];
  resource: string | null;
  auth_time: number;
  amr: string[];
  acr: string;
}

export interface CodeRecord extends Grant {
  redirect_uri: string;
  nonce: string | null;
  code_challenge: string | null;
  expires_at: number;
}

export interface Family extends Grant {
  id: string;
  revoked_at: number | null;
}

interface GrantRow { client_id: string; user_id: string; sid: string; scope: string; resource: string | null; auth_time: number; amr: string; acr: string }
const toGrant = (r: GrantRow): Grant => ({
  client_id: r.client_id,
  user_id: r.user_id,
  sid: r.sid,
  scope: r.scope ? r.scope.split(' ') : [],
  resource: r.resource,
  auth_time: r.auth_time,
  amr: parseJson(r.amr, []),
  acr: r.acr,
});

export type CodeRedemption =
  | { ok: true; code: CodeRecord }
  | { ok: false; reason: 'unknown' | 'expired' | 'reused'; revokedFamily?: string }
  | { ok: false; reason: 'mismatch'; detail: string };

export type RefreshRotation =
  | { ok: true; family: Family }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' | 'wrong_client' | 'invalid_scope' };

export function oauthStore(db: Db) {
  const tx = <T>(fn: () => T): T => (db.inTransaction ? fn() : db.transaction(fn).immediate());

  // Pending authorization requests
  const insertRequest = db.prepare(
    'INSERT INTO oauth_requests (id, client_id, params, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
  );
  const getRequest = db.prepare<[string, number], { id: string; client_id: string; params: string; user_id: string | null; fresh: number; consented: number; expires_at: number }>(
    'SELECT * FROM oauth_requests WHERE id = ? AND expires_at > ?',
  );
  const setRequestUser = db.prepare('UPDATE oauth_requests SET user_id = ? WHERE id = ?');
  const markFresh = db.prepare('UPDATE oauth_requests SET fresh = 1 WHERE id = ?');
  const markConsented = db.prepare('UPDATE oauth_requests SET consented = 1 WHERE id = ?');
  const deleteRequest = db.prepare('DELETE FROM oauth_requests WHERE id = ?');

  // Codes
  const insertCode = db.prepare(
    `INSERT INTO oauth_codes (code_hash, client_id, user_id, sid, redirect_uri, scope, resource, nonce, code_challenge, auth_time, amr, acr, created_at, expires_at)
     VALUES (@code_hash, @client_id, @user_id, @sid, @redirect_uri, @scope, @resource, @nonce, @code_challenge, @auth_time, @amr, @acr, @created_at, @expires_at)`,
  );
  const getCode = db.prepare<[string], GrantRow & { redirect_uri: string; nonce: string | null; code_challenge: string | null; expires_at: number; used_at: number | null; family_id: string | null }>(
    'SELECT * FROM oauth_codes WHERE code_hash = ?',
  );
  const useCode = db.prepare('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL');
  const setCodeFamily = db.prepare('UPDATE oauth_codes SET family_id = ? WHERE code_hash = ?');

  // Refresh families and tokens
  const insertFamily = db.prepare(
    `INSERT INTO refresh_families (id, client_id, user_id, sid, scope, resource, auth_time, amr, acr, created_at)
     VALUES (@id, @client_id, @user_id, @sid, @scope, @resource, @auth_time, @amr, @acr, @created_at)`,
  );
  const getFamily = db.prepare<[string], GrantRow & { id: string; revoked_at: number | null }>('SELECT * FROM refresh_families WHERE id = ?');
  const revokeFamily = db.prepare('UPDATE refresh_families SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  const revokeFamiliesOfUser = db.prepare('UPDATE refresh_families SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL');
  const revokeFamiliesOfSession = db.prepare('UPDATE refresh_families SET revoked_at = ? WHERE sid = ? AND revoked_at IS NULL');
  const insertRefresh = db.prepare('INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at) VALUES (?, ?, ?, ?)');
  const getRefresh = db.prepare<[string], { token_hash: string; family_id: string; expires_at: number; used_at: number | null }>(
    'SELECT token_hash, family_id, expires_at, used_at FROM refresh_tokens WHERE token_hash = ?',
  );
  const useRefresh = db.prepare('UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL');

  // Consents, TOTP replay, housekeeping
  const getConsent = db.prepare<[string, string], { scopes: string }>('SELECT scopes FROM oauth_consents WHERE user_id = ? AND client_id = ?');
  const putConsent = db.prepare(
    'INSERT INTO oauth_consents (user_id, client_id, scopes, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = excluded.scopes, updated_at = excluded.updated_at',
  );
  const consentsOfUser = db.prepare<[string], { client_id: string; scopes: string; updated_at: number }>(
    'SELECT client_id, scopes, updated_at FROM oauth_consents WHERE user_id = ? ORDER BY updated_at DESC, client_id',
  );
  const deleteConsent = db.prepare('DELETE FROM oauth_consents WHERE user_id = ? AND client_id = ?');
  const revokeFamiliesOfUserClient = db.prepare(
    'UPDATE refresh_families SET revoked_at = ? WHERE user_id = ? AND client_id = ? AND revoked_at IS NULL',
  );
  const getTotpStep = db.prepare<[string], { step: number }>('SELECT step FROM totp_used WHERE user_id = ?');
  const putTotpStep = db.prepare(
    'INSERT INTO totp_used (user_id, step) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET step = excluded.step WHERE excluded.step > totp_used.step',
  );
  const purgeRequests = db.prepare('DELETE FROM oauth_requests WHERE expires_at <= ?');
  const purgeCodes = db.prepare('DELETE FROM oauth_codes WHERE expires_at <= ?');

  const newFamily = (id: string, g: Grant, refreshHash: string, refreshTtl: number) => {
    const t = now();
    insertFamily.run({
      id, client_id: g.client_id, user_id: g.user_id, sid: g.sid, scope: g.scope.join(' '), resource: g.resource,
      auth_time: g.auth_time, amr: JSON.stringify(g.amr), acr: g.acr, created_at: t,
    });
    insertRefresh.run(refreshHash, id, t, t + refreshTtl);
  };

  return {
    createRequest(id: string, params: AuthorizationParams, ttl: number): void {
      const t = now();
      insertRequest.run(id, params.client_id, JSON.stringify(params), t, t + ttl);
    },
    getRequest(id: string): PendingRequest | undefined {
      const r = getRequest.get(id, now());
      return r && { id: r.id, client_id: r.client_id, params: JSON.parse(r.params) as AuthorizationParams, user_id: r.user_id, fresh: r.fresh === 1, consented: r.consented === 1, expires_at: r.expires_at };
    },
    setRequestUser: (id: string, userId: string | null): void => void setRequestUser.run(userId, id),
    markRequestFresh: (id: string): void => void markFresh.run(id),
    markRequestConsented: (id: string): void => void markConsented.run(id),
    deleteRequest: (id: string): void => void deleteRequest.run(id),

    createCode(codeHash: string, c: Omit<CodeRecord, 'expires_at'>, ttl: number): void {
      const t = now();
      insertCode.run({
        code_hash: codeHash, client_id: c.client_id, user_id: c.user_id, sid: c.sid, redirect_uri: c.redirect_uri,
        scope: c.scope.join(' '), resource: c.resource, nonce: c.nonce, code_challenge: c.code_challenge,
        auth_time: c.auth_time, amr: JSON.stringify(c.amr), acr: c.acr, created_at: t, expires_at: t + ttl,
      });
    },

    /**
     * The authorization code state table in one immediate transaction: an unused, unexpired
     * code that passes `check` becomes used and (when `refresh` is given) starts its refresh
     * family. A code used before revokes the family its first exchange started (RFC 6749
     * 4.1.2), and a racing second exchange can never slip in between.
     */
    redeemCode(
      codeHash: string,
      check: (code: CodeRecord) => string | undefined,
      refresh?: { familyId: string; tokenHash: string; ttl: number },
    ): CodeRedemption {
      return tx(() => {
        const r = getCode.get(codeHash);
        if (!r) return { ok: false, reason: 'unknown' } as const;
        if (r.used_at != null) {
          if (r.family_id) revokeFamily.run(now(), r.family_id);
          return { ok: false, reason: 'reused', revokedFamily: r.family_id ?? undefined } as const;
        }
        // Single use: whatever happens next, this code is spent.
        useCode.run(now(), codeHash);
        if (r.expires_at <= now()) return { ok: false, reason: 'expired' } as const;
        const code: CodeRecord = { ...toGrant(r), redirect_uri: r.redirect_uri, nonce: r.nonce, code_challenge: r.code_challenge, expires_at: r.expires_at };
        const mismatch = check(code);
        if (mismatch) return { ok: false, reason: 'mismatch', detail: mismatch } as const;
        if (refresh) {
          newFamily(refresh.familyId, code, refresh.tokenHash, refresh.ttl);
          setCodeFamily.run(refresh.familyId, codeHash);
        }
        return { ok: true, code } as const;
      });
    },

    /**
     * The refresh state table in one immediate transaction: the current token becomes used and
     * `nextHash` the current one; a used token presented again revokes the whole family. Of any
     * number of racing requests with one token, exactly one sees it unused.
     */
    rotateRefresh(
      tokenHash: string,
      nextHash: string,
      refreshTtl: number,
      check: (family: Family) => 'ok' | 'wrong_client' | 'invalid_scope',
    ): RefreshRotation {
      return tx(() => {
        const t = now();
        const tok = getRefresh.get(tokenHash);
        if (!tok) return { ok: false, reason: 'unknown' } as const;
        const f = getFamily.get(tok.family_id)!;
        const family: Family = { ...toGrant(f), id: f.id, revoked_at: f.revoked_at };
        const verdict = check(family);
        // Another application's token: not ours to consume or revoke.
        if (verdict === 'wrong_client') return { ok: false, reason: 'wrong_client' } as const;
        if (family.revoked_at != null) return { ok: false, reason: 'revoked' } as const;
        if (tok.used_at != null) {
          revokeFamily.run(t, family.id);
          return { ok: false, reason: 'reused' } as const;
        }
        if (tok.expires_at <= t) return { ok: false, reason: 'expired' } as const;
        if (verdict === 'invalid_scope') return { ok: false, reason: 'invalid_scope' } as const;
        useRefresh.run(t, tokenHash);
        insertRefresh.run(nextHash, family.id, t, t + refreshTtl);
        return { ok: true, family } as const;
      });
    },

    /** The family of a refresh token (any state), for revocation. */
    familyOfRefresh(tokenHash: string): Family | undefined {
      const tok = getRefresh.get(tokenHash);
      if (!tok) return undefined;
      const f = getFamily.get(tok.family_id);
      return f && { ...toGrant(f), id: f.id, revoked_at: f.revoked_at };
    },
    revokeFamily: (familyId: string): boolean => revokeFamily.run(now(), familyId).changes === 1,
    /** For the management API: every refresh family of a person. */
    revokeFamiliesOfUser: (userId: string): number => revokeFamiliesOfUser.run(now(), userId).changes,
    /** Every refresh family started from one session. */
    revokeFamiliesOfSession: (sid: string): number => revokeFamiliesOfSession.run(now(), sid).changes,

    consentedScopes(userId: string, clientId: string): string[] {
      const r = getConsent.get(userId, clientId);
      return r ? parseJson<string[]>(r.scopes, []) : [];
    },
    /** Adds scopes to what the person allowed the application. */
    addConsent(userId: string, clientId: string, scopes: string[]): void {
      tx(() => {
        const had = getConsent.get(userId, clientId);
        const merged = [...new Set([...(had ? parseJson<string[]>(had.scopes, []) : []), ...scopes])];
        putConsent.run(userId, clientId, JSON.stringify(merged), now());
      });
    },

    /** Every application the person allowed, newest first. */
    consentsOfUser: (userId: string): { client_id: string; scopes: string[]; updated_at: number }[] =>
      consentsOfUser.all(userId).map((r) => ({ client_id: r.client_id, scopes: parseJson<string[]>(r.scopes, []), updated_at: r.updated_at })),
    /** Forgets what the person allowed the application; true when there was a consent. */
    withdrawConsent: (userId: string, clientId: string): boolean => deleteConsent.run(userId, clientId).changes === 1,
    /** Every refresh family of one person at one application. */
    revokeFamiliesOfUserClient: (userId: string, clientId: string): number =>
      revokeFamiliesOfUserClient.run(now(), userId, clientId).changes,

    /** Records a TOTP time step as used; false when it (or a later one) was used already. */
    useTotpStep(userId: string, step: number): boolean {
      return tx(() => {
        const r = getTotpStep.get(userId);
        if (r && r.step >= step) return false;
        putTotpStep.run(userId, step);
        return true;
      });
    },

    /** Removes expired requests and codes; returns how many rows went. */
    purgeExpired(t = now()): number {
      return purgeRequests.run(t).changes + purgeCodes.run(t - 24 * 60 * 60).changes;
    },
  };
}
export type OAuthStore = ReturnType<typeof oauthStore>;
