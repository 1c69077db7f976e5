import { createPublicKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DOMParser, type Element } from '@xmldom/xmldom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
const DS = 'http://www.w3.org/2000/09/xmldsig#';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.stop());

function parse(text: string) {
  const doc = new DOMParser({ onError: (level, msg) => { throw new Error(`${level}: ${msg}`); } }).parseFromString(text, 'text/xml');
  return doc.documentElement!;
}
const children = (el: Element, local: string, ns = MD): Element[] => Array.from(el.getElementsByTagNameNS(ns, local));

async function rs256PublicKey() {
  const jwks = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as { keys: Record<string, string>[] };
  const jwk = jwks.keys.find((k) => k.alg === 'RS256')!;
  return createPublicKey({ key: jwk, format: 'jwk' });
}

function certificateOf(descriptor: Element): X509Certificate {
  const kd = children(descriptor, 'KeyDescriptor');
  expect(kd).toHaveLength(1);
  expect(kd[0]!.getAttribute('use')).toBe('signing');
  const text = children(kd[0]!, 'X509Certificate', DS)[0]!.textContent!;
  expect(text).not.toContain('BEGIN');
  return new X509Certificate(Buffer.from(text, 'base64'));
}

describe('GET /saml/metadata', () => {
  it('is the IdP metadata with the RS256 key as a self-signed certificate', async () => {
    const res = await fetch(`${server.url}/saml/metadata`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/samlmetadata\+xml/);
    const root = parse(await res.text());
    expect(root.namespaceURI).toBe(MD);
    expect(root.localName).toBe('EntityDescriptor');
    expect(root.getAttribute('entityID')).toBe(`${server.url}/saml/metadata`);

    const idp = children(root, 'IDPSSODescriptor')[0]!;
    expect(idp.getAttribute('protocolSupportEnumeration')).toBe('urn:oasis:names:tc:SAML:2.0:protocol');
    expect(idp.getAttribute('WantAuthnRequestsSigned')).toBe('false');

    const cert = certificateOf(idp);
    expect(cert.publicKey.equals(await rs256PublicKey())).toBe(true);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.subject).toBe('CN=localhost');
    expect(cert.ca).toBe(false);
    const years = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / (365.25 * 86400e3);
    expect(Math.round(years)).toBe(10);

    const formats = children(idp, 'NameIDFormat').map((e) => e.textContent);
    expect(formats).toEqual(['urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress', 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent']);
    const sso = children(idp, 'SingleSignOnService').map((e) => [e.getAttribute('Binding'), e.getAttribute('Location')]);
    expect(sso).toEqual([
      ['urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect', `${server.url}/saml/sso`],
      ['urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST', `${server.url}/saml/sso`],
    ]);
    expect(children(idp, 'SingleLogoutService')[0]!.getAttribute('Location')).toBe(`${server.url}/saml/slo`);
  });

  it('serves the same certificate each time, and a new one after a key rotation', async () => {
    const certText = async () => children(parse(await (await fetch(`${server.url}/saml/metadata`)).text()), 'X509Certificate', DS)[0]!.textContent;
    const first = await certText();
    expect(await certText()).toBe(first);
    const rotated = await server.admin('POST', '/keys/rotate', { alg: 'RS256' });
    expect(rotated.status).toBeLessThan(300);
    const next = await certText();
    expect(next).not.toBe(first);
    // The new certificate is the new key's: its public key is in the JWK Set and is not the old one.
    const cert = new X509Certificate(Buffer.from(next!, 'base64'));
    const old = new X509Certificate(Buffer.from(first!, 'base64'));
    expect(cert.publicKey.equals(old.publicKey)).toBe(false);
    const jwks = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as { keys: Record<string, string>[] };
    const published = jwks.keys.filter((k) => k.alg === 'RS256').map((k) => createPublicKey({ key: k, format: 'jwk' }));
    expect(published.some((k) => k.equals(cert.publicKey))).toBe(true);
  });
});

describe('the certificate is kept in the database', () => {
  it('is the same after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-saml-'));
    const certs: string[] = [];
    try {
      for (let start = 0; start < 2; start++) {
        const s = await startTestServer({ dir });
        try {
          certs.push(children(parse(await (await fetch(`${s.url}/saml/metadata`)).text()), 'X509Certificate', DS)[0]!.textContent!);
        } finally {
          await s.stop();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(certs[1]).toBe(certs[0]);
  });
});

describe('GET /saml/sp/{name}/metadata', () => {
  it('is the SP metadata of an idp connection', async () => {
    const created = await server.admin('POST', '/saml/connections', { name: 'okta', kind: 'idp' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'okta', kind: 'idp', metadata_url: `${server.url}/saml/sp/okta/metadata`, sp_acs_url: `${server.url}/saml/sp/okta/acs` });

    const res = await fetch(`${server.url}/saml/sp/okta/metadata`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/samlmetadata\+xml/);
    const root = parse(await res.text());
    expect(root.getAttribute('entityID')).toBe(`${server.url}/saml/sp/okta`);
    const sp = children(root, 'SPSSODescriptor')[0]!;
    expect(sp.getAttribute('WantAssertionsSigned')).toBe('true');
    expect(sp.getAttribute('AuthnRequestsSigned')).toMatch(/^(true|false)$/);
    expect(sp.getAttribute('protocolSupportEnumeration')).toBe('urn:oasis:names:tc:SAML:2.0:protocol');
    const cert = certificateOf(sp);
    const idpCert = children(parse(await (await fetch(`${server.url}/saml/metadata`)).text()), 'X509Certificate', DS)[0]!.textContent!;
    expect(cert.raw.toString('base64')).toBe(idpCert);
    const acs = children(sp, 'AssertionConsumerService')[0]!;
    expect(acs.getAttribute('Binding')).toBe('urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST');
    expect(acs.getAttribute('Location')).toBe(`${server.url}/saml/sp/okta/acs`);
  });

  it('answers 404 for an unknown connection, and for an sp connection', async () => {
    const unknown = await fetch(`${server.url}/saml/sp/nobody/metadata`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: 'not_found' });
    await server.admin('POST', '/saml/connections', { name: 'app-sp', kind: 'sp', entity_id: 'urn:app', acs_url: 'https://app.example/acs' });
    expect((await fetch(`${server.url}/saml/sp/app-sp/metadata`)).status).toBe(404);
  });
});
