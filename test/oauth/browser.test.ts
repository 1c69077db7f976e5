import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as client from 'openid-client';
import { chromium, type Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assign, createApp, createUser } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';

describe.skipIf(!existsSync(CHROMIUM))('sign-in in a real browser (headless Chromium)', () => {
  let server: TestServer;
  let rp: Server;
  let rpUrl: string;
  let browser: PwBrowser;

  beforeAll(async () => {
    server = await startTestServer();
    // The relying party's callback: a page that just says it got there.
    rp = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>callback</title><p>back at the app</p>');
    });
    await new Promise<void>((r) => rp.listen(0, '127.0.0.1', r));
    rpUrl = `http://127.0.0.1:${(rp.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    rp?.close();
    await server?.stop();
  });

  it('signs in through the page and lands on the redirect URI with a code', async () => {
    const redirectUri = `${rpUrl}/callback`;
    const app = await createApp(server, { type: 'web', redirect_uris: [redirectUri] });
    const user = await createUser(server, { email: 'pat@example.com', password: 'pat password 123', name: 'Pat' });
    await assign(server, app.client_id, user.id);

    const config = await client.discovery(new URL(server.ctx.urls.issuer), app.client_id, app.client_secret, undefined, {
      execute: [client.allowInsecureRequests],
    });
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'openid email',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      login_hint: 'pat@example.com',
    });

    const page = await browser.newPage();
    await page.goto(url.toString());
    expect(await page.inputValue('input[name="email"]')).toBe('pat@example.com');
    await page.fill('input[name="password"]', 'pat password 123');
    await Promise.all([page.waitForURL(`${redirectUri}**`), page.click('button[type="submit"]')]);

    const landed = new URL(page.url());
    expect(landed.searchParams.get('code')).toBeTruthy();
    expect(landed.searchParams.get('state')).toBe(state);
    const tokens = await client.authorizationCodeGrant(config, landed, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.claims()!.email).toBe('pat@example.com');
    await page.close();
  });
});
