import * as client from 'openid-client';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assign, authorizationUrl, basic, Browser, createApp, createUser, discover, followSignIn, postForm,
  signInAndExchange, startFixture, type Fixture,
} from './helpers.js';

let f: Fixture;
let tokenUrl: string;
const auth = () => ({ authorization: basic(f.web.client_id, f.web.client_secret) });

beforeAll(async () => {
  f = await startFixture();
  tokenUrl = `${f.issuer}/oauth/token`;
});
afterAll(() => f.server.stop());

/** Signs in and returns the callback URL and the PKCE verifier, without exchanging. */
async function codeFor(app: { client_id: string; client_secret?: string }, extra: Record<string, string> = {}) {
  const config = await discover(f, app);
  const flow = await authorizationUrl(config, f, extra);
  const callback = await followSignIn(new Browser(f.issuer), flow.url, { email: f.user.email, password: f.user.password });
  return { code: callback.searchParams.get('code')!, verifier: flow.verifier, config, flow, callback };
}

describe('authorize errors (the description table)', () => {
  const q = (params: Record<string, string>) => `${f.issuer}/oauth/authorize?${new URLSearchParams(params)}`;
  const pkce = { code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };

  it('unknown client_id: a 401 page with invalid_client, no redirect', async () => {
    const res = await fetch(q({ client_id: 'nope', redirect_uri: f.redirectUri, ...pkce }), { redirect: 'manual' });
    expect(res.status).toBe(401);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(await res.text()).toContain('invalid_client');
  });

  it('missing or unregistered redirect_uri: a 400 page with invalid_request, no redirect', async () => {
    for (const params of [{ client_id: f.web.client_id }, { client_id: f.web.client_id, redirect_uri: 'https://evil.example/cb' }] as Record<string, string>[]) {
      const res = await fetch(q({ ...params, ...pkce, state: 'x' }), { redirect: 'manual' });
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('invalid_request');
    }
  });

  it('anything else: redirect with error, error_description and state', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ client_id: f.spa.client_id }, 'invalid_request'], // public app without PKCE
      [{ client_id: f.web.client_id, code_challenge: pkce.code_challenge, code_challenge_method: 'plain' }, 'invalid_request'],
      [{ client_id: f.web.client_id, ...pkce, response_type: 'token' }, 'unsupported_response_type'],
      [{ client_id: f.web.client_id, ...pkce, prompt: 'sometimes' }, 'invalid_request'],
      [{ client_id: f.web.client_id, ...pkce, max_age: '-1' }, 'invalid_request'],
      [{ client_id: f.web.client_id, ...pkce, resource: 'https://unknown.example/api' }, 'invalid_target'],
      [{ client_id: f.web.client_id, ...pkce, acr_values: 'urn:example:acr:not-offered' }, 'unmet_authentication_requirements'],
      [{ client_id: f.web.client_id, ...pkce, prompt: 'none' }, 'login_required'],
    ];
    for (const [params, error] of cases) {
      const res = await fetch(q({ redirect_uri: f.redirectUri, state: 'st-1', ...params }), { redirect: 'manual' });
      expect(res.status, error).toBe(302);
      const to = new URL(res.headers.get('location')!);
      expect(`${to.origin}${to.pathname}`).toBe(f.redirectUri);
      expect(to.searchParams.get('error')).toBe(error);
      expect(to.searchParams.get('error_description')).toBeTruthy();
      expect(to.searchParams.get('state')).toBe('st-1');
      expect(to.searchParams.get('iss')).toBe(f.issuer);
    }
  });

  it('a state too long to accept is refused without being echoed: the redirect stays a size clients read', async () => {
    for (const state of ['s'.repeat(2049), 's'.repeat(40_000)]) {
      const res = await fetch(`${f.issuer}/oauth/authorize`, {
        method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: f.web.client_id, redirect_uri: f.redirectUri, response_type: 'code', ...pkce, state }),
      });
      expect(res.status).toBe(302);
      const location = res.headers.get('location')!;
      expect(location.length).toBeLessThan(1000);
      const to = new URL(location);
      expect(to.searchParams.get('error')).toBe('invalid_request');
      expect(to.searchParams.get('state')).toBeNull();
    }
    // At the limit, the state is accepted and goes back with an error as usual.
    const res = await fetch(q({ client_id: f.web.client_id, redirect_uri: f.redirectUri, ...pkce, prompt: 'sometimes', state: 's'.repeat(2048) }), { redirect: 'manual' });
    expect(new URL(res.headers.get('location')!).searchParams.get('state')).toBe('s'.repeat(2048));
  });

  it('scope defaults to openid', async () => {
    const { code, verifier } = await codeFor(f.web, { scope: '' });
    const r = await postForm(tokenUrl, { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri, code_verifier: verifier }, auth());
    expect(r.body.scope).toBe('openid');
    expect(r.body.id_token).toBeTruthy();
  });
});

