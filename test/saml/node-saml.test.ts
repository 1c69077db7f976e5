import { SAML, ValidateInResponseTo } from '@node-saml/node-saml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser, parseForms } from '../oauth/helpers.js';

/** node-saml (the SP library behind passport-saml) as a real service provider of our IdP. */
const SP = 'https://node-saml.example/sp';
const ACS = 'https://node-saml.example/acs';
const SLO = 'https://node-saml.example/slo';
const PERSON = { email: 'linus@example.com', password: 'correct horse battery staple', name: 'Linus', roles: ['admin'] };

let server: TestServer;
let sp: SAML;

beforeAll(async () => {
  server = await startTestServer();
  await server.admin('POST', '/users', PERSON);
  await server.admin('POST', '/saml/connections', { name: 'node-saml', kind: 'sp', entity_id: SP, acs_url: ACS, slo_url: SLO });
  // node-saml is configured from our metadata: the certificate, the issuer and the SSO URL.
  const metadata = await (await fetch(`${server.url}/saml/metadata`)).text();
  sp = new SAML({
    entryPoint: /SingleSignOnService Binding="[^"]+HTTP-Redirect" Location="([^"]+)"/.exec(metadata)![1]!,
    logoutUrl: /SingleLogoutService Binding="[^"]+" Location="([^"]+)"/.exec(metadata)![1]!,
    idpCert: /<ds:X509Certificate>([^<]+)</.exec(metadata)![1]!,
    idpIssuer: /entityID="([^"]+)"/.exec(metadata)![1]!,
    issuer: SP,
    callbackUrl: ACS,
    audience: SP,
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: true,
    validateInResponseTo: ValidateInResponseTo.always,
  });
});
afterAll(() => server?.stop());

describe('node-saml as the service provider', () => {
  it('signs a person in: the SP validates our Response and reads the profile; then single logout', async () => {
    const browser = new Browser(server.url);
    const start = await browser.get(await sp.getAuthorizeUrlAsync('after-login', undefined, {}));
    expect(start.status).toBe(302);
    const login = start.headers.get('location')!;
    const done = await browser.submit(await browser.get(login), { email: PERSON.email, password: PERSON.password }, login);
    const page = await browser.get(done.headers.get('location')!);
    const [form] = parseForms(await page.text());
    expect(form!.action).toBe(ACS);
    expect(form!.fields.RelayState).toBe('after-login');

    const { profile } = await sp.validatePostResponseAsync({ SAMLResponse: form!.fields.SAMLResponse! });
    expect(profile!.nameID).toBe(PERSON.email);
    expect(profile!.issuer).toBe(`${server.url}/saml/metadata`);
    expect(profile!.email).toBe(PERSON.email);
    expect(profile!.roles).toBe('admin');
    expect(profile!.sessionIndex).toBeTruthy();

    // Our answer to node-saml's LogoutRequest: a signed LogoutResponse that node-saml validates.
    const logout = await browser.get(await sp.getLogoutUrlAsync(profile!, 'bye', {}));
    expect(logout.status).toBe(302);
    const back = new URL(logout.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(SLO);
    const result = await sp.validateRedirectAsync(Object.fromEntries(back.searchParams), back.search.slice(1));
    expect(result.loggedOut).toBe(true);

    // the session is over: the next AuthnRequest asks for a sign-in again
    const again = await browser.get(await sp.getAuthorizeUrlAsync('', undefined, {}));
    expect(again.headers.get('location')).toMatch(/^\/login\?/);
  });
});
