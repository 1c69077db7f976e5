import * as client from 'openid-client';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assign, authorizationUrl, Browser, createApp, createUser, discover, followSignIn, postForm,
  signInAndExchange, startFixture, type Fixture,
} from './helpers.js';

let f: Fixture;
let jwks: ReturnType<typeof createRemoteJWKSet>;

beforeAll(async () => {
  f = await startFixture();
  jwks = createRemoteJWKSet(new URL(`${f.issuer}/.well-known/jwks.json`));
});
afterAll(() => f.server.stop());

describe('authorization code flow with openid-client', () => {
  it('signs in, exchanges the code and returns tokens with the contract claims', async () => {
    const config = await discover(f, f.web);
    const { tokens, callback } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    expect(callback.searchParams.get('iss')).toBe(f.issuer);
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.expires_in).toBe(900);
    expect(tokens.scope).toBe('openid profile email');
    expect(typeof tokens.refresh_token).toBe('string');

    const at = await jwtVerify(tokens.access_token, jwks, { issuer: f.issuer, audience: f.web.client_id, typ: 'at+jwt', algorithms: ['RS256'] });
    expect(at.protectedHeader.kid).toBeTruthy();
    expect(at.payload).toMatchObject({
      sub: f.user.id, client_id: f.web.client_id, scope: 'openid profile email',
      amr: ['pwd'], acr: 'urn:service:acr:1fa', groups: ['eng'], roles: ['admin'],
    });
    for (const k of ['exp', 'iat', 'jti', 'sid', 'auth_time']) expect(at.payload[k]).toBeDefined();
    expect(at.payload.exp! - at.payload.iat!).toBe(900);

    const id = await jwtVerify(tokens.id_token!, jwks, { issuer: f.issuer, audience: f.web.client_id, algorithms: ['RS256'] });
    expect(id.payload).toMatchObject({
      sub: f.user.id, email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace',
      groups: ['eng'], roles: ['admin'], sid: at.payload.sid, amr: ['pwd'], acr: 'urn:service:acr:1fa',
      auth_time: at.payload.auth_time,
    });
    expect(typeof id.payload.at_hash).toBe('string');
  });

  it('a public SPA signs in with PKCE and client_id only', async () => {
    const config = await discover(f, f.spa);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const claims = tokens.claims()!;
    expect(claims.sub).toBe(f.user.id);
    expect(claims.aud).toBe(f.spa.client_id);
  });

  it('the ID token always carries the profile claims, even for scope openid alone', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { scope: 'openid' });
    expect(tokens.claims()).toMatchObject({ email: 'ada@example.com', name: 'Ada Lovelace', groups: ['eng'], roles: ['admin'] });
  });

  it('a session is reused: a second authorization needs no password', async () => {
    const config = await discover(f, f.web);
    const first = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const flow = await authorizationUrl(config, f);
    const callback = await followSignIn(first.browser, flow.url); // no steps: must not stop at a page
    expect(callback.searchParams.get('code')).toBeTruthy();
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
    expect(tokens.claims()!.sid).toBe(first.tokens.claims()!.sid);
  });

  it('sets the session cookie HttpOnly and SameSite=Lax', async () => {
    const config = await discover(f, f.web);
    const { browser } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const line = browser.jar.setCookieHeaders.find((h) => h.startsWith('gatehouse_session='))!;
    expect(line).toMatch(/HttpOnly/i);
    expect(line).toMatch(/SameSite=Lax/i);
    expect(line).not.toMatch(/Secure/i); // the test issuer is http
  });

  it('resource (RFC 8707) becomes the access token audience', async () => {
    const api = await createApp(f.server, { type: 'api', client_id: 'urn:example:orders-api', redirect_uris: [] });
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { resource: api.client_id });
    const at = await jwtVerify(tokens.access_token, jwks, { issuer: f.issuer, audience: 'urn:example:orders-api' });
    expect(at.payload.client_id).toBe(f.web.client_id);
  });

  it('login_hint fills in the email on the sign-in page', async () => {
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { login_hint: 'hint"<b>@example.com' });
    const browser = new Browser(f.issuer);
    const r1 = await browser.get(flow.url);
    const page = await browser.get(r1.headers.get('location')!);
    const html = await page.text();
    expect(html).toContain('value="hint&quot;&lt;b&gt;@example.com"');
    expect(html).not.toContain('<b>@');
  });
});

