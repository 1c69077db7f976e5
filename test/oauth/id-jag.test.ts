import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as client from 'openid-client';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startUpstream, type TestUpstream } from '../mcp/upstream.js';
import { assign, Browser, createApp, createUser, followSignIn, postForm, basic } from './helpers.js';

/**
 * The enterprise flow between two Gatehouse instances: `idp` is the enterprise's identity
 * provider, `as` the authorization server in front of an MCP server. A person signs in at the
 * IdP; the client trades the ID token for an ID-JAG there, redeems it at `as` (jwt-bearer, the
 * client authenticated as `as`'s delegated agent) and calls a tool through `as`'s gateway.
 */

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';
const ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const REDIRECT = 'http://localhost:9/callback';
const PASSWORD = 'correct horse battery staple';

let idp: TestServer;
let as: TestServer;
let upstream: TestUpstream;
let app: { client_id: string; client_secret: string };
let ada: { id: string };
let agent: { id: string; key: CryptoKey };
/** A second identity provider trusted by `as` whose keys the test holds (to forge what the IdP would never sign). */
let partner: { issuer: string; key: CryptoKey };
let idpConfig: client.Configuration;
let asConfig: client.Configuration;
let idToken: string;

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

async function signIn(): Promise<string> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(idpConfig, {
    redirect_uri: REDIRECT,
    scope: 'openid email',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  });
  const callback = await followSignIn(new Browser(idp.ctx.urls.issuer), url.toString(), { email: 'ada@example.com', password: PASSWORD });
  const tokens = await client.authorizationCodeGrant(idpConfig, callback, { pkceCodeVerifier: verifier, expectedState: state });
  return tokens.id_token!;
}

/** The token exchange at the IdP, as openid-client sends it. */
function exchange(parameters: Record<string, string>) {
  return client.genericGrantRequest(idpConfig, TOKEN_EXCHANGE, {
    requested_token_type: ID_JAG,
    subject_token: idToken,
    subject_token_type: ID_TOKEN,
    audience: as.ctx.urls.issuer,
    resource: as.ctx.urls.mcp,
    scope: 'invoke:tools',
    ...parameters,
  });
}

/** The jwt-bearer grant at `as`, raw (openid-client throws on refusals; the tests read them). */
async function redeem(assertion: string) {
  const clientAssertion = await new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .setIssuer(agent.id)
    .setSubject(agent.id)
    .setAudience(as.ctx.urls.issuer)
    .setIssuedAt()
    .setExpirationTime('2m')
    .sign(agent.key);
  return postForm(as.ctx.urls.token, {
    grant_type: JWT_BEARER,
    assertion,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: clientAssertion,
  });
}

async function freshIdJag(parameters: Record<string, string> = {}): Promise<string> {
  return (await exchange(parameters)).access_token;
}

/** An ID-JAG signed by the partner's key, with `claims` over sound defaults. */
async function partnerIdJag(claims: JWTPayload, typ = 'oauth-id-jag+jwt'): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    sub: 'ada-at-partner',
    client_id: agent.id,
    jti: randomUUID(),
    email: 'ada@example.com',
    scope: 'invoke:tools',
    iat: now,
    exp: now + 300,
    ...claims,
  })
    .setProtectedHeader({ alg: 'ES256', typ })
    .setIssuer(partner.issuer)
    .setAudience(as.ctx.urls.issuer)
    .sign(partner.key);
}

