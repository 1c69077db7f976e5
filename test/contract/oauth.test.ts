import { generateKeyPair, SignJWT, createRemoteJWKSet, decodeJwt, jwtVerify, exportJWK } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assign, authorizationUrl, basic, Browser, createApp, createUser, discover, followSignIn, postForm,
  signInAndExchange, startFixture, type Fixture,
} from '../oauth/helpers.js';

/** The sign-in part of the description (endpoints, tokens, states, errors) with real clients. */
let f: Fixture;
let jwks: ReturnType<typeof createRemoteJWKSet>;
let config: client.Configuration;
const ada = () => ({ email: f.user.email, password: f.user.password });

beforeAll(async () => {
  f = await startFixture();
  jwks = createRemoteJWKSet(new URL(`${f.issuer}/.well-known/jwks.json`));
  config = await discover(f, f.web);
});
afterAll(() => f.server.stop());

/** Signs in through the pages and returns the raw code redirect (no exchange). */
async function codeFor(app: { client_id: string }, extra: Record<string, string> = {}, browser = new Browser(f.issuer)) {
  const cfg = app.client_id === f.web.client_id ? config : await discover(f, app);
  const flow = await authorizationUrl(cfg, f, extra);
  const callback = await followSignIn(browser, flow.url, ada());
  return { callback, flow, browser };
}