describe('token endpoint errors (the description table)', () => {
  it('the response carries Cache-Control: no-store', async () => {
    const { code, verifier } = await codeFor(f.web);
    const r = await postForm(tokenUrl, { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri, code_verifier: verifier }, auth());
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  it('client_secret_post and client_secret_basic with URL-encoded credentials both authenticate', async () => {
    const odd = await createApp(f.server, { type: 'web', client_id: 'odd:client@x', client_secret: 'a secret with spaces & symbols +/=% that is long', redirect_uris: [f.redirectUri] });
    await assign(f.server, odd.client_id, f.user.id);
    const a = await codeFor(odd);
    const basicRes = await postForm(tokenUrl, { grant_type: 'authorization_code', code: a.code, redirect_uri: f.redirectUri, code_verifier: a.verifier }, { authorization: basic(odd.client_id, odd.client_secret!) });
    expect(basicRes.status).toBe(200);
    const b = await codeFor(odd);
    const postRes = await postForm(tokenUrl, { grant_type: 'authorization_code', code: b.code, redirect_uri: f.redirectUri, code_verifier: b.verifier, client_id: odd.client_id, client_secret: odd.client_secret! });
    expect(postRes.status).toBe(200);
  });

  it('invalid_client: unknown client, missing or wrong secret (401)', async () => {
    const cases = [
      [{ grant_type: 'client_credentials', client_id: 'nope', client_secret: 'x' }, {}],
      [{ grant_type: 'client_credentials', client_id: f.web.client_id }, {}],
      [{ grant_type: 'client_credentials' }, { authorization: basic(f.web.client_id, 'wrong') }],
    ] as const;
    for (const [form, headers] of cases) {
      const r = await postForm(tokenUrl, form as Record<string, string>, headers as Record<string, string>);
      expect(r.status).toBe(401);
      expect(r.body.error).toBe('invalid_client');
    }
  });

  it('unsupported_grant_type and a missing grant_type', async () => {
    const r = await postForm(tokenUrl, { grant_type: 'password' }, auth());
    expect([r.status, r.body.error]).toEqual([400, 'unsupported_grant_type']);
    const m = await postForm(tokenUrl, {}, auth());
    expect([m.status, m.body.error]).toEqual([400, 'invalid_request']);
  });

  it('unauthorized_client: client_credentials from an application not of type m2m', async () => {
    const r = await postForm(tokenUrl, { grant_type: 'client_credentials' }, auth());
    expect([r.status, r.body.error]).toEqual([400, 'unauthorized_client']);
  });

  it('invalid_grant: the verifier does not match', async () => {
    const { code } = await codeFor(f.web);
    const r = await postForm(tokenUrl, { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri, code_verifier: 'x'.repeat(43) }, auth());
    expect([r.status, r.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('invalid_grant: a different redirect_uri or another client', async () => {
    const a = await codeFor(f.web);
    const r = await postForm(tokenUrl, { grant_type: 'authorization_code', code: a.code, redirect_uri: 'http://localhost:9/other', code_verifier: a.verifier }, auth());
    expect(r.body.error).toBe('invalid_grant');
    const b = await codeFor(f.web);
    const r2 = await postForm(tokenUrl, { grant_type: 'authorization_code', code: b.code, redirect_uri: f.redirectUri, code_verifier: b.verifier, client_id: f.spa.client_id });
    expect(r2.body.error).toBe('invalid_grant');
  });

  it('code state table: used once; a second exchange fails and revokes the tokens issued from it', async () => {
    const { code, verifier } = await codeFor(f.web);
    const form = { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri, code_verifier: verifier };
    const first = await postForm(tokenUrl, form, auth());
    expect(first.status).toBe(200);
    const second = await postForm(tokenUrl, form, auth());
    expect([second.status, second.body.error]).toEqual([400, 'invalid_grant']);
    const refresh = await postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token }, auth());
    expect(refresh.body.error).toBe('invalid_grant');
  });

  it('code state table: an expired code fails with invalid_grant', async () => {
    const { code, verifier } = await codeFor(f.web);
    await f.server.ctx.store.sql.run('UPDATE oauth_codes SET expires_at = expires_at - 301');
    const r = await postForm(tokenUrl, { grant_type: 'authorization_code', code, redirect_uri: f.redirectUri, code_verifier: verifier }, auth());
    expect([r.status, r.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('access_denied: the assignment is checked again at every issue', async () => {
    const person = await createUser(f.server, { email: 'kim@example.com', password: 'kim password long', name: 'Kim' });
    await assign(f.server, f.web.client_id, person.id);
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f);
    const cb = await followSignIn(new Browser(f.issuer), flow.url, { email: 'kim@example.com', password: 'kim password long' });
    const tokens = await client.authorizationCodeGrant(config, cb, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
    expect((await f.server.admin('DELETE', `/applications/${f.web.client_id}/assignments/${person.id}`)).status).toBe(204);
    const r = await postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth());
    expect([r.status, r.body.error]).toEqual([403, 'access_denied']);
  });
});

describe('refresh token state table', () => {
  it('current → used: a new token is returned; the used one again fails and revokes the whole family', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const r1 = await client.refreshTokenGrant(config, tokens.refresh_token!);
    const replay = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth());
    expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    // the current token of the family is revoked too
    await expect(client.refreshTokenGrant(config, r1.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('current → revoked by the revoke endpoint', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    await client.tokenRevocation(config, tokens.refresh_token!);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('scope may not widen (invalid_scope)', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { scope: 'openid email' });
    const r = await postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, scope: 'openid email profile' }, auth());
    expect([r.status, r.body.error]).toEqual([400, 'invalid_scope']);
    // the token was not consumed by the refused request
    expect((await client.refreshTokenGrant(config, tokens.refresh_token!)).access_token).toBeTruthy();
  });

  it('20 parallel refreshes with one token: exactly one succeeds', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => postForm(tokenUrl, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth())),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.body.error === 'invalid_grant')).toHaveLength(19);
  });

  it('an application without refresh_tokens gets none', async () => {
    const noRefresh = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], refresh_tokens: false });
    await assign(f.server, noRefresh.client_id, f.user.id);
    const config = await discover(f, noRefresh);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password }, { scope: 'openid offline_access' });
    expect(tokens.refresh_token).toBeUndefined();
  });
});

