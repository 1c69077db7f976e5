import { createPublicKey, verify as verifySignature } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser, parseForms } from '../oauth/helpers.js';

/**
 * The project as a service provider, against a real IdP: itself. The `idp` connection "loop" is made
 * from our own IdP metadata, and the `sp` connection "loop-sp" registers our SP side at our IdP.
 */
const PERSON = { email: 'grace@example.com', password: 'correct horse battery staple', name: 'Grace' };
let server: TestServer;
let idpCertificate: string;

beforeAll(async () => {
  server = await startTestServer();
  await server.admin('POST', '/users', PERSON);
  const idpMetadata = await (await fetch(`${server.url}/saml/metadata`)).text();
  const idp = await server.admin('POST', '/saml/connections', { name: 'loop', kind: 'idp', idp_metadata_xml: idpMetadata });
  expect(idp.status).toBe(201);
  idpCertificate = idp.body.idp_certificate;
  await server.admin('POST', '/saml/connections', { name: 'other', kind: 'idp', idp_metadata_xml: idpMetadata });
  const sp = await server.admin('POST', '/saml/connections', { name: 'loop-sp', kind: 'sp', entity_id: idp.body.sp_entity_id, acs_url: idp.body.sp_acs_url });
  expect(sp.status).toBe(201);
});
afterAll(() => server?.stop());

/** Starts a sign-in at /saml/sp/loop/login and runs it through our IdP up to the form posted to the ACS. */
async function throughIdp(browser: Browser, signedIn: boolean): Promise<{ action: string; fields: Record<string, string> }> {
  const start = await browser.get('/saml/sp/loop/login?return_to=/approvals');
  expect(start.status).toBe(302);
  let res = await browser.get(start.headers.get('location')!);
  if (!signedIn) {
    const login = res.headers.get('location')!;
    const done = await browser.submit(await browser.get(login), { email: PERSON.email, password: PERSON.password }, login);
    res = await browser.get(done.headers.get('location')!);
  }
  expect(res.status).toBe(200);
  const [form] = parseForms(await res.text());
  return form!;
}

describe('signing in through an external IdP (/saml/sp/{name}/login and /acs)', () => {
  it('sends a signed AuthnRequest to the IdP', async () => {
    const b = new Browser(server.url);
    const res = await b.get('/saml/sp/loop/login');
    const location = new URL(res.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).toBe(`${server.url}/saml/sso`);
    const [signed, signature] = location.search.slice(1).split('&Signature=') as [string, string];
    const ok = verifySignature('sha256', Buffer.from(signed), createPublicKey(idpCertificate), Buffer.from(decodeURIComponent(signature), 'base64'));
    expect(ok).toBe(true);
  });

  it('signs the person in at the ACS and goes back to return_to; a replayed Response is refused', async () => {
    const b = new Browser(server.url);
    const form = await throughIdp(b, false);
    expect(form.action).toBe(`${server.url}/saml/sp/loop/acs`);
    const before = b.jar.cookies.get('gatehouse_session');
    const acs = await b.post(form.action, form.fields);
    expect(acs.status).toBe(302);
    expect(acs.headers.get('location')).toBe('/approvals');
    expect(b.jar.cookies.get('gatehouse_session')).toBeDefined();
    expect(b.jar.cookies.get('gatehouse_session')).not.toBe(before);

    const replay = await b.post(form.action, form.fields);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('no pending request');
  });

  it('refuses a Response changed after signing, and one posted to another connection', async () => {
    const b = new Browser(server.url);
    const form = await throughIdp(b, false);
    const xml = Buffer.from(form.fields.SAMLResponse!, 'base64').toString();
    const forged = Buffer.from(xml.replaceAll(PERSON.email, 'mallory@example.com')).toString('base64');
    const res = await b.post(form.action, { ...form.fields, SAMLResponse: forged });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('signature');

    const elsewhere = await b.post(`${server.url}/saml/sp/other/acs`, form.fields);
    expect(elsewhere.status).toBe(400);
    expect(await elsewhere.text()).toContain('Destination');

    // Signature wrapping: a second, unsigned Assertion about someone else beside the signed one
    const assertion = /<saml:Assertion[\s\S]*<\/saml:Assertion>/.exec(xml)![0];
    const evil = assertion.replace(/<ds:Signature[\s\S]*<\/ds:Signature>/, '').replaceAll(PERSON.email, 'mallory@example.com').replace(/ID="[^"]+"/, 'ID="_evil"');
    const wrapped = Buffer.from(xml.replace('<saml:Assertion', `${evil}<saml:Assertion`)).toString('base64');
    const xsw = await b.post(form.action, { ...form.fields, SAMLResponse: wrapped });
    expect(xsw.status).toBe(400);

    // the untouched Response still works once
    expect((await b.post(form.action, form.fields)).status).toBe(302);
  });

  it('answers 404 for an unknown or unconfigured connection', async () => {
    const b = new Browser(server.url);
    expect((await b.get('/saml/sp/nobody/login')).status).toBe(404);
    await server.admin('POST', '/saml/connections', { name: 'half', kind: 'idp' });
    expect((await b.get('/saml/sp/half/login')).status).toBe(404);
    expect((await b.post('/saml/sp/half/acs', { SAMLResponse: 'x' })).status).toBe(404);
  });

  it('refuses garbage at the ACS with a page, never a 500', async () => {
    const b = new Browser(server.url);
    for (const body of [{}, { SAMLResponse: '!!!' }, { SAMLResponse: Buffer.from('<x/>').toString('base64') }, { SAMLResponse: Buffer.from('<a').toString('base64') }]) {
      const res = await b.post('/saml/sp/loop/acs', body as Record<string, string>);
      expect(res.status).toBe(400);
    }
  });
});
