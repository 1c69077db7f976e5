import { randomUUID } from 'node:crypto';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FRESH_SIGN_IN_SECONDS } from '../../src/account/router.js';
import { sha256 } from '../../src/crypto/hash.js';
import { EVENT_TYPES } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  assign, authorizationUrl, Browser, createApp, createUser, followSignIn, parseForms, totpNow, TOTP_SECRET, type Fixture,
} from '../oauth/helpers.js';
import { Receiver, setVerifier, type VerifiedSet } from '../ssf/receiver.js';
import { accountPage, csrfOf, formFor, passkeySignIn, postJson, registerPasskey, signInToAccount, submitAccountForm } from './helpers.js';
import { SoftAuthenticator } from './soft-authenticator.js';

process.env.GATEHOUSE_SSF_POLL_MS = '20';

const PASSKEY = 'urn:service:acr:passkey';
const PASSKEY_MFA = 'urn:service:acr:passkey_mfa';
const MFA = 'urn:service:acr:mfa';
const PASSWORD = 'correct horse battery staple';

let server: TestServer;
let issuer: string;
let f: Fixture;
let web: { client_id: string; client_secret: string };
let thirdParty: { client_id: string; client_secret: string };
let config: client.Configuration;
let thirdConfig: client.Configuration;
let receiver: Receiver;
let streamAud: string;
let verify: ReturnType<typeof setVerifier>;

async function person(extra: Record<string, unknown> = {}): Promise<{ id: string; email: string }> {
  const email = `p-${randomUUID().slice(0, 8)}@example.com`;
  const u = await createUser(server, { email, password: PASSWORD, name: 'Person Example', ...extra });
  for (const app of [web, thirdParty]) await assign(server, app.client_id, u.id);
  return { id: u.id, email };
}

/** Follows redirects on the issuer until the browser is sent to the application; returns that URL. */
async function toApplication(browser: Browser, res: Response, at: string): Promise<URL> {
  let url = at;
  for (let hop = 0; hop < 10; hop++) {
    expect(res.status, `at ${url}: ${res.status === 200 ? (await res.clone().text()).slice(0, 400) : ''}`).toBeGreaterThanOrEqual(300);
    const next = new URL(res.headers.get('location')!, new URL(url, issuer));
    if (next.origin !== issuer) return next;
    url = next.toString();
    res = await browser.get(url);
  }
  throw new Error('too many redirects');
}

/** Starts an authorization request; returns the flow and the page the issuer sent the browser to. */
async function authorize(browser: Browser, extra: Record<string, string>, cfg = config) {
  const flow = await authorizationUrl(cfg, f, extra);
  const res = await browser.get(flow.url);
  expect(res.status).toBe(302);
  const location = res.headers.get('location')!;
  return { flow, location };
}

