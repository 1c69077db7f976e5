import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';
import {
  assign, authorizationUrl, basic, Browser, createApp, discover, followSignIn, parseForms, postForm,
  signInAndExchange, startFixture, type Fixture,
} from '../oauth/helpers.js';

/** What a browser sees, and the prompt / max_age / acr_values parameters. */
let f: Fixture;
let third: { client_id: string; client_secret: string };
let thirdConfig: client.Configuration;

beforeAll(async () => {
  f = await startFixture();
  third = (await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], first_party: false })) as typeof third;
  await assign(f.server, third.client_id, f.user.id);
  thirdConfig = await discover(f, third);
});
afterAll(() => f.server.stop());

const ada = () => ({ email: f.user.email, password: f.user.password });

/** Follows redirects on the issuer until a page (200) or a redirect away. */
async function pageOrExit(b: Browser, url: string) {
  let res = await b.get(url);
  let at = url;
  while (res.status >= 300 && res.status < 400) {
    const next = new URL(res.headers.get('location')!, at);
    if (next.origin !== new URL(f.issuer).origin) return { exit: next };
    at = next.toString();
    res = await b.get(at);
  }
  return { res, at, html: await res.text() };
}

describe('Sign-in pages: consent', () => {
  it('a third-party application shows a consent form listing the scopes with approve and deny', async () => {
    const flow = await authorizationUrl(thirdConfig, f, { scope: 'openid email' });
    const b = new Browser(f.issuer);
    const login = await pageOrExit(b, flow.url);
    const afterLogin = await b.submit(login.html!, ada(), login.at!);
    const consent = await pageOrExit(b, new URL(afterLogin.headers.get('location')!, f.issuer).toString());
    expect(consent.res!.status).toBe(200);
    const forms = parseForms(consent.html!);
    expect(forms).toHaveLength(1);
    expect(forms[0]!.buttons).toEqual(expect.arrayContaining([{ name: 'decision', value: 'approve' }, { name: 'decision', value: 'deny' }]));
    expect(consent.html).toContain('email');
    const denied = await b.submit(consent.html!, { decision: 'deny' }, consent.at!);
    const loc = new URL(denied.headers.get('location')!);
    expect(loc.searchParams.get('error')).toBe('access_denied');
    expect(loc.searchParams.get('state')).toBe(flow.state);
  });

  it('approve gives a code; prompt=consent asks again; a first-party app never asks', async () => {
    const b = new Browser(f.issuer);
    const first = await signInAndExchange(thirdConfig, f, { ...ada(), consent: 'approve' }, { scope: 'openid email' }, b);
    expect(first.tokens.access_token).toBeTruthy();
    const again = await authorizationUrl(thirdConfig, f, { scope: 'openid email', prompt: 'consent' });
    const page = await pageOrExit(b, again.url);
    expect(page.res?.status).toBe(200);
    expect(parseForms(page.html!)[0]!.buttons.some((x) => x.name === 'decision')).toBe(true);
    const firstParty = await authorizationUrl(await discover(f, f.web), f);
    const direct = await pageOrExit(b, firstParty.url);
    expect(direct.exit?.searchParams.get('code')).toBeTruthy();
  });
});

describe('Sign-in pages: prompt, max_age, acr_values', () => {
  it('prompt=login and max_age=0 ask for the password again; auth_time moves on', async () => {
    const config = await discover(f, f.web);
    const b = new Browser(f.issuer);
    const first = await signInAndExchange(config, f, ada(), {}, b);
    const extras: Record<string, string>[] = [{ prompt: 'login' }, { max_age: '0' }];
    for (const extra of extras) {
      const flow = await authorizationUrl(config, f, extra);
      const page = await pageOrExit(b, flow.url);
      expect(page.res?.status, JSON.stringify(extra)).toBe(200);
      expect(parseForms(page.html!)[0]!.inputs).toEqual(expect.arrayContaining(['email', 'password']));
    }
    const fresh = await signInAndExchange(config, f, ada(), { prompt: 'login' }, b);
    expect(decodeJwt(fresh.tokens.id_token!).auth_time).toBeGreaterThanOrEqual(decodeJwt(first.tokens.id_token!).auth_time as number);
  });

  it('acr_values=urn:service:acr:mfa asks for the otp and yields acr mfa', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.mfaUser.email, password: f.mfaUser.password, totpSecret: f.mfaUser.totp }, { acr_values: 'urn:service:acr:mfa' });
    expect(tokens.claims()!.acr).toBe('urn:service:acr:mfa');
  });

  it('acr_values=urn:service:acr:mfa for a person without a second factor: unmet_authentication_requirements', async () => {
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { acr_values: 'urn:service:acr:mfa' });
    const cb = await followSignIn(new Browser(f.issuer), flow.url, ada());
    expect(cb.searchParams.get('error')).toBe('unmet_authentication_requirements');
    expect(cb.searchParams.get('state')).toBe(flow.state);
  });
});

describe('Token endpoint: insufficient_user_authentication', () => {
  it('after the password is marked compromised, a refresh of a password sign-in is refused', async () => {
    const u = await f.server.admin('POST', '/users', { email: 'cc@example.com', password: 'pw-cc-1234567890', name: 'CC' });
    await assign(f.server, f.web.client_id, u.body.id);
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: 'cc@example.com', password: 'pw-cc-1234567890' });
    expect((await f.server.admin('POST', `/users/${u.body.id}/credential-compromise`, { credential_type: 'password' })).status).toBe(204);
    const r = await postForm(`${f.issuer}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect([r.status, r.body.error]).toEqual([401, 'insufficient_user_authentication']);
  });
});

describe('Session cookie flags with an https issuer', () => {
  it('is Secure, HttpOnly and SameSite=Lax', async () => {
    const server = await startTestServer({ env: { GATEHOUSE_ISSUER: 'https://id.example.test' } });
    try {
      const app = await server.admin('POST', '/applications', { name: 'w', type: 'web', redirect_uris: ['https://app.example/cb'] });
      const u = await server.admin('POST', '/users', { email: 'sec@example.com', password: 'pw-secure-123456', name: 'S' });
      await server.admin('PUT', `/applications/${app.body.client_id}/assignments/${u.body.id}`);
      const b = new Browser(server.url);
      const q = new URLSearchParams({ client_id: app.body.client_id, redirect_uri: 'https://app.example/cb', response_type: 'code' });
      let res = await b.get(`${server.url}/oauth/authorize?${q}`);
      let at = `${server.url}/oauth/authorize?${q}`;
      while (res.status === 302 || res.status === 303) {
        const next = new URL(res.headers.get('location')!, at);
        at = `${server.url}${next.pathname}${next.search}`;
        res = await b.get(at);
      }
      const signIn = await b.submit(await res.text(), { email: 'sec@example.com', password: 'pw-secure-123456' }, at);
      expect(signIn.status).toBeGreaterThanOrEqual(300);
      const session = b.jar.setCookieHeaders.filter((h) => !/max-age=0/i.test(h));
      expect(session.length).toBeGreaterThan(0);
      for (const h of session) {
        expect(h).toMatch(/;\s*Secure/i);
        expect(h).toMatch(/;\s*HttpOnly/i);
        expect(h).toMatch(/;\s*SameSite=Lax/i);
      }
    } finally {
      await server.stop();
    }
  });
});
