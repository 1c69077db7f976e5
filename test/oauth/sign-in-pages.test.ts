import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assign, authorizationUrl, basic, Browser, createUser, discover, parseForms, postForm, signInAndExchange, startFixture, type Fixture,
} from './helpers.js';

let f: Fixture;
beforeAll(async () => {
  f = await startFixture();
});
afterAll(() => f.server.stop());

/** Opens the sign-in page of a fresh authorization request; returns the browser and page. */
async function openLogin() {
  const config = await discover(f, f.web);
  const flow = await authorizationUrl(config, f);
  const browser = new Browser(f.issuer);
  const r = await browser.get(flow.url);
  expect(r.status).toBe(302);
  const loginUrl = r.headers.get('location')!;
  const html = await (await browser.get(loginUrl)).text();
  return { browser, loginUrl, html };
}

describe('the sign-in page', () => {
  it('is one POST form with email, password and hidden csrf and request inputs', async () => {
    const { html, browser } = await openLogin();
    const forms = parseForms(html);
    expect(forms).toHaveLength(1);
    expect(forms[0]!.inputs).toEqual(expect.arrayContaining(['email', 'password', 'csrf', 'request']));
    expect(html).toMatch(/<input type="hidden" name="csrf"/);
    const csrfCookie = browser.jar.setCookieHeaders.find((h) => h.startsWith('gatehouse_csrf='))!;
    expect(csrfCookie).toMatch(/HttpOnly/i);
  });

  it('a wrong password shows the page again with a message and makes no session', async () => {
    const { browser, loginUrl, html } = await openLogin();
    const res = await browser.submit(html, { email: f.user.email, password: 'wrong password' }, loginUrl);
    expect(res.status).toBe(200);
    const again = await res.text();
    expect(again).toMatch(/not correct/);
    expect(parseForms(again)[0]!.inputs).toContain('password');
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('a post without the CSRF value is refused and makes no session', async () => {
    const { browser, loginUrl, html } = await openLogin();
    const res = await browser.submit(html, { email: f.user.email, password: f.user.password, csrf: 'forged-value-forged-value-forged-value' }, loginUrl);
    expect(res.status).toBe(400);
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('an unknown or expired request shows an error page', async () => {
    const res = await new Browser(f.issuer).get('/login?request=unknown');
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('invalid_request');
  });

  it('a compromised password does not sign in', async () => {
    const person = await createUser(f.server, { email: 'leaked@example.com', password: 'leaked password 123', name: 'Leaked' });
    await assign(f.server, f.web.client_id, person.id);
    const r = await f.server.admin('POST', `/users/${person.id}/credential-compromise`, { credential_type: 'password' });
    expect(r.status).toBe(204);
    const { browser, loginUrl, html } = await openLogin();
    const res = await browser.submit(html, { email: 'leaked@example.com', password: 'leaked password 123' }, loginUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/compromised/);
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('failed sign-ins are rate limited per account: even the right password gets 429 afterwards', async () => {
    const person = await createUser(f.server, { email: 'target@example.com', password: 'target password 123', name: 'Target' });
    await assign(f.server, f.web.client_id, person.id);
    for (let i = 0; i < 5; i++) {
      const { browser, loginUrl, html } = await openLogin();
      expect((await browser.submit(html, { email: 'target@example.com', password: `guess ${i}` }, loginUrl)).status).toBe(200);
    }
    const { browser, loginUrl, html } = await openLogin();
    const res = await browser.submit(html, { email: 'target@example.com', password: 'target password 123' }, loginUrl);
    expect(res.status).toBe(429);
    expect(await res.text()).toMatch(/rate_limited|Too many/);
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('page output is escaped', async () => {
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { login_hint: '"><script>alert(1)</script>' });
    const browser = new Browser(f.issuer);
    const r = await browser.get(flow.url);
    const html = await (await browser.get(r.headers.get('location')!)).text();
    expect(html).not.toContain('<script>');
    expect(html).toContain('&lt;script&gt;');
  });
});

describe('a person deleted', () => {
  it('takes their refresh tokens along (ON DELETE CASCADE)', async () => {
    const person = await createUser(f.server, { email: 'gone@example.com', password: 'gone password 123', name: 'Gone' });
    await assign(f.server, f.web.client_id, person.id);
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: 'gone@example.com', password: 'gone password 123' });
    expect((await f.server.admin('DELETE', `/users/${person.id}`)).status).toBe(204);
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.body.error).toBe('invalid_grant');
    await expect(client.fetchUserInfo(config, tokens.access_token, person.id)).rejects.toBeDefined();
  });
});
