import type { Db } from './db.js';
import { attributesOf, type Attributes } from './entities.js';
import { bool, now, parseJson } from './util.js';

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

export function usersStore(db: Db) {
  const insert = db.prepare(
    `INSERT INTO users (id, email, password_hash, name, email_verified, picture, locale, groups, roles, attributes, totp_secret_enc, created_at, updated_at)
     VALUES (@id, @email, @password_hash, @name, @email_verified, @picture, @locale, @groups, @roles, COALESCE(@attributes, '{}'), @totp_secret_enc, @t, @t)`,
  );
  const byId = db.prepare<[string], Row>('SELECT * FROM users WHERE id = ?');
  const byEmail = db.prepare<[string], Row>('SELECT * FROM users WHERE email = ?');
  const list = db.prepare<[number, number], Row>('SELECT * FROM users ORDER BY created_at, id LIMIT ? OFFSET ?');
  const update = db.prepare(
    `UPDATE users SET email = @email, name = @name, email_verified = @email_verified, picture = @picture, locale = @locale,
       groups = @groups, roles = @roles, attributes = COALESCE(@attributes, attributes), updated_at = @t WHERE id = @id`,
  );
  const setPassword = db.prepare('UPDATE users SET password_hash = ?, password_compromised = 0, updated_at = ? WHERE id = ?');
  const setTotp = db.prepare('UPDATE users SET totp_secret_enc = ?, updated_at = ? WHERE id = ?');
  const markCompromised = db.prepare('UPDATE users SET password_compromised = 1, updated_at = ? WHERE id = ?');
  const del = db.prepare('DELETE FROM users WHERE id = ?');

  const fieldParams = (f: UserFields) => ({
    email: f.email,
    name: f.name,
    email_verified: f.email_verified ? 1 : 0,
    picture: f.picture,
    locale: f.locale,
    groups: JSON.stringify(f.groups),
    roles: JSON.stringify(f.roles),
    attributes: f.attributes === undefined ? null : JSON.stringify(f.attributes),
    t: now(),
  });

  return {
    create(id: string, f: UserFields, passwordHash: string | null, totpSecretEnc: string | null): User {
      insert.run({ id, ...fieldParams(f), password_hash: passwordHash, totp_secret_enc: totpSecretEnc });
      return toUser(byId.get(id)!);
    },
    get(id: string): User | undefined {
      const r = byId.get(id);
      return r && toUser(r);
    },
    getByEmail(email: string): User | undefined {
      const r = byEmail.get(email);
      return r && toUser(r);
    },
    credentialsByEmail(email: string): UserCredentials | undefined {
      const r = byEmail.get(email);
      return r && { ...toUser(r), password_hash: r.password_hash, totp_secret_enc: r.totp_secret_enc };
    },
    credentialsById(id: string): UserCredentials | undefined {
      const r = byId.get(id);
      return r && { ...toUser(r), password_hash: r.password_hash, totp_secret_enc: r.totp_secret_enc };
    },
    list: (limit = 100, offset = 0): User[] => list.all(limit, offset).map(toUser),
    update(id: string, f: UserFields): User | undefined {
      if (update.run({ id, ...fieldParams(f) }).changes === 0) return undefined;
      return toUser(byId.get(id)!);
    },
    setPasswordHash: (id: string, hash: string | null): boolean => setPassword.run(hash, now(), id).changes === 1,
    setTotpSecret: (id: string, sealed: string | null): boolean => setTotp.run(sealed, now(), id).changes === 1,
    markPasswordCompromised: (id: string): boolean => markCompromised.run(now(), id).changes === 1,
    delete: (id: string): boolean => del.run(id).changes === 1,
  };
}
export type UsersStore = ReturnType<typeof usersStore>;