async function exchange(flow: { verifier: string; state: string; nonce: string }, landed: URL, cfg = config) {
  return client.authorizationCodeGrant(cfg, landed, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
}

/** A person signed in at /account with one passkey registered from the page. */
async function withPasskey(opts: { userVerified?: boolean; backupEligible?: boolean; totp?: boolean } = {}) {
  const p = await person(opts.totp ? { totp_secret: TOTP_SECRET } : {});
  const browser = new Browser(issuer);
  await signInToAccount(browser, p.email, PASSWORD);
  const auth = new SoftAuthenticator(issuer, opts);
  const res = await registerPasskey(browser, auth, 'Laptop');
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/account?done=passkey-added#passkeys');
  return { ...p, browser, auth };
}

async function setsSince(from: number): Promise<VerifiedSet[]> {
  return Promise.all(receiver.accepted.slice(from).map((push) => verify(push.body, streamAud)));
}

/** Makes the browser's current session look `seconds` old (its last sign-in). */
async function ageSession(userId: string, seconds: number) {
  for (const s of await server.ctx.store.sessions.activeForUser(userId)) {
    await server.ctx.store.sessions.update(s.sid, s.auth_time - seconds, s.amr, s.acr);
  }
}

beforeAll(async () => {
  server = await startTestServer();
  issuer = server.ctx.urls.issuer;
  const redirectUri = 'http://localhost:9/callback';
  web = (await createApp(server, { type: 'web', redirect_uris: [redirectUri] })) as typeof web;
  thirdParty = (await createApp(server, { name: 'Third Party Reader', type: 'web', redirect_uris: [redirectUri], first_party: false })) as typeof web;
  f = { server, issuer, redirectUri } as Fixture;
  const discover = (app: typeof web) =>
    client.discovery(new URL(issuer), app.client_id, app.client_secret, client.ClientSecretBasic(app.client_secret), { execute: [client.allowInsecureRequests] });
  config = await discover(web);
  thirdConfig = await discover(thirdParty);
  verify = setVerifier(server.url);
  receiver = await new Receiver().start();
  const res = await fetch(`${server.url}/v1/ssf/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url }, events_requested: Object.values(EVENT_TYPES) }),
  });
  expect(res.status).toBe(201);
  streamAud = ((await res.json()) as { aud: string }).aud;
});
afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
});

describe('/account: signed in, or to the sign-in page and back', () => {
  it('redirects to the sign-in page and comes back after the password', async () => {
    const p = await person();
    const html = await signInToAccount(new Browser(issuer), p.email, PASSWORD);
    expect(html).toContain(p.email);
    for (const id of ['profile', 'passkeys', 'totp', 'sessions', 'applications']) expect(html).toContain(`id="${id}"`);
  });

  it('is sent with a strict CSP: scripts only from our origin, none inline', async () => {
    const p = await person();
    const browser = new Browser(issuer);
    await signInToAccount(browser, p.email, PASSWORD);
    for (const path of ['/account', '/login']) {
      const res = await browser.get(path);
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline\'; script');
      expect(csp).toContain("default-src 'none'");
      const html = await res.text();
      expect(html).not.toMatch(/<script>|<script [^>]*>[^<]/); // every script is a src, with no body
      for (const src of html.matchAll(/<script src="([^"]+)"/g)) {
        const js = await fetch(new URL(src[1]!, issuer));
        expect(js.status).toBe(200);
        expect(js.headers.get('content-type')).toMatch(/javascript/);
      }
    }
  });

  it('refuses every account form without the right CSRF value (403) and changes nothing', async () => {
    const p = await withPasskey({ totp: true });
    const html = await accountPage(p.browser);
    const forms = parseForms(html);
    expect(forms.length).toBeGreaterThanOrEqual(8);
    for (const form of forms) {
      for (const csrf of [undefined, 'forged-forged-forged-forged-forged-forged']) {
        const values = { ...form.fields, csrf: csrf as string };
        if (csrf === undefined) delete (values as Record<string, string | undefined>).csrf;
        const res = await p.browser.post(form.action, values);
        expect(res.status, form.action).toBe(403);
        expect(await res.text()).toContain('CSRF');
      }
    }
    const options = await postJson(p.browser, '/account/passkeys/options', { csrf: 'forged' });
    expect(options.status).toBe(403);
    // nothing changed: the passkey, TOTP and session are all still there
    const after = await accountPage(p.browser);
    expect(after).toContain('Laptop');
    expect(after).toContain('An authenticator app is set up');
    expect(after).toContain('this browser');
  });
});

describe('passkeys over HTTP (a software authenticator)', () => {
  it('registers several passkeys per person, renames one; the audit trail records each change', async () => {
    const p = await withPasskey();
    const second = new SoftAuthenticator(issuer, { backupEligible: true });
    expect((await registerPasskey(p.browser, second, 'Phone')).status).toBe(303);
    // the same authenticator again: already registered
    const again = await registerPasskey(p.browser, second, 'Phone again');
    expect(again.status).toBe(400);
    expect(await again.text()).toContain('already registered');

    const rename = await submitAccountForm(p.browser, '/account/passkeys/rename', { name: 'Old phone' }, ['id', second.id]);
    expect(rename.status).toBe(303);
    const html = await accountPage(p.browser);
    expect(html).toContain('Laptop');
    expect(html).toContain('Old phone');
    expect(html).toContain('synced');

    const audit = await server.admin('GET', `/audit?kind=account&user_id=${p.id}`);
    expect(audit.body.data.map((r: { action: string }) => r.action)).toEqual(['passkey.rename', 'passkey.register', 'passkey.register']);
    expect(JSON.stringify(audit.body.data)).not.toContain('public_key');
  });

  it('signs in for acr_values=passkey (discoverable): acr and amr in the ID and access tokens', async () => {
    const p = await withPasskey({ userVerified: false });
    const browser = new Browser(issuer);
    const { flow, location } = await authorize(browser, { acr_values: PASSKEY });
    expect(location).toMatch(/^\/login\?request=/);
    const { res } = await passkeySignIn(browser, p.auth, { pageUrl: location });
    const tokens = await exchange(flow, await toApplication(browser, res, '/login/passkey'));
    expect(tokens.claims()).toMatchObject({ sub: p.id, acr: PASSKEY, amr: ['hwk'] });
    expect(decodeJwt(tokens.access_token)).toMatchObject({ acr: PASSKEY, amr: ['hwk'] });
  });

  it('user verification makes passkey_mfa; a synced passkey is swk', async () => {
    const p = await withPasskey({ userVerified: true, backupEligible: true });
    const browser = new Browser(issuer);
    const { flow, location } = await authorize(browser, { acr_values: PASSKEY_MFA });
    const { res } = await passkeySignIn(browser, p.auth, { pageUrl: location });
    const tokens = await exchange(flow, await toApplication(browser, res, '/login/passkey'));
    expect(tokens.claims()).toMatchObject({ acr: PASSKEY_MFA, amr: ['swk', 'user', 'mfa'] });
  });

  it('passkey_mfa without user verification: the one-time code next (step-up, same session); without TOTP unmet', async () => {
    const withCode = await withPasskey({ userVerified: false, totp: true });
    const browser = new Browser(issuer);
    const { flow, location } = await authorize(browser, { acr_values: PASSKEY_MFA });
    const { res } = await passkeySignIn(browser, withCode.auth, { pageUrl: location });
    expect(res.status).toBe(302);
    const otpPage = res.headers.get('location')!;
    expect(otpPage).toMatch(/^\/login\/otp\?request=/);
    const sidBefore = (await server.ctx.store.sessions.activeForUser(withCode.id)).map((s) => s.sid);
    const landed = await followSignIn(browser, new URL(otpPage, issuer).toString(), { email: '', password: '', totpSecret: TOTP_SECRET });
    const tokens = await exchange(flow, landed);
    expect(tokens.claims()).toMatchObject({ acr: PASSKEY_MFA, amr: ['hwk', 'otp', 'mfa'] });
    expect(sidBefore).toContain(tokens.claims()!.sid);

    const without = await withPasskey({ userVerified: false });
    const b2 = new Browser(issuer);
    const second = await authorize(b2, { acr_values: PASSKEY_MFA });
    const { res: r2 } = await passkeySignIn(b2, without.auth, { pageUrl: second.location });
    const back = await toApplication(b2, r2, '/login/passkey');
    expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');
    expect(back.searchParams.get('state')).toBe(second.flow.state);
  });

  it('a person without a passkey asking for passkey: unmet_authentication_requirements after the password', async () => {
    const p = await person();
    const browser = new Browser(issuer);
    const { flow } = await authorize(browser, { acr_values: PASSKEY });
    const back = await followSignIn(browser, flow.url, { email: p.email, password: PASSWORD });
    expect(`${back.origin}${back.pathname}`).toBe(f.redirectUri);
    expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');
    expect(back.searchParams.get('error_description')).toMatch(/passkey/);
    expect(back.searchParams.get('state')).toBe(flow.state);
    expect(back.searchParams.get('iss')).toBe(issuer);
  });

  it('the password first, then the passkey step with allowCredentials of that person', async () => {
    const p = await withPasskey({ userVerified: false });
    const browser = new Browser(issuer);
    const { flow, location } = await authorize(browser, { acr_values: PASSKEY });
    const login = await browser.get(location);
    const afterPassword = await browser.submit(login, { email: p.email, password: PASSWORD }, location);
    expect(afterPassword.status).toBe(302);
    const step = afterPassword.headers.get('location')!;
    expect(step).toMatch(/^\/login\/passkey\?request=/);
    expect(browser.jar.cookies.has('gatehouse_session')).toBe(false); // the password alone made no session
    const { res, options } = await passkeySignIn(browser, p.auth, { pageUrl: step });
    expect(options.allowCredentials.map((c: { id: string }) => c.id)).toEqual([p.auth.id]);
    const tokens = await exchange(flow, await toApplication(browser, res, '/login/passkey'));
    expect(tokens.claims()).toMatchObject({ acr: PASSKEY, amr: ['hwk'] });
  });

  it('email first: the account passkeys; an unknown email or one without passkeys gets a stable stand-in', async () => {
    const p = await withPasskey({ userVerified: true });
    const plain = await person();
    const browser = new Browser(issuer);
    const login = await (await browser.get('/login?return_to=/account')).text();
    const ask = async (email: string) =>
      (await postJson(browser, '/login/passkey/options', { csrf: csrfOf(login), mode: 'button', email })).body.allowCredentials as { id: string }[];
    expect((await ask(p.email)).map((c) => c.id)).toEqual([p.auth.id]);
    const unknown = await ask('nobody-here@example.com');
    const none = await ask(plain.email);
    expect(unknown).toHaveLength(1);
    expect(none).toHaveLength(1);
    expect(unknown[0]!.id).not.toBe(none[0]!.id);
    expect((await ask('nobody-here@example.com'))[0]!.id).toBe(unknown[0]!.id);
    expect((await ask(p.email.toUpperCase()))[0]!.id).toBe(p.auth.id);

    // signing in without a request returns to the page asked for
    const { res } = await passkeySignIn(browser, p.auth, { pageUrl: '/login?return_to=/account', email: p.email });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/account');
  });

  it('challenges are single use, bound to the browser and to the request', async () => {
    const p = await withPasskey({ userVerified: true });
    const browser = new Browser(issuer);
    const { location } = await authorize(browser, { acr_values: PASSKEY });
    const first = await passkeySignIn(browser, p.auth, { pageUrl: location });
    expect(first.res.status).toBe(302);
    // the same answer again (the request is gone; a fresh one does not take the old challenge)
    const next = await authorize(browser, { acr_values: PASSKEY, prompt: 'login' });
    const replay = await browser.post('/login/passkey', { ...first.form, request: new URLSearchParams(next.location.split('?')[1]).get('request')! });
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('expired or was already used');

    // a challenge this browser asked for, answered from another browser
    const other = new Browser(issuer);
    const { location: otherLogin } = await authorize(other, { acr_values: PASSKEY });
    const nextHtml = await (await browser.get(next.location)).text();
    const mine = await postJson(browser, '/login/passkey/options', {
      csrf: csrfOf(nextHtml), request: new URLSearchParams(next.location.split('?')[1]).get('request'), mode: 'button',
    });
    expect(mine.status).toBe(200);
    // the same request and a valid CSRF pair of its own: only the browser binding differs
    const otherHtml = await (await other.get(otherLogin)).text();
    const otherRequest = new URLSearchParams(otherLogin.split('?')[1]).get('request');
    // the other browser has ceremonies of its own (and so its own binding cookie)
    expect((await postJson(other, '/login/passkey/options', { csrf: csrfOf(otherHtml), request: otherRequest, mode: 'button' })).status).toBe(200);
    const foreign = {
      res: await other.post('/login/passkey', {
        csrf: csrfOf(otherHtml),
        request: new URLSearchParams(next.location.split('?')[1]).get('request')!,
        credential: JSON.stringify(p.auth.assert({ challenge: mine.body.challenge, rpId: 'localhost' })),
      }),
    };
    expect(foreign.res.status).toBe(400);
    expect(await foreign.res.text()).toContain('expired or was already used');
    expect(other.jar.cookies.has('gatehouse_session')).toBe(false);

    // a challenge made for one request, used for another
    const b3 = new Browser(issuer);
    const one = await authorize(b3, { acr_values: PASSKEY });
    const two = await authorize(b3, { acr_values: PASSKEY });
    const html = await (await b3.get(one.location)).text();
    const options = await postJson(b3, '/login/passkey/options', { csrf: csrfOf(html), request: new URLSearchParams(one.location.split('?')[1]).get('request'), mode: 'button' });
    const crossed = await b3.post('/login/passkey', {
      csrf: csrfOf(html),
      request: new URLSearchParams(two.location.split('?')[1]).get('request')!,
      credential: JSON.stringify(p.auth.assert(options.body)),
    });
    expect(crossed.status).toBe(400);
    expect(b3.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('a wrong signature is refused and suspends nothing; a counter going backwards on a genuine signature suspends the passkey and emits credential-compromise', async () => {
    const p = await withPasskey({ userVerified: true });
    const browser = new Browser(issuer);
    for (let i = 0; i < 3; i++) {
      const { res } = await passkeySignIn(browser, p.auth, { pageUrl: '/login?return_to=/account' });
      expect(res.status).toBe(302);
    }
    const from = receiver.accepted.length;
    // a forged answer with an old counter: not a clone, just invalid
    const forged = await passkeySignIn(browser, p.auth, {
      pageUrl: '/login?return_to=/account',
      counter: 1,
      tamper: (a) => ({ ...a, response: { ...a.response, signature: a.response.signature.replace(/^.{8}/, 'AAAAAAAA') } }),
    });
    expect(await forged.res.text()).toContain('could not be verified');
    expect((await server.ctx.store.webauthn.get(p.auth.id))!.suspended_at).toBeNull();

    // a genuine signature from a copy of the key whose counter is behind
    const clone = await passkeySignIn(browser, p.auth, { pageUrl: '/login?return_to=/account', counter: 2 });
    expect(await clone.res.text()).toContain('suspended');
    expect((await server.ctx.store.webauthn.get(p.auth.id))!.suspended_at).not.toBeNull();
    // from now on even the right counter is refused
    const after = await passkeySignIn(browser, p.auth, { pageUrl: '/login?return_to=/account', counter: 10 });
    expect(await after.res.text()).toContain('suspended');

    await receiver.waitFor((r) => r.accepted.length >= from + 1);
    const sets = await setsSince(from);
    expect(sets.map((s) => s.type)).toEqual([EVENT_TYPES.credentialCompromise]);
    expect(sets[0]!.event).toMatchObject({ credential_type: 'fido2-platform', initiating_entity: 'system' });
    expect(sets[0]!.claims.sub_id).toEqual({ format: 'iss_sub', iss: issuer, sub: p.id });
    expect(await accountPage(p.browser)).toContain('suspended');
  });

  it('removing a passkey: it no longer signs in, the other sessions it signed in end (session-revoked), "lost" emits credential-compromise', async () => {
    const p = await withPasskey({ userVerified: true });
    // another browser signs in with the passkey and gets a refresh token
    const elsewhere = new Browser(issuer);
    const { flow, location } = await authorize(elsewhere, { acr_values: PASSKEY });
    const { res } = await passkeySignIn(elsewhere, p.auth, { pageUrl: location });
    const tokens = await exchange(flow, await toApplication(elsewhere, res, '/login/passkey'));
    const elsewhereSid = tokens.claims()!.sid as string;

    const from = receiver.accepted.length;
    const removed = await submitAccountForm(p.browser, '/account/passkeys/remove', { lost: '1' }, ['id', p.auth.id]);
    expect(removed.status).toBe(303);
    expect(removed.headers.get('location')).toBe('/account?done=passkey-removed#passkeys');

    await receiver.waitFor((r) => r.accepted.length >= from + 2);
    const sets = await setsSince(from);
    expect(sets.map((s) => s.type).sort()).toEqual([EVENT_TYPES.credentialCompromise, EVENT_TYPES.sessionRevoked].sort());
    expect(sets.find((s) => s.type === EVENT_TYPES.sessionRevoked)!.event).toMatchObject({ sid: elsewhereSid, initiating_entity: 'user' });
    expect(sets.find((s) => s.type === EVENT_TYPES.credentialCompromise)!.event).toMatchObject({ credential_type: 'fido2-platform', initiating_entity: 'user' });

    // the other browser is signed out and its refresh token is dead; this browser stays signed in
    expect((await elsewhere.get('/account')).status).toBe(302);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect((await p.browser.get('/account')).status).toBe(200);

    const again = new Browser(issuer);
    const retry = await passkeySignIn(again, p.auth, { pageUrl: '/login?return_to=/account' });
    expect(retry.res.status).toBe(200);
    expect(await retry.res.text()).toContain('not registered here');
    expect(again.jar.cookies.has('gatehouse_session')).toBe(false);
  });

  it('a passkey request with a 1fa session: the passkey step (same session), or interaction_required for prompt=none', async () => {
    const p = await withPasskey({ userVerified: false });
    // p.browser's session is a password sign-in
    const silent = await authorize(p.browser, { acr_values: PASSKEY, prompt: 'none' });
    const back = new URL(silent.location);
    expect(back.searchParams.get('error')).toBe('interaction_required');

    const sid = (await server.ctx.store.sessions.activeForUser(p.id))[0]!.sid;
    const { flow, location } = await authorize(p.browser, { acr_values: PASSKEY });
    expect(location).toMatch(/^\/login\/passkey\?request=/);
    const { res } = await passkeySignIn(p.browser, p.auth, { pageUrl: location });
    const tokens = await exchange(flow, await toApplication(p.browser, res, '/login/passkey'));
    expect(tokens.claims()).toMatchObject({ sid, acr: PASSKEY, amr: ['hwk'] });
  });

  it('acr_values lists alternatives in order: passkey or mfa, whichever the person has', async () => {
    const totpOnly = await person({ totp_secret: TOTP_SECRET });
    const b1 = new Browser(issuer);
    const { flow } = await authorize(b1, { acr_values: `${PASSKEY} ${MFA}` });
    const landed = await followSignIn(b1, flow.url, { email: totpOnly.email, password: PASSWORD, totpSecret: TOTP_SECRET });
    expect((await exchange(flow, landed)).claims()).toMatchObject({ acr: MFA, amr: ['pwd', 'otp', 'mfa'] });

    const neither = await person();
    const b2 = new Browser(issuer);
    const second = await authorize(b2, { acr_values: `${PASSKEY} ${MFA}` });
    const back = await followSignIn(b2, second.flow.url, { email: neither.email, password: PASSWORD });
    expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');

    // a listed 1fa accepts the password as it always did
    const b3 = new Browser(issuer);
    const third = await authorize(b3, { acr_values: `${PASSKEY} urn:service:acr:1fa` });
    const ok = await followSignIn(b3, third.flow.url, { email: neither.email, password: PASSWORD });
    expect((await exchange(third.flow, ok)).claims()).toMatchObject({ acr: 'urn:service:acr:1fa', amr: ['pwd'] });
  });
});

describe('a fresh sign-in for changing how one signs in', () => {
  it(`after ${FRESH_SIGN_IN_SECONDS / 60} minutes: credential forms are hidden and refused; renaming and sessions still work`, async () => {
    const p = await withPasskey();
    await ageSession(p.id, FRESH_SIGN_IN_SECONDS + 5);
    const html = await accountPage(p.browser);
    expect(html).toContain('sign in again first');
    expect(parseForms(html).map((f) => f.action)).not.toContain('/account/passkeys');
    expect(parseForms(html).map((f) => f.action)).not.toContain('/account/totp/setup');

    const csrf = csrfOf(html);
    for (const [action, extra] of [['/account/passkeys/remove', { id: p.auth.id }], ['/account/totp/setup', {}], ['/account/passkeys', { credential: '{}' }]] as const) {
      const res = await p.browser.post(action, { csrf, ...extra });
      expect(res.status, action).toBe(303);
      expect(res.headers.get('location')).toBe('/account?done=sign-in-again');
    }
    const options = await postJson(p.browser, '/account/passkeys/options', { csrf });
    expect(options.status).toBe(401);
    expect(options.body).toMatchObject({ error: 'login_required', login_url: '/login?return_to=%2Faccount' });
    expect((await server.ctx.store.webauthn.ofUser(p.id))).toHaveLength(1);

    expect((await submitAccountForm(p.browser, '/account/passkeys/rename', { name: 'Renamed' }, ['id', p.auth.id])).status).toBe(303);
    expect(await accountPage(p.browser)).toContain('Renamed');

    // signing in again (here with the passkey) makes it fresh
    const { res } = await passkeySignIn(p.browser, p.auth, { pageUrl: '/login?return_to=/account' });
    expect(res.headers.get('location')).toBe('/account');
    expect(parseForms(await accountPage(p.browser)).map((f) => f.action)).toContain('/account/passkeys');
  });
});

describe('passkey failures from the same address', () => {
  it('throttle the refusals with a growing Retry-After, and never refuse a passkey that verifies', async () => {
    const p = await withPasskey({ userVerified: true });
    // Someone else behind the same address: a passkey this server does not know, more often than the old lockout allowed (20).
    const stranger = new SoftAuthenticator(issuer, {});
    const waits: (string | null)[] = [];
    for (let i = 0; i < 22; i++) {
      const { res } = await passkeySignIn(new Browser(issuer), stranger, { pageUrl: '/login?return_to=/account' });
      expect(res.status === 200 || res.status === 429).toBe(true);
      if (res.status === 429) waits.push(res.headers.get('retry-after'));
    }
    expect(waits.length).toBeGreaterThanOrEqual(2);
    expect(Number(waits.at(-1))).toBeGreaterThan(Number(waits[0]));
    // The owner's passkey, from the same address, still signs in.
    const { res } = await passkeySignIn(new Browser(issuer), p.auth, { pageUrl: '/login?return_to=/account' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/account');
  });
});

describe('TOTP from the account page', () => {
  it('set up with a QR code and the key in text; takes effect only once a code confirms it; the confirming code cannot be replayed', async () => {
    const p = await person();
    const browser = new Browser(issuer);
    await signInToAccount(browser, p.email, PASSWORD);
    const setup = await submitAccountForm(browser, '/account/totp/setup');
    expect(setup.status).toBe(303);
    expect(setup.headers.get('location')).toBe('/account/totp');
    const page = await (await browser.get('/account/totp')).text();
    expect(page).toMatch(/<img class="qr" src="data:image\/svg\+xml;base64,/);
    const secret = /id="totp-secret">([A-Z2-7 ]+)</.exec(page)![1]!.replace(/ /g, '');
    expect(page).toContain(`otpauth://totp/`);
    expect((await server.ctx.store.users.get(p.id))!.has_totp).toBe(false);

    const wrong = await browser.submit(page, { otp: '123456' }, '/account/totp');
    expect(wrong.status).toBe(400);
    expect((await server.ctx.store.users.get(p.id))!.has_totp).toBe(false);

    const code = totpNow(secret);
    const ok = await browser.submit(page, { otp: code }, '/account/totp');
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/account?done=totp-enabled#totp');
    expect((await server.ctx.store.users.get(p.id))!.has_totp).toBe(true);

    // the mfa sign-in: the confirming code is spent, the next one works
    const b2 = new Browser(issuer);
    const { flow } = await authorize(b2, { acr_values: MFA });
    const login = await b2.get(flow.url);
    let res = await b2.get(login.headers.get('location')!);
    res = await b2.submit(res, { email: p.email, password: PASSWORD }, '/login');
    const otpUrl = res.headers.get('location')!;
    const otpPage = await (await b2.get(otpUrl)).text();
    const replay = await b2.submit(otpPage, { otp: code }, otpUrl);
    expect(await replay.text()).toContain('not correct');
    const landed = await followSignIn(b2, new URL(otpUrl, issuer).toString(), { email: '', password: '', totpSecret: secret, totpOffset: 1 });
    expect((await exchange(flow, landed)).claims()).toMatchObject({ acr: MFA, amr: ['pwd', 'otp', 'mfa'] });
  });

  it('turning it off ends the other sessions signed in with a code; "lost" emits credential-compromise (app)', async () => {
    const p = await person({ totp_secret: TOTP_SECRET });
    const browser = new Browser(issuer);
    await signInToAccount(browser, p.email, PASSWORD);
    const other = new Browser(issuer);
    const { flow } = await authorize(other, { acr_values: MFA });
    const landed = await followSignIn(other, flow.url, { email: p.email, password: PASSWORD, totpSecret: TOTP_SECRET });
    const otherSid = (await exchange(flow, landed)).claims()!.sid;

    const from = receiver.accepted.length;
    const res = await submitAccountForm(browser, '/account/totp/remove', { lost: '1' });
    expect(res.headers.get('location')).toBe('/account?done=totp-removed#totp');
    expect((await server.ctx.store.users.get(p.id))!.has_totp).toBe(false);
    await receiver.waitFor((r) => r.accepted.length >= from + 2);
    const sets = await setsSince(from);
    expect(sets.find((s) => s.type === EVENT_TYPES.sessionRevoked)!.event.sid).toBe(otherSid);
    expect(sets.find((s) => s.type === EVENT_TYPES.credentialCompromise)!.event).toMatchObject({ credential_type: 'app' });
    expect((await other.get('/account')).status).toBe(302);
    expect((await browser.get('/account')).status).toBe(200);
  });
});

