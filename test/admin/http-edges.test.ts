import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.stop());

const raw = (path: string, init: RequestInit = {}) => fetch(`${server.url}/admin/v1${path}`, init);
const auth = { authorization: `Bearer ${'test-admin-token-0123456789abcdef'}` };

describe('admin token', () => {
  it.each([
    ['missing', {}],
    ['wrong', { authorization: 'Bearer not-the-token-not-the-token' }],
    ['not bearer', { authorization: 'Basic dGVzdDp0ZXN0' }],
  ])('a %s token gets 401 invalid_token', async (_what, headers) => {
    for (const [method, path] of [['GET', '/applications'], ['POST', '/users'], ['POST', '/keys/rotate'], ['GET', '/audit']] as const) {
      const res = await raw(path, { method, headers });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'invalid_token' });
    }
  });
});

describe('malformed requests are 4xx, never 500', () => {
  it('malformed JSON is a 400 invalid_request', async () => {
    const res = await raw('/applications', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"name": ' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });

  it('an oversized body is a 413', async () => {
    const body = JSON.stringify({ name: 'x'.repeat(300 * 1024), type: 'web' });
    const res = await raw('/applications', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });

  it('a form-encoded body is refused rather than read as fields', async () => {
    const res = await raw('/applications', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=Web&type=web',
    });
    expect(res.status).toBe(400);
    // Only the built-in applications (the console, the AuthZEN API): nothing was created from the form.
    expect((await server.admin('GET', '/applications')).body.data.map((a: { client_id: string }) => a.client_id)).toEqual([
      'gatehouse-console',
      `${server.ctx.urls.issuer}/access/v1`,
    ]);
  });

  it('a missing body names the body', async () => {
    const res = await server.admin('POST', '/users');
    expect(res.status).toBe(400);
    expect(res.body.issues[0].path).toBe('body');
  });

  it('an unknown id is 404 not_found on every resource', async () => {
    for (const [method, path] of [
      ['GET', '/applications/nope'],
      ['PATCH', '/applications/nope'],
      ['DELETE', '/applications/nope'],
      ['GET', '/users/nope'],
      ['DELETE', '/users/nope'],
      ['POST', '/users/nope/sessions/revoke'],
      ['GET', '/roles/nope'],
      ['DELETE', '/roles/nope'],
      ['GET', `/agents/${encodeURIComponent('spiffe://localhost/agent/nope')}`],
      ['POST', `/agents/${encodeURIComponent('spiffe://localhost/agent/nope')}/revoke`],
      ['GET', '/rules/nope'],
      ['POST', '/rules/nope/validate'],
      ['POST', '/rules/nope/enable'],
    ] as const) {
      const res = await server.admin(method, path, method === 'PATCH' ? {} : undefined);
      expect([method, path, res.status, res.body.error]).toEqual([method, path, 404, 'not_found']);
    }
  });

  it('bad query parameters are named', async () => {
    const res = await server.admin('GET', '/audit?limit=0&decision=maybe');
    expect(res.status).toBe(400);
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(['decision', 'limit']);
  });
});

describe('OpenAPI document', () => {
  it('is served without a token, as OpenAPI 3.1 with a path for every admin route', async () => {
    const res = await fetch(`${server.url}/admin/v1/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, any>>; servers: { url: string }[] };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers[0]!.url).toBe(`${server.ctx.urls.issuer}/admin/v1`);
    const expected: [string, string][] = [
      ['post', '/applications'], ['get', '/applications'], ['get', '/applications/{client_id}'],
      ['patch', '/applications/{client_id}'], ['delete', '/applications/{client_id}'],
      ['put', '/applications/{client_id}/grants/{api_client_id}'], ['delete', '/applications/{client_id}/grants/{api_client_id}'],
      ['put', '/applications/{client_id}/assignments/{user_id}'], ['delete', '/applications/{client_id}/assignments/{user_id}'],
      ['post', '/users'], ['get', '/users'], ['get', '/users/{id}'], ['patch', '/users/{id}'], ['delete', '/users/{id}'],
      ['post', '/users/{id}/sessions/revoke'], ['post', '/users/{id}/credential-compromise'],
      ['post', '/roles'], ['get', '/roles'], ['get', '/roles/{name}'], ['put', '/roles/{name}'], ['delete', '/roles/{name}'],
      ['post', '/agents'], ['get', '/agents'], ['get', '/agents/{agent_id}'], ['patch', '/agents/{agent_id}'],
      ['put', '/agents/{agent_id}/capabilities/{name}'], ['delete', '/agents/{agent_id}/capabilities/{name}'],
      ['post', '/agents/{agent_id}/revoke'],
      ['post', '/rules'], ['get', '/rules'], ['get', '/rules/{id}'], ['delete', '/rules/{id}'],
      ['post', '/rules/{id}/validate'], ['post', '/rules/{id}/enable'], ['post', '/rules/{id}/disable'],
      ['get', '/policy'], ['post', '/policy/reload'], ['post', '/keys/rotate'], ['get', '/audit'],
    ];
    for (const [method, path] of expected) expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    // request bodies come from the same zod schemas that validate
    const appBody = doc.paths['/applications']!.post.requestBody.content['application/json'].schema;
    expect(appBody.required).toEqual(expect.arrayContaining(['name', 'type']));
    expect(appBody.properties.type.enum).toEqual(['web', 'spa', 'native', 'm2m', 'api']);
    expect(doc.paths['/agents']!.post.requestBody.content['application/json'].schema.required).toEqual(['name', 'mode', 'public_jwk']);
  });
});
