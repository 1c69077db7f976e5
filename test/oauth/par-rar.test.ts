import * as client from 'openid-client';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, Browser, createApp, discover, followSignIn, postForm, startFixture, type Fixture } from './helpers.js';

let f: Fixture;
let jwks: ReturnType<typeof createRemoteJWKSet>;

/** A browser that keeps the HTML of every page it was shown. */
class RecordingBrowser extends Browser {
  readonly pages: string[] = [];
  override async get(url: string): Promise<Response> {
    const res = await super.get(url);
    if (res.status === 200) this.pages.push(await res.clone().text());
    return res;
  }
}

const PAYMENT_SCHEMA = {
  type: 'object',
  properties: {
    actions: { type: 'array', items: { enum: ['initiate', 'status'] } },
    locations: { type: 'array', items: { type: 'string' } },
    instructedAmount: {
      type: 'object',
      properties: { currency: { type: 'string', pattern: '^[A-Z]{3}$' }, amount: { type: 'number', exclusiveMinimum: 0, maximum: 10000 } },
      required: ['currency', 'amount'],
      additionalProperties: false,
    },
    creditorName: { type: 'string', maxLength: 70 },
    creditorAccount: { type: 'object', properties: { iban: { type: 'string', pattern: '^[A-Z]{2}[0-9A-Z]{10,30}$' } }, required: ['iban'] },
  },
  required: ['instructedAmount', 'creditorAccount'],
  additionalProperties: false,
};

const payment = (amount: number, name = 'Merchant A') => ({
  type: 'payment_initiation',
  actions: ['initiate'],
  instructedAmount: { currency: 'EUR', amount },
  creditorName: name,
  creditorAccount: { iban: 'DE02100100109307118603' },
});

async function pkce() {
  const verifier = client.randomPKCECodeVerifier();
  return { verifier, challenge: await client.calculatePKCECodeChallenge(verifier), state: client.randomState() };
}

beforeAll(async () => {
  f = await startFixture();
  jwks = createRemoteJWKSet(new URL(`${f.issuer}/.well-known/jwks.json`));
  const put = await f.server.admin('PUT', '/authorization-details-types/payment_initiation', { description: 'A payment from your account', schema: PAYMENT_SCHEMA });
  expect(put.status).toBe(201);
});
afterAll(() => f.server.stop());

describe('discovery', () => {
  it('names the PAR endpoint, the declared types and metadata document support', async () => {
    const doc = (await (await fetch(`${f.issuer}/.well-known/openid-configuration`)).json()) as any;
    expect(doc).toMatchObject({
      pushed_authorization_request_endpoint: `${f.issuer}/oauth/par`,
      require_pushed_authorization_requests: false,
      client_id_metadata_document_supported: true,
    });
    expect(doc.authorization_details_types_supported).toEqual(['payment_initiation']);
    // The agents' metadata keeps its response types; its token endpoint (CIBA, token exchange)
    // takes the same declared types.
    const as = (await (await fetch(`${f.issuer}/.well-known/oauth-authorization-server`)).json()) as any;
    expect(as.response_types_supported).toEqual([]);
    expect(as.client_id_metadata_document_supported).toBeUndefined();
    expect(as.authorization_details_types_supported).toEqual(['payment_initiation']);
  });
});