describe('GET /oauth/authorize', () => {
  it('redirects with code, state (unchanged) and iss', async () => {
    const state = 'ünïcødé state/with?odd&chars=1';
    const { callback } = await codeFor(f.web, { state });
    expect(callback.origin + callback.pathname).toBe(f.redirectUri);
    expect(callback.searchParams.get('code')).toBeTruthy();
    expect(callback.searchParams.get('state')).toBe(state);
    expect(callback.searchParams.get('iss')).toBe(f.issuer);
  });

  it('unknown client_id: a 401 page on the issuer, no redirect', async () => {
    const res = await fetch(`${f.issuer}/oauth/authorize?client_id=nobody&redirect_uri=${encodeURIComponent(f.redirectUri)}&response_type=code`, { redirect: 'manual' });
    expect(res.status).toBe(401);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toContain('invalid_client');
  });

  it('missing or unregistered redirect_uri: a 400 page, never a redirect', async () => {
    for (const ru of [undefined, 'http://evil.example/cb', `${f.redirectUri}/extra`, `${f.redirectUri}?x=1`, f.redirectUri.toUpperCase()]) {
      const q = new URLSearchParams({ client_id: f.web.client_id, response_type: 'code', ...(ru ? { redirect_uri: ru } : {}) });
      const res = await fetch(`${f.issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('invalid_request');
    }
  });

  it('anything else goes to the redirect URI with error, error_description and state', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ response_type: 'token' }, 'unsupported_response_type'],
      [{ code_challenge_method: 'plain', code_challenge: 'x'.repeat(43) }, 'invalid_request'],
      [{ acr_values: 'urn:example:acr:not-offered' }, 'unmet_authentication_requirements'],
      [{ prompt: 'none' }, 'login_required'],
    ];
    for (const [extra, error] of cases) {
      const q = new URLSearchParams({ client_id: f.web.client_id, redirect_uri: f.redirectUri, state: 's-1', ...extra });
      const res = await fetch(`${f.issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      const loc = new URL(res.headers.get('location')!);
      expect(loc.origin + loc.pathname).toBe(f.redirectUri);
      expect(loc.searchParams.get('error')).toBe(error);
      expect(loc.searchParams.get('error_description')).toBeTruthy();
      expect(loc.searchParams.get('state')).toBe('s-1');
    }
  });

  it('a public application must send a PKCE challenge', async () => {
    const q = new URLSearchParams({ client_id: f.spa.client_id, redirect_uri: f.redirectUri, state: 'p' });
    const res = await fetch(`${f.issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
    const loc = new URL(res.headers.get('location')!);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('state')).toBe('p');
  });

  it('a person not assigned to the application: access_denied at the redirect URI', async () => {
    const stranger = await createUser(f.server, { email: 'stranger@example.com', password: 'pw-stranger-123456', name: 'S' });
    const flow = await authorizationUrl(config, f, { state: 'st' });
    const cb = await followSignIn(new Browser(f.issuer), flow.url, { email: 'stranger@example.com', password: 'pw-stranger-123456' });
    expect(cb.searchParams.get('error')).toBe('access_denied');
    expect(cb.searchParams.get('state')).toBe('st');
    expect(stranger.id).toBeTruthy();
  });

  it('the session cookie is HttpOnly and SameSite=Lax', async () => {
    const { browser } = await codeFor(f.web);
    const session = browser.jar.setCookieHeaders.filter((h) => !/max-age=0|expires=thu, 01 jan 1970/i.test(h));
    expect(session.length).toBeGreaterThan(0);
    for (const h of session) {
      expect(h).toMatch(/;\s*HttpOnly/i);
      expect(h).toMatch(/;\s*SameSite=Lax/i);
    }
  });

  it('login_hint fills in the sign-in page', async () => {
    const flow = await authorizationUrl(config, f, { login_hint: 'hint@example.com', prompt: 'login' });
    const b = new Browser(f.issuer);
    let res = await b.get(flow.url);
    if (res.status === 302) res = await b.get(new URL(res.headers.get('location')!, f.issuer).toString());
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('hint@example.com');
  });
});

describe('POST /oauth/token: authorization code grant', () => {
  it('answers the token response with Cache-Control: no-store', async () => {
    const { callback, flow } = await codeFor(f.web);
    const r = await postForm(`${f.issuer}/oauth/token`, {
      grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: flow.verifier,
    }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toContain('no-store');
    expect(r.body.token_type).toBe('Bearer');
    expect(r.body.expires_in).toBe(900);
    expect(Number.isInteger(r.body.expires_in)).toBe(true);
    expect(typeof r.body.access_token).toBe('string');
    expect(typeof r.body.id_token).toBe('string');
    expect(typeof r.body.refresh_token).toBe('string');
    expect(r.body.scope).toBe('openid profile email');
    const at = await jwtVerify(r.body.access_token, jwks, { issuer: f.issuer, algorithms: ['RS256'] });
    expect(at.protectedHeader.kid).toBeTruthy();
    expect(at.payload.exp! - at.payload.iat!).toBe(900);
    const id = await jwtVerify(r.body.id_token, jwks, { issuer: f.issuer, audience: f.web.client_id, algorithms: ['RS256'] });
    expect(id.payload.nonce).toBe(flow.nonce);
  });

  it('client_secret_post works as well as Basic', async () => {
    const { callback, flow } = await codeFor(f.web);
    const r = await postForm(`${f.issuer}/oauth/token`, {
      grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: flow.verifier,
      client_id: f.web.client_id, client_secret: f.web.client_secret,
    });
    expect(r.status).toBe(200);
  });

  it('a code is single use: the second exchange is invalid_grant', async () => {
    const { callback, flow } = await codeFor(f.web);
    const form = { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: flow.verifier };
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    expect((await postForm(`${f.issuer}/oauth/token`, form, auth)).status).toBe(200);
    const again = await postForm(`${f.issuer}/oauth/token`, form, auth);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
  });

  it('a wrong verifier, a wrong redirect_uri or an unknown code is invalid_grant', async () => {
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    const a = await codeFor(f.web);
    const wrongVerifier = await postForm(`${f.issuer}/oauth/token`, {
      grant_type: 'authorization_code', code: a.callback.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: 'A'.repeat(43),
    }, auth);
    expect([wrongVerifier.status, wrongVerifier.body.error]).toEqual([400, 'invalid_grant']);
    const b = await codeFor(f.web);
    const wrongRedirect = await postForm(`${f.issuer}/oauth/token`, {
      grant_type: 'authorization_code', code: b.callback.searchParams.get('code')!, redirect_uri: 'http://localhost:9/other', code_verifier: b.flow.verifier,
    }, auth);
    expect([wrongRedirect.status, wrongRedirect.body.error]).toEqual([400, 'invalid_grant']);
    const unknown = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'authorization_code', code: 'nope', redirect_uri: f.redirectUri }, auth);
    expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('a missing code or redirect_uri is invalid_request', async () => {
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    const forms: Record<string, string>[] = [{ grant_type: 'authorization_code', redirect_uri: f.redirectUri }, { grant_type: 'authorization_code', code: 'x' }];
    for (const form of forms) {
      const r = await postForm(`${f.issuer}/oauth/token`, form, auth);
      expect([r.status, r.body.error]).toEqual([400, 'invalid_request']);
    }
  });

  it('invalid_client: unknown client, wrong or missing secret; 401', async () => {
    const { callback, flow } = await codeFor(f.web);
    const form = { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: flow.verifier };
    for (const headers of [
      { authorization: basic(f.web.client_id, 'wrong') },
      { authorization: basic('unknown-client', 'x') },
    ]) {
      const r = await postForm(`${f.issuer}/oauth/token`, form, headers);
      expect([r.status, r.body.error]).toEqual([401, 'invalid_client']);
    }
    const missing = await postForm(`${f.issuer}/oauth/token`, { ...form, client_id: f.web.client_id });
    expect([missing.status, missing.body.error]).toEqual([401, 'invalid_client']);
  });

  it('the assignment is checked again at issue: access_denied (403) after unassignment', async () => {
    const app = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri] });
    await assign(f.server, app.client_id, f.user.id);
    const cfg = await discover(f, app as { client_id: string; client_secret: string });
    const flow = await authorizationUrl(cfg, f);
    const cb = await followSignIn(new Browser(f.issuer), flow.url, ada());
    const del = await f.server.admin('DELETE', `/applications/${app.client_id}/assignments/${f.user.id}`);
    expect(del.status).toBe(204);
    const r = await postForm(`${f.issuer}/oauth/token`, {
      grant_type: 'authorization_code', code: cb.searchParams.get('code')!, redirect_uri: f.redirectUri, code_verifier: flow.verifier,
    }, { authorization: basic(app.client_id, app.client_secret!) });
    expect([r.status, r.body.error]).toEqual([403, 'access_denied']);
  });

  it('scope left out means openid', async () => {
    const b = new Browser(f.issuer);
    await codeFor(f.web, {}, b); // signed in
    const q = new URLSearchParams({ client_id: f.web.client_id, redirect_uri: f.redirectUri, response_type: 'code' });
    const res = await b.get(`${f.issuer}/oauth/authorize?${q}`);
    expect(res.status).toBe(302);
    const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri },
      { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.status).toBe(200);
    expect(r.body.scope).toBe('openid');
    expect(typeof r.body.id_token).toBe('string');
  });
});

describe('POST /oauth/token: refresh token grant', () => {
  it('rotates, keeps sid/amr/auth_time, narrows scope, refuses wider scope', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const first = decodeJwt(tokens.access_token);
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, scope: 'openid email' }, auth);
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toContain('no-store');
    expect(r.body.refresh_token).toBeTruthy();
    expect(r.body.refresh_token).not.toBe(tokens.refresh_token);
    expect(r.body.scope).toBe('openid email');
    expect(r.body.token_type).toBe('Bearer');
    expect(r.body.expires_in).toBe(900);
    const next = decodeJwt(r.body.access_token);
    expect([next.sid, next.amr, next.auth_time]).toEqual([first.sid, first.amr, first.auth_time]);
    const id = decodeJwt(r.body.id_token);
    expect([id.sid, id.auth_time]).toEqual([first.sid, first.auth_time]);

    const wider = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: r.body.refresh_token, scope: 'openid admin' }, auth);
    expect([wider.status, wider.body.error]).toEqual([400, 'invalid_scope']);
  });

  it('a used refresh token is invalid_grant and revokes the whole family', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    const r1 = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
    expect(r1.status).toBe(200);
    const reuse = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
    expect([reuse.status, reuse.body.error]).toEqual([400, 'invalid_grant']);
    const current = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: r1.body.refresh_token }, auth);
    expect([current.status, current.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('a public SPA refreshes with client_id only', async () => {
    const spaConfig = await discover(f, f.spa);
    const { tokens } = await signInAndExchange(spaConfig, f, ada());
    expect(tokens.refresh_token).toBeTruthy();
    const r = await client.refreshTokenGrant(spaConfig, tokens.refresh_token!);
    expect(r.access_token).toBeTruthy();
  });

  it('an application that may not hold refresh tokens gets none', async () => {
    const app = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], refresh_tokens: false });
    await assign(f.server, app.client_id, f.user.id);
    const cfg = await discover(f, app as { client_id: string; client_secret: string });
    const { tokens } = await signInAndExchange(cfg, f, ada());
    expect(tokens.refresh_token).toBeUndefined();
  });
});

describe('POST /oauth/token: client credentials grant', () => {
  let m2m: { client_id: string; client_secret: string };
  let api: { client_id: string };
  beforeAll(async () => {
    m2m = (await createApp(f.server, { type: 'm2m', redirect_uris: [] })) as typeof m2m;
    api = await createApp(f.server, { type: 'api', redirect_uris: [] });
  });

  it('answers access_token, token_type and expires_in only; the token is for the caller', async () => {
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials', scope: 'read:things write:things' },
      { authorization: basic(m2m.client_id, m2m.client_secret) });
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toContain('no-store');
    expect(Object.keys(r.body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(r.body.token_type).toBe('Bearer');
    expect(r.body.expires_in).toBe(900);
    const at = await jwtVerify(r.body.access_token, jwks, { issuer: f.issuer, audience: m2m.client_id, algorithms: ['RS256'] });
    expect(at.payload.sub).toBe(m2m.client_id);
    expect(at.payload.scope).toBe('read:things write:things');
  });

  it('resource names an API the caller holds a grant on; otherwise invalid_target', async () => {
    const auth = { authorization: basic(m2m.client_id, m2m.client_secret) };
    const before = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials', resource: api.client_id }, auth);
    expect([before.status, before.body.error]).toEqual([400, 'invalid_target']);
    const none = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials', resource: 'no-such-api' }, auth);
    expect([none.status, none.body.error]).toEqual([400, 'invalid_target']);
    const g = await f.server.admin('PUT', `/applications/${m2m.client_id}/grants/${api.client_id}`, { scopes: ['read'] });
    expect(g.status).toBe(204);
    const ok = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials', resource: api.client_id }, auth);
    expect(ok.status).toBe(200);
    expect(decodeJwt(ok.body.access_token).aud).toBe(api.client_id);
  });

  it('an application not of type m2m is unauthorized_client (openid-client too)', async () => {
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials' }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect([r.status, r.body.error]).toEqual([400, 'unauthorized_client']);
    await expect(client.clientCredentialsGrant(config)).rejects.toMatchObject({ error: 'unauthorized_client' });
  });

  it('openid-client client_credentials works against discovery', async () => {
    const cfg = await discover(f, m2m);
    const t = await client.clientCredentialsGrant(cfg, { scope: 'a b' });
    expect(t.access_token).toBeTruthy();
    expect(t.token_type.toLowerCase()).toBe('bearer');
  });

  it('an unsupported grant type is unsupported_grant_type', async () => {
    for (const gt of ['password', 'implicit', 'urn:ietf:params:oauth:grant-type:device_code', '__proto__', 'constructor']) {
      const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: gt }, { authorization: basic(m2m.client_id, m2m.client_secret) });
      expect([r.status, r.body.error]).toEqual([400, 'unsupported_grant_type']);
    }
  });
});

describe('JWK Set: rotation seen by a token validator', () => {
  it('after rotation new tokens name the new kid; tokens signed before still validate', async () => {
    const before = await signInAndExchange(config, f, ada());
    const oldKid = JSON.parse(Buffer.from(before.tokens.access_token.split('.')[0]!, 'base64url').toString()).kid;
    const rot = await f.server.admin('POST', '/keys/rotate', { alg: 'RS256' });
    expect(rot.status).toBe(200);
    const after = await signInAndExchange(config, f, ada());
    const newKid = JSON.parse(Buffer.from(after.tokens.access_token.split('.')[0]!, 'base64url').toString()).kid;
    expect(newKid).not.toBe(oldKid);
    // a fresh remote set (a validator that fetches on an unknown kid) validates both
    const fresh = createRemoteJWKSet(new URL(`${f.issuer}/.well-known/jwks.json`));
    await jwtVerify(before.tokens.access_token, fresh, { issuer: f.issuer });
    await jwtVerify(after.tokens.access_token, fresh, { issuer: f.issuer });
    await jwtVerify(after.tokens.id_token!, fresh, { issuer: f.issuer, audience: f.web.client_id });
  });
});

describe('GET or POST /oauth/userinfo', () => {
  it('filters by scope; profile gives name, picture, locale, groups, roles; email gives email, email_verified', async () => {
    const full = await signInAndExchange(config, f, ada(), { scope: 'openid profile email' });
    const get = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${full.tokens.access_token}` } });
    expect(get.status).toBe(200);
    expect(await get.json()).toEqual({
      sub: f.user.id, email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace',
      picture: 'https://example.com/ada.png', locale: 'en-GB', groups: ['eng'], roles: ['admin'],
    });
    const post = await fetch(`${f.issuer}/oauth/userinfo`, { method: 'POST', headers: { authorization: `Bearer ${full.tokens.access_token}` } });
    expect(post.status).toBe(200);

    const only = await signInAndExchange(config, f, ada(), { scope: 'openid' });
    const r = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${only.tokens.access_token}` } });
    expect(await r.json()).toEqual({ sub: f.user.id });
    const em = await signInAndExchange(config, f, ada(), { scope: 'openid email' });
    const r2 = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${em.tokens.access_token}` } });
    expect(await r2.json()).toEqual({ sub: f.user.id, email: 'ada@example.com', email_verified: true });
  });

  it('a changed name shows at once; groups and roles stay those of the token', async () => {
    const user = await createUser(f.server, { email: 'nm@example.com', password: 'pw-nm-123456789', name: 'Old Name', groups: ['g1'], roles: ['r1'] });
    await assign(f.server, f.web.client_id, user.id);
    const { tokens } = await signInAndExchange(config, f, { email: 'nm@example.com', password: 'pw-nm-123456789' }, { scope: 'openid profile' });
    const p = await f.server.admin('PATCH', `/users/${user.id}`, { name: 'New Name', groups: ['g2'] });
    expect(p.status).toBe(200);
    const info = await client.fetchUserInfo(config, tokens.access_token, user.id);
    expect(info.name).toBe('New Name');
    expect(info.groups).toEqual(['g1']);
  });

  it('no token, a malformed token, an alg:none token or one signed by another key: 401 invalid_token', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const claims = decodeJwt(tokens.access_token);
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    const { privateKey } = await generateKeyPair('RS256');
    const kid = (decodeJwt as unknown) && JSON.parse(Buffer.from(tokens.access_token.split('.')[0]!, 'base64url').toString()).kid;
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid }).sign(privateKey);
    const tampered = tokens.access_token.slice(0, -4) + (tokens.access_token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    for (const h of [undefined, 'Bearer', 'Bearer x', `Bearer ${none}`, `Bearer ${forged}`, `Bearer ${tampered}`, `Basic ${Buffer.from('a:b').toString('base64')}`, `Bearer ${'a'.repeat(7000)}`, `Bearer ${tokens.id_token}`]) {
      const res = await fetch(`${f.issuer}/oauth/userinfo`, { headers: h ? { authorization: h } : {} });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_token');
    }
  });
});

