import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256, verifyPassword } from '../../src/crypto/hash.js';
import { EVENT_TYPES, type SecurityEventInput } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
const events: SecurityEventInput[] = [];
beforeAll(async () => {
  server = await startTestServer();
  // Record what the admin operations emit (the Shared Signals sink is tested on its own).
  server.ctx.signals = { emit: async (_tx, e) => void events.push(e) };
});
afterAll(async () => server.stop());

const paths = (res: { body: { issues: { path: string }[] } }) => res.body.issues.map((i) => i.path).sort();

describe('applications', () => {
  it('defaults follow the type; a confidential application gets its secret once, stored hashed', async () => {
    const web = await server.admin('POST', '/applications', { name: 'Web', type: 'web', redirect_uris: ['https://app.example/cb'] });
    expect(web.status).toBe(201);
    expect(web.body).toMatchObject({ type: 'web', confidential: true, refresh_tokens: true, first_party: true, post_logout_redirect_uris: [] });
    expect(typeof web.body.client_secret).toBe('string');
    expect((await server.ctx.store.applications.getWithSecret(web.body.client_id))!.secret_hash).toBe(sha256(web.body.client_secret));

    const spa = await server.admin('POST', '/applications', { name: 'SPA', type: 'spa', redirect_uris: ['http://localhost:5173/cb'] });
    expect(spa.body).toMatchObject({ confidential: false, refresh_tokens: true, has_secret: false });
    expect(spa.body.client_secret).toBeUndefined();

    const m2m = await server.admin('POST', '/applications', { name: 'Job', type: 'm2m' });
    expect(m2m.body).toMatchObject({ confidential: true, refresh_tokens: false });

    const got = await server.admin('GET', `/applications/${web.body.client_id}`);
    expect(got.status).toBe(200);
    expect(got.body.client_secret).toBeUndefined();
    expect(JSON.stringify(got.body)).not.toContain(web.body.client_secret);
    const list = await server.admin('GET', '/applications');
    expect(list.body.data.map((a: { client_id: string }) => a.client_id)).toEqual(
      expect.arrayContaining([web.body.client_id, spa.body.client_id, m2m.body.client_id]),
    );
  });

  it('names each bad field', async () => {
    const res = await server.admin('POST', '/applications', {
      name: 42,
      type: 'desktop',
      redirect_uris: ['/relative', 'https://app.example/cb#frag'],
      first_party: 'yes',
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(paths(res)).toEqual(['first_party', 'name', 'redirect_uris.0', 'redirect_uris.1', 'type']);
    expect(res.body.error_description).toContain('redirect_uris.1');

    const short = await server.admin('POST', '/applications', { name: 'X', type: 'web', client_secret: 'too-short' });
    expect(paths(short)).toEqual(['client_secret']);
    const publicWithSecret = await server.admin('POST', '/applications', { name: 'X', type: 'spa', client_secret: 'x'.repeat(40) });
    expect(paths(publicWithSecret)).toEqual(['client_secret']);
  });

  it('a fixed client_id and secret are kept; a duplicate is 409', async () => {
    const secret = 'a-hand-made-secret-of-more-than-32-chars';
    const res = await server.admin('POST', '/applications', { name: 'Fixed', type: 'web', client_id: 'fixed-app', client_secret: secret });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ client_id: 'fixed-app', client_secret: secret });
    const dup = await server.admin('POST', '/applications', { name: 'Again', type: 'web', client_id: 'fixed-app' });
    expect(dup.status).toBe(409);
  });

  it('PATCH changes fields and can rotate the secret; DELETE removes it', async () => {
    const { body: app } = await server.admin('POST', '/applications', { name: 'P', type: 'web', redirect_uris: ['https://p.example/cb'] });
    const patched = await server.admin('PATCH', `/applications/${app.client_id}`, {
      name: 'P2',
      post_logout_redirect_uris: ['https://p.example/bye'],
      first_party: false,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'P2', post_logout_redirect_uris: ['https://p.example/bye'], first_party: false, redirect_uris: ['https://p.example/cb'] });
    expect(patched.body.client_secret).toBeUndefined();

    const rotated = await server.admin('PATCH', `/applications/${app.client_id}`, { rotate_secret: true });
    expect(rotated.body.client_secret).toEqual(expect.any(String));
    expect(rotated.body.client_secret).not.toBe(app.client_secret);
    expect((await server.ctx.store.applications.getWithSecret(app.client_id))!.secret_hash).toBe(sha256(rotated.body.client_secret));

    expect((await server.admin('PATCH', `/applications/${app.client_id}`, { type: 'spa' })).status).toBe(400);
    expect((await server.admin('DELETE', `/applications/${app.client_id}`)).status).toBe(204);
    expect((await server.admin('GET', `/applications/${app.client_id}`)).status).toBe(404);
  });

  it('grants: only m2m → api; assignments need a known person', async () => {
    const m2m = (await server.admin('POST', '/applications', { name: 'Worker', type: 'm2m' })).body;
    const api = (await server.admin('POST', '/applications', { name: 'Orders API', type: 'api' })).body;
    const web = (await server.admin('POST', '/applications', { name: 'W', type: 'web', redirect_uris: ['https://w.example/cb'] })).body;

    expect((await server.admin('PUT', `/applications/${m2m.client_id}/grants/${api.client_id}`, { scopes: ['orders:read'] })).status).toBe(204);
    expect((await server.admin('GET', `/applications/${m2m.client_id}`)).body.grants).toEqual([{ api_client_id: api.client_id, scopes: ['orders:read'] }]);
    expect((await server.admin('PUT', `/applications/${m2m.client_id}/grants/${api.client_id}`)).status).toBe(204);
    expect((await server.admin('PUT', `/applications/${web.client_id}/grants/${api.client_id}`, {})).status).toBe(400);
    expect((await server.admin('PUT', `/applications/${m2m.client_id}/grants/${web.client_id}`, {})).status).toBe(400);
    expect((await server.admin('PUT', `/applications/${m2m.client_id}/grants/missing`, {})).status).toBe(400);
    expect((await server.admin('PUT', `/applications/${m2m.client_id}/grants/${api.client_id}`, { scopes: ['has space'] })).status).toBe(400);
    expect((await server.admin('DELETE', `/applications/${m2m.client_id}/grants/${api.client_id}`)).status).toBe(204);
    expect((await server.admin('DELETE', `/applications/${m2m.client_id}/grants/${api.client_id}`)).status).toBe(404);

    const user = (await server.admin('POST', '/users', { email: 'assignee@example.com', password: 'correct horse battery', name: 'A' })).body;
    expect((await server.admin('PUT', `/applications/${web.client_id}/assignments/${user.id}`)).status).toBe(204);
    expect(await server.ctx.store.applications.isAssigned(web.client_id, user.id)).toBe(true);
    expect((await server.admin('PUT', `/applications/${web.client_id}/assignments/nobody`)).status).toBe(404);
    expect((await server.admin('DELETE', `/applications/${web.client_id}/assignments/${user.id}`)).status).toBe(204);
    expect(await server.ctx.store.applications.isAssigned(web.client_id, user.id)).toBe(false);
  });
});