describe('pushed authorization requests (RFC 9126)', () => {
  it('openid-client pushes the request and signs in with the request_uri alone', async () => {
    const config = await discover(f, f.web);
    const p = await pkce();
    const url = await client.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: f.redirectUri, scope: 'openid email', code_challenge: p.challenge, code_challenge_method: 'S256', state: p.state,
    });
    expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    expect(url.searchParams.get('request_uri')).toMatch(/^urn:ietf:params:oauth:request_uri:/);
    const callback = await followSignIn(new Browser(f.issuer), url.toString(), { email: f.user.email, password: f.user.password });
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: p.verifier, expectedState: p.state });
    expect(tokens.claims()!.sub).toBe(f.user.id);

    // Single use: the same request_uri again is refused on the issuer's page.
    const again = await fetch(url, { redirect: 'manual' });
    expect(again.status).toBe(400);
    expect(await again.text()).toContain('invalid_request_uri');
  });

  it('answers 201 with a 60-second request_uri; a public client pushes with its client_id', async () => {
    const p = await pkce();
    const res = await postForm(`${f.issuer}/oauth/par`, {
      client_id: f.spa.client_id, redirect_uri: f.redirectUri, response_type: 'code', scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256',
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body.expires_in).toBe(60);
    expect(res.body.request_uri).toMatch(/^urn:ietf:params:oauth:request_uri:[A-Za-z0-9_-]{20,}$/);
  });

  it('refuses a wrong secret, an unregistered redirect URI and a pushed request_uri', async () => {
    const p = await pkce();
    const fields = { redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256' };
    const wrong = await postForm(`${f.issuer}/oauth/par`, fields, { authorization: basic(f.web.client_id, 'not-the-secret-not-the-secret-0000') });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const redirect = await postForm(`${f.issuer}/oauth/par`, { ...fields, redirect_uri: 'https://evil.example/cb' }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(redirect.status).toBe(400);
    expect(redirect.body.error).toBe('invalid_request');
    const nested = await postForm(`${f.issuer}/oauth/par`, { ...fields, request_uri: 'urn:ietf:params:oauth:request_uri:x' }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(nested.body.error).toBe('invalid_request');
  });

  it('an expired request_uri is refused', async () => {
    const p = await pkce();
    const res = await postForm(`${f.issuer}/oauth/par`, {
      client_id: f.spa.client_id, redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256',
    });
    // Sixty seconds later, as the database sees it.
    await f.server.ctx.store.sql.run('UPDATE pushed_authorization_requests SET expires_at = expires_at - 61');
    const page = await fetch(`${f.issuer}/oauth/authorize?client_id=${f.spa.client_id}&request_uri=${encodeURIComponent(res.body.request_uri)}`, { redirect: 'manual' });
    expect(page.status).toBe(400);
    expect(await page.text()).toMatch(/expired[\s\S]*invalid_request_uri/);
  });

  it('a request_uri is bound to the client that pushed it', async () => {
    const p = await pkce();
    const res = await postForm(`${f.issuer}/oauth/par`, {
      client_id: f.spa.client_id, redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256',
    });
    const page = await fetch(`${f.issuer}/oauth/authorize?client_id=${f.web.client_id}&request_uri=${encodeURIComponent(res.body.request_uri)}`, { redirect: 'manual' });
    expect(page.status).toBe(400);
    expect(await page.text()).toContain('invalid_request_uri');
  });

  it('an application with require_pushed_authorization_requests gets no code from a plain request', async () => {
    const app = await createApp(f.server, { type: 'web', redirect_uris: [f.redirectUri], require_pushed_authorization_requests: true });
    const read = await f.server.admin('GET', `/applications/${app.client_id}`);
    expect(read.body.require_pushed_authorization_requests).toBe(true);
    const p = await pkce();
    const plain = await fetch(
      `${f.issuer}/oauth/authorize?${new URLSearchParams({ client_id: app.client_id, redirect_uri: f.redirectUri, response_type: 'code', scope: 'openid', state: p.state, code_challenge: p.challenge, code_challenge_method: 'S256' })}`,
      { redirect: 'manual' },
    );
    expect(plain.status).toBe(302);
    const to = new URL(plain.headers.get('location')!);
    expect(to.searchParams.get('error')).toBe('invalid_request');
    expect(to.searchParams.get('state')).toBe(p.state);
    expect(to.searchParams.get('code')).toBeNull();

    // Through PAR it signs in as usual.
    await f.server.admin('PUT', `/applications/${app.client_id}/assignments/${f.user.id}`);
    const config = await discover(f, { client_id: app.client_id, client_secret: app.client_secret! });
    const url = await client.buildAuthorizationUrlWithPAR(config, { redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256', state: p.state });
    const callback = await followSignIn(new Browser(f.issuer), url.toString(), { email: f.user.email, password: f.user.password });
    expect(callback.searchParams.get('code')).toBeTruthy();

    const off = await f.server.admin('PATCH', `/applications/${app.client_id}`, { require_pushed_authorization_requests: false });
    expect(off.body.require_pushed_authorization_requests).toBe(false);
  });
});

describe('rich authorization requests (RFC 9396)', () => {
  it('authorization_details go through PAR, the consent page, the token response, the access token and introspection', async () => {
    const config = await discover(f, f.web);
    const p = await pkce();
    const details = [payment(240, 'Merchant <b>A</b>')];
    const url = await client.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256', state: p.state,
      authorization_details: JSON.stringify(details),
    });
    const browser = new RecordingBrowser(f.issuer);
    const callback = await followSignIn(browser, url.toString(), { email: f.user.email, password: f.user.password, consent: 'approve' });
    // The consent page (even for a first-party application) shows exactly what is approved, escaped.
    const consent = browser.pages.find((h) => h.includes('name="decision"'))!;
    expect(consent).toContain('payment_initiation');
    expect(consent).toContain('A payment from your account');
    expect(consent).toContain('240');
    expect(consent).toContain('DE02100100109307118603');
    expect(consent).toContain('Merchant &lt;b&gt;A&lt;/b&gt;');
    expect(consent).not.toContain('<b>A</b>');

    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: p.verifier, expectedState: p.state });
    expect(tokens.authorization_details).toEqual(details);
    const at = await jwtVerify(tokens.access_token, jwks, { issuer: f.issuer, typ: 'at+jwt' });
    expect(at.payload.authorization_details).toEqual(details);
    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    expect(introspected.authorization_details).toEqual(details);

    // A refreshed token carries the same details.
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect((await jwtVerify(refreshed.access_token, jwks)).payload.authorization_details).toEqual(details);
  });

  it('authorize takes authorization_details directly too; an undeclared type or a schema failure is invalid_authorization_details', async () => {
    const p = await pkce();
    const base = { client_id: f.spa.client_id, redirect_uri: f.redirectUri, response_type: 'code', scope: 'openid', state: p.state, code_challenge: p.challenge, code_challenge_method: 'S256' };
    const at = async (details: unknown) => {
      const res = await fetch(`${f.issuer}/oauth/authorize?${new URLSearchParams({ ...base, authorization_details: JSON.stringify(details) })}`, { redirect: 'manual' });
      return res.status === 302 ? new URL(res.headers.get('location')!, f.issuer) : undefined;
    };
    const ok = await at([payment(10)]);
    expect(ok!.origin).toBe(new URL(f.issuer).origin); // on to the sign-in page

    const undeclared = await at([{ type: 'account_information', actions: ['read'] }]);
    expect(undeclared!.searchParams.get('error')).toBe('invalid_authorization_details');
    expect(undeclared!.searchParams.get('error_description')).toContain('not declared');
    expect(undeclared!.searchParams.get('state')).toBe(p.state);

    const tooMuch = await at([payment(20000)]);
    expect(tooMuch!.searchParams.get('error')).toBe('invalid_authorization_details');
    expect(tooMuch!.searchParams.get('error_description')).toContain('/instructedAmount/amount');
    const extra = await at([{ ...payment(5), note: 'x' }]);
    expect(extra!.searchParams.get('error_description')).toContain('/note: is not allowed');
    const notJson = await fetch(`${f.issuer}/oauth/authorize?${new URLSearchParams({ ...base, authorization_details: '{oops' })}`, { redirect: 'manual' });
    expect(new URL(notJson.headers.get('location')!).searchParams.get('error')).toBe('invalid_authorization_details');
  });

  it('PAR refuses invalid authorization_details as JSON', async () => {
    const p = await pkce();
    const fields = { client_id: f.spa.client_id, redirect_uri: f.redirectUri, scope: 'openid', code_challenge: p.challenge, code_challenge_method: 'S256' };
    const undeclared = await postForm(`${f.issuer}/oauth/par`, { ...fields, authorization_details: JSON.stringify([{ type: 'nope' }]) });
    expect(undeclared.status).toBe(400);
    expect(undeclared.body.error).toBe('invalid_authorization_details');
    const invalid = await postForm(`${f.issuer}/oauth/par`, { ...fields, authorization_details: JSON.stringify([{ type: 'payment_initiation', instructedAmount: { currency: 'eur', amount: 1 }, creditorAccount: { iban: 'DE02100100109307118603' } }]) });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toBe('invalid_authorization_details');
    expect(invalid.body.error_description).toContain('/instructedAmount/currency');
  });
});

