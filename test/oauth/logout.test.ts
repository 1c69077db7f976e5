// RP-initiated logout: a cross-site link cannot sign a person out, the return address is held
// to what the application registered, and a valid id_token_hint is proof enough.
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorizationUrl, Browser, discover, followSignIn, signInAndExchange, startFixture, type Fixture } from './helpers.js';

let f: Fixture;
let config: client.Configuration;

beforeAll(async () => {
  f = await startFixture();
  config = await discover(f, f.web);
}, 30_000);
afterAll(() => f.server.stop());

/** A request another site started: the browser says so with `Sec-Fetch-Site`. */
async function fromElsewhere(browser: Browser, url: string, init: { method?: string; body?: URLSearchParams } = {}): Promise<Response> {
  const res = await fetch(new URL(url, f.issuer), {
    redirect: 'manual',
    method: init.method ?? 'GET',
    headers: { cookie: browser.jar.header(), 'sec-fetch-site': 'cross-site', ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    ...(init.body ? { body: init.body } : {}),
  });
  browser.jar.store(res);
  return res;
}

/** Whether the browser's session still holds: a silent authorization request succeeds. */
async function stillSignedIn(browser: Browser): Promise<boolean> {
  const flow = await authorizationUrl(config, f, { prompt: 'none' });
  const back = await followSignIn(browser, flow.url);
  return back.searchParams.get('error') === null && back.searchParams.get('code') !== null;
}

const signIn = () => signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
const logoutUrl = (q: Record<string, string>) => `/oauth/logout?${new URLSearchParams(q)}`;

describe('logout started by another site', () => {
  it('without a hint shows a confirmation page and does not sign out; confirming signs out and returns', async () => {
    const { browser } = await signIn();
    const url = logoutUrl({ client_id: f.web.client_id, post_logout_redirect_uri: 'http://localhost:9/bye', state: 's-9' });
    const page = await fromElsewhere(browser, url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Sign out?');
    expect(html).toContain('name="csrf"');
    expect(page.headers.get('location')).toBeNull();
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(true);
    expect(await stillSignedIn(browser)).toBe(true);

    // A forged confirmation (no CSRF value of this browser) is not one.
    const forged = await fromElsewhere(browser, '/oauth/logout', { method: 'POST', body: new URLSearchParams({ confirm: 'yes', csrf: 'x'.repeat(43) }) });
    expect(forged.status).toBe(200);
    expect(await forged.text()).toContain('Sign out?');
    expect(await stillSignedIn(browser)).toBe(true);

    // The person confirms: signed out, and sent back with the state.
    const done = await browser.submit(html, {}, url);
    expect(done.status).toBe(302);
    const to = new URL(done.headers.get('location')!);
    expect(`${to.origin}${to.pathname}`).toBe('http://localhost:9/bye');
    expect(to.searchParams.get('state')).toBe('s-9');
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
    expect(await stillSignedIn(browser)).toBe(false);
  });

  it('with a valid id_token_hint for the person signed in signs out at once', async () => {
    const { browser, tokens } = await signIn();
    const res = await fromElsewhere(browser, logoutUrl({ id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'http://localhost:9/bye' }));
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('http://localhost:9/bye');
    expect(await stillSignedIn(browser)).toBe(false);
  });

  it('with a hint for another application than client_id, or a forged one, asks first', async () => {
    const { browser, tokens } = await signIn();
    const requests: Record<string, string>[] = [
      { client_id: f.spa.client_id, id_token_hint: tokens.id_token! },
      { id_token_hint: `${tokens.id_token!.slice(0, -4)}AAAA` },
    ];
    for (const q of requests) {
      const res = await fromElsewhere(browser, logoutUrl(q));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('Sign out?');
    }
    expect(await stillSignedIn(browser)).toBe(true);
  });

  it('a cross-site POST that carries no session leaves the cookie alone', async () => {
    const { browser } = await signIn();
    const res = await fetch(new URL('/oauth/logout', f.issuer), {
      method: 'POST', redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
      body: new URLSearchParams({ client_id: f.web.client_id }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie().filter((c) => c.startsWith('gatehouse_session='))).toEqual([]);
    expect(await stillSignedIn(browser)).toBe(true);
  });
});

describe('the return address', () => {
  it('a state too long to carry back is refused with a 400 page, not echoed into a redirect clients cannot read', async () => {
    const post = (state: string) => fetch(new URL('/oauth/logout', f.issuer), {
      method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ client_id: f.web.client_id, post_logout_redirect_uri: 'http://localhost:9/bye', state }),
    });
    const refused = await post('s'.repeat(40_000));
    expect(refused.status).toBe(400);
    expect(refused.headers.get('location')).toBeNull();
    expect(await refused.text()).toContain('state is too long');
    const carried = await post('s'.repeat(2048));
    expect(carried.status).toBe(302);
    expect(new URL(carried.headers.get('location')!).searchParams.get('state')).toBe('s'.repeat(2048));
  });

  it('must be exactly one the application registered: another path on its host is refused', async () => {
    const { browser } = await signIn();
    const res = await browser.get(logoutUrl({ client_id: f.web.client_id, post_logout_redirect_uri: 'http://localhost:9/bye/other' }));
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toContain('has not registered');
    // The person asked here (no other site involved): signed out, as the description says.
    expect(await stillSignedIn(browser)).toBe(false);
  });
});
