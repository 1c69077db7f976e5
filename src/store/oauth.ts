import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

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
  /** `delegate_agent` (and `delegate_capabilities`): the client asks the person to let this agent act for them */
  delegate?: { agent_id: string; capabilities: string[] };
  /** RFC 9396: what the person is asked to approve, checked against the declared types */
  authorization_details?: Record<string, unknown>[];
  /** RFC 9449 section 10: the JWK thumbprint of the DPoP key the code is bound to */
  dpop_jkt?: string;
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
  /** RFC 9396: the authorization details the person approved (null: none asked) */
  authorization_details?: Record<string, unknown>[] | null;
}

export interface CodeRecord extends Grant {
  redirect_uri: string;
  nonce: string | null;
  code_challenge: string | null;
  /** the thumbprint of the DPoP key whose proof must come with the code (null: none) */
  dpop_jkt?: string | null;
  expires_at: number;
}

export interface Family extends Grant {
  id: string;
  revoked_at: number | null;
}

interface GrantRow { client_id: string; user_id: string; sid: string; scope: string; resource: string | null; auth_time: number; amr: string; acr: string; authorization_details?: string | null }
const toGrant = (r: GrantRow): Grant => ({
  client_id: r.client_id,
  user_id: r.user_id,
  sid: r.sid,
  scope: r.scope ? r.scope.split(' ') : [],
  resource: r.resource,
  auth_time: r.auth_time,
  amr: parseJson(r.amr, []),
  acr: r.acr,
  authorization_details: parseJson<Record<string, unknown>[] | null>(r.authorization_details, null),
});

export type CodeRedemption =
  | { ok: true; code: CodeRecord }
  | { ok: false; reason: 'unknown' | 'expired' | 'reused'; revokedFamily?: string }
  | { ok: false; reason: 'mismatch'; detail: string };

export type RefreshRotation =
  | { ok: true; family: Family }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' | 'wrong_client' | 'invalid_scope' };

type CodeRow = GrantRow & { redirect_uri: string; nonce: string | null; code_challenge: string | null; dpop_jkt: string | null; expires_at: number; used_at: number | null; family_id: string | null };
type FamilyRow = GrantRow & { id: string; revoked_at: number | null };
type RefreshRow = { token_hash: string; family_id: string; expires_at: number; used_at: number | null };

const GET_FAMILY = 'SELECT * FROM refresh_families WHERE id = ?';
const REVOKE_FAMILY = 'UPDATE refresh_families SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL';
const INSERT_REFRESH = 'INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at) VALUES (?, ?, ?, ?)';
const GET_REFRESH = 'SELECT token_hash, family_id, expires_at, used_at FROM refresh_tokens WHERE token_hash = ?';
const GET_CONSENT = 'SELECT scopes FROM oauth_consents WHERE user_id = ? AND client_id = ?';
const toFamily = (f: FamilyRow): Family => ({ ...toGrant(f), id: f.id, revoked_at: f.revoked_at });