describe('users', () => {
  it('creates a person with a hashed password and sealed TOTP secret; never shows either', async () => {
    const res = await server.admin('POST', '/users', {
      email: 'ada@example.com',
      password: 'correct horse battery',
      name: 'Ada',
      email_verified: true,
      groups: ['eng'],
      roles: ['admin'],
      totp_secret: 'JBSWY3DPEHPK3PXPJBSWY3DP',
      locale: 'en-GB',
    });
    expect(res.status).toBe(201);
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body).toMatchObject({ email: 'ada@example.com', groups: ['eng'], roles: ['admin'], totp_enabled: true, email_verified: true });
    const creds = (await server.ctx.store.users.credentialsById(res.body.id))!;
    expect(await verifyPassword('correct horse battery', creds.password_hash)).toBe(true);
    expect(creds.totp_secret_enc).not.toContain('JBSWY3DP');
    expect(server.ctx.box.open(creds.totp_secret_enc!)).toBe('JBSWY3DPEHPK3PXPJBSWY3DP');
    const got = await server.admin('GET', `/users/${res.body.id}`);
    expect(Object.keys(got.body).some((k) => /password$|secret/.test(k))).toBe(false);
    expect((await server.admin('POST', '/users', { email: 'ADA@example.com', password: 'another password', name: 'Ada 2' })).status).toBe(409);
  });

  it('names each bad field', async () => {
    const res = await server.admin('POST', '/users', { email: 'not-an-email', password: '', name: '', totp_secret: 'not base32!', groups: 'eng' });
    expect(res.status).toBe(400);
    expect(paths(res)).toEqual(['email', 'groups', 'name', 'password', 'totp_secret']);
  });

  it('lists a page at a time and finds by email', async () => {
    for (let i = 0; i < 3; i++) await server.admin('POST', '/users', { email: `page${i}@example.com`, password: 'correct horse battery', name: `P${i}` });
    const first = await server.admin('GET', '/users?limit=2');
    expect(first.body.data).toHaveLength(2);
    expect(first.body.next_offset).toBe(2);
    const byEmail = await server.admin('GET', '/users?email=page1@example.com');
    expect(byEmail.body.data.map((u: { name: string }) => u.name)).toEqual(['P1']);
  });

  it('PATCH of groups, roles or email emits token-claims-change with the new values; a new password clears the compromise mark', async () => {
    const { body: u } = await server.admin('POST', '/users', { email: 'bob@example.com', password: 'correct horse battery', name: 'Bob', groups: ['a'] });
    events.length = 0;
    const named = await server.admin('PATCH', `/users/${u.id}`, { name: 'Robert' });
    expect(named.body.name).toBe('Robert');
    expect(events).toEqual([]);

    const res = await server.admin('PATCH', `/users/${u.id}`, { groups: ['a', 'b'], email: 'robert@example.com' });
    expect(res.status).toBe(200);
    expect(events).toEqual([
      {
        type: EVENT_TYPES.tokenClaimsChange,
        subject: { user_id: u.id, email: 'robert@example.com' },
        payload: { claims: { email: 'robert@example.com', groups: ['a', 'b'] } },
        initiatingEntity: 'admin',
      },
    ]);

    events.length = 0;
    expect((await server.admin('POST', `/users/${u.id}/credential-compromise`, { credential_type: 'password', reason: 'found in a breach' })).status).toBe(204);
    expect(events).toEqual([
      expect.objectContaining({
        type: EVENT_TYPES.credentialCompromise,
        subject: { user_id: u.id, email: 'robert@example.com' },
        payload: { credential_type: 'password', reason_admin: { en: 'found in a breach' } },
      }),
    ]);
    expect((await server.admin('GET', `/users/${u.id}`)).body.password_compromised).toBe(true);
    expect((await server.admin('POST', `/users/${u.id}/credential-compromise`, { credential_type: 'smartcard' })).status).toBe(400);
    const reset = await server.admin('PATCH', `/users/${u.id}`, { password: 'a brand new password' });
    expect(reset.body.password_compromised).toBe(false);
    expect(await verifyPassword('a brand new password', (await server.ctx.store.users.credentialsById(u.id))!.password_hash)).toBe(true);
  });

  it('sessions/revoke ends every live session, one session-revoked event each; DELETE emits account-purged', async () => {
    const { body: u } = await server.admin('POST', '/users', { email: 'cy@example.com', password: 'correct horse battery', name: 'Cy' });
    const sids = [randomUUID(), randomUUID()];
    for (const sid of sids) {
      await server.ctx.store.sessions.create({ sid, user_id: u.id, token_hash: sha256(sid), auth_time: 1, amr: ['pwd'], acr: '1', ttl: 3600 });
    }
    events.length = 0;
    expect((await server.admin('POST', `/users/${u.id}/sessions/revoke`)).status).toBe(204);
    expect(await server.ctx.store.sessions.activeForUser(u.id)).toEqual([]);
    expect(events.map((e) => [e.type, e.subject.session_id]).sort()).toEqual(
      sids.map((sid) => [EVENT_TYPES.sessionRevoked, sid]).sort(),
    );

    events.length = 0;
    expect((await server.admin('DELETE', `/users/${u.id}`)).status).toBe(204);
    expect(events).toEqual([expect.objectContaining({ type: EVENT_TYPES.accountPurged, subject: { user_id: u.id, email: 'cy@example.com' } })]);
    expect((await server.admin('GET', `/users/${u.id}`)).status).toBe(404);
    expect(await server.ctx.store.sessions.get(sids[0]!)).toBeUndefined();
  });
});
