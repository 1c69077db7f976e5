// Who may call, and what a malformed or hostile request gets: 401 with a challenge, 400 naming
// the field, never a 5xx.
import { SignJWT, generateKeyPair } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { putRole } from '../agents/helpers.js';
import { startTestServer } from '../helpers/server.js';
import { createApp, newCaller, pdpPost, putUser, startAuthzen, tokenFor, type AuthzenFixture } from './helpers.js';

let f: AuthzenFixture;
const q = { subject: { type: 'user', id: 'ada' }, action: { name: 'read' }, resource: { type: 'document', id: '1' } };
const ENDPOINTS = ['/access/v1/evaluation', '/access/v1/evaluations', '/access/v1/search/subject', '/access/v1/search/resource', '/access/v1/search/action'];

beforeAll(async () => {
  f = await startAuthzen();
  await putRole(f.server, 'reader', ['read:documents']);
  await putUser(f.server, { id: 'ada', email: 'ada@example.com', roles: ['reader'] });
}, 30_000);
afterAll(async () => f?.server.stop());

describe('the built-in api application', () => {
  it('exists with the API URL as its client ID, once, across restarts', async () => {
    const res = await f.server.admin('GET', `/applications/${encodeURIComponent(f.api)}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ client_id: f.api, type: 'api', has_secret: false });
    expect(res.body.grants).toEqual([]);
    const list = await f.server.admin('GET', '/applications');
    expect(list.body.data.filter((a: { client_id: string }) => a.client_id === f.api)).toHaveLength(1);
  });
});

describe('a project file may grant on the AuthZEN API', () => {
  it('the api application exists before the project file applies; its grant gives a working token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-authzen-'));
    const issuer = 'https://pdp.example.com';
    const project = join(dir, 'project.json');
    writeFileSync(project, JSON.stringify({
      roles: [{ name: 'reader', permissions: ['read:documents'] }],
      users: [{ id: 'ada', email: 'ada@example.com', password: 'pw', name: 'Ada', roles: ['reader'] }],
      applications: [{ client_id: 'gateway', name: 'Gateway', type: 'm2m', client_secret: 'gateway-secret-0123456789abcdef-0123456789', grants: [{ api_client_id: `${issuer}/access/v1`, scopes: [], enforcement_point_for: '*', search_subject_types: ['user'] }] }],
    }));
    const s = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: issuer, GATEHOUSE_PROJECT_FILE: project } });
    try {
      const app = await s.admin('GET', '/applications/gateway');
      // The AuthZEN terms come with the grant from the project file.
      expect(app.body.grants).toEqual([{ api_client_id: `${issuer}/access/v1`, scopes: [], enforcement_point_for: '*', search_subject_types: ['user'] }]);
      const tokenRes = await fetch(`${s.url}/oauth/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from('gateway:gateway-secret-0123456789abcdef-0123456789').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource: `${issuer}/access/v1` }),
      });
      const { access_token } = (await tokenRes.json()) as { access_token: string };
      const res = await pdpPost(s.url, '/access/v1/evaluation', q, { authorization: `Bearer ${access_token}` });
      expect([res.status, res.body]).toEqual([200, { decision: true }]);
    } finally {
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the built-in api application follows the issuer', () => {
  it('a restart under another issuer moves it, grants included', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-authzen-'));
    try {
      const first = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: 'https://old.example.com' } });
      const pep = (await createApp(first, { type: 'm2m' })) as { client_id: string };
      expect((await first.admin('PUT', `/applications/${pep.client_id}/grants/${encodeURIComponent('https://old.example.com/access/v1')}`, { scopes: ['x'] })).status).toBe(204);
      await first.stop();
      const second = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: 'https://new.example.com' } });
      try {
        const apis = (await second.admin('GET', '/applications')).body.data.filter((a: { type: string }) => a.type === 'api');
        expect(apis.map((a: { client_id: string }) => a.client_id)).toEqual(['https://new.example.com/access/v1']);
        expect((await second.admin('GET', `/applications/${pep.client_id}`)).body.grants).toEqual([{ api_client_id: 'https://new.example.com/access/v1', scopes: ['x'] }]);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('authentication', () => {
  it('without a token: 401 with a Bearer challenge, on every endpoint', async () => {
    for (const path of ENDPOINTS) {
      const res = await pdpPost(f.base, path, q, {});
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate'), path).toBe(`Bearer realm="${f.api}"`);
      expect(res.body.error).toBe('invalid_token');
    }
  });

  it('a token that is not ours, malformed, or of another scheme: 401 invalid_token', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const t = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ client_id: f.caller.client_id })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: 'x' })
      .setIssuer(f.base).setSubject(f.caller.client_id).setAudience(f.api).setIssuedAt(t).setExpirationTime(t + 60)
      .sign(privateKey);
    for (const authorization of [`Bearer ${forged}`, 'Bearer not.a.jwt', `Basic ${Buffer.from('a:b').toString('base64')}`, `Bearer ${f.server.adminToken}`]) {
      const res = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization });
      expect(res.status, authorization).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm=".*", error="invalid_token"/);
    }
    // Under the DPoP scheme the challenge is a DPoP one (RFC 9449 section 7.1).
    for (const authorization of [`DPoP ${forged}`, 'DPoP not.a.jwt']) {
      const res = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization });
      expect(res.status, authorization).toBe(401);
      expect(res.body.error).toBe('invalid_token');
      expect(res.headers.get('www-authenticate')).toMatch(new RegExp(`^DPoP error="invalid_token", .*algs="ES256 EdDSA", realm="${f.api}"$`));
    }
  });

  it('a token of ours for another audience (the application itself): 401', async () => {
    const config = await client.discovery(new URL(f.base), f.caller.client_id, f.caller.client_secret, undefined, {
      execute: [client.allowInsecureRequests],
    });
    const own = (await client.clientCredentialsGrant(config)).access_token;
    const res = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${own}` });
    expect([res.status, res.body.error]).toEqual([401, 'invalid_token']);
  });

  it('an application without a grant gets no token; a removed grant ends access at once: 403, on every endpoint', async () => {
    const stranger = (await createApp(f.server, { type: 'm2m' })) as { client_id: string; client_secret: string };
    await expect(tokenFor(f.base, stranger, f.api)).rejects.toMatchObject({ error: 'invalid_target' });

    const other = await newCaller(f.server);
    const ok = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${other.token}` });
    expect(ok.status).toBe(200);
    const removed = await f.server.admin('DELETE', `/applications/${other.client_id}/grants/${encodeURIComponent(f.api)}`);
    expect(removed.status).toBe(204);
    await new Promise((r) => setTimeout(r, 5));
    // The token is still authentic and for this API: the caller is known, and no longer allowed to ask.
    for (const path of ENDPOINTS) {
      const after = await pdpPost(f.base, path, q, { authorization: `Bearer ${other.token}`, 'x-request-id': 'forbidden-1' });
      expect([after.status, after.body.error], path).toEqual([403, 'insufficient_scope']);
      expect(after.body.error_description).toBe('the application of this token holds no grant on the AuthZEN API');
      expect(after.headers.get('www-authenticate')).toBe(
        `Bearer realm="${f.api}", error="insufficient_scope", error_description="the application of this token holds no grant on the AuthZEN API"`,
      );
      expect(after.headers.get('x-request-id')).toBe('forbidden-1');
    }
    // A grant given again restores the same token's access.
    const regrant = await f.server.admin('PUT', `/applications/${other.client_id}/grants/${encodeURIComponent(f.api)}`, { scopes: [] });
    expect(regrant.status).toBe(204);
    await new Promise((r) => setTimeout(r, 5));
    expect((await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${other.token}` })).status).toBe(200);
  });

  it("a deleted application's token is as good as revoked: 401 invalid_token", async () => {
    const gone = await newCaller(f.server);
    expect((await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${gone.token}` })).status).toBe(200);
    expect((await f.server.admin('DELETE', `/applications/${gone.client_id}`)).status).toBe(204);
    await new Promise((r) => setTimeout(r, 5));
    for (const path of ENDPOINTS) {
      const res = await pdpPost(f.base, path, q, { authorization: `Bearer ${gone.token}` });
      expect([res.status, res.body.error], path).toEqual([401, 'invalid_token']);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm=".*", error="invalid_token"/);
    }
  });

  it('the metadata needs no token', async () => {
    expect((await fetch(`${f.base}/.well-known/authzen-configuration`)).status).toBe(200);
  });
});

