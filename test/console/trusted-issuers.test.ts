import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';
import type { Browser } from '../oauth/helpers.js';
import { consoleSignIn, csrfOf, makePerson } from './helpers.js';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer();
  const admin = await makePerson(server, 'root@example.com', ['admin']);
  ({ browser } = await consoleSignIn(server, admin.email, admin.password));
}, 20_000);

afterAll(async () => {
  await server?.stop();
});

async function page(): Promise<string> {
  const res = await browser.get('/console/trusted-issuers');
  expect(res.status).toBe(200);
  return res.text();
}

describe('the trusted issuers page', () => {
  it('lists, adds and removes trusted issuers, each change in the audit trail', async () => {
    expect(await page()).toContain('No issuer is trusted');
    const { publicKey } = await generateKeyPair('ES256');
    const jwks = JSON.stringify({ keys: [await exportJWK(publicKey)] });

    // A refusal comes back on the form, with what was typed.
    const refused = await browser.post('/console/trusted-issuers', { csrf: csrfOf(await page()), issuer: 'not a url', jwks, subject_mapping: 'email' });
    expect(refused.status).toBe(400);
    const refusedHtml = await refused.text();
    expect(refusedHtml).toContain('issuer must be an absolute http or https URL');
    expect(refusedHtml).toContain('not a url');

    const added = await browser.post('/console/trusted-issuers', { csrf: csrfOf(await page()), issuer: 'https://idp.example.com', jwks, subject_mapping: 'id' });
    expect(added.status).toBe(303);
    const listed = await page();
    expect(listed).toContain('https://idp.example.com');
    expect(listed).toContain('1 key(s) kept here');
    const api = await server.admin('GET', `/trusted-issuers/${encodeURIComponent('https://idp.example.com')}`);
    expect(api.body).toMatchObject({ issuer: 'https://idp.example.com', jwks_uri: null, subject_mapping: 'id' });

    const unconfirmed = await browser.post('/console/trusted-issuers/remove', { csrf: csrfOf(listed), issuer: 'https://idp.example.com' });
    expect(unconfirmed.status).toBe(400);
    expect((await server.admin('GET', '/trusted-issuers')).body.data).toHaveLength(1);
    const removed = await browser.post('/console/trusted-issuers/remove', { csrf: csrfOf(listed), issuer: 'https://idp.example.com', confirm: 'yes' });
    expect(removed.status).toBe(303);
    expect((await server.admin('GET', '/trusted-issuers')).body.data).toHaveLength(0);

    const audit = await server.admin('GET', '/audit?kind=all&limit=20');
    const actions = audit.body.data.map((r: { action: string }) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['console.trusted_issuers.create', 'console.trusted_issuers.delete']));
  });
});

describe("an application's ID-JAG audiences in the console", () => {
  it('are edited one per line, with the client ID there after a space', async () => {
    const created = await server.admin('POST', '/applications', { name: 'wiki', type: 'web', redirect_uris: ['https://wiki.example/cb'] });
    expect(created.status).toBe(201);
    const id = created.body.client_id as string;
    const html = await (await browser.get(`/console/applications/${id}`)).text();
    expect(html).toContain('ID-JAG audiences');
    const form = {
      csrf: csrfOf(html), name: 'wiki', redirect_uris: 'https://wiki.example/cb', post_logout_redirect_uris: '', first_party: 'on',
      id_jag_audiences: 'https://chat.example\nhttps://tools.example wiki-at-tools',
    };
    expect((await browser.post(`/console/applications/${id}`, form)).status).toBe(303);
    expect((await server.admin('GET', `/applications/${id}`)).body.id_jag_audiences).toEqual([
      { audience: 'https://chat.example', client_id: null },
      { audience: 'https://tools.example', client_id: 'wiki-at-tools' },
    ]);
    const bad = await browser.post(`/console/applications/${id}`, { ...form, id_jag_audiences: 'chat' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('must be an http or https URL');
  });
});