describe('refresh, userinfo, introspection, revocation, logout', () => {
  it('refresh returns new tokens with the original sid, amr and auth_time', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const first = await jwtVerify(tokens.access_token, jwks);
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const second = await jwtVerify(refreshed.access_token, jwks, { typ: 'at+jwt' });
    for (const k of ['sid', 'amr', 'auth_time', 'acr']) expect(second.payload[k]).toEqual(first.payload[k]);
    expect(refreshed.claims()!.auth_time).toBe(first.payload.auth_time);
    expect(refreshed.scope).toBe('openid profile email');
  });

  it('refresh may narrow the scope', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const narrowed = await client.refreshTokenGrant(config, tokens.refresh_token!, { scope: 'openid email' });
    expect(narrowed.scope).toBe('openid email');
    const at = await jwtVerify(narrowed.access_token, jwks);
    expect(at.payload.scope).toBe('openid email');
  });

  it('userinfo is filtered by scope and reads the profile fresh', async () => {
    const config = await discover(f, f.web);
    const full = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const info = await client.fetchUserInfo(config, full.tokens.access_token, f.user.id);
    expect(info).toEqual({
      sub: f.user.id, email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace',
      picture: 'https://example.com/ada.png', locale: 'en-GB', groups: ['eng'], roles: ['admin'],
    });

    const onlyEmail = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { scope: 'openid email' });
    expect(await client.fetchUserInfo(config, onlyEmail.tokens.access_token, f.user.id)).toEqual({
      sub: f.user.id, email: 'ada@example.com', email_verified: true,
    });

    // A changed name shows at once; groups stay those of the token.
    const patched = await f.server.admin('PATCH', `/users/${f.user.id}`, { name: 'Countess Lovelace', groups: ['research'] });
    expect(patched.status).toBe(200);
    const again = await client.fetchUserInfo(config, full.tokens.access_token, f.user.id);
    expect(again.name).toBe('Countess Lovelace');
    expect(again.groups).toEqual(['eng']);
    // POST works too
    const post = await fetch(`${f.issuer}/oauth/userinfo`, { method: 'POST', headers: { authorization: `Bearer ${full.tokens.access_token}` } });
    expect(((await post.json()) as { name: string }).name).toBe('Countess Lovelace');
    await f.server.admin('PATCH', `/users/${f.user.id}`, { name: 'Ada Lovelace', groups: ['eng'] });
  });

  it('userinfo refuses a missing or bad token with 401', async () => {
    const none = await fetch(`${f.issuer}/oauth/userinfo`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const bad = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: 'Bearer abc.def.ghi' } });
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: string }).error).toBe('invalid_token');
  });

  it('introspection: active for the token client, {"active": false} otherwise', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const result = await client.tokenIntrospection(config, tokens.access_token);
    expect(result).toMatchObject({
      active: true, client_id: f.web.client_id, sub: f.user.id, iss: f.issuer, token_type: 'Bearer', scope: 'openid profile email',
    });
    expect(typeof result.exp).toBe('number');
    expect(typeof result.iat).toBe('number');

    const auth = { authorization: `Basic ${Buffer.from(`${f.web.client_id}:${f.web.client_secret}`).toString('base64')}` };
    for (const token of ['garbage', tokens.refresh_token!, tokens.id_token!]) {
      const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token }, auth);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ active: false });
    }

    // Another application with a secret sees the token as inactive; a wrong secret is 401.
    const other = await createApp(f.server, { type: 'web', redirect_uris: ['http://localhost:9/other'] });
    const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token: tokens.access_token }, {
      authorization: `Basic ${Buffer.from(`${other.client_id}:${other.client_secret}`).toString('base64')}`,
    });
    expect(r.body).toEqual({ active: false });
    const wrongSecret = await postForm(`${f.issuer}/oauth/token/introspect`, { token: tokens.access_token }, {
      authorization: `Basic ${Buffer.from(`${other.client_id}:wrong`).toString('base64')}`,
    });
    expect(wrongSecret.status).toBe(401);

    // The token's audience (an API) sees it as active.
    const api = await createApp(f.server, { type: 'api', redirect_uris: [] });
    const forApi = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { resource: api.client_id });
    const r2 = await postForm(`${f.issuer}/oauth/token/introspect`, { token: forApi.tokens.access_token }, {
      authorization: `Basic ${Buffer.from(`${api.client_id}:${api.client_secret}`).toString('base64')}`,
    });
    expect(r2.body.active).toBe(true);

    // A public application may not introspect.
    const pub = await postForm(`${f.issuer}/oauth/token/introspect`, { token: tokens.access_token, client_id: f.spa.client_id });
    expect(pub.status).toBe(401);
    expect(pub.body.error).toBe('invalid_client');
  });

  it('revocation revokes the whole family, answers 200 with an empty body, and leaves other apps alone', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const r1 = await client.refreshTokenGrant(config, tokens.refresh_token!);

    // Another application's revoke call leaves the token alone.
    const spaRevoke = await postForm(`${f.issuer}/oauth/token/revoke`, { token: r1.refresh_token!, client_id: f.spa.client_id });
    expect(spaRevoke.status).toBe(200);
    expect(spaRevoke.body).toBe('');

    // Revoking the first (already used) token revokes the family, so the current one fails.
    await client.tokenRevocation(config, tokens.refresh_token!);
    await expect(client.refreshTokenGrant(config, r1.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });

    // Unknown tokens and access tokens: 200, empty body.
    const auth = { authorization: `Basic ${Buffer.from(`${f.web.client_id}:${f.web.client_secret}`).toString('base64')}` };
    for (const token of ['nope', tokens.access_token]) {
      const r = await postForm(`${f.issuer}/oauth/token/revoke`, { token }, auth);
      expect(r.status).toBe(200);
      expect(r.body).toBe('');
    }
  });

  it('a public app revokes with client_id', async () => {
    const config = await discover(f, f.spa);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const r = await postForm(`${f.issuer}/oauth/token/revoke`, { token: tokens.refresh_token!, client_id: f.spa.client_id });
    expect(r.status).toBe(200);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('logout ends the session, redirects to an allowed URI with state, and leaves refresh tokens alone', async () => {
    const config = await discover(f, f.web);
    const { tokens, browser } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const url = client.buildEndSessionUrl(config, { post_logout_redirect_uri: 'http://localhost:9/bye', state: 's-1', id_token_hint: tokens.id_token! });
    const res = await browser.get(url.toString());
    expect(res.status).toBe(302);
    const to = new URL(res.headers.get('location')!);
    expect(`${to.origin}${to.pathname}`).toBe('http://localhost:9/bye');
    expect(to.searchParams.get('state')).toBe('s-1');
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);

    // The session is over: prompt=none now answers login_required.
    const flow = await authorizationUrl(config, f, { prompt: 'none' });
    const back = await followSignIn(browser, flow.url);
    expect(back.searchParams.get('error')).toBe('login_required');

    // Rule 4: the refresh token still works.
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.access_token).toBeTruthy();
  });

  it('logout honours a URI with the scheme and host of a redirect URI when no post-logout URI is registered; otherwise shows a signed-out page', async () => {
    const same = await new Browser(f.issuer).get(`/oauth/logout?client_id=${f.spa.client_id}&post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/elsewhere')}`);
    expect(same.status).toBe(302);
    expect(same.headers.get('location')).toBe('http://localhost:9/elsewhere');

    for (const q of [
      `client_id=${f.web.client_id}&post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/elsewhere')}`,
      `client_id=${f.web.client_id}&post_logout_redirect_uri=${encodeURIComponent('https://evil.example/')}`,
      `post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/bye')}`,
      '',
    ]) {
      const res = await new Browser(f.issuer).get(`/oauth/logout?${q}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toMatch(/signed out/i);
    }
  });
});

describe('consent for third-party applications', () => {
  it('asks once, remembers, asks again with prompt=consent, and deny gives access_denied', async () => {
    const third = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], first_party: false });
    await assign(f.server, third.client_id, f.user.id);
    const config = await discover(f, third);
    const browser = new Browser(f.issuer);

    // First time: the consent page lists the scopes.
    const flow = await authorizationUrl(config, f);
    let res = await browser.get(flow.url);
    res = await browser.get(res.headers.get('location')!);
    res = await browser.submit(res, { email: f.user.email, password: f.user.password }, '/login');
    expect(res.status).toBe(302);
    const consentUrl = res.headers.get('location')!;
    expect(consentUrl).toMatch(/^\/consent/);
    const page = await (await browser.get(consentUrl)).text();
    for (const s of ['openid', 'profile', 'email']) expect(page).toContain(s);
    expect(page).toContain('<button type="submit" name="decision" value="approve">');
    expect(page).toContain('name="decision" value="deny"');
    res = await browser.submit(page, { decision: 'approve' }, consentUrl);
    const cb = new URL(res.headers.get('location')!);
    await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });

    // Remembered: no page.
    const again = await authorizationUrl(config, f);
    expect((await followSignIn(browser, again.url)).searchParams.get('code')).toBeTruthy();

    // prompt=consent shows it again; deny → access_denied with state.
    const forced = await authorizationUrl(config, f, { prompt: 'consent' });
    const denied = await followSignIn(browser, forced.url, { email: '', password: '', consent: 'deny' });
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('state')).toBe(forced.state);
  });

  it('prompt=none without consent answers consent_required', async () => {
    const third = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], first_party: false });
    await assign(f.server, third.client_id, f.user.id);
    const config = await discover(f, f.web);
    const { browser } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const thirdConfig = await discover(f, third);
    const flow = await authorizationUrl(thirdConfig, f, { prompt: 'none' });
    expect((await followSignIn(browser, flow.url)).searchParams.get('error')).toBe('consent_required');
  });
});

describe('sign-in strength and prompts', () => {
  it('acr_values mfa asks for the TOTP code and puts mfa into the tokens', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(
      config, f, { email: f.mfaUser.email, password: f.mfaUser.password, totpSecret: f.mfaUser.totp },
      { acr_values: 'urn:service:acr:mfa' },
    );
    expect(tokens.claims()).toMatchObject({ acr: 'urn:service:acr:mfa', amr: ['pwd', 'otp', 'mfa'] });
    const at = await jwtVerify(tokens.access_token, jwks);
    expect(at.payload.acr).toBe('urn:service:acr:mfa');
  });

  it('a 1fa session steps up to mfa with the code', async () => {
    const config = await discover(f, f.web);
    const first = await signInAndExchange(config, f, { email: f.mfaUser.email, password: f.mfaUser.password });
    expect(first.tokens.claims()!.acr).toBe('urn:service:acr:1fa');
    const { tokens } = await signInAndExchange(
      config, f, { email: '', password: '', totpSecret: f.mfaUser.totp, totpOffset: 1 }, { acr_values: 'urn:service:acr:mfa' }, first.browser,
    );
    expect(tokens.claims()).toMatchObject({ acr: 'urn:service:acr:mfa', sid: first.tokens.claims()!.sid });
  });

  it('a wrong or replayed code is refused on the page', async () => {
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { acr_values: 'urn:service:acr:mfa' });
    const browser = new Browser(f.issuer);
    let res = await browser.get(flow.url);
    res = await browser.get(res.headers.get('location')!);
    res = await browser.submit(res, { email: f.mfaUser.email, password: f.mfaUser.password }, '/login');
    const otpUrl = res.headers.get('location')!;
    const page = await (await browser.get(otpUrl)).text();
    res = await browser.submit(page, { otp: '000000' }, otpUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/not correct/);
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('a person without TOTP asking for mfa gets unmet_authentication_requirements', async () => {
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { acr_values: 'urn:service:acr:mfa' });
    const back = await followSignIn(new Browser(f.issuer), flow.url, { email: f.user.email, password: f.user.password });
    expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');
    expect(back.searchParams.get('state')).toBe(flow.state);
  });

  it('prompt=login and max_age=0 ask for the password again and give a new auth_time', async () => {
    const config = await discover(f, f.web);
    const first = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    for (const extra of [{ prompt: 'login' }, { max_age: '0' }] as Record<string, string>[]) {
      const flow = await authorizationUrl(config, f, extra);
      const r = await first.browser.get(flow.url);
      expect(r.headers.get('location')).toMatch(/^\/login\?/);
      const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, extra, first.browser);
      expect(tokens.claims()!.auth_time).toBeGreaterThanOrEqual(first.tokens.claims()!.auth_time!);
    }
  });

  it('prompt=none with a live session returns a code; with mfa needed, interaction_required', async () => {
    const config = await discover(f, f.web);
    const first = await signInAndExchange(config, f, { email: f.mfaUser.email, password: f.mfaUser.password });
    const ok = await authorizationUrl(config, f, { prompt: 'none' });
    expect((await followSignIn(first.browser, ok.url)).searchParams.get('code')).toBeTruthy();
    const mfa = await authorizationUrl(config, f, { prompt: 'none', acr_values: 'urn:service:acr:mfa' });
    expect((await followSignIn(first.browser, mfa.url)).searchParams.get('error')).toBe('interaction_required');
  });

  it('a person not assigned to the application gets access_denied at the redirect URI', async () => {
    const stranger = await createUser(f.server, { email: 'eve@example.com', password: 'a long enough password', name: 'Eve' });
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f);
    const back = await followSignIn(new Browser(f.issuer), flow.url, { email: 'eve@example.com', password: 'a long enough password' });
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe(flow.state);
    expect(stranger.id).toBeTruthy();
  });

  it('access tokens name their key: kid is in the JWK Set', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const { kid, typ, alg } = decodeProtectedHeader(tokens.access_token);
    expect({ typ, alg }).toEqual({ typ: 'at+jwt', alg: 'RS256' });
    const set = (await (await fetch(`${f.issuer}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    expect(set.keys.some((k: { kid: string }) => k.kid === kid)).toBe(true);
  });
});