describe('malformed requests: 400 naming the field', () => {
  const cases: [string, unknown, string][] = [
    ['missing subject', { action: q.action, resource: q.resource }, 'subject: is required'],
    ['missing action', { subject: q.subject, resource: q.resource }, 'action: is required'],
    ['missing resource', { subject: q.subject, action: q.action }, 'resource: is required'],
    ['subject without type', { ...q, subject: { id: 'ada' } }, 'subject.type: is required'],
    ['subject without id', { ...q, subject: { type: 'user' } }, 'subject.id: is required'],
    ['action without name', { ...q, action: {} }, 'action.name: is required'],
    ['resource without type', { ...q, resource: { id: '1' } }, 'resource.type: is required'],
    ['resource without id', { ...q, resource: { type: 'document' } }, 'resource.id: is required'],
    ['subject as a string', { ...q, subject: 'ada' }, 'subject: must be an object'],
    ['action.name as a number', { ...q, action: { name: 123 } }, 'action.name: must be a string'],
    ['properties as a list', { ...q, subject: { type: 'user', id: 'ada', properties: [1] } }, 'subject.properties: must be an object'],
    ['context as a string', { ...q, context: 'now' }, 'context: must be an object'],
    ['an array body', [q], 'body: must be a JSON object'],
    ['an empty id', { ...q, subject: { type: 'user', id: '' } }, 'subject.id: must not be empty'],
  ];
  for (const [what, body, message] of cases) {
    it(what, async () => {
      const res = await f.post('/access/v1/evaluation', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_request');
      expect(res.body.error_description).toContain(message);
    });
  }

  it('not JSON, an empty body, another content type', async () => {
    const bad = await f.post('/access/v1/evaluation', '{"subject":');
    expect([bad.status, bad.body.error_description]).toEqual([400, 'the request body is not valid JSON']);
    const empty = await f.post('/access/v1/evaluation', '');
    expect(empty.status).toBe(400);
    const text = await f.post('/access/v1/evaluation', JSON.stringify(q), { 'content-type': 'text/plain' });
    expect([text.status, text.body.error_description]).toEqual([400, 'the request body must be application/json']);
    const none = await f.post('/access/v1/evaluation', JSON.stringify(q), { 'content-type': null });
    expect(none.status).toBe(400);
  });

  it('the evaluations top level: evaluations not a list, a badly typed default, too many items', async () => {
    expect((await f.post('/access/v1/evaluations', { ...q, evaluations: {} })).body.error_description).toContain('evaluations: must be an array');
    expect((await f.post('/access/v1/evaluations', { subject: { type: 7 }, evaluations: [q] })).body.error_description).toContain('subject.type: must be a string');
    const many = await f.post('/access/v1/evaluations', { evaluations: Array.from({ length: 1001 }, () => q) });
    expect([many.status, many.body.error_description]).toEqual([400, 'evaluations: must hold at most 1000 items']);
  });

  it('another method on an endpoint: 405', async () => {
    const res = await fetch(`${f.base}/access/v1/evaluation`, { headers: { authorization: `Bearer ${f.token}` } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });
});

describe('hostile input never gets a 5xx', () => {
  const deep = (n: number): unknown => (n === 0 ? 'x' : { a: deep(n - 1) });
  const hostile: unknown[] = [
    { ...q, subject: { type: 'user', id: 'ada', properties: JSON.parse('{"__proto__": {"polluted": true}, "constructor": 1}') } },
    { ...q, resource: { type: 'document', id: '1', properties: deep(200) } },
    { ...q, context: deep(200) },
    { ...q, subject: { type: 'user', id: 'x'.repeat(5000) } },
    { ...q, resource: { type: 'a:b:c', id: '::' } },
    { ...q, action: { name: '*:*' } },
    { ...q, resource: { type: '__proto__', id: 'constructor' } },
    { ...q, action: { name: 'read', properties: { soft: null } }, context: null },
    { evaluations: [null, 1, 'x', [], { subject: null }] },
    { evaluations: [q], options: 'fast' },
    { evaluations: [q], options: { evaluations_semantic: null } },
    JSON.parse('{"subject": {"type": "user", "id": "ada", "type": "agent"}, "action": {"name": "read"}, "resource": {"type": "document", "id": "1"}}'),
    { ...q, subject: { type: 'user', id: '\u0000\uffff' } },
  ];
  it('each gets a 200 or a 400', async () => {
    for (const body of hostile) {
      for (const path of ['/access/v1/evaluation', '/access/v1/evaluations']) {
        const res = await f.post(path, body);
        expect([200, 400], `${path} ${JSON.stringify(body).slice(0, 120)}`).toContain(res.status);
        if (res.status === 200 && 'decision' in res.body) expect(typeof res.body.decision).toBe('boolean');
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a large body and a bad percent-encoded path', async () => {
    const big = await f.post('/access/v1/evaluations', { evaluations: [q], pad: 'x'.repeat(2_000_000) });
    expect(big.status).toBe(413);
    const path = await fetch(`${f.base}/access/v1/%E0%A4%A`, { method: 'POST' });
    expect(path.status).toBeLessThan(500);
  });
});

describe('every error is a JSON object naming the error, with the request id echoed', () => {
  type Probe = { what: string; status: number; send: (path: string, rid: string) => Promise<Response> };
  const auth = () => ({ authorization: `Bearer ${f.token}` });
  const post = (path: string, rid: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${f.base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': rid, ...auth(), ...headers }, body });
  const probes: Probe[] = [
    { what: 'no token', status: 401, send: (p, rid) => fetch(`${f.base}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': rid }, body: JSON.stringify(q) }) },
    { what: 'a bad token', status: 401, send: (p, rid) => post(p, rid, JSON.stringify(q), { authorization: 'Bearer x.y.z' }) },
    { what: 'not JSON', status: 400, send: (p, rid) => post(p, rid, '{"subject":') },
    { what: 'a JSON array', status: 400, send: (p, rid) => post(p, rid, '[]') },
    { what: 'another content type', status: 400, send: (p, rid) => post(p, rid, JSON.stringify(q), { 'content-type': 'text/plain' }) },
    { what: 'an unknown charset', status: 415, send: (p, rid) => post(p, rid, JSON.stringify(q), { 'content-type': 'application/json; charset=klingon' }) },
    { what: 'no resource', status: 400, send: (p, rid) => post(p, rid, JSON.stringify({ subject: q.subject, action: q.action })) },
    { what: 'nested too deep', status: 400, send: (p, rid) => post(p, rid, '{"context":' + '['.repeat(500) + ']'.repeat(500) + '}') },
    { what: 'too large', status: 413, send: (p, rid) => post(p, rid, JSON.stringify({ ...q, pad: 'x'.repeat(1_100_000) })) },
    { what: 'GET', status: 405, send: (p, rid) => fetch(`${f.base}${p}`, { headers: { 'x-request-id': rid, ...auth() } }) },
  ];
  for (const probe of probes) {
    it(`${probe.what}: ${probe.status}`, async () => {
      for (const [i, path] of ENDPOINTS.entries()) {
        const rid = `probe-${probe.status}-${i}`;
        const res = await probe.send(path, rid);
        const text = await res.text();
        expect(res.status, `${path}: ${text}`).toBe(probe.status);
        expect(res.headers.get('content-type'), path).toMatch(/^application\/json/);
        expect(res.headers.get('x-request-id'), path).toBe(rid);
        const body = JSON.parse(text);
        expect(body, path).toMatchObject({ error: expect.any(String), error_description: expect.any(String) });
        if (probe.status === 401) expect(res.headers.get('www-authenticate'), path).toMatch(/^Bearer realm="/);
        if (probe.status === 405) expect(res.headers.get('allow'), path).toBe('POST');
      }
    });
  }

  it('an unknown endpoint under the API (404), and the metadata with another method (405)', async () => {
    const missing = await fetch(`${f.base}/access/v1/search/everything`, { method: 'POST', headers: { 'x-request-id': 'nf-1', 'content-type': 'application/json' }, body: '{}' });
    expect([missing.status, missing.headers.get('x-request-id')]).toEqual([404, 'nf-1']);
    expect(await missing.json()).toMatchObject({ error: 'not_found' });
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await fetch(`${f.base}/.well-known/authzen-configuration`, { method, headers: { 'x-request-id': 'md-1' } });
      expect([res.status, res.headers.get('allow'), res.headers.get('x-request-id')], method).toEqual([405, 'GET, HEAD', 'md-1']);
      expect(await res.json()).toMatchObject({ error: 'method_not_allowed' });
    }
    const head = await fetch(`${f.base}/.well-known/authzen-configuration`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('an item that cannot be asked in the middle of a batch: a deny carrying a 400 error, under every semantic', async () => {
    const items = [q, { subject: q.subject, action: { name: 7 }, resource: q.resource }, q];
    for (const semantic of ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit']) {
      const res = await f.post('/access/v1/evaluations', { evaluations: items, options: { evaluations_semantic: semantic } });
      expect(res.status, semantic).toBe(200);
      const bad = { decision: false, context: { error: { status: 400, message: 'evaluations.1.action.name: must be a string' } } };
      const expected = semantic === 'execute_all' ? [{ decision: true }, bad, { decision: true }] : semantic === 'deny_on_first_deny' ? [{ decision: true }, bad] : [{ decision: true }];
      expect(res.body, semantic).toEqual({ evaluations: expected });
    }
  });

  it('an unsupported evaluations_semantic is a 400 naming it; an unknown subject type is a deny, not an error', async () => {
    const res = await f.post('/access/v1/evaluations', { evaluations: [q], options: { evaluations_semantic: 'majority' } });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
    expect(res.body.issues).toEqual([{ path: 'options.evaluations_semantic', message: expect.stringContaining('execute_all'), code: 'invalid_value' }]);
    const robot = await f.post('/access/v1/evaluation', { ...q, subject: { type: 'robot', id: 'r2' } });
    expect(robot.body).toEqual({ decision: false, context: { reason: 'unknown_subject: robot r2' } });
  });
});

describe('a decision that fails in the middle of a batch', () => {
  it('is a deny carrying a 500 error for that item alone; the others are decided; a single evaluation is a 200 deny too', async () => {
    const entities = f.server.ctx.store.entities;
    const get = entities.get;
    entities.get = async (type: string, id: string) => {
      if (id === 'unreadable') throw new Error('disk on fire');
      return get.call(entities, type, id);
    };
    try {
      const doc = (id: string) => ({ resource: { type: 'document', id } });
      const res = await f.post('/access/v1/evaluations', { subject: q.subject, action: q.action, evaluations: [doc('10'), doc('unreadable'), doc('11')] });
      expect(res.status).toBe(200);
      const failed = { decision: false, context: { reason: 'error: the decision could not be made', error: { status: 500, message: 'error: the decision could not be made' } } };
      expect(res.body).toEqual({ evaluations: [{ decision: true }, failed, { decision: true }] });
      const stop = await f.post('/access/v1/evaluations', { subject: q.subject, action: q.action, options: { evaluations_semantic: 'deny_on_first_deny' }, evaluations: [doc('10'), doc('unreadable'), doc('11')] });
      expect(stop.body).toEqual({ evaluations: [{ decision: true }, failed] });
      const one = await f.post('/access/v1/evaluation', { ...q, resource: { type: 'document', id: 'unreadable' } });
      expect([one.status, one.body]).toEqual([200, failed]);
    } finally {
      entities.get = get;
    }
  });
});
