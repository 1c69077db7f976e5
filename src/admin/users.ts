import { randomUUID } from 'node:crypto';
import type { Router } from 'express';
import type { AppContext } from '../context.js';
import type { Store } from '../store/index.js';
import { hashPassword } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { EVENT_TYPES } from '../signals.js';
import type { User, UserFields } from '../store/users.js';
import type { Recorder } from './audit.js';
import { onDuplicate, onStillReferenced } from './conflict.js';
import { adminRoute, param, parseWith } from './route.js';
import {
  credentialCompromise,
  listOf,
  userCreate,
  userListQuery,
  userPatch,
  userView,
  type UserCreate,
  type UserPatch,
} from './schemas.js';
import { iso } from '../clock.js';

export function userJson(u: User) {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    email_verified: u.email_verified,
    picture: u.picture,
    locale: u.locale,
    groups: u.groups,
    roles: u.roles,
    attributes: u.attributes,
    totp_enabled: u.has_totp,
    password_compromised: u.password_compromised,
    created_at: iso(u.created_at),
    updated_at: iso(u.updated_at),
  };
}

async function mustGet(store: Store, id: string): Promise<User> {
  const u = await store.users.get(id);
  if (!u) throw errors.notFound(`no user ${id}`);
  return u;
}

const normalizeTotp = (s: string): string => s.replace(/[\s=]/g, '').toUpperCase();
const sameList = (a: string[], b: string[]) => a.length === b.length && a.every((v, i) => v === b[i]);
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * A person's email, groups, roles and attributes are facts of the decisions a delegated agent
 * (or the person) asks for: a change moves the counter the agent cache follows, in the same
 * transaction, so every worker's next decision sees it.
 */
const PERSON_FACTS_DOMAIN = 'agents';
const emailTaken = (email: string) => `a user with email ${email} exists`;

export async function createUser(ctx: AppContext, input: UserCreate, record?: Recorder<User>): Promise<User> {
  const id = input.id ?? randomUUID();
  // Hash before the write transaction: scrypt takes tens of milliseconds.
  const passwordHash = await hashPassword(input.password);
  const totp = input.totp_secret ? ctx.box.seal(normalizeTotp(input.totp_secret)) : null;
  const fields: UserFields = {
    email: input.email.trim(),
    name: input.name,
    email_verified: input.email_verified,
    picture: input.picture ?? null,
    locale: input.locale ?? null,
    groups: input.groups,
    roles: input.roles,
    attributes: input.attributes,
  };
  return onDuplicate(emailTaken(fields.email), () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.users.get(id)) throw errors.conflict(`a user with id ${id} exists`);
      if (await tx.users.getByEmail(fields.email)) throw errors.conflict(emailTaken(fields.email));
      const user = await tx.users.create(id, fields, passwordHash, totp);
      await tx.settings.bump(PERSON_FACTS_DOMAIN);
      await record?.(tx, user);
      return user;
    }),
  );
}

/**
 * Changes the fields given. A new password clears `password_compromised`. A change of
 * groups, roles or email emits token-claims-change with the new values, in the same
 * transaction as the change.
 */
export async function updateUser(ctx: AppContext, id: string, patch: UserPatch, record?: Recorder<User>): Promise<User> {
  await mustGet(ctx.store, id);
  const passwordHash = patch.password !== undefined ? await hashPassword(patch.password) : undefined;
  const totp = patch.totp_secret === undefined ? undefined : patch.totp_secret === null ? null : ctx.box.seal(normalizeTotp(patch.totp_secret));
  const email = patch.email?.trim();
  return onDuplicate(emailTaken(email ?? ''), () =>
    ctx.store.transaction(async (tx) => {
      const cur = await mustGet(tx, id);
      if (email !== undefined && email.toLowerCase() !== cur.email.toLowerCase()) {
        const other = await tx.users.getByEmail(email);
        if (other && other.id !== id) throw errors.conflict(emailTaken(email));
      }
      const next: UserFields = {
        email: email ?? cur.email,
        name: patch.name ?? cur.name,
        email_verified: patch.email_verified ?? cur.email_verified,
        picture: patch.picture !== undefined ? patch.picture : cur.picture,
        locale: patch.locale !== undefined ? patch.locale : cur.locale,
        groups: patch.groups ?? cur.groups,
        roles: patch.roles ?? cur.roles,
        attributes: patch.attributes ?? cur.attributes,
      };
      await tx.users.update(id, next);
      if (passwordHash !== undefined) await tx.users.setPasswordHash(id, passwordHash);
      if (totp !== undefined) await tx.users.setTotpSecret(id, totp);

      const claims: Record<string, unknown> = {};
      if (next.email !== cur.email) claims.email = next.email;
      if (!sameList(next.groups, cur.groups)) claims.groups = next.groups;
      if (!sameList(next.roles, cur.roles)) claims.roles = next.roles;
      if (Object.keys(claims).length || !sameJson(next.attributes, cur.attributes)) await tx.settings.bump(PERSON_FACTS_DOMAIN);
      if (Object.keys(claims).length) {
        await ctx.signals.emit(tx, {
          type: EVENT_TYPES.tokenClaimsChange,
          subject: { user_id: id, email: next.email },
          payload: { claims },
          initiatingEntity: 'admin',
        });
      }
      const saved = (await tx.users.get(id))!;
      await record?.(tx, saved);
      return saved;
    }),
  );
}