describe('authorization details types in the management API', () => {
  it('PUT declares and changes, GET reads and lists, DELETE removes', async () => {
    const schema = { type: 'object', properties: { files: { type: 'array', items: { type: 'string' }, maxItems: 10 } } };
    const created = await f.server.admin('PUT', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles', { description: 'Files', schema });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ type: 'https://example.com/files', description: 'Files', schema });
    const changed = await f.server.admin('PUT', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles', { description: 'Your files', schema });
    expect(changed.status).toBe(200);
    expect((await f.server.admin('GET', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles')).body.description).toBe('Your files');
    const list = await f.server.admin('GET', '/authorization-details-types');
    expect(list.body.data.map((t: { type: string }) => t.type)).toEqual(['https://example.com/files', 'payment_initiation']);
    expect((await f.server.admin('DELETE', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles')).status).toBe(204);
    expect((await f.server.admin('GET', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles')).status).toBe(404);
    expect((await f.server.admin('DELETE', '/authorization-details-types/https%3A%2F%2Fexample.com%2Ffiles')).status).toBe(404);
  });

  it('refuses a schema with a keyword the validator does not check, or a malformed one', async () => {
    const ref = await f.server.admin('PUT', '/authorization-details-types/x', { schema: { $ref: '#/defs/a' } });
    expect(ref.status).toBe(400);
    expect(ref.body.error_description).toContain('$ref is not supported');
    const bad = await f.server.admin('PUT', '/authorization-details-types/x', { schema: { type: 'money', maxLength: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.length).toBe(2);
    expect((await f.server.admin('PUT', '/authorization-details-types/x', { description: 'no schema' })).status).toBe(400);
  });
});

describe('the project file', () => {
  it('declares authorization_details_types and require_pushed_authorization_requests, idempotently', async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { startTestServer } = await import('../helpers/server.js');
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-project-'));
    const file = join(dir, 'project.json');
    writeFileSync(file, JSON.stringify({
      applications: [{ name: 'Bank', type: 'web', client_id: 'bank', client_secret: 'b'.repeat(40), redirect_uris: ['https://bank.example/cb'], require_pushed_authorization_requests: true }],
      authorization_details_types: [{ type: 'payment_initiation', description: 'A payment', schema: { type: 'object', required: ['amount'] } }],
    }));
    const server = await startTestServer({ env: { GATEHOUSE_PROJECT_FILE: file } });
    try {
      expect((await server.admin('GET', '/applications/bank')).body.require_pushed_authorization_requests).toBe(true);
      const t = await server.admin('GET', '/authorization-details-types/payment_initiation');
      expect(t.body).toMatchObject({ description: 'A payment', schema: { type: 'object', required: ['amount'] } });
      const { applyProjectFile } = await import('../../src/project-file.js');
      await applyProjectFile(server.ctx, file);
      expect((await server.admin('GET', '/authorization-details-types/payment_initiation')).body.updated_at).toBe(t.body.updated_at);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