describe('POST /oauth/token/introspect', () => {
  it('a good access token: active with scope, client_id, sub, iss, exp, iat, token_type', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token: tokens.access_token }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ active: true, scope: 'openid profile email', client_id: f.web.client_id, sub: f.user.id, iss: f.issuer, token_type: 'Bearer' });
    expect(Number.isInteger(r.body.exp)).toBe(true);
    expect(Number.isInteger(r.body.iat)).toBe(true);
  });

  it('a service token: sub is the client ID', async () => {
    const m2m = (await createApp(f.server, { type: 'm2m', redirect_uris: [] })) as { client_id: string; client_secret: string };
    const t = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret) });
    const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token: t.body.access_token }, { authorization: basic(m2m.client_id, m2m.client_secret) });
    expect(r.body).toMatchObject({ active: true, sub: m2m.client_id, client_id: m2m.client_id, iss: f.issuer, token_type: 'Bearer' });
  });

  it('an application that is neither the token\'s client nor its audience sees exactly {"active": false} (issue 4)', async () => {
    const spaConfig = await discover(f, f.spa);
    const { tokens } = await signInAndExchange(spaConfig, f, ada());
    const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token: tokens.access_token }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.body).toEqual({ active: false });
  });

  it('expired, malformed, forged, refresh or ID tokens: exactly {"active": false}', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const claims = decodeJwt(tokens.access_token);
    const { privateKey } = await generateKeyPair('EdDSA');
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt' }).sign(privateKey);
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    for (const token of ['garbage', 'a.b.c', forged, none, tokens.refresh_token!, tokens.id_token!, '🙂'.repeat(100), 'x'.repeat(50000)]) {
      const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token }, { authorization: basic(f.web.client_id, f.web.client_secret) });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ active: false });
    }
  });

  it('openid-client tokenIntrospection works', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const r = await client.tokenIntrospection(config, tokens.access_token);
    expect(r.active).toBe(true);
  });
});

