import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { createPublicKey, verify as verifySignature, X509Certificate } from 'node:crypto';
import { DOMParser, type Document, type Element } from '@xmldom/xmldom';
import { SignedXml } from 'xml-crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser, parseForms } from '../oauth/helpers.js';

const SAMLP = 'urn:oasis:names:tc:SAML:2.0:protocol';
const SAML = 'urn:oasis:names:tc:SAML:2.0:assertion';
const DS = 'http://www.w3.org/2000/09/xmldsig#';
const SP_ENTITY = 'https://sp.example/metadata';
const ACS = 'https://sp.example/acs';
const PERSON = { email: 'ada@example.com', password: 'correct horse battery staple', name: 'Ada <Lovelace>', groups: ['eng'] };

let server: TestServer;
let userId: string;
let idpCertPem: string;

beforeAll(async () => {
  server = await startTestServer();
  userId = (await server.admin('POST', '/users', PERSON)).body.id;
  expect((await server.admin('POST', '/saml/connections', { name: 'sp-app', kind: 'sp', entity_id: SP_ENTITY, acs_url: ACS, slo_url: 'https://sp.example/slo' })).status).toBe(201);
  // The SP trusts the certificate of our metadata, nothing else.
  const metadata = new DOMParser().parseFromString(await (await fetch(`${server.url}/saml/metadata`)).text(), 'text/xml');
  const b64 = metadata.getElementsByTagNameNS(DS, 'X509Certificate')[0]!.textContent!;
  idpCertPem = new X509Certificate(Buffer.from(b64, 'base64')).toString();
});
afterAll(() => server?.stop());

let seq = 0;
function authnRequest(extra: { acs?: string; issuer?: string; nameIdFormat?: string; forceAuthn?: boolean } = {}): { id: string; encoded: string } {
  const id = `_req${++seq}`;
  const xml =
    `<samlp:AuthnRequest xmlns:samlp="${SAMLP}" xmlns:saml="${SAML}" ID="${id}" Version="2.0" IssueInstant="${new Date().toISOString()}"` +
    ` Destination="${server.url}/saml/sso" AssertionConsumerServiceURL="${extra.acs ?? ACS}" ProtocolBinding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"` +
    (extra.forceAuthn ? ' ForceAuthn="true"' : '') +
    `><saml:Issuer>${extra.issuer ?? SP_ENTITY}</saml:Issuer>` +
    (extra.nameIdFormat ? `<samlp:NameIDPolicy Format="${extra.nameIdFormat}" AllowCreate="true"/>` : '') +
    `</samlp:AuthnRequest>`;
  return { id, encoded: deflateRawSync(Buffer.from(xml)).toString('base64') };
}
const ssoUrl = (encoded: string, relay = 'relay-1') => `/saml/sso?${new URLSearchParams({ SAMLRequest: encoded, RelayState: relay })}`;

async function signIn(browser: Browser, loginLocation: string): Promise<Response> {
  const page = await browser.get(loginLocation);
  expect(page.status).toBe(200);
  const done = await browser.submit(page, { email: PERSON.email, password: PERSON.password }, loginLocation);
  expect(done.status).toBe(302);
  return browser.get(done.headers.get('location')!);
}

/** The auto-submitted form: action and fields; the SAMLResponse parsed. */
async function postedResponse(res: Response): Promise<{ action: string; relay: string; xml: string; doc: Document }> {
  expect(res.status).toBe(200);
  const [form] = parseForms(await res.text());
  const xml = Buffer.from(form!.fields.SAMLResponse!, 'base64').toString('utf8');
  return { action: form!.action, relay: form!.fields.RelayState!, xml, doc: new DOMParser().parseFromString(xml, 'text/xml') };
}

const child = (el: Element, ns: string, local: string) => Array.from(el.childNodes).find((n) => (n as Element).localName === local && (n as Element).namespaceURI === ns) as Element | undefined;