/** Deletes the person and everything of theirs (sessions, tokens, assignments go by cascade). */
export async function deleteUser(ctx: AppContext, id: string, record?: Recorder): Promise<void> {
  await onStillReferenced(`user ${id} still has records that refer to it`, () =>
    ctx.store.transaction(async (tx) => {
      const u = await mustGet(tx, id);
      await tx.users.delete(id);
      await tx.settings.bump(PERSON_FACTS_DOMAIN);
      await ctx.signals.emit(tx, { type: EVENT_TYPES.accountPurged, subject: { user_id: u.id, email: u.email }, payload: {}, initiatingEntity: 'admin' });
      await record?.(tx);
    }),
  );
}

/** Ends every live session of the person: one session-revoked event per session. */
export function revokeSessions(ctx: AppContext, id: string, record?: Recorder<number>): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    const u = await mustGet(tx, id);
    let ended = 0;
    for (const s of await tx.sessions.activeForUser(id)) {
      if (!(await tx.sessions.end(s.sid))) continue;
      ended++;
      // The session's sign-in ends with it: its refresh tokens stop working too.
      await tx.oauth.revokeFamiliesOfSession(s.sid);
      await ctx.signals.emit(tx, {
        type: EVENT_TYPES.sessionRevoked,
        subject: { user_id: u.id, email: u.email, session_id: s.sid },
        payload: {},
        initiatingEntity: 'admin',
      });
    }
    await record?.(tx, ended);
    return ended;
  });
}

export async function markCredentialCompromised(ctx: AppContext, id: string, credentialType: string, reason?: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const u = await mustGet(tx, id);
    // Only the password is a credential this service holds; other kinds are reported onward.
    if (credentialType === 'password') await tx.users.markPasswordCompromised(id);
    await ctx.signals.emit(tx, {
      type: EVENT_TYPES.credentialCompromise,
      subject: { user_id: u.id, email: u.email },
      payload: { credential_type: credentialType, ...(reason ? { reason_admin: { en: reason } } : {}) },
      initiatingEntity: 'admin',
    });
    await record?.(tx);
  });
}

export function userRoutes(router: Router, ctx: AppContext): void {
  const tags = ['users'];

  adminRoute(
    router,
    {
      method: 'post', path: '/users', tags, summary: 'Create a person',
      request: userCreate,
      responses: { 201: { description: 'the person; `id` is the `sub`', schema: userView }, 409: 'the email or id is taken' },
    },
    async (req, res) => {
      const user = await createUser(ctx, parseWith(userCreate, req.body));
      res.status(201).json(userJson(user));
    },
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/users', tags, summary: 'List people, a page at a time (or find one by email)',
      query: userListQuery,
      responses: { 200: { description: 'a page; `next_offset` is null on the last', schema: listOf(userView).extend({ next_offset: userListQuery.shape.offset.nullable() }) } },
    },
    async (req, res) => {
      const q = parseWith(userListQuery, req.query, 'query');
      if (q.email !== undefined) {
        const u = await ctx.store.users.getByEmail(q.email);
        res.json({ data: u ? [userJson(u)] : [], next_offset: null });
        return;
      }
      const page = await ctx.store.users.list(q.limit + 1, q.offset);
      const more = page.length > q.limit;
      res.json({ data: page.slice(0, q.limit).map(userJson), next_offset: more ? q.offset + q.limit : null });
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/users/{id}', tags, summary: 'Read a person (never the password or TOTP secret)', responses: { 200: { description: 'the person', schema: userView } } },
    async (req, res) => void res.json(userJson(await mustGet(ctx.store, param(req, 'id')))),
  );

  adminRoute(
    router,
    {
      method: 'patch', path: '/users/{id}', tags, summary: 'Change a person (attributes are replaced whole); groups, roles or email emit token-claims-change',
      request: userPatch,
      responses: { 200: { description: 'the person', schema: userView }, 409: 'the email is taken' },
    },
    async (req, res) => {
      const patch = parseWith(userPatch, req.body);
      res.json(userJson(await updateUser(ctx, param(req, 'id'), patch)));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/users/{id}', tags, summary: 'Delete a person and everything of theirs; emits account-purged', responses: { 204: 'deleted' } },
    async (req, res) => {
      await deleteUser(ctx, param(req, 'id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'post', path: '/users/{id}/sessions/revoke', tags, summary: 'End every session of a person; emits session-revoked per session', responses: { 204: 'ended' } },
    async (req, res) => {
      await revokeSessions(ctx, param(req, 'id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/users/{id}/credential-compromise', tags,
      summary: 'Mark a credential compromised: it stops working until reset; emits credential-compromise',
      request: credentialCompromise,
      responses: { 204: 'marked' },
    },
    async (req, res) => {
      const body = parseWith(credentialCompromise, req.body);
      await markCredentialCompromised(ctx, param(req, 'id'), body.credential_type, body.reason);
      res.status(204).end();
    },
  );
}