describe('POST /oauth/token/revoke', () => {
  it('200 with an empty body; the family is revoked; the access token stays valid', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const auth = { authorization: basic(f.web.client_id, f.web.client_secret) };
    const r1 = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
    const rev = await fetch(`${f.issuer}/oauth/token/revoke`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...auth }, body: new URLSearchParams({ token: r1.body.refresh_token }),
    });
    expect(rev.status).toBe(200);
    expect(await rev.text()).toBe('');
    const after = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: r1.body.refresh_token }, auth);
    expect([after.status, after.body.error]).toEqual([400, 'invalid_grant']);
    const info = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${r1.body.access_token}` } });
    expect(info.status).toBe(200);
  });

  it('a public application sends client_id; unknown tokens and access tokens also get 200', async () => {
    const spaConfig = await discover(f, f.spa);
    const { tokens } = await signInAndExchange(spaConfig, f, ada());
    for (const token of [tokens.refresh_token!, 'never-issued', tokens.access_token]) {
      const r = await postForm(`${f.issuer}/oauth/token/revoke`, { token, client_id: f.spa.client_id });
      expect(r.status).toBe(200);
      expect(r.body).toBe('');
    }
    await expect(client.refreshTokenGrant(spaConfig, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('an application with a secret authenticates as at the token endpoint', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    const forms: Record<string, string>[] = [
      { token: tokens.refresh_token!, client_id: f.web.client_id },
      { token: tokens.refresh_token!, client_id: f.web.client_id, client_secret: 'wrong' },
      { token: tokens.refresh_token!, client_id: 'no-such-client' },
    ];
    for (const form of forms) {
      const r = await postForm(`${f.issuer}/oauth/token/revoke`, form);
      expect([r.status, r.body.error]).toEqual([401, 'invalid_client']);
    }
    const ok = await postForm(`${f.issuer}/oauth/token/revoke`, { token: tokens.refresh_token!, client_id: f.web.client_id, client_secret: f.web.client_secret });
    expect([ok.status, ok.body]).toEqual([200, '']);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('openid-client tokenRevocation works', async () => {
    const { tokens } = await signInAndExchange(config, f, ada());
    await client.tokenRevocation(config, tokens.refresh_token!);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });
});

describe('GET /oauth/logout', () => {
  it('ends the session, removes its cookie, and sends the person back with state', async () => {
    const { browser } = await codeFor(f.web);
    const q = new URLSearchParams({ client_id: f.web.client_id, post_logout_redirect_uri: 'http://localhost:9/bye', state: 'bye-state' });
    const res = await browser.get(`${f.issuer}/oauth/logout?${q}`);
    expect(res.status).toBe(302);
    const loc = new URL(res.headers.get('location')!);
    expect(loc.origin + loc.pathname).toBe('http://localhost:9/bye');
    expect(loc.searchParams.get('state')).toBe('bye-state');
    expect(res.headers.getSetCookie().some((c) => /max-age=0|expires=thu, 01 jan 1970/i.test(c))).toBe(true);
    // the session is gone: prompt=none now fails
    const flow = await authorizationUrl(config, f, { prompt: 'none' });
    const again = await browser.get(flow.url);
    expect(new URL(again.headers.get('location')!).searchParams.get('error')).toBe('login_required');
  });

  it('a post_logout_redirect_uri with the scheme and host of a redirect URI is honoured for an application that registered no post-logout URIs', async () => {
    const res = await fetch(`${f.issuer}/oauth/logout?client_id=${f.spa.client_id}&post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/anything')}`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    // One that registered some is held to them exactly.
    const other = await fetch(`${f.issuer}/oauth/logout?client_id=${f.web.client_id}&post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/anything')}`, { redirect: 'manual' });
    expect(other.status).toBe(200);
  });

  it('otherwise a signed-out page; a foreign URI is never followed', async () => {
    for (const q of ['', `client_id=${f.web.client_id}&post_logout_redirect_uri=${encodeURIComponent('https://evil.example/')}`, `post_logout_redirect_uri=${encodeURIComponent('http://localhost:9/bye')}`, 'client_id=a&client_id=b']) {
      const res = await fetch(`${f.issuer}/oauth/logout?${q}`, { redirect: 'manual' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      expect((await res.text()).toLowerCase()).toContain('signed out');
    }
  });

  it('the refresh token survives logout', async () => {
    const { tokens, browser } = await signInAndExchange(config, f, ada());
    await browser.get(`${f.issuer}/oauth/logout`);
    const r = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(r.access_token).toBeTruthy();
  });
});

