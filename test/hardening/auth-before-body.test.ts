import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * An unauthenticated request announcing a 5 MB body to an authenticated endpoint is refused
 * with 401 before its body is read: the test sends the headers and 1 KB, never the rest, and
 * gets its answer (a server that read the body first would wait for the rest for ever).
 */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

const FIVE_MB = 5 * 1024 * 1024;

function announceBig(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const url = new URL(path, server.url);
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(FIVE_MB), ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.write('{"padding":"' + 'x'.repeat(1024));
  });
}

describe('authentication before the body', () => {
  it('the management API: 401 invalid_token', async () => {
    const res = await announceBig('/admin/v1/users');
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).error).toBe('invalid_token');
  });

  it('the management API with a wrong token: 401', async () => {
    expect((await announceBig('/admin/v1/rules', { authorization: 'Bearer not-the-token' })).status).toBe(401);
  });

  it('the SSF stream API: 401', async () => {
    expect((await announceBig('/v1/ssf/streams')).status).toBe(401);
  });

  it('AuthZEN evaluation: 401 for a caller without credentials', async () => {
    expect((await announceBig('/access/v1/evaluation')).status).toBe(401);
  });

  it('the decision endpoint (whose caller is named in the body): refused for its announced size, unread', async () => {
    expect((await announceBig('/apis/regional/v1/agents/authorize')).status).toBe(413);
  });

  it('an authenticated request with a body still works', async () => {
    const res = await server.admin('POST', '/users', { email: 'body@example.com', password: 'pw-123456789', name: 'Body' });
    expect(res.status).toBe(201);
  });
});