describe('client credentials', () => {
  it('an m2m app gets a token for itself, or for an API it holds a grant on; invalid_target otherwise', async () => {
    const m2m = await createApp(f.server, { type: 'm2m', redirect_uris: [] });
    const api = await createApp(f.server, { type: 'api', redirect_uris: [] });
    const otherApi = await createApp(f.server, { type: 'api', redirect_uris: [] });
    expect((await f.server.admin('PUT', `/applications/${m2m.client_id}/grants/${api.client_id}`, { scopes: ['read'] })).status).toBe(204);
    const config = await discover(f, m2m);
    const jwks = createRemoteJWKSet(new URL(`${f.issuer}/.well-known/jwks.json`));

    const own = await client.clientCredentialsGrant(config, { scope: 'read write' });
    const ownRaw = await postForm(tokenUrl, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret!) });
    expect(Object.keys(ownRaw.body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(ownRaw.headers.get('cache-control')).toBe('no-store');
    const a = await jwtVerify(own.access_token, jwks, { issuer: f.issuer, audience: m2m.client_id, typ: 'at+jwt' });
    expect(a.payload).toMatchObject({ sub: m2m.client_id, client_id: m2m.client_id, scope: 'read write' });

    const forApi = await client.clientCredentialsGrant(config, { resource: api.client_id });
    await jwtVerify(forApi.access_token, jwks, { issuer: f.issuer, audience: api.client_id });

    for (const resource of [otherApi.client_id, 'not-an-app']) {
      const r = await postForm(tokenUrl, { grant_type: 'client_credentials', resource }, { authorization: basic(m2m.client_id, m2m.client_secret!) });
      expect([r.status, r.body.error]).toEqual([400, 'invalid_target']);
    }
  });

  it('failed client authentications are rate limited (429 rate_limited)', async () => {
    const m2m = await createApp(f.server, { type: 'm2m', redirect_uris: [] });
    let last = 0;
    for (let i = 0; i < 11; i++) {
      last = (await postForm(tokenUrl, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, 'wrong') })).status;
    }
    expect(last).toBe(429);
    const ok = await postForm(tokenUrl, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret!) });
    expect([ok.status, ok.body.error]).toEqual([429, 'rate_limited']);
  });
});