beforeAll(async () => {
  idp = await startTestServer();
  // `as` fetches the IdP's keys from localhost: allowed here by configuration only.
  as = await startTestServer({ env: { GATEHOUSE_OUTBOUND_ALLOW_PRIVATE: 'true' } });
  upstream = await startUpstream();

  // At `as`: the person (known by email), the client as a delegated agent, the MCP upstream, the IdP trusted.
  expect((await as.admin('POST', '/roles', { name: 'tool-user', permissions: ['invoke:tools'] })).status).toBe(201);
  expect((await as.admin('POST', '/users', { email: 'ada@example.com', password: PASSWORD, name: 'Ada', roles: ['tool-user'] })).status).toBe(201);
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const created = await as.admin('POST', '/agents', {
    name: 'wiki-assistant', mode: 'delegated', public_jwk: await exportJWK(publicKey), roles: ['tool-user'], capabilities: [{ name: 'invoke:tools' }],
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  agent = { id: created.body.agent_id, key: privateKey };
  expect((await as.admin('POST', '/mcp/upstreams', { name: 'wiki', url: upstream.url, tools: [] })).status).toBe(201);
  const trusted = await as.admin('POST', '/trusted-issuers', { issuer: idp.ctx.urls.issuer, jwks_uri: idp.ctx.urls.jwks, subject_mapping: 'email' });
  expect(trusted.status, JSON.stringify(trusted.body)).toBe(201);
  const partnerKeys = await generateKeyPair('ES256');
  partner = { issuer: 'https://partner-idp.example', key: partnerKeys.privateKey };
  const partnerTrusted = await as.admin('POST', '/trusted-issuers', {
    issuer: partner.issuer, jwks: { keys: [{ ...(await exportJWK(partnerKeys.publicKey)), kid: 'p1', alg: 'ES256' }] }, subject_mapping: 'email',
  });
  expect(partnerTrusted.status, JSON.stringify(partnerTrusted.body)).toBe(201);

  // At the IdP: the client's application, allowed to ask for `as` (where it is the agent) and one more server.
  app = (await createApp(idp, {
    type: 'web', redirect_uris: [REDIRECT],
    id_jag_audiences: [{ audience: as.ctx.urls.issuer, client_id: agent.id }, { audience: 'https://elsewhere.example' }],
  })) as { client_id: string; client_secret: string };
  ada = await createUser(idp, { email: 'ada@example.com', password: PASSWORD, name: 'Ada Lovelace', email_verified: true });
  await assign(idp, app.client_id, ada.id);

  const insecure = { execute: [client.allowInsecureRequests] };
  idpConfig = await client.discovery(new URL(idp.ctx.urls.issuer), app.client_id, app.client_secret, client.ClientSecretBasic(app.client_secret), insecure);
  // The agent endpoints name Ed25519 signatures `EdDSA` (openid-client would write `Ed25519`).
  const eddsa = { [client.modifyAssertion]: (header: { alg?: string }) => void (header.alg = 'EdDSA') };
  asConfig = await client.discovery(new URL(as.ctx.urls.issuer), agent.id, undefined, client.PrivateKeyJwt(agent.key, eddsa), insecure);
  idToken = await signIn();
}, 30_000);

afterAll(async () => {
  await upstream?.close();
  await idp?.stop();
  await as?.stop();
});

describe('ID-JAG between two Gatehouse instances', () => {
  it('the IdP issues an ID-JAG, the other server redeems it, and the MCP SDK client reaches a tool with the token', async () => {
    const issued = await exchange({});
    expect(issued).toMatchObject({ issued_token_type: ID_JAG, token_type: 'n_a', expires_in: 300, scope: 'invoke:tools' });
    expect(decodeProtectedHeader(issued.access_token).typ).toBe('oauth-id-jag+jwt');
    const claims = decodeJwt(issued.access_token);
    expect(claims).toMatchObject({
      iss: idp.ctx.urls.issuer, sub: ada.id, aud: as.ctx.urls.issuer, client_id: agent.id,
      resource: as.ctx.urls.mcp, scope: 'invoke:tools', email: 'ada@example.com',
    });
    expect(typeof claims.jti).toBe('string');
    expect(claims.exp! - claims.iat!).toBe(300);

    // openid-client sends the jwt-bearer grant, the agent authenticated by private_key_jwt.
    const tokens = await client.genericGrantRequest(asConfig, JWT_BEARER, { assertion: issued.access_token });
    const access = decodeJwt(tokens.access_token);
    const person = (await as.admin('GET', '/users')).body.data.find((u: { email: string }) => u.email === 'ada@example.com');
    expect(access).toMatchObject({ iss: as.ctx.urls.issuer, sub: person.id, act: { sub: agent.id }, aud: as.ctx.urls.mcp, capabilities: ['invoke:tools'] });

    const mcp = new Client({ name: 'wiki', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(as.ctx.urls.mcp), { requestInit: { headers: { Authorization: `Bearer ${tokens.access_token}` } } }));
    try {
      const result = (await mcp.callTool({ name: 'wiki.echo', arguments: { text: 'from the enterprise' } })) as CallToolResult;
      expect(result.isError, text(result)).toBeFalsy();
      expect(upstream.calls.at(-1)).toMatchObject({ tool: 'echo', args: { text: 'from the enterprise' } });
    } finally {
      await mcp.close();
    }
    const vouched = await idp.admin('GET', '/audit?kind=token&limit=20');
    expect(vouched.body.data).toEqual(expect.arrayContaining([
      expect.objectContaining({ action: 'token:id-jag', user_id: ada.id, resource: as.ctx.urls.issuer, caller: app.client_id, decision: 'issued' }),
    ]));
    const audit = await as.admin('GET', '/audit?kind=token&limit=20');
    expect(audit.body.data.some((r: { action: string; user_id: string }) => r.action === 'token:jwt-bearer' && r.user_id === person.id)).toBe(true);
  });

  it('refuses a replayed ID-JAG (its jti)', async () => {
    const idJag = await freshIdJag();
    expect((await redeem(idJag)).status).toBe(200);
    const again = await redeem(idJag);
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('already used') });
    const audit = await as.admin('GET', `/audit?kind=token&agent_id=${encodeURIComponent(agent.id)}&limit=1`);
    expect(audit.body.data[0]).toMatchObject({ action: 'token:jwt-bearer', decision: 'refused', reason: expect.stringContaining('already used') });
  });

  it('refuses an ID-JAG for another authorization server (aud)', async () => {
    const elsewhere = await freshIdJag({ audience: 'https://elsewhere.example' });
    expect(decodeJwt(elsewhere).aud).toBe('https://elsewhere.example');
    const r = await redeem(elsewhere);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('aud') });
  });

  it('refuses an ID-JAG from an issuer it does not trust', async () => {
    const rogue = await generateKeyPair('ES256');
    const now = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ sub: ada.id, client_id: agent.id, jti: randomUUID(), email: 'ada@example.com', iat: now, exp: now + 300 })
      .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt' })
      .setIssuer('https://rogue.example')
      .setAudience(as.ctx.urls.issuer)
      .sign(rogue.privateKey);
    const r = await redeem(forged);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('not trusted') });

    // Removing a trusted issuer stops its ID-JAGs at once.
    const idJag = await freshIdJag();
    expect((await as.admin('DELETE', `/trusted-issuers/${encodeURIComponent(idp.ctx.urls.issuer)}`)).status).toBe(204);
    try {
      expect((await redeem(idJag)).body.error_description).toContain('not trusted');
    } finally {
      expect((await as.admin('POST', '/trusted-issuers', { issuer: idp.ctx.urls.issuer, jwks_uri: idp.ctx.urls.jwks })).status).toBe(201);
    }
  });

  it('refuses to issue one for a person no longer assigned to the application', async () => {
    expect((await idp.admin('DELETE', `/applications/${app.client_id}/assignments/${ada.id}`)).status).toBe(204);
    try {
      await expect(exchange({})).rejects.toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('not assigned') });
    } finally {
      await assign(idp, app.client_id, ada.id);
    }
  });

  it('refuses an expired ID-JAG', async () => {
    const now = Math.floor(Date.now() / 1000);
    const r = await redeem(await partnerIdJag({ iat: now - 900, exp: now - 600 }));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('expired') });
    // the same, fresh, is redeemed (the refusal was the time, not the issuer)
    expect((await redeem(await partnerIdJag({}))).status).toBe(200);
  });

  it('refuses an audience not on the application\'s allow-list', async () => {
    await expect(exchange({ audience: 'https://not-listed.example' })).rejects.toMatchObject({ error: 'invalid_target' });
    await expect(exchange({ audience: idp.ctx.urls.issuer })).rejects.toMatchObject({ error: 'invalid_target' });
  });

  it('checks the rest of the assertion: typ, client_id, the person, the subject token', async () => {
    const wrongTyp = await redeem(await partnerIdJag({}, 'JWT'));
    expect(wrongTyp.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('typ') });
    const otherClient = await redeem(await partnerIdJag({ client_id: 'someone-else' }));
    expect(otherClient.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('client_id') });
    const stranger = await redeem(await partnerIdJag({ email: 'nobody@example.com' }));
    expect(stranger.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('no person') });
    // An access token is not an identity assertion.
    const raw = await postForm(idp.ctx.urls.token, {
      grant_type: TOKEN_EXCHANGE, requested_token_type: ID_JAG, subject_token_type: ID_TOKEN, audience: as.ctx.urls.issuer,
      subject_token: (await redeemFresh()).access_token,
    }, { authorization: basic(app.client_id, app.client_secret) });
    expect(raw.body).toMatchObject({ error: 'invalid_grant' });
    // Without client authentication: invalid_client.
    const anonymous = await postForm(as.ctx.urls.token, { grant_type: JWT_BEARER, assertion: await freshIdJag() });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error).toBe('invalid_client');
  });

  it('advertises both grants in both metadata documents', async () => {
    const oidc = (await (await fetch(`${idp.ctx.urls.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    expect(oidc.grant_types_supported).toEqual(expect.arrayContaining([TOKEN_EXCHANGE, JWT_BEARER]));
    expect(oidc.identity_chaining_requested_token_types_supported).toEqual([ID_JAG]);
    const meta = (await (await fetch(`${as.ctx.urls.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.grant_types_supported).toEqual(expect.arrayContaining([JWT_BEARER]));
  });
});

describe('trusted issuers in the management API', () => {
  it('validates what it keeps', async () => {
    const both = await as.admin('POST', '/trusted-issuers', { issuer: 'https://x.example', jwks_uri: 'https://x.example/jwks', jwks: { keys: [] } });
    expect(both.status).toBe(400);
    const priv = (await generateKeyPair('ES256', { extractable: true })).privateKey;
    const secret = await as.admin('POST', '/trusted-issuers', { issuer: 'https://x.example', jwks: { keys: [await exportJWK(priv)] } });
    expect(secret.status).toBe(400);
    expect(JSON.stringify(secret.body)).toContain('public key');
    const dup = await as.admin('POST', '/trusted-issuers', { issuer: partner.issuer, jwks_uri: 'https://partner-idp.example/jwks' });
    expect(dup.status).toBe(409);
    const self = await as.admin('POST', '/trusted-issuers', { issuer: as.ctx.urls.issuer, jwks_uri: as.ctx.urls.jwks });
    expect(self.status).toBe(400);
    const list = await as.admin('GET', '/trusted-issuers');
    expect(list.body.data.map((i: { issuer: string }) => i.issuer).sort()).toEqual([idp.ctx.urls.issuer, partner.issuer].sort());
  });

  it('refuses a JWKS URI on a private address unless configured to allow it', async () => {
    const r = await idp.admin('POST', '/trusted-issuers', { issuer: 'https://y.example', jwks_uri: 'http://127.0.0.1:9/jwks' });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('not a public address');
  });

  it("keeps an application's id_jag_audiences", async () => {
    const read = await idp.admin('GET', `/applications/${app.client_id}`);
    expect(read.body.id_jag_audiences).toEqual([
      { audience: 'https://elsewhere.example', client_id: null },
      { audience: as.ctx.urls.issuer, client_id: agent.id },
    ].sort((a, b) => a.audience.localeCompare(b.audience)));
    const bad = await idp.admin('PATCH', `/applications/${app.client_id}`, { id_jag_audiences: [{ audience: 'not a url' }] });
    expect(bad.status).toBe(400);
  });
});

/** A fresh person access token at the IdP (the code flow), to offer as a wrong subject token. */
async function redeemFresh() {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(idpConfig, {
    redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state,
  });
  const callback = await followSignIn(new Browser(idp.ctx.urls.issuer), url.toString(), { email: 'ada@example.com', password: PASSWORD });
  return client.authorizationCodeGrant(idpConfig, callback, { pkceCodeVerifier: verifier, expectedState: state });
}

describe('other clients redeeming an ID-JAG', () => {
  it('an application gets a person access token, only for a person assigned to it', async () => {
    const web = (await createApp(as, { type: 'web', redirect_uris: [REDIRECT] })) as { client_id: string; client_secret: string };
    const auth = { authorization: basic(web.client_id, web.client_secret) };
    const person = (await as.admin('GET', '/users')).body.data.find((u: { email: string }) => u.email === 'ada@example.com');
    const unassigned = await postForm(as.ctx.urls.token, { grant_type: JWT_BEARER, assertion: await partnerIdJag({ client_id: web.client_id }) }, auth);
    expect(unassigned.body).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('not assigned') });
    await assign(as, web.client_id, person.id);
    const ok = await postForm(as.ctx.urls.token, { grant_type: JWT_BEARER, assertion: await partnerIdJag({ client_id: web.client_id, scope: 'profile' }) }, auth);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toMatchObject({ token_type: 'Bearer', scope: 'profile' });
    expect(decodeJwt(ok.body.access_token)).toMatchObject({ sub: person.id, aud: web.client_id, client_id: web.client_id });
    const audit = await as.admin('GET', '/audit?kind=token&limit=5');
    expect(audit.body.data[0]).toMatchObject({ action: 'token:jwt-bearer', user_id: person.id, caller: web.client_id });
  });

  it('the agent token endpoint (the one the MCP metadata names) redeems one too', async () => {
    const clientAssertion = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA' })
      .setIssuer(agent.id)
      .setSubject(agent.id)
      .setAudience(as.ctx.urls.issuer)
      .setIssuedAt()
      .setExpirationTime('2m')
      .sign(agent.key);
    const r = await postForm(as.ctx.urls.agentToken, {
      grant_type: JWT_BEARER,
      assertion: await freshIdJag(),
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: clientAssertion,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(decodeJwt(r.body.access_token)).toMatchObject({ act: { sub: agent.id }, aud: as.ctx.urls.mcp });
  });
});
