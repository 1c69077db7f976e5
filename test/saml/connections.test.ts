import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.stop());

const sp = { name: 'wiki', kind: 'sp', entity_id: 'https://wiki.example/saml', acs_url: 'https://wiki.example/saml/acs' };

describe('/admin/v1/saml/connections', () => {
  it('needs the admin token', async () => {
    const res = await fetch(`${server.url}/admin/v1/saml/connections`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'invalid_token' });
  });

  it('creates, lists, reads, replaces and deletes', async () => {
    const created = await server.admin('POST', '/saml/connections', sp);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ ...sp, name_id_format: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress', metadata_url: `${server.url}/saml/metadata` });

    const list = await server.admin('GET', '/saml/connections');
    expect(list.body.data.map((c: { name: string }) => c.name)).toContain('wiki');
    expect((await server.admin('GET', '/saml/connections/wiki')).body).toMatchObject(sp);

    const put = await server.admin('PUT', '/saml/connections/wiki', { entity_id: sp.entity_id, acs_url: 'https://wiki.example/acs2', name_id_format: 'persistent' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ kind: 'sp', acs_url: 'https://wiki.example/acs2', name_id_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent' });

    expect((await server.admin('DELETE', '/saml/connections/wiki')).status).toBe(204);
    expect((await server.admin('GET', '/saml/connections/wiki')).status).toBe(404);
  });

  it('names each bad field in a 400', async () => {
    const res = await server.admin('POST', '/saml/connections', { name: 'has space', kind: 'sp', acs_url: 'javascript:alert(1)' });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    const paths = res.body.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['name', 'acs_url', 'entity_id']));

    const badKind = await server.admin('POST', '/saml/connections', { name: 'x', kind: 'saml' });
    expect(badKind.status).toBe(400);
    expect(badKind.body.issues[0].path).toBe('kind');

    const badCert = await server.admin('POST', '/saml/connections', { name: 'x', kind: 'idp', idp_certificate: 'not a certificate' });
    expect(badCert.status).toBe(400);
    expect(badCert.body.issues[0].path).toBe('idp_certificate');

    const badXml = await server.admin('POST', '/saml/connections', { name: 'x', kind: 'idp', idp_metadata_xml: '<!DOCTYPE x [<!ENTITY a "b">]><x/>' });
    expect(badXml.status).toBe(400);
    expect(badXml.body.issues[0].path).toBe('idp_metadata_xml');

    const renamed = await server.admin('PUT', '/saml/connections/x', { name: 'y', kind: 'idp' });
    expect(renamed.status).toBe(404); // x does not exist
  });

  it('answers 404 for unknown names and 409 for duplicates', async () => {
    expect((await server.admin('GET', '/saml/connections/nope')).body).toEqual({ error: 'not_found' }); // exactly
    expect((await server.admin('PUT', '/saml/connections/nope', sp)).status).toBe(404);
    expect((await server.admin('DELETE', '/saml/connections/nope')).status).toBe(404);
    await server.admin('POST', '/saml/connections', { ...sp, name: 'dup' });
    expect((await server.admin('POST', '/saml/connections', { ...sp, name: 'dup' })).status).toBe(409);
    // one sp connection per entityID: that is how an AuthnRequest finds its SP
    expect((await server.admin('POST', '/saml/connections', { ...sp, name: 'dup2' })).status).toBe(409);
  });

  it('reads an IdP connection from its metadata', async () => {
    const idpMetadata = await (await fetch(`${server.url}/saml/metadata`)).text();
    const res = await server.admin('POST', '/saml/connections', { name: 'loop', kind: 'idp', idp_metadata_xml: idpMetadata });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ entity_id: `${server.url}/saml/metadata`, idp_sso_url: `${server.url}/saml/sso` });
    expect(res.body.idp_certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${server.url}/admin/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths['/admin/v1/saml/connections/{name}'] ?? doc.paths['/saml/connections/{name}'] ?? {})).toEqual(
      expect.arrayContaining(['get', 'put', 'delete']),
    );
  });
});

describe('the project file', () => {
  it('applies saml_connections idempotently', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-saml-'));
    const file = join(dir, 'project.json');
    writeFileSync(file, JSON.stringify({ saml_connections: [{ ...sp, name: 'from-file', entity_id: 'urn:from-file' }, { name: 'corp-idp' }] }));
    try {
      for (let start = 0; start < 2; start++) {
        const s = await startTestServer({ env: { GATEHOUSE_PROJECT_FILE: file }, dir });
        try {
          const list = (await s.admin('GET', '/saml/connections')).body.data;
          expect(list.map((c: { name: string; kind: string }) => [c.name, c.kind])).toEqual([['corp-idp', 'idp'], ['from-file', 'sp']]);
        } finally {
          await s.stop();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
