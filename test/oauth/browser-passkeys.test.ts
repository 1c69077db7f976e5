import { join } from 'node:path';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { Secret, TOTP } from 'otpauth';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  finishFlow, hasChromium, launchChromium, passkeyBrowser, passwordSignIn, screenshotDir, startCallbackServer, startFlow,
  waitForText, type PasskeyBrowser, type VirtualCredential,
} from '../account/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assign, createApp, createUser, TOTP_SECRET } from './helpers.js';

const PASSKEY = 'urn:service:acr:passkey';
const PASSKEY_MFA = 'urn:service:acr:passkey_mfa';
const MFA = 'urn:service:acr:mfa';

const totpCode = (secret: string, offsetSteps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), digits: 6, period: 30 }).generate({ timestamp: Date.now() + offsetSteps * 30_000 });

describe.skipIf(!hasChromium)('passkeys in a real browser (headless Chromium, CDP virtual authenticator)', () => {
  let server: TestServer;
  let rp: { url: string; close(): void };
  let redirectUri: string;
  let chromium: Browser;
  let config: client.Configuration;
  let shots: string;

  beforeAll(async () => {
    server = await startTestServer();
    rp = await startCallbackServer();
    redirectUri = `${rp.url}/callback`;
    chromium = await launchChromium();
    const app = await createApp(server, { name: 'Acme Portal', type: 'web', redirect_uris: [redirectUri] });
    config = await client.discovery(new URL(server.ctx.urls.issuer), app.client_id, app.client_secret, undefined, {
      execute: [client.allowInsecureRequests],
    });
    for (const [email, name] of [['pat@example.com', 'Pat Example'], ['quinn@example.com', 'Quinn Example'], ['remy@example.com', 'Remy Example'], ['sam@example.com', 'Sam Example']]) {
      const totp = email === 'sam@example.com' ? { totp_secret: TOTP_SECRET } : {};
      const user = await createUser(server, { email, password: `${name} password`, name, ...totp });
      await assign(server, app.client_id, user.id);
    }
    shots = screenshotDir(server);
  });
  afterAll(async () => {
    await chromium?.close();
    rp?.close();
    await server?.stop();
  });

  /** Opens an authorization request in the browser; returns the flow. */
  async function authorize(b: PasskeyBrowser, extra: Record<string, string>) {
    const flow = await startFlow(config, redirectUri, extra);
    await b.page.goto(flow.url);
    return flow;
  }

  /**
   * Presses the passkey button and waits until the browser is back at the application. With an
   * email typed first the prompt lists that account's passkeys (Chromium's virtual authenticator
   * without user verification answers only such a prompt, not a discoverable one).
   */
  async function passkeyToCallback(b: PasskeyBrowser, email?: string) {
    if (email) await b.page.fill('#email', email);
    await Promise.all([b.page.waitForURL(`${redirectUri}**`), b.page.click('#passkey-button')]);
    return b.page.url();
  }

  /** Signs in at /account with the password and adds a passkey through the page. */
  async function registerPasskey(b: PasskeyBrowser, email: string, password: string, name: string) {
    await b.page.goto(`${server.url}/account`);
    expect(new URL(b.page.url()).pathname).toBe('/login');
    await passwordSignIn(b.page, email, password);
    await addPasskey(b, name);
  }

  /** Adds a passkey on the account page of a signed-in browser. */
  async function addPasskey(b: PasskeyBrowser, name: string) {
    if (new URL(b.page.url()).pathname !== '/account') await b.page.goto(`${server.url}/account`);
    expect(new URL(b.page.url()).pathname).toBe('/account');
    await b.page.fill('#passkey-name', name);
    await Promise.all([b.page.waitForURL('**/account?done=passkey-added**'), b.page.click('#add-passkey-button')]);
    expect(await b.page.locator('.passkey-name', { hasText: name }).count()).toBe(1);
  }

  describe('one person, one passkey, every strength', () => {
    let pat: PasskeyBrowser;
    let laptop: VirtualCredential;
    beforeAll(async () => {
      pat = await passkeyBrowser(chromium, { userVerified: true });
    });
    afterAll(() => pat?.close());

    it('registers a passkey from /account (resident key on the authenticator, listed on the page)', async () => {
      await registerPasskey(pat, 'pat@example.com', 'Pat Example password', 'Work laptop');
      const creds = await pat.credentials();
      expect(creds).toHaveLength(1);
      expect(creds[0]!.isResidentCredential).toBe(true);
      expect(await pat.page.textContent('#passkeys')).toContain('this device only');
    });

    it('the sign-in page for acr_values=passkey, with the passkey prompt: screenshots', async () => {
      const flow = await authorize(pat, { acr_values: PASSKEY, prompt: 'login', login_hint: 'pat@example.com' });
      expect(new URL(pat.page.url()).pathname).toBe('/login');
      await pat.page.locator('#passkey-button').waitFor({ state: 'visible' });
      expect(await pat.page.textContent('main')).toContain('Acme Portal asks you to sign in with a passkey');
      await pat.page.screenshot({ path: join(shots, 'sign-in.png'), fullPage: true });

      // The prompt state: the authenticator waits for a touch that does not come.
      await pat.setPresence(false);
      await pat.page.fill('#email', '');
      await pat.page.click('#passkey-button');
      await waitForText(pat.page, '#passkey-status', /Follow the prompt/);
      expect(await pat.page.isDisabled('#passkey-button')).toBe(true);
      await pat.page.screenshot({ path: join(shots, 'passkey-prompt.png'), fullPage: true });
      await pat.setPresence(true);
      void flow;
    });

    it('signs in with the passkey (discoverable) for acr_values=passkey: acr and amr in both tokens', async () => {
      const flow = await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
      const landed = await passkeyToCallback(pat);
      const tokens = await finishFlow(config, flow, landed);
      const id = tokens.claims()!;
      // user verification on: a passkey with UV is two factors on its own
      expect(id.acr).toBe(PASSKEY_MFA);
      expect(id.amr).toEqual(['hwk', 'user', 'mfa']);
      const at = decodeJwt(tokens.access_token);
      expect(at.acr).toBe(PASSKEY_MFA);
      expect(at.amr).toEqual(['hwk', 'user', 'mfa']);
      expect(id.sid).toBe(at.sid);
    });

    it('user verification on: passkey_mfa straight from the passkey', async () => {
      const flow = await authorize(pat, { acr_values: PASSKEY_MFA, prompt: 'login' });
      const tokens = await finishFlow(config, flow, await passkeyToCallback(pat));
      expect(tokens.claims()!.acr).toBe(PASSKEY_MFA);
      expect(tokens.claims()!.amr).toEqual(['hwk', 'user', 'mfa']);
    });

    it('email first: the typed email narrows the prompt to that account (allowCredentials)', async () => {
      const flow = await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
      await pat.page.fill('#email', 'pat@example.com');
      const tokens = await finishFlow(config, flow, await passkeyToCallback(pat));
      expect(tokens.claims()!.email).toBe('pat@example.com');

      // another account's email: the prompt offers none of this authenticator's passkeys
      await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
      await pat.page.fill('#email', 'remy@example.com');
      await pat.page.click('#passkey-button');
      await waitForText(pat.page, '#passkey-status', /closed or timed out|failed/);
      expect(new URL(pat.page.url()).pathname).toBe('/login');
    });

    it('max_age is honoured with passkeys: an old sign-in asks for the passkey again', async () => {
      const sid = (await server.ctx.store.sessions.activeForUser((await server.ctx.store.users.getByEmail('pat@example.com'))!.id)).at(-1)!;
      await server.ctx.store.sessions.update(sid.sid, sid.auth_time - 120, sid.amr, sid.acr);
      const flow = await authorize(pat, { acr_values: PASSKEY, max_age: '60' });
      expect(new URL(pat.page.url()).pathname).toBe('/login');
      const tokens = await finishFlow(config, flow, await passkeyToCallback(pat));
      expect(Math.floor(Date.now() / 1000) - (tokens.claims()!.auth_time as number)).toBeLessThan(30);
    });

    it('user verification failing on the device: no sign-in, the page says so', async () => {
      await pat.setUserVerified(false);
      try {
        await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
        await pat.page.click('#passkey-button');
        await waitForText(pat.page, '#passkey-status', /closed or timed out/);
        expect(new URL(pat.page.url()).pathname).toBe('/login');
      } finally {
        await pat.setUserVerified(true);
      }
    });

    it('a second passkey, on an authenticator without user verification: acr passkey; passkey_mfa out of reach without TOTP', async () => {
      laptop = (await pat.credentials())[0]!;
      await pat.replaceAuthenticator({ hasUserVerification: false });
      await addPasskey(pat, 'Security key');
      expect(await pat.page.locator('.passkey-item').count()).toBe(2);

      const flow = await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
      const tokens = await finishFlow(config, flow, await passkeyToCallback(pat, 'pat@example.com'));
      expect(tokens.claims()!.acr).toBe(PASSKEY);
      expect(tokens.claims()!.amr).toEqual(['hwk']);
      expect(decodeJwt(tokens.access_token).amr).toEqual(['hwk']);

      const mfa = await authorize(pat, { acr_values: PASSKEY_MFA, prompt: 'login' });
      const back = new URL(await passkeyToCallback(pat, 'pat@example.com'));
      expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');
      expect(back.searchParams.get('state')).toBe(new URL(mfa.url).searchParams.get('state'));
    });

    it('the account page, on a desktop and a phone: screenshots', async () => {
      await pat.page.goto(`${server.url}/account`);
      expect(await pat.page.textContent('#passkeys')).toContain('Work laptop');
      await pat.page.screenshot({ path: join(shots, 'account.png'), fullPage: true });
      const phone = await pat.context.newPage();
      await phone.setViewportSize({ width: 390, height: 844 });
      await phone.goto(`${server.url}/account`);
      // nothing wider than the screen
      expect(await phone.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await phone.screenshot({ path: join(shots, 'account-phone.png'), fullPage: true });
      await phone.close();
    });

    it('a removed passkey no longer signs in; with none left, the passkey strength is out of reach', async () => {
      await pat.page.goto(`${server.url}/account`);
      for (const name of ['Work laptop', 'Security key']) {
        await Promise.all([
          pat.page.waitForURL('**/account?done=passkey-removed**'),
          pat.page.click(`.passkey-item:has-text("${name}") button:has-text("Remove")`),
        ]);
      }
      expect(await pat.page.textContent('#passkey-list')).toContain('no passkeys');
      // The laptop's passkey is still on the device (back on an authenticator with user verification).
      await pat.replaceAuthenticator({});
      await pat.importCredential(laptop);

      await authorize(pat, { acr_values: PASSKEY, prompt: 'login' });
      await Promise.all([pat.page.waitForURL('**/login/passkey'), pat.page.click('#passkey-button')]);
      expect(await pat.page.textContent('main')).toContain('This passkey is not registered here');
      await passwordSignIn(pat.page, 'pat@example.com', 'Pat Example password');
      const back = new URL(pat.page.url());
      expect(`${back.origin}${back.pathname}`).toBe(redirectUri);
      expect(back.searchParams.get('error')).toBe('unmet_authentication_requirements');
    });
  });

  it('autofill (conditional mediation): the passkey offered in the email field signs in', async () => {
    const remy = await passkeyBrowser(chromium, { autofill: true });
    try {
      await registerPasskey(remy, 'remy@example.com', 'Remy Example password', 'Desktop');
      // The virtual authenticator picks the passkey from the autofill at once, as a person would.
      const flow = await startFlow(config, redirectUri, { acr_values: PASSKEY, prompt: 'login' });
      await Promise.all([remy.page.waitForURL(`${redirectUri}**`), remy.page.goto(flow.url)]);
      const tokens = await finishFlow(config, flow, remy.page.url());
      expect(tokens.claims()!.email).toBe('remy@example.com');
      expect(tokens.claims()!.amr).toEqual(['hwk', 'user', 'mfa']);
    } finally {
      await remy.close();
    }
  });

  describe('TOTP enrolled through the page, then an mfa sign-in', () => {
    let quinn: PasskeyBrowser;
    let secret: string;
    beforeAll(async () => {
      quinn = await passkeyBrowser(chromium);
    });
    afterAll(() => quinn?.close());

    it('enrols TOTP from /account: QR code, key in text, confirmed with a code', async () => {
      await quinn.page.goto(`${server.url}/account`);
      await passwordSignIn(quinn.page, 'quinn@example.com', 'Quinn Example password');
      await Promise.all([quinn.page.waitForURL('**/account/totp'), quinn.page.click('#totp button:has-text("Set up")')]);
      const qr = await quinn.page.getAttribute('img.qr', 'src');
      expect(qr).toMatch(/^data:image\/svg\+xml;base64,/);
      secret = (await quinn.page.textContent('#totp-secret'))!.replace(/\s+/g, '');
      expect(secret).toMatch(/^[A-Z2-7]{32}$/);
      await quinn.page.screenshot({ path: join(shots, 'totp-setup.png'), fullPage: true });

      await quinn.page.fill('#otp', '000000');
      await Promise.all([quinn.page.waitForNavigation(), quinn.page.click('button:has-text("Confirm")')]);
      expect(await quinn.page.textContent('main')).toContain('The code is not correct');

      await quinn.page.fill('#otp', totpCode(secret));
      await Promise.all([quinn.page.waitForURL('**/account?done=totp-enabled**'), quinn.page.click('button:has-text("Confirm")')]);
      expect(await quinn.page.textContent('#totp-status')).toContain('An authenticator app is set up');
    });

    it('the TOTP set up on the page signs in with acr mfa (password + code)', async () => {
      const flow = await authorize(quinn, { acr_values: MFA, prompt: 'login' });
      await passwordSignIn(quinn.page, 'quinn@example.com', 'Quinn Example password');
      expect(new URL(quinn.page.url()).pathname).toBe('/login/otp');
      // the next time step: the one that confirmed the app is spent
      await quinn.page.fill('#otp', totpCode(secret, 1));
      await Promise.all([quinn.page.waitForURL(`${redirectUri}**`), quinn.page.click('button[type="submit"]')]);
      const tokens = await finishFlow(config, flow, quinn.page.url());
      expect(tokens.claims()!.acr).toBe(MFA);
      expect(tokens.claims()!.amr).toEqual(['pwd', 'otp', 'mfa']);
    });
  });

  it('a synced passkey without user verification plus the code reaches passkey_mfa', async () => {
    const sam = await passkeyBrowser(chromium, { hasUserVerification: false, backupEligible: true });
    try {
      await registerPasskey(sam, 'sam@example.com', 'Sam Example password', 'Phone');
      expect(await sam.page.textContent('#passkeys')).toContain('synced');
      const flow = await authorize(sam, { acr_values: PASSKEY_MFA, prompt: 'login' });
      await sam.page.fill('#email', 'sam@example.com');
      await Promise.all([sam.page.waitForURL('**/login/otp**'), sam.page.click('#passkey-button')]);
      await sam.page.fill('#otp', totpCode(TOTP_SECRET));
      await Promise.all([sam.page.waitForURL(`${redirectUri}**`), sam.page.click('button[type="submit"]')]);
      const tokens = await finishFlow(config, flow, sam.page.url());
      expect(tokens.claims()!.acr).toBe(PASSKEY_MFA);
      // a synced (backup eligible) passkey is a software-secured key
      expect(tokens.claims()!.amr).toEqual(['swk', 'otp', 'mfa']);
    } finally {
      await sam.close();
    }
  });
});
