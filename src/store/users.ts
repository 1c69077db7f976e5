import type { Sql } from './sql.js';
import { attributesOf, type Attributes } from './entities.js';
import type { Clock } from '../clock.js';
import { bool, parseJson, secondsOf } from './util.js';

export interface User {
  id: string;
  email: string;
  name: string;
  email_verified: boolean;
  picture: string | null;
  locale: string | null;
  groups: string[];
  roles: string[];
  /** custom attributes for policy conditions (`person.<name>`, `subject.<name>`); `{}` when none */
  attributes: Attributes;
  has_totp: boolean;
  password_compromised: boolean;
  created_at: number;
  updated_at: number;
}

interface Row {
  id: string;
  email: string;
  password_hash: string | null;
  name: string;
  email_verified: number;
  picture: string | null;
  locale: string | null;
  groups: string;
  roles: string;
  attributes: string;
  totp_secret_enc: string | null;
  totp_pending_enc: string | null;
  totp_pending_expires_at: number | null;
  password_compromised: number;
  created_at: number;
  updated_at: number;
}

const toUser = (r: Row): User => ({
  id: r.id,
  email: r.email,
  name: r.name,
  email_verified: bool(r.email_verified),
  picture: r.picture,
  locale: r.locale,
  groups: parseJson(r.groups, []),
  roles: parseJson(r.roles, []),
  attributes: attributesOf(r.attributes),
  has_totp: r.totp_secret_enc != null,
  password_compromised: bool(r.password_compromised),
  created_at: r.created_at,
  updated_at: r.updated_at,
});

export interface UserFields {
  email: string;
  name: string;
  email_verified: boolean;
  picture: string | null;
  locale: string | null;
  groups: string[];
  roles: string[];
  /** absent: `{}` on create, unchanged on update */
  attributes?: Attributes;
}

/** What sign-in needs: the user plus the stored (hashed or sealed) credentials. */
export interface UserCredentials extends User {
  password_hash: string | null;
  totp_secret_enc: string | null;
}

const BY_ID = 'SELECT * FROM users WHERE id = ?';
const BY_EMAIL = 'SELECT * FROM users WHERE email = ?';

const fieldParams = (f: UserFields, t: number) => ({
  email: f.email,
  name: f.name,
  email_verified: f.email_verified ? 1 : 0,
  picture: f.picture,
  locale: f.locale,
  groups: JSON.stringify(f.groups),
  roles: JSON.stringify(f.roles),
  attributes: f.attributes === undefined ? null : JSON.stringify(f.attributes),
  t,
});

const credentials = (r: Row): UserCredentials => ({ ...toUser(r), password_hash: r.password_hash, totp_secret_enc: r.totp_secret_enc });

export function usersStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const byId = (id: string) => sql.get<Row>(BY_ID, [id]);
  const byEmail = (email: string) => sql.get<Row>(BY_EMAIL, [email]);
  return {
    async create(id: string, f: UserFields, passwordHash: string | null, totpSecretEnc: string | null): Promise<User> {
      await sql.run(
        `INSERT INTO users (id, email, password_hash, name, email_verified, picture, locale, groups, roles, attributes, totp_secret_enc, created_at, updated_at)
         VALUES (@id, @email, @password_hash, @name, @email_verified, @picture, @locale, @groups, @roles, COALESCE(CAST(@attributes AS TEXT), '{}'), @totp_secret_enc, @t, @t)`,
        { id, ...fieldParams(f, now()), password_hash: passwordHash, totp_secret_enc: totpSecretEnc },
      );
      return toUser((await byId(id))!);
    },
    async get(id: string): Promise<User | undefined> {
      const r = await byId(id);
      return r && toUser(r);
    },
    /** By email, compared without regard to case. */
    async getByEmail(email: string): Promise<User | undefined> {
      const r = await byEmail(email);
      return r && toUser(r);
    },
    async credentialsByEmail(email: string): Promise<UserCredentials | undefined> {
      const r = await byEmail(email);
      return r && credentials(r);
    },
    async credentialsById(id: string): Promise<UserCredentials | undefined> {
      const r = await byId(id);
      return r && credentials(r);
    },
    list: async (limit = 100, offset = 0): Promise<User[]> =>
      (await sql.all<Row>('SELECT * FROM users ORDER BY created_at, id LIMIT ? OFFSET ?', [limit, offset])).map(toUser),
    async update(id: string, f: UserFields): Promise<User | undefined> {
      const r = await sql.run(
        `UPDATE users SET email = @email, name = @name, email_verified = @email_verified, picture = @picture, locale = @locale,
           groups = @groups, roles = @roles, attributes = COALESCE(CAST(@attributes AS TEXT), attributes), updated_at = @t WHERE id = @id`,
        { id, ...fieldParams(f, now()) },
      );
      if (r.changes === 0) return undefined;
      return toUser((await byId(id))!);
    },
    setPasswordHash: async (id: string, hash: string | null): Promise<boolean> =>
      (await sql.run('UPDATE users SET password_hash = ?, password_compromised = 0, updated_at = ? WHERE id = ?', [hash, now(), id])).changes === 1,
    setTotpSecret: async (id: string, sealed: string | null): Promise<boolean> =>
      (await sql.run('UPDATE users SET totp_secret_enc = ?, updated_at = ? WHERE id = ?', [sealed, now(), id])).changes === 1,
    /** A TOTP secret being set up (sealed); it takes effect on `confirmPendingTotp`. `null` forgets it. */
    setPendingTotp: async (id: string, sealed: string | null, expiresAt: number | null): Promise<boolean> =>
      (await sql.run('UPDATE users SET totp_pending_enc = ?, totp_pending_expires_at = ? WHERE id = ?', [sealed, expiresAt, id])).changes === 1,
    /** The sealed secret being set up, while it has not expired. */
    async pendingTotp(id: string): Promise<string | undefined> {
      const r = await byId(id);
      return r?.totp_pending_enc && (r.totp_pending_expires_at ?? 0) > now() ? r.totp_pending_enc : undefined;
    },
    /**
     * Makes the pending secret (exactly `sealed`) the person's TOTP secret; false when it changed
     * or expired: only the secret the person confirmed a code from takes effect.
     */
    confirmPendingTotp: async (id: string, sealed: string): Promise<boolean> =>
      (
        await sql.run(
          `UPDATE users SET totp_secret_enc = totp_pending_enc, totp_pending_enc = NULL, totp_pending_expires_at = NULL, updated_at = ?
           WHERE id = ? AND totp_pending_enc = ? AND totp_pending_expires_at > ?`,
          [now(), id, sealed, now()],
        )
      ).changes === 1,
    markPasswordCompromised: async (id: string): Promise<boolean> =>
      (await sql.run('UPDATE users SET password_compromised = 1, updated_at = ? WHERE id = ?', [now(), id])).changes === 1,
    delete: async (id: string): Promise<boolean> => (await sql.run('DELETE FROM users WHERE id = ?', [id])).changes === 1,
  };
}
export type UsersStore = ReturnType<typeof usersStore>;
