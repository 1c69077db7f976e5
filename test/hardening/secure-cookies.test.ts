import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assign, Browser, createApp, createUser, discover, signInAndExchange, type Fixture } from '../oauth/helpers.js';

/**
 * Behind a TLS-terminating proxy (a trusted peer saying X-Forwarded-Proto: https) the browser
 * cookies are Secure and carry the `__Host-` prefix (`__Secure-` for the console's, on
 * /console); sign-in works there, and over plain http the plain names stay.
 */

let server: TestServer;
let f: Fixture;
beforeAll(async () => {
  server = await startTestServer({ env: { GATEHOUSE_TRUSTED_PROXIES: '127.0.0.1,::1' } });
  const redirectUri = 'http://localhost:9/callback';
  const web = await createApp(server, { type: 'web', redirect_uris: [redirectUri] });
  const password = 'correct horse battery staple';
  const user = await createUser(server, { email: 'ada@example.com', password, name: 'Ada' });
  await assign(server, web.client_id, user.id);
  f = {
    server,
    issuer: server.ctx.urls.issuer,
    redirectUri,
    web: { client_id: web.client_id, client_secret: web.client_secret! },
    spa: { client_id: '' },
    user: { id: user.id, email: 'ada@example.com', password },
    mfaUser: { id: '', email: '', password: '', totp: '' },
  };
});
afterAll(() => server.stop());

const named = (headers: string[], name: string) => headers.filter((h) => h.startsWith(`${name}=`));

describe('cookies behind a TLS-terminating proxy', () => {
  it('signs in with __Host- cookies, all Secure', async () => {
    const browser = new Browser(f.issuer, { 'x-forwarded-proto': 'https' });
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password }, {}, browser);
    expect(typeof tokens.access_token).toBe('string');
    const set = browser.jar.setCookieHeaders;
    for (const base of ['gatehouse_session', 'gatehouse_csrf']) {
      const lines = named(set, `__Host-${base}`);
      expect(lines.length, base).toBeGreaterThan(0);
      for (const line of lines) {
        expect(line).toMatch(/; Secure/);
        expect(line).toMatch(/; Path=\/(;|$)/);
        expect(line).not.toMatch(/; Domain=/i);
      }
      expect(named(set, base)).toEqual([]);
    }
  });

  it('names the console cookies __Secure- (path /console)', async () => {
    const browser = new Browser(f.issuer, { 'x-forwarded-proto': 'https' });
    await browser.get('/console/login');
    const lines = browser.jar.setCookieHeaders.filter((h) => h.startsWith('__Secure-gatehouse_console'));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/; Secure/);
    expect(browser.jar.setCookieHeaders.filter((h) => h.startsWith('gatehouse_console'))).toEqual([]);
  });

  it('keeps the plain names without Secure over plain http', async () => {
    const browser = new Browser(f.issuer);
    await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password }, {}, browser);
    const set = browser.jar.setCookieHeaders;
    expect(named(set, 'gatehouse_session').length).toBeGreaterThan(0);
    expect(set.some((h) => h.startsWith('__Host-'))).toBe(false);
    expect(set.some((h) => /; Secure/.test(h))).toBe(false);
  });
});

describe('X-Forwarded-Proto from a peer that is not a trusted proxy', () => {
  it('is ignored: plain names, no Secure', async () => {
    const other = await startTestServer();
    try {
      const res = await fetch(`${other.url}/console/login`, { redirect: 'manual', headers: { 'x-forwarded-proto': 'https' } });
      const set = res.headers.getSetCookie();
      expect(set.some((h) => h.startsWith('gatehouse_console_flow='))).toBe(true);
      expect(set.some((h) => /; Secure/.test(h))).toBe(false);
      expect(set.some((h) => h.startsWith('__Host-') || h.startsWith('__Secure-'))).toBe(false);
    } finally {
      await other.stop();
    }
  });
});
