import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The management API: shapes and status codes of every row. */
let s: TestServer;
let jwk: Record<string, unknown>;

beforeAll(async () => {
  s = await startTestServer();
  jwk = (await exportJWK((await generateKeyPair('EdDSA', { crv: 'Ed25519' })).publicKey)) as Record<string, unknown>;
});
afterAll(() => s.stop());

const raw = (method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}) =>
  fetch(`${s.url}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${s.adminToken}`, ...init.headers }, body: init.body });

describe('Management API: authentication and error shapes', () => {
  it('missing or wrong token: 401 {"error":"invalid_token"}', async () => {
    const headerSets: Record<string, string>[] = [{}, { authorization: 'Bearer wrong' }, { authorization: `Basic ${s.adminToken}` }, { authorization: `Bearer ${s.adminToken}x` }];
    for (const h of headerSets) {
      for (const [m, p] of [['GET', '/applications'], ['POST', '/users'], ['GET', '/rules'], ['POST', '/keys/rotate'], ['GET', '/approvals?state=pending'], ['GET', '/audit']]) {
        const res = await fetch(`${s.url}/admin/v1${p}`, { method: m, headers: h });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ error: 'invalid_token' });
      }
    }
  });

  it('the OpenAPI document is served without a token', async () => {
    const res = await fetch(`${s.url}/admin/v1/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.paths['/applications']).toBeDefined();
  });

  it('unknown ids: 404 exactly {"error":"not_found"}', async () => {
    const calls: [string, string, unknown?][] = [
      ['GET', '/applications/nope'], ['PATCH', '/applications/nope', { name: 'x' }], ['DELETE', '/applications/nope'],
      ['GET', '/users/nope'], ['PATCH', '/users/nope', { name: 'x' }], ['DELETE', '/users/nope'],
      ['POST', '/users/nope/sessions/revoke'], ['POST', '/users/nope/credential-compromise', { credential_type: 'password' }],
      ['DELETE', '/roles/nope'], ['GET', `/agents/${encodeURIComponent('spiffe://localhost/agent/nope')}`],
      ['POST', `/agents/${encodeURIComponent('spiffe://localhost/agent/nope')}/revoke`],
      ['POST', '/rules/nope/validate'], ['POST', '/rules/nope/enable'], ['DELETE', '/rules/nope'],
      ['POST', '/approvals/nope/approve'], ['POST', '/approvals/nope/deny'],
    ];
    for (const [m, p, b] of calls) {
      const r = await s.admin(m, p, b);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body, `${m} ${p}`).toEqual({ error: 'not_found' });
    }
  });

  it('a body that fails validation: 400 invalid_request with issues naming each bad field', async () => {
    const r = await s.admin('POST', '/applications', { name: 7, type: 'weird', redirect_uris: 'http://x' });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('invalid_request');
    expect(typeof r.body.error_description).toBe('string');
    const paths = r.body.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['name', 'type', 'redirect_uris']));
    const u = await s.admin('POST', '/users', { email: 'not-an-email', password: ['x'], name: 'A', groups: 'admins' });
    expect(u.status).toBe(400);
    expect(u.body.issues.map((i: { path: string }) => i.path)).toEqual(expect.arrayContaining(['email', 'password', 'groups']));
  });

  it('hostile bodies are 4xx, never 500', async () => {
    const bodies: [Record<string, string>, string][] = [
      [{ 'content-type': 'application/json' }, '{"name":'],
      [{ 'content-type': 'application/json' }, '[]'],
      [{ 'content-type': 'application/json' }, 'null'],
      [{ 'content-type': 'application/json' }, '"str"'],
      [{ 'content-type': 'text/plain' }, 'name=x'],
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 'name=x&type=web'],
      [{ 'content-type': 'application/json' }, JSON.stringify({ name: 'x'.repeat(300000), type: 'web' })],
      [{ 'content-type': 'application/json' }, '{"__proto__":{"admin":true},"name":7,"constructor":{"prototype":1}}'],
      [{ 'content-type': 'application/json' }, JSON.stringify({ name: '💥\u0000\u202e', type: 'web', redirect_uris: ['javascript:alert(1)'] })],
    ];
    for (const path of ['/applications', '/users', '/roles', '/agents', '/rules']) {
      for (const [headers, body] of bodies) {
        const res = await raw('POST', path, { headers, body });
        expect(res.status, `${path} ${body.slice(0, 40)}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${path} ${body.slice(0, 40)}`).toBeLessThan(500);
        expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
      }
    }
  });
});

describe('Management API: applications', () => {
  it('POST 201 with client_id and, once, client_secret; GET never shows the secret', async () => {
    const r = await s.admin('POST', '/applications', { name: 'Web', type: 'web', redirect_uris: ['https://app.example/cb'] });
    expect(r.status).toBe(201);
    expect(typeof r.body.client_id).toBe('string');
    expect(typeof r.body.client_secret).toBe('string');
    const g = await s.admin('GET', `/applications/${encodeURIComponent(r.body.client_id)}`);
    expect(g.status).toBe(200);
    expect(g.body.client_id).toBe(r.body.client_id);
    expect(JSON.stringify(g.body)).not.toContain(r.body.client_secret);
    expect(g.body.client_secret).toBeUndefined();
  });

  it('defaults: confidential for web, m2m, api; refresh tokens for web, spa, native; first party', async () => {
    const expectations: Record<string, { secret: boolean; refresh: boolean }> = {
      web: { secret: true, refresh: true }, spa: { secret: false, refresh: true }, native: { secret: false, refresh: true },
      m2m: { secret: true, refresh: false }, api: { secret: true, refresh: false },
    };
    for (const [type, e] of Object.entries(expectations)) {
      const r = await s.admin('POST', '/applications', { name: `d-${type}`, type, redirect_uris: type === 'm2m' || type === 'api' ? [] : ['https://d.example/cb'] });
      expect(r.status, type).toBe(201);
      expect(typeof r.body.client_secret === 'string', type).toBe(e.secret);
      expect(r.body.refresh_tokens, type).toBe(e.refresh);
      expect(r.body.first_party, type).toBe(true);
    }
  });

  it('fixed client_id and secret; a duplicate client_id is 409', async () => {
    const body = { name: 'Fixed', type: 'm2m', client_id: 'fixed-client', client_secret: 'fixed-secret-0123456789abcdef-0123456789' };
    const r = await s.admin('POST', '/applications', body);
    expect(r.status).toBe(201);
    expect(r.body.client_id).toBe('fixed-client');
    expect((await s.admin('POST', '/applications', body)).status).toBe(409);
    const t = await fetch(`${s.url}/oauth/token`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'fixed-client', client_secret: body.client_secret }),
    });
    expect(t.status).toBe(200);
  });

  it('PATCH changes fields; DELETE 204 then 404', async () => {
    const r = await s.admin('POST', '/applications', { name: 'P', type: 'spa', redirect_uris: ['https://p.example/cb'] });
    const p = await s.admin('PATCH', `/applications/${r.body.client_id}`, { name: 'P2', redirect_uris: ['https://p.example/cb2'] });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ name: 'P2', redirect_uris: ['https://p.example/cb2'] });
    expect((await s.admin('DELETE', `/applications/${r.body.client_id}`)).status).toBe(204);
    expect((await s.admin('GET', `/applications/${r.body.client_id}`)).status).toBe(404);
  });

  it('grants and assignments answer 204', async () => {
    const m2m = await s.admin('POST', '/applications', { name: 'G', type: 'm2m' });
    const api = await s.admin('POST', '/applications', { name: 'A', type: 'api' });
    expect((await s.admin('PUT', `/applications/${m2m.body.client_id}/grants/${api.body.client_id}`, { scopes: ['read'] })).status).toBe(204);
    expect((await s.admin('PUT', `/applications/${m2m.body.client_id}/grants/${api.body.client_id}`)).status).toBe(204);
    expect((await s.admin('DELETE', `/applications/${m2m.body.client_id}/grants/${api.body.client_id}`)).status).toBe(204);
    const web = await s.admin('POST', '/applications', { name: 'W', type: 'web', redirect_uris: ['https://w.example/cb'] });
    const u = await s.admin('POST', '/users', { email: 'assign@example.com', password: 'pw-assign-12345', name: 'As' });
    expect((await s.admin('PUT', `/applications/${web.body.client_id}/assignments/${u.body.id}`)).status).toBe(204);
    expect((await s.admin('DELETE', `/applications/${web.body.client_id}/assignments/${u.body.id}`)).status).toBe(204);
    expect((await s.admin('PUT', `/applications/${web.body.client_id}/assignments/no-such-user`)).status).toBe(404);
  });
});

describe('Management API: users', () => {
  it('POST 201 with id; duplicate email 409; GET, PATCH, DELETE', async () => {
    const body = { email: 'u1@example.com', password: 'pw-u1-123456789', name: 'U One', groups: ['g'], roles: ['r'], email_verified: true, locale: 'fr', picture: 'https://x.example/p.png' };
    const r = await s.admin('POST', '/users', body);
    expect(r.status).toBe(201);
    expect(typeof r.body.id).toBe('string');
    expect(r.body.password).toBeUndefined();
    expect(JSON.stringify(r.body)).not.toContain('pw-u1-123456789');
    expect((await s.admin('POST', '/users', body)).status).toBe(409);
    const g = await s.admin('GET', `/users/${r.body.id}`);
    expect(g.body).toMatchObject({ id: r.body.id, email: 'u1@example.com', name: 'U One', groups: ['g'], roles: ['r'] });
    expect((await s.admin('PATCH', `/users/${r.body.id}`, { roles: ['r2'] })).body.roles).toEqual(['r2']);
    expect((await s.admin('POST', `/users/${r.body.id}/sessions/revoke`)).status).toBe(204);
    const cc = await s.admin('POST', `/users/${r.body.id}/credential-compromise`, { credential_type: 'password', reason: 'leak' });
    expect(cc.status).toBe(204);
    expect((await s.admin('POST', `/users/${r.body.id}/credential-compromise`, {})).status).toBe(400);
    expect((await s.admin('DELETE', `/users/${r.body.id}`)).status).toBe(204);
    expect((await s.admin('GET', `/users/${r.body.id}`)).status).toBe(404);
  });
});

describe('Management API: roles, agents, capabilities', () => {
  it('roles: POST, PUT, DELETE; a permission must be <action>:<resource_kind>', async () => {
    const r = await s.admin('POST', '/roles', { name: 'billing', permissions: ['create:refunds'] });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ name: 'billing', permissions: ['create:refunds'] });
    expect((await s.admin('POST', '/roles', { name: 'billing', permissions: [] })).status).toBe(409);
    const bad = await s.admin('POST', '/roles', { name: 'bad', permissions: ['refunds'] });
    expect(bad.status).toBe(400);
    expect(bad.body.issues[0].path).toMatch(/^permissions/);
    const put = await s.admin('PUT', '/roles/billing', { permissions: ['create:refunds', 'read:refunds'] });
    expect(put.status).toBeLessThan(300);
    expect(put.body.permissions).toEqual(['create:refunds', 'read:refunds']);
  });

  it('agents: 201 with a SPIFFE agent_id on the issuer host; 409 duplicate; GET/PATCH URL-encoded', async () => {
    const r = await s.admin('POST', '/agents', {
      name: 'refunder', mode: 'autonomous', public_jwk: jwk, roles: ['billing'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500, min: 1 }, currency: { in: ['USD'] }, channel: 'api' } }],
    });
    expect(r.status).toBe(201);
    expect(r.body.agent_id).toBe('spiffe://localhost/agent/refunder');
    expect((await s.admin('POST', '/agents', { name: 'refunder', mode: 'autonomous', public_jwk: jwk })).status).toBe(409);
    const id = encodeURIComponent(r.body.agent_id);
    const g = await s.admin('GET', `/agents/${id}`);
    expect(g.status).toBe(200);
    expect(g.body).toMatchObject({ agent_id: r.body.agent_id, mode: 'autonomous' });
    const p = await s.admin('PATCH', `/agents/${id}`, { roles: [] });
    expect(p.status).toBe(200);
    const cap = await s.admin('PUT', `/agents/${id}/capabilities/${encodeURIComponent('read:refunds')}`, { limits: { region: { not_in: ['XX'] } } });
    expect(cap.status).toBeLessThan(300);
    expect(cap.body).toMatchObject({ name: 'read:refunds', limits: { region: { not_in: ['XX'] } } });
    expect((await s.admin('DELETE', `/agents/${id}/capabilities/${encodeURIComponent('read:refunds')}`)).status).toBeLessThan(300);
    expect((await s.admin('POST', `/agents/${id}/revoke`)).status).toBe(204);
  });

  it('agents: bad keys, modes and limits are 400 naming the field', async () => {
    const { publicKey } = await generateKeyPair('RS256');
    const rsa = await exportJWK(publicKey);
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'a1', mode: 'autonomous', public_jwk: rsa }, 'public_jwk'],
      [{ name: 'a2', mode: 'sideways', public_jwk: jwk }, 'mode'],
      [{ name: 'a3', mode: 'autonomous', public_jwk: { ...jwk, d: 'private' } }, 'public_jwk'],
      [{ name: 'a4', mode: 'autonomous', public_jwk: jwk, capabilities: [{ name: 'create:refunds', limits: { amount: { max: 'lots' } } }] }, 'capabilities'],
      [{ name: 'a5', mode: 'autonomous', public_jwk: jwk, capabilities: [{ name: 'create:refunds', limits: { amount: { between: [1, 2] } } }] }, 'capabilities'],
    ];
    for (const [body, field] of cases) {
      const r = await s.admin('POST', '/agents', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.issues.some((i: { path: string }) => i.path.startsWith(field)), JSON.stringify(r.body)).toBe(true);
    }
  });
});

describe('Management API: rules, policy, keys, approvals, audit', () => {
  it('rule states: draft → (validate) → live → disabled; enable before validate is refused', async () => {
    const r = await s.admin('POST', '/rules', {
      name: 'block-large', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*',
      condition: { field: 'amount', op: 'gt', value: 10000 },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ state: 'draft' });
    expect(typeof r.body.id).toBe('string');
    const early = await s.admin('POST', `/rules/${r.body.id}/enable`);
    expect(early.status).toBeGreaterThanOrEqual(400);
    expect(early.status).toBeLessThan(500);
    const v = await s.admin('POST', `/rules/${r.body.id}/validate`);
    expect(v.status).toBe(200);
    expect(v.body).toEqual({ valid: true, errors: [] });
    const e = await s.admin('POST', `/rules/${r.body.id}/enable`);
    expect(e.status).toBe(200);
    expect(e.body.state).toBe('live');
    const list = await s.admin('GET', '/rules');
    expect(list.status).toBe(200);
    const rules = Array.isArray(list.body) ? list.body : list.body.data;
    expect(rules.some((x: { id: string; state: string }) => x.id === r.body.id && x.state === 'live')).toBe(true);
    const policy = await s.admin('GET', '/policy');
    expect(policy.status).toBe(200);
    expect(typeof policy.body.version).toBe('string');
    const d = await s.admin('POST', `/rules/${r.body.id}/disable`);
    expect(d.body.state).toBe('disabled');
    expect((await s.admin('DELETE', `/rules/${r.body.id}`)).status).toBeLessThan(300);
  });

  it('rule shape errors name the field', async () => {
    const r = await s.admin('POST', '/rules', { name: 'x', effect: 'explode', subjects: 'agent:*', relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'approx', value: 1 } });
    expect(r.status).toBe(400);
    const paths = r.body.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['effect', 'subjects', 'condition.op']));
  });

  it('POST /policy/reload answers the version in force', async () => {
    const r = await s.admin('POST', '/policy/reload');
    expect(r.status).toBe(200);
    expect(typeof r.body.version).toBe('string');
    expect(Array.isArray(r.body.sources)).toBe(true);
  });

  it('POST /keys/rotate answers the new kids, which appear in the JWK Set', async () => {
    const r = await s.admin('POST', '/keys/rotate', { alg: 'EdDSA' });
    expect(r.status).toBe(200);
    const set = (await (await fetch(`${s.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    const kids = JSON.stringify(r.body).match(/"kid":"([^"]+)"/g)!.map((m) => m.slice(7, -1));
    expect(kids.length).toBeGreaterThan(0);
    for (const k of kids) expect(set.keys.map((x) => x.kid)).toContain(k);
    expect((await s.admin('POST', '/keys/rotate', { alg: 'HS256' })).status).toBe(400);
  });

  it('GET /approvals?state=pending and GET /audit answer {data: [...]}', async () => {
    const a = await s.admin('GET', '/approvals?state=pending');
    expect(a.status).toBe(200);
    expect(Array.isArray(a.body.data)).toBe(true);
    const au = await s.admin('GET', '/audit?limit=5');
    expect(au.status).toBe(200);
    expect(Array.isArray(au.body.data)).toBe(true);
    for (const q of ['limit=-1', 'limit=abc', 'limit=99999999999999999999', 'agent_id=%ff']) {
      const r = await s.admin('GET', `/audit?${q}`);
      expect(r.status, q).toBeLessThan(500);
    }
  });
});