describe('Errors: hostile input at the sign-in endpoints never gives a 500', () => {
  const endpoints = ['/oauth/token', '/oauth/token/introspect', '/oauth/token/revoke', '/oauth/userinfo'];
  const bodies: [string, string][] = [
    ['application/json', '{"grant_type":"client_credentials","client_id":["a","b"]}'],
    ['application/json', '{"grant_type": '],
    ['application/json', '[]'],
    ['application/json', 'null'],
    ['text/plain', 'grant_type=client_credentials'],
    ['application/x-www-form-urlencoded', 'grant_type=authorization_code&code=a&code=b&client_id=x'],
    ['application/x-www-form-urlencoded', `client_id=${'é'.repeat(5000)}&grant_type=refresh_token&refresh_token=%00%ff`],
    ['application/x-www-form-urlencoded', 'token=%E0%A4%A&client_id=%'],
    ['application/x-www-form-urlencoded', `token=${'x'.repeat(70000)}`],
    ['application/x-www-form-urlencoded', Array.from({ length: 300 }, (_, i) => `p${i}=1`).join('&')],
    ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="grant_type"\r\n\r\nclient_credentials\r\n--x--'],
    ['application/x-www-form-urlencoded', 'grant_type=client_credentials&client_id=__proto__&client_secret=constructor'],
  ];
  it.each(endpoints)('%s answers 4xx in the OAuth form', async (path) => {
    for (const [type, body] of bodies) {
      const res = await fetch(`${f.issuer}${path}`, { method: 'POST', headers: { 'content-type': type, authorization: 'Basic !!!' }, body });
      expect(res.status, `${type} ${body.slice(0, 40)}`).toBeGreaterThanOrEqual(400);
      expect(res.status, `${type} ${body.slice(0, 40)}`).toBeLessThan(500);
      const j = (await res.json()) as { error: string };
      expect(typeof j.error).toBe('string');
    }
  });

  it('Basic credentials with odd encodings are invalid_client, not a crash', async () => {
    for (const h of ['Basic', 'Basic ', 'Basic %%%', `Basic ${Buffer.from(':').toString('base64')}`, `Basic ${Buffer.from('a%zz:b').toString('base64')}`, `Basic ${Buffer.from(`${f.web.client_id}:${'s'.repeat(10000)}`).toString('base64')}`]) {
      const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'client_credentials' }, { authorization: h });
      expect(r.status, h.slice(0, 20)).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
  });

  it('authorize with repeated, huge or odd parameters never crashes', async () => {
    const qs = [
      `client_id=${f.web.client_id}&client_id=${f.spa.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}`,
      `client_id=${f.web.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}&scope=openid&scope=email`,
      `client_id=${f.web.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}&state=${'s'.repeat(5000)}`,
      `client_id=${f.web.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}&max_age=-1`,
      `client_id=${f.web.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}&prompt=bogus`,
      `client_id=${f.web.client_id}&redirect_uri=${encodeURIComponent(f.redirectUri)}&scope=${encodeURIComponent('openid "bad')}`,
      `client_id=%ff%fe&redirect_uri=%`,
      `client_id[]=x&redirect_uri[a]=y`,
      `client_id=${'x'.repeat(8000)}`,
    ];
    for (const q of qs) {
      const res = await fetch(`${f.issuer}/oauth/authorize?${q}`, { redirect: 'manual' });
      expect(res.status, q.slice(0, 80)).toBeGreaterThanOrEqual(300);
      expect(res.status, q.slice(0, 80)).toBeLessThan(500);
      if (res.status === 302) {
        const loc = new URL(res.headers.get('location')!);
        expect(loc.origin + loc.pathname).toBe(f.redirectUri);
        expect(loc.searchParams.get('error')).toBeTruthy();
      }
    }
  });

  it('an EdDSA public key in an alg:none-looking token does not pass (no JWK embedding)', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    const jwk = await exportJWK(publicKey);
    const { tokens } = await signInAndExchange(config, f, ada());
    const forged = await new SignJWT(decodeJwt(tokens.access_token)).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', jwk }).sign(privateKey);
    const r = await postForm(`${f.issuer}/oauth/token/introspect`, { token: forged }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(r.body).toEqual({ active: false });
  });
});
