import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as client from 'openid-client';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import type { TestServer } from '../helpers/server.js';

/** Debian's Chromium, driven by playwright-core (no downloaded browsers). */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/** A relying party's callback: a page that just says the browser got there. */
export async function startCallbackServer(): Promise<{ url: string; close(): void }> {
  const rp: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>callback</title><p>back at the app</p>');
  });
  await new Promise<void>((r) => rp.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(rp.address() as AddressInfo).port}`, close: () => rp.close() };
}

/**
 * One person's browser: its own context (cookies) and page, with a CDP virtual authenticator
 * (CTAP2, internal transport, resident keys, user verification) standing in for the device.
 */
export interface PasskeyBrowser {
  context: BrowserContext;
  page: Page;
  cdp: CDPSession;
  /** the current virtual authenticator */
  authenticatorId: string;
  /** removes the authenticator (and the passkeys it holds) and attaches a new one */
  replaceAuthenticator(opts: AuthenticatorOptions): Promise<void>;
  /** whether the authenticator's user verification (PIN, biometrics) succeeds */
  setUserVerified(on: boolean): Promise<void>;
  /** false: the authenticator waits for a touch that never comes (the prompt stays open) */
  setPresence(auto: boolean): Promise<void>;
  /** the passkeys the authenticator holds, private keys included */
  credentials(): Promise<VirtualCredential[]>;
  /** puts a passkey (from `credentials()` of an earlier authenticator) on the current one */
  importCredential(credential: VirtualCredential): Promise<void>;
  close(): Promise<void>;
}

/**
 * `autofill: false` (the default) makes the browser report no conditional mediation, so the
 * sign-in page offers the passkey button only: Chromium's virtual authenticator answers an
 * autofill request at once, with no person picking the passkey, which would sign in on load.
 */
export interface VirtualCredential {
  credentialId: string;
  isResidentCredential: boolean;
  rpId?: string;
  privateKey: string;
  userHandle?: string;
  signCount: number;
}

export interface AuthenticatorOptions {
  /** the authenticator can verify the person (PIN, biometrics); default true */
  hasUserVerification?: boolean;
  /** its user verification succeeds; default true */
  userVerified?: boolean;
  /** passkeys it makes are backup eligible (synced); default false */
  backupEligible?: boolean;
}

export async function passkeyBrowser(browser: Browser, opts: AuthenticatorOptions & { autofill?: boolean } = {}): Promise<PasskeyBrowser> {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  if (!opts.autofill) {
    await context.addInitScript({
      content: 'if (window.PublicKeyCredential) PublicKeyCredential.isConditionalMediationAvailable = () => Promise.resolve(false);',
    });
  }
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const attach = async (o: AuthenticatorOptions) =>
    (
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          ctap2Version: 'ctap2_1',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: o.hasUserVerification ?? true,
          isUserVerified: o.userVerified ?? true,
          automaticPresenceSimulation: true,
          defaultBackupEligibility: o.backupEligible ?? false,
          defaultBackupState: o.backupEligible ?? false,
        },
      })
    ).authenticatorId;
  const b: PasskeyBrowser = {
    context,
    page,
    cdp,
    authenticatorId: await attach(opts),
    async replaceAuthenticator(o) {
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: b.authenticatorId });
      b.authenticatorId = await attach(o);
    },
    setUserVerified: async (on) => void (await cdp.send('WebAuthn.setUserVerified', { authenticatorId: b.authenticatorId, isUserVerified: on })),
    setPresence: async (auto) => void (await cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId: b.authenticatorId, enabled: auto })),
    credentials: async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId: b.authenticatorId })).credentials,
    importCredential: async (credential) => void (await cdp.send('WebAuthn.addCredential', { authenticatorId: b.authenticatorId, credential })),
    close: () => context.close(),
  };
  return b;
}

/** An authorization request built by openid-client (PKCE, state, nonce). */
export interface Flow {
  url: string;
  verifier: string;
  state: string;
  nonce: string;
}

export async function startFlow(config: client.Configuration, redirectUri: string, extra: Record<string, string> = {}): Promise<Flow> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid email profile',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url: url.toString(), verifier, state, nonce };
}

/** Exchanges the code the browser landed with (openid-client checks iss, state, nonce and the ID token). */
export async function finishFlow(config: client.Configuration, flow: Flow, landed: string) {
  return client.authorizationCodeGrant(config, new URL(landed), {
    pkceCodeVerifier: flow.verifier,
    expectedState: flow.state,
    expectedNonce: flow.nonce,
  });
}

/** Signs in with the password form on the page the browser is on. */
export async function passwordSignIn(page: Page, email: string, password: string): Promise<void> {
  await page.fill('#email', email);
  await page.fill('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('#login-form button[type="submit"]')]);
}

/** Where screenshots go: docs/screenshots when UPDATE_SCREENSHOTS=1, else the server's temp directory. */
export function screenshotDir(server: TestServer): string {
  const dir = process.env.UPDATE_SCREENSHOTS === '1' ? join(process.cwd(), 'docs', 'screenshots') : join(server.dir, 'screenshots');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Waits until the element's text matches (the page's script updates it). A locator, not a
 * string predicate: the pages' Content-Security-Policy forbids eval, string predicates included.
 */
export async function waitForText(page: Page, selector: string, pattern: RegExp, timeout = 20_000): Promise<void> {
  await page.locator(selector).filter({ hasText: pattern }).first().waitFor({ timeout });
}
