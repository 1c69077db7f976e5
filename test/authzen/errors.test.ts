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
      applications: [{ client_id: 'gateway', name: 'Gateway', type: 'm2m', client_secret: 'gateway-secret-0123456789abcdef-0123456789', grants: [{ api_client_id: `${issuer}/access/v1`, scopes: [] }] }],
    }));
    const s = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: issuer, GATEHOUSE_PROJECT_FILE: project } });
    try {
      const app = await s.admin('GET', '/applications/gateway');
      expect(app.body.grants).toEqual([{ api_client_id: `${issuer}/access/v1`, scopes: [] }]);
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
  });

  it('a token of ours for another audience (the application itself): 401', async () => {
    const config = await client.discovery(new URL(f.base), f.caller.client_id, f.caller.client_secret, undefined, {
      execute: [client.allowInsecureRequests],
    });
    const own = (await client.clientCredentialsGrant(config)).access_token;
    const res = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${own}` });
    expect([res.status, res.body.error]).toEqual([401, 'invalid_token']);
  });

  it('an application without a grant gets no token; a removed grant ends access at once', async () => {
    const stranger = (await createApp(f.server, { type: 'm2m' })) as { client_id: string; client_secret: string };
    await expect(tokenFor(f.base, stranger, f.api)).rejects.toMatchObject({ error: 'invalid_target' });

    const other = await newCaller(f.server);
    const ok = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${other.token}` });
    expect(ok.status).toBe(200);
    const removed = await f.server.admin('DELETE', `/applications/${other.client_id}/grants/${encodeURIComponent(f.api)}`);
    expect(removed.status).toBe(204);
    await new Promise((r) => setTimeout(r, 5));
    const after = await pdpPost(f.base, '/access/v1/evaluation', q, { authorization: `Bearer ${other.token}` });
    expect(after.status).toBe(401);
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