/** xml-crypto verifies the enveloped signature of `el` with the metadata certificate only. */
function verifiedBy(xml: string, el: Element): boolean {
  const signature = child(el, DS, 'Signature');
  if (!signature) return false;
  const sig = new SignedXml({ publicCert: idpCertPem, getCertFromKeyInfo: () => null });
  sig.loadSignature(signature);
  try {
    return sig.checkSignature(xml) && sig.getSignedReferences().length === 1;
  } catch {
    return false;
  }
}

describe('SP-initiated SSO (HTTP-Redirect in, HTTP-POST out)', () => {
  const browser = () => new Browser(server.url);
  let signedIn: Browser;

  it('sends a person who is not signed in to the sign-in page, then posts a signed Response to the ACS', async () => {
    signedIn = browser();
    const req = authnRequest();
    const first = await signedIn.get(ssoUrl(req.encoded));
    expect(first.status).toBe(302);
    expect(first.headers.get('location')).toMatch(/^\/login\?return_to=/);

    const { action, relay, xml, doc } = await postedResponse(await signIn(signedIn, first.headers.get('location')!));
    expect(action).toBe(ACS);
    expect(relay).toBe('relay-1');
    const response = doc.documentElement!;
    expect(response.localName).toBe('Response');
    expect(response.getAttribute('InResponseTo')).toBe(req.id);
    expect(response.getAttribute('Destination')).toBe(ACS);
    expect(child(child(response, SAMLP, 'Status')!, SAMLP, 'StatusCode')!.getAttribute('Value')).toBe('urn:oasis:names:tc:SAML:2.0:status:Success');
    expect(verifiedBy(xml, response)).toBe(true);

    const assertion = child(response, SAML, 'Assertion')!;
    expect(verifiedBy(xml, assertion)).toBe(true);
    expect(child(assertion, SAML, 'Issuer')!.textContent).toBe(`${server.url}/saml/metadata`);
    const nameId = doc.getElementsByTagNameNS(SAML, 'NameID')[0]!;
    expect(nameId.textContent).toBe(PERSON.email);
    expect(nameId.getAttribute('Format')).toBe('urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress');
    expect(doc.getElementsByTagNameNS(SAML, 'Audience')[0]!.textContent).toBe(SP_ENTITY);
    const confirmation = doc.getElementsByTagNameNS(SAML, 'SubjectConfirmationData')[0]!;
    expect(confirmation.getAttribute('Recipient')).toBe(ACS);
    expect(confirmation.getAttribute('InResponseTo')).toBe(req.id);
    const attrs = Object.fromEntries(
      Array.from(doc.getElementsByTagNameNS(SAML, 'Attribute')).map((a) => [a.getAttribute('Name'), Array.from(a.getElementsByTagNameNS(SAML, 'AttributeValue')).map((v) => v.textContent)]),
    );
    expect(attrs).toMatchObject({ sub: [userId], email: [PERSON.email], name: [PERSON.name], groups: ['eng'] });
  });

  it('answers at once when the person is signed in, with a persistent NameID when asked', async () => {
    const req = authnRequest({ nameIdFormat: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent' });
    const { xml, doc } = await postedResponse(await signedIn.get(ssoUrl(req.encoded)));
    expect(doc.getElementsByTagNameNS(SAML, 'NameID')[0]!.textContent).toBe(userId);
    expect(verifiedBy(xml, doc.documentElement!)).toBe(true);
  });

  it('accepts the HTTP-POST binding', async () => {
    const id = `_post${++seq}`;
    const xml = `<samlp:AuthnRequest xmlns:samlp="${SAMLP}" xmlns:saml="${SAML}" ID="${id}" Version="2.0" IssueInstant="${new Date().toISOString()}"><saml:Issuer>${SP_ENTITY}</saml:Issuer></samlp:AuthnRequest>`;
    const res = await signedIn.post('/saml/sso', { SAMLRequest: Buffer.from(xml).toString('base64') });
    const { doc } = await postedResponse(res);
    expect(doc.documentElement!.getAttribute('InResponseTo')).toBe(id);
  });

  it('a Response changed after signing does not verify', async () => {
    const { xml } = await postedResponse(await signedIn.get(ssoUrl(authnRequest().encoded)));
    const forged = xml.replace(PERSON.email, 'mallory@example.com');
    const doc = new DOMParser().parseFromString(forged, 'text/xml');
    expect(verifiedBy(forged, doc.documentElement!)).toBe(false);
    expect(verifiedBy(forged, child(doc.documentElement!, SAML, 'Assertion')!)).toBe(false);
  });

  it('refuses unknown SPs, other ACS URLs and malformed requests on its own page', async () => {
    const b = browser();
    for (const url of [
      ssoUrl(authnRequest({ issuer: 'https://evil.example' }).encoded),
      ssoUrl(authnRequest({ acs: 'https://evil.example/acs' }).encoded),
      ssoUrl(Buffer.from('not deflated').toString('base64')),
      ssoUrl(deflateRawSync(Buffer.from('<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>')).toString('base64')),
      '/saml/sso',
    ]) {
      const res = await b.get(url);
      expect(res.status).toBe(400);
      const body = await res.text();
      expect(body).toContain('invalid_request');
      expect(body).not.toContain('SAMLResponse');
    }
  });

  it('answers an unsupported NameID format at the ACS with InvalidNameIDPolicy', async () => {
    const req = authnRequest({ nameIdFormat: 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient' });
    const { xml, doc } = await postedResponse(await signedIn.get(ssoUrl(req.encoded)));
    const codes = Array.from(doc.getElementsByTagNameNS(SAMLP, 'StatusCode')).map((c) => c.getAttribute('Value'));
    expect(codes).toEqual(['urn:oasis:names:tc:SAML:2.0:status:Requester', 'urn:oasis:names:tc:SAML:2.0:status:InvalidNameIDPolicy']);
    expect(doc.getElementsByTagNameNS(SAML, 'Assertion')).toHaveLength(0);
    expect(verifiedBy(xml, doc.documentElement!)).toBe(true);
  });

  it('answers a held request once', async () => {
    const b = browser();
    const first = await b.get(ssoUrl(authnRequest().encoded));
    const login = first.headers.get('location')!;
    const resume = decodeURIComponent(login.split('return_to=')[1]!);
    await postedResponse(await signIn(b, login));
    const again = await b.get(resume);
    expect(again.status).toBe(400);
  });

  it('single logout ends the session and sends a signed LogoutResponse to the SP', async () => {
    const logout = `<samlp:LogoutRequest xmlns:samlp="${SAMLP}" xmlns:saml="${SAML}" ID="_lo1" Version="2.0" IssueInstant="${new Date().toISOString()}"><saml:Issuer>${SP_ENTITY}</saml:Issuer><saml:NameID>${PERSON.email}</saml:NameID></samlp:LogoutRequest>`;
    const res = await signedIn.get(`/saml/slo?${new URLSearchParams({ SAMLRequest: deflateRawSync(Buffer.from(logout)).toString('base64'), RelayState: 'r' })}`);
    expect(res.status).toBe(302);
    const location = res.headers.get('location')!;
    expect(location.startsWith('https://sp.example/slo?SAMLResponse=')).toBe(true);
    const [signed, signature] = location.split('?')[1]!.split('&Signature=') as [string, string];
    expect(verifySignature('sha256', Buffer.from(signed), createPublicKey(idpCertPem), Buffer.from(decodeURIComponent(signature), 'base64'))).toBe(true);
    const params = new URLSearchParams(signed);
    const xml = inflateRawSync(Buffer.from(params.get('SAMLResponse')!, 'base64')).toString();
    expect(xml).toContain('InResponseTo="_lo1"');
    expect(params.get('RelayState')).toBe('r');

    const after = await signedIn.get(ssoUrl(authnRequest().encoded));
    expect(after.status).toBe(302);
    expect(after.headers.get('location')).toMatch(/^\/login\?/);
  });
});