describe('sessions and consents from the account page', () => {
  it('ends one session, then all others, then everywhere: session-revoked per session, refresh tokens stop', async () => {
    const p = await person();
    const mine = new Browser(issuer);
    await signInToAccount(mine, p.email, PASSWORD);
    const others = [new Browser(issuer), new Browser(issuer), new Browser(issuer)];
    const refresh: string[] = [];
    for (const b of others) {
      const { flow } = await authorize(b, {});
      const tokens = await exchange(flow, await followSignIn(b, flow.url, { email: p.email, password: PASSWORD }));
      refresh.push(tokens.refresh_token!);
    }
    const sids = async () => (await server.ctx.store.sessions.activeForUser(p.id)).map((s) => s.sid);
    expect(await sids()).toHaveLength(4);

    const from = receiver.accepted.length;
    const mineSid = (await server.ctx.store.sessions.findByTokenHash(sha256(mine.jar.cookies.get('gatehouse_session')!)))!.sid;
    const otherSid = (await sids()).find((sid) => sid !== mineSid)!;
    const one = formFor(await accountPage(mine), '/account/sessions/end', ['sid', otherSid]);
    const ended = await mine.post('/account/sessions/end', one.fields);
    expect(ended.status).toBe(303);
    expect(await sids()).toHaveLength(3);

    const rest = await submitAccountForm(mine, '/account/sessions/end-all', {}, ['keep_current', '1']);
    expect(rest.headers.get('location')).toBe('/account?done=sessions-ended#sessions');
    expect(await sids()).toHaveLength(1);
    await receiver.waitFor((r) => r.accepted.length >= from + 3);
    const sets = await setsSince(from);
    expect(sets.map((s) => s.type)).toEqual([EVENT_TYPES.sessionRevoked, EVENT_TYPES.sessionRevoked, EVENT_TYPES.sessionRevoked]);
    for (const s of sets) expect(s.event.initiating_entity).toBe('user');
    for (const token of refresh) await expect(client.refreshTokenGrant(config, token)).rejects.toMatchObject({ error: 'invalid_grant' });

    const everywhere = await mine.post('/account/sessions/end-all', { csrf: csrfOf(await accountPage(mine)) });
    expect(everywhere.status).toBe(200);
    expect(await everywhere.text()).toContain('signed out');
    expect(mine.jar.cookies.has('gatehouse_session')).toBe(false);
    expect(await sids()).toHaveLength(0);
  });

  it('lists the applications the person allowed; withdrawing ends their refresh tokens and asks for consent again', async () => {
    const p = await person();
    const browser = new Browser(issuer);
    const flow = await authorizationUrl(thirdConfig, f, { scope: 'openid email' });
    const landed = await followSignIn(browser, flow.url, { email: p.email, password: PASSWORD, consent: 'approve' });
    const tokens = await exchange(flow, landed, thirdConfig);
    expect(tokens.refresh_token).toBeTruthy();

    const html = await accountPage(browser);
    expect(html).toContain('Third Party Reader');
    const res = await submitAccountForm(browser, '/account/consents/withdraw', {}, ['client_id', thirdParty.client_id]);
    expect(res.headers.get('location')).toBe('/account?done=consent-withdrawn#applications');
    expect(await accountPage(browser)).not.toContain('Third Party Reader');
    await expect(client.refreshTokenGrant(thirdConfig, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });

    const again = await authorizationUrl(thirdConfig, f, { scope: 'openid email' });
    const r = await browser.get(again.url);
    expect(r.headers.get('location')).toMatch(/^\/consent\?request=/);
    const audit = await server.admin('GET', `/audit?kind=account&user_id=${p.id}`);
    expect(audit.body.data[0]).toMatchObject({ action: 'consent.withdraw', resource: thirdParty.client_id });
  });

  it('saves the display name; an empty one is a 400 with a message', async () => {
    const p = await person();
    const browser = new Browser(issuer);
    await signInToAccount(browser, p.email, PASSWORD);
    expect((await submitAccountForm(browser, '/account/profile', { name: 'Ada Example' })).status).toBe(303);
    expect((await server.ctx.store.users.get(p.id))!.name).toBe('Ada Example');
    const bad = await submitAccountForm(browser, '/account/profile', { name: '   ' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('Enter a name');
  });
});