export function oauthStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const newFamily = async (tx: Sql, id: string, g: Grant, refreshHash: string, refreshTtl: number) => {
    const t = now();
    await tx.run(
      `INSERT INTO refresh_families (id, client_id, user_id, sid, scope, resource, auth_time, amr, acr, authorization_details, created_at)
       VALUES (@id, @client_id, @user_id, @sid, @scope, @resource, @auth_time, @amr, @acr, @authorization_details, @created_at)`,
      {
        id, client_id: g.client_id, user_id: g.user_id, sid: g.sid, scope: g.scope.join(' '), resource: g.resource,
        auth_time: g.auth_time, amr: JSON.stringify(g.amr), acr: g.acr,
        authorization_details: g.authorization_details ? JSON.stringify(g.authorization_details) : null, created_at: t,
      },
    );
    await tx.run(INSERT_REFRESH, [refreshHash, id, t, t + refreshTtl]);
  };

  return {
    async createRequest(id: string, params: AuthorizationParams, ttl: number): Promise<void> {
      const t = now();
      await sql.run('INSERT INTO oauth_requests (id, client_id, params, created_at, expires_at) VALUES (?, ?, ?, ?, ?)', [
        id, params.client_id, JSON.stringify(params), t, t + ttl,
      ]);
    },
    async getRequest(id: string): Promise<PendingRequest | undefined> {
      const r = await sql.get<{ id: string; client_id: string; params: string; user_id: string | null; fresh: number; consented: number; expires_at: number }>(
        'SELECT * FROM oauth_requests WHERE id = ? AND expires_at > ?',
        [id, now()],
      );
      return r && { id: r.id, client_id: r.client_id, params: JSON.parse(r.params) as AuthorizationParams, user_id: r.user_id, fresh: r.fresh === 1, consented: r.consented === 1, expires_at: r.expires_at };
    },
    setRequestUser: async (id: string, userId: string | null): Promise<void> => {
      await sql.run('UPDATE oauth_requests SET user_id = ? WHERE id = ?', [userId, id]);
    },
    markRequestFresh: async (id: string): Promise<void> => {
      await sql.run('UPDATE oauth_requests SET fresh = 1 WHERE id = ?', [id]);
    },
    markRequestConsented: async (id: string): Promise<void> => {
      await sql.run('UPDATE oauth_requests SET consented = 1 WHERE id = ?', [id]);
    },
    deleteRequest: async (id: string): Promise<void> => {
      await sql.run('DELETE FROM oauth_requests WHERE id = ?', [id]);
    },

    async createCode(codeHash: string, c: Omit<CodeRecord, 'expires_at'>, ttl: number): Promise<void> {
      const t = now();
      await sql.run(
        `INSERT INTO oauth_codes (code_hash, client_id, user_id, sid, redirect_uri, scope, resource, nonce, code_challenge, dpop_jkt, auth_time, amr, acr, authorization_details, created_at, expires_at)
         VALUES (@code_hash, @client_id, @user_id, @sid, @redirect_uri, @scope, @resource, @nonce, @code_challenge, @dpop_jkt, @auth_time, @amr, @acr, @authorization_details, @created_at, @expires_at)`,
        {
          code_hash: codeHash, client_id: c.client_id, user_id: c.user_id, sid: c.sid, redirect_uri: c.redirect_uri,
          scope: c.scope.join(' '), resource: c.resource, nonce: c.nonce, code_challenge: c.code_challenge, dpop_jkt: c.dpop_jkt ?? null,
          auth_time: c.auth_time, amr: JSON.stringify(c.amr), acr: c.acr,
          authorization_details: c.authorization_details ? JSON.stringify(c.authorization_details) : null, created_at: t, expires_at: t + ttl,
        },
      );
    },

    /**
     * The authorization code state table in one transaction: an unused, unexpired code that
     * passes `check` becomes used and (when `refresh` is given) starts its refresh family. The
     * code is spent by one conditional UPDATE, so of any number of concurrent exchanges (on any
     * instance) exactly one finds it unused; the others wait for that one's row and then find
     * it used. A code used before revokes the family its first exchange started (RFC 6749 4.1.2).
     */
    redeemCode(
      codeHash: string,
      check: (code: CodeRecord) => string | undefined,
      refresh?: { familyId: string; tokenHash: string; ttl: number },
    ): Promise<CodeRedemption> {
      return sql.transaction(async (tx): Promise<CodeRedemption> => {
        const t = now();
        // Single use: whatever happens next, this code is spent.
        const r = await tx.get<CodeRow>('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING *', [t, codeHash]);
        if (!r) {
          const used = await tx.get<{ family_id: string | null }>('SELECT family_id FROM oauth_codes WHERE code_hash = ?', [codeHash]);
          if (!used) return { ok: false, reason: 'unknown' };
          if (used.family_id) await tx.run(REVOKE_FAMILY, [t, used.family_id]);
          return { ok: false, reason: 'reused', revokedFamily: used.family_id ?? undefined };
        }
        if (r.expires_at <= t) return { ok: false, reason: 'expired' };
        const code: CodeRecord = { ...toGrant(r), redirect_uri: r.redirect_uri, nonce: r.nonce, code_challenge: r.code_challenge, dpop_jkt: r.dpop_jkt, expires_at: r.expires_at };
        const mismatch = check(code);
        if (mismatch) return { ok: false, reason: 'mismatch', detail: mismatch };
        if (refresh) {
          await newFamily(tx, refresh.familyId, code, refresh.tokenHash, refresh.ttl);
          await tx.run('UPDATE oauth_codes SET family_id = ? WHERE code_hash = ?', [refresh.familyId, codeHash]);
        }
        return { ok: true, code };
      });
    },

    /**
     * The refresh state table in one transaction: the current token becomes used and
     * `nextHash` the current one; a used token presented again revokes the whole family. The
     * token is spent by one conditional UPDATE: of any number of racing requests with one token
     * (on any instance) exactly one wins; the others count as a reuse.
     */
    rotateRefresh(
      tokenHash: string,
      nextHash: string,
      refreshTtl: number,
      check: (family: Family) => 'ok' | 'wrong_client' | 'invalid_scope',
    ): Promise<RefreshRotation> {
      return sql.transaction(async (tx): Promise<RefreshRotation> => {
        const t = now();
        const tok = await tx.get<RefreshRow>(GET_REFRESH, [tokenHash]);
        if (!tok) return { ok: false, reason: 'unknown' };
        const family = toFamily((await tx.get<FamilyRow>(GET_FAMILY, [tok.family_id]))!);
        const verdict = check(family);
        // Another application's token: not ours to consume or revoke.
        if (verdict === 'wrong_client') return { ok: false, reason: 'wrong_client' };
        if (family.revoked_at != null) return { ok: false, reason: 'revoked' };
        if (tok.used_at != null) {
          await tx.run(REVOKE_FAMILY, [t, family.id]);
          return { ok: false, reason: 'reused' };
        }
        if (tok.expires_at <= t) return { ok: false, reason: 'expired' };
        if (verdict === 'invalid_scope') return { ok: false, reason: 'invalid_scope' };
        const spent = await tx.run('UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL', [t, tokenHash]);
        if (spent.changes !== 1) {
          // A concurrent rotation spent it between our read and this write: a reuse like any other.
          await tx.run(REVOKE_FAMILY, [t, family.id]);
          return { ok: false, reason: 'reused' };
        }
        await tx.run(INSERT_REFRESH, [nextHash, family.id, t, t + refreshTtl]);
        return { ok: true, family };
      });
    },

    /** The family of a refresh token (any state), for revocation. */
    async familyOfRefresh(tokenHash: string): Promise<Family | undefined> {
      const tok = await sql.get<RefreshRow>(GET_REFRESH, [tokenHash]);
      if (!tok) return undefined;
      const f = await sql.get<FamilyRow>(GET_FAMILY, [tok.family_id]);
      return f && toFamily(f);
    },
    revokeFamily: async (familyId: string): Promise<boolean> => (await sql.run(REVOKE_FAMILY, [now(), familyId])).changes === 1,
    /** For the management API: every refresh family of a person. */
    revokeFamiliesOfUser: async (userId: string): Promise<number> =>
      (await sql.run('UPDATE refresh_families SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL', [now(), userId])).changes,
    /** Every refresh family started from one session. */
    revokeFamiliesOfSession: async (sid: string): Promise<number> =>
      (await sql.run('UPDATE refresh_families SET revoked_at = ? WHERE sid = ? AND revoked_at IS NULL', [now(), sid])).changes,

    async consentedScopes(userId: string, clientId: string): Promise<string[]> {
      const r = await sql.get<{ scopes: string }>(GET_CONSENT, [userId, clientId]);
      return r ? parseJson<string[]>(r.scopes, []) : [];
    },
    /** Adds scopes to what the person allowed the application (concurrent additions all count). */
    async addConsent(userId: string, clientId: string, scopes: string[]): Promise<void> {
      await sql.transaction(async (tx) => {
        await tx.lock(`consent:${userId}:${clientId}`);
        const had = await tx.get<{ scopes: string }>(GET_CONSENT, [userId, clientId]);
        const merged = [...new Set([...(had ? parseJson<string[]>(had.scopes, []) : []), ...scopes])];
        await tx.run(
          'INSERT INTO oauth_consents (user_id, client_id, scopes, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = excluded.scopes, updated_at = excluded.updated_at',
          [userId, clientId, JSON.stringify(merged), now()],
        );
      });
    },

    /** Every application the person allowed, newest first. */
    consentsOfUser: async (userId: string): Promise<{ client_id: string; scopes: string[]; updated_at: number }[]> =>
      (
        await sql.all<{ client_id: string; scopes: string; updated_at: number }>(
          'SELECT client_id, scopes, updated_at FROM oauth_consents WHERE user_id = ? ORDER BY updated_at DESC, client_id',
          [userId],
        )
      ).map((r) => ({ client_id: r.client_id, scopes: parseJson<string[]>(r.scopes, []), updated_at: r.updated_at })),
    /** Forgets what the person allowed the application; true when there was a consent. */
    withdrawConsent: async (userId: string, clientId: string): Promise<boolean> =>
      (await sql.run('DELETE FROM oauth_consents WHERE user_id = ? AND client_id = ?', [userId, clientId])).changes === 1,
    /** Every refresh family of one person at one application. */
    revokeFamiliesOfUserClient: async (userId: string, clientId: string): Promise<number> =>
      (await sql.run('UPDATE refresh_families SET revoked_at = ? WHERE user_id = ? AND client_id = ? AND revoked_at IS NULL', [now(), userId, clientId])).changes,

    /** Records a TOTP time step as used; false when it (or a later one) was used already. One statement: atomic everywhere. */
    async useTotpStep(userId: string, step: number): Promise<boolean> {
      const r = await sql.run(
        'INSERT INTO totp_used (user_id, step) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET step = excluded.step WHERE excluded.step > totp_used.step',
        [userId, step],
      );
      return r.changes === 1;
    },

    /** Removes expired requests and codes; returns how many rows went. */
    async purgeExpired(t = now()): Promise<number> {
      const requests = await sql.run('DELETE FROM oauth_requests WHERE expires_at <= ?', [t]);
      const codes = await sql.run('DELETE FROM oauth_codes WHERE expires_at <= ?', [t - 24 * 60 * 60]);
      return requests.changes + codes.changes;
    },
  };
}
export type OAuthStore = ReturnType<typeof oauthStore>;
