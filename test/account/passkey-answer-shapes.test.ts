import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser } from '../oauth/helpers.js';
import { accountPage, formFor, passkeySignIn, postJson, registerPasskey, signInToAccount } from './helpers.js';
import { SoftAuthenticator } from './soft-authenticator.js';

// A passkey answer is JSON the browser's script posts, so any member may come with any type:
// the optional ones the server reads (the user handle at sign-in, the transports at
// registration) of the wrong type make the answer unreadable, a 400 page, never a 500.

let server: TestServer;
let issuer: string;
const PASSWORD = 'a long enough password';

beforeAll(async () => {
  server = await startTestServer();
  issuer = server.ctx.urls.issuer;
});
afterAll(async () => {
  await server?.stop();
});

async function signedIn(email: string): Promise<Browser> {
  const r = await server.admin('POST', '/users', { email, password: PASSWORD, name: 'P' });
  expect(r.status).toBe(201);
  const browser = new Browser(issuer);
  await signInToAccount(browser, email, PASSWORD);
  return browser;
}

describe('passkey answers with members of the wrong type', () => {
  it('a user handle that is not a string (or is too long) is unreadable at sign-in; the passkey still signs in', async () => {
    const browser = await signedIn('handle@example.com');
    const auth = new SoftAuthenticator(issuer);
    expect((await registerPasskey(browser, auth, 'Laptop')).status).toBe(303);
    for (const userHandle of [{ a: 1 }, ['x'], true, 'x'.repeat(1401)]) {
      const { res } = await passkeySignIn(new Browser(issuer), auth, {
        pageUrl: '/login?return_to=/account',
        tamper: (a) => ({ ...a, response: { ...a.response, userHandle } }),
      });
      expect(res.status, JSON.stringify(userHandle).slice(0, 40)).toBe(400);
      expect(await res.text()).toContain('could not be read');
    }
    const { res } = await passkeySignIn(new Browser(issuer), auth, { pageUrl: '/login?return_to=/account' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/account');
  });

  it('transports that are not a list are unreadable at registration; a list keeps only names of a plausible length', async () => {
    const browser = await signedIn('transports@example.com');
    const register = async (transports: unknown) => {
      const form = formFor(await accountPage(browser), '/account/passkeys');
      const options = await postJson(browser, '/account/passkeys/options', { csrf: form.fields.csrf });
      expect(options.status).toBe(200);
      const answer = new SoftAuthenticator(issuer).register(options.body) as { response: Record<string, unknown> };
      answer.response = { ...answer.response, transports };
      return browser.post('/account/passkeys', { ...form.fields, name: 'Key', credential: JSON.stringify(answer) });
    };
    for (const transports of [{ a: 1 }, 'usb', 5]) {
      const res = await register(transports);
      expect(res.status, JSON.stringify(transports)).toBe(400);
    }
    const user = (await server.ctx.store.users.getByEmail('transports@example.com'))!;
    expect(await server.ctx.store.webauthn.ofUser(user.id)).toEqual([]);
    const kept = await register(['usb', 'x'.repeat(33), 7, 'internal']);
    expect(kept.status).toBe(303);
    expect((await server.ctx.store.webauthn.ofUser(user.id)).map((c) => c.transports)).toEqual([['usb', 'internal']]);
  });
});
