import { rmSync } from 'node:fs';
import { createRemoteJWKSet, decodeProtectedHeader, exportJWK, jwtVerify, SignJWT, generateKeyPair } from 'jose';
import { discoverAuthorizationServerMetadata, fetchToken } from '@modelcontextprotocol/sdk/client/auth.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, agentToken, assertion, JWT_BEARER, newKeyPair, postForm, registerAgent, type TestAgent } from './helpers.js';

let server: TestServer;
let bot: TestAgent;
let helper: TestAgent;

beforeAll(async () => {
  server = await startTestServer();
  bot = await registerAgent(server, {
    name: 'billing-bot',
    mode: 'autonomous',
    capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }, { name: 'read:invoices' }],
  });
  helper = await registerAgent(server, { name: 'assistant', mode: 'delegated', capabilities: [{ name: 'read:invoices' }] });
});
afterAll(async () => server?.stop());

const form = async (agent: TestAgent, o: Parameters<typeof assertion>[2] = {}, extra: Record<string, string> = {}) =>
  postForm(server.ctx.urls.agentToken, {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertion(server, agent, o),
    ...extra,
  });

describe('agent token endpoint: client_credentials', () => {
  it('issues an EdDSA at+jwt with the contract claims, verifiable against the JWK Set', async () => {
    const res = await agentToken(server, bot);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'create:refunds read:invoices' });
    const header = decodeProtectedHeader(res.body.access_token);
    expect(header).toMatchObject({ alg: 'EdDSA', typ: 'at+jwt' });
    const jwks = createRemoteJWKSet(new URL(server.ctx.urls.jwks));
    const { payload } = await jwtVerify(res.body.access_token, jwks, {
      issuer: server.ctx.urls.issuer,
      audience: server.ctx.urls.mcp,
      typ: 'at+jwt',
      algorithms: ['EdDSA'],
    });
    expect(payload).toMatchObject({ sub: bot.id, client_id: bot.id, scope: 'create:refunds read:invoices', capabilities: ['create:refunds', 'read:invoices'] });
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(typeof payload.jti).toBe('string');
    // every token issued is in the audit trail
    const audit = await server.ctx.store.audit.list({ agent_id: bot.id, kind: 'token' });
    expect(audit.some((r) => (r.context as { jti?: string }).jti === payload.jti)).toBe(true);
  });

  it('narrows to a requested scope and refuses an unknown capability', async () => {
    const narrowed = await agentToken(server, bot, { scope: 'read:invoices' });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.scope).toBe('read:invoices');
    const unknown = await agentToken(server, bot, { scope: 'read:invoices delete:everything' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toBe('invalid_scope');
  });

  it('accepts the MCP URL as resource and nothing else', async () => {
    expect((await agentToken(server, bot, { resource: server.ctx.urls.mcp })).status).toBe(200);
    const other = await agentToken(server, bot, { resource: 'https://elsewhere.example/api' });
    expect(other.status).toBe(400);
    expect(other.body.error).toBe('invalid_target');
  });

  it('accepts the issuer as audience, as a string or in an array', async () => {
    expect((await form(bot, { aud: server.ctx.urls.issuer })).status).toBe(200);
    expect((await form(bot, { aud: ['https://other.example', server.ctx.urls.agentToken] })).status).toBe(200);
  });

  it('refuses client_credentials to a delegated agent', async () => {
    const res = await agentToken(server, helper);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('unauthorized_client');
  });

  it('refuses a bad grant type and a missing one', async () => {
    const bad = await form(bot, {}, { grant_type: 'password' });
    expect(bad.body.error).toBe('unsupported_grant_type');
    const missing = await postForm(server.ctx.urls.agentToken, { client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, bot) });
    expect(missing.body.error).toBe('invalid_request');
  });
});

describe('agent token endpoint: the client assertion', () => {
  const expectInvalidClient = (res: { status: number; body: any }) => {
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  };

  it('refuses a replayed jti', async () => {
    const a = await assertion(server, bot);
    const fields = { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a };
    expect((await postForm(server.ctx.urls.agentToken, fields)).status).toBe(200);
    expectInvalidClient(await postForm(server.ctx.urls.agentToken, fields));
  });

  it('refuses an assertion signed by another key (a foreign key)', async () => {
    const other = await newKeyPair();
    expectInvalidClient(await form(bot, { key: other.privateKey }));
  });

  it('refuses any alg other than EdDSA: none, HS256 keyed with the public key, ES256', async () => {
    const t = Math.floor(Date.now() / 1000);
    const claims = { iss: bot.id, sub: bot.id, aud: server.ctx.urls.agentToken, exp: t + 60, iat: t };
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const none = `${b64({ alg: 'none' })}.${b64({ ...claims, jti: 'n1' })}.`;
    const hs = await new SignJWT({ ...claims, jti: 'h1' })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(JSON.stringify(bot.publicJwk)));
    const ec = await generateKeyPair('ES256');
    const es = await new SignJWT({ ...claims, jti: 'e1' }).setProtectedHeader({ alg: 'ES256' }).sign(ec.privateKey);
    for (const a of [none, hs, es]) {
      expectInvalidClient(
        await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a }),
      );
    }
  });

  it('refuses a wrong audience, iss ≠ sub, missing exp/iat/jti, and exp more than 5 minutes ahead', async () => {
    expectInvalidClient(await form(bot, { aud: 'https://elsewhere.example/token' }));
    expectInvalidClient(await form(bot, { sub: 'spiffe://localhost/agent/someone-else' }));
    expectInvalidClient(await form(bot, { omit: ['exp'] }));
    expectInvalidClient(await form(bot, { omit: ['iat'] }));
    expectInvalidClient(await form(bot, { omit: ['jti'] }));
    expectInvalidClient(await form(bot, { expIn: 3600 }));
    expectInvalidClient(await form(bot, { expIn: -120 }));
    expect((await form(bot, { expIn: 300 })).status).toBe(200);
  });

  it('refuses a missing assertion, a wrong assertion type and an unknown agent', async () => {
    expectInvalidClient(await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials' }));
    expectInvalidClient(
      await postForm(server.ctx.urls.agentToken, {
        grant_type: 'client_credentials',
        client_assertion_type: 'urn:example:other',
        client_assertion: await assertion(server, bot),
      }),
    );
    const ghost = { ...bot, id: 'spiffe://localhost/agent/ghost' };
    expectInvalidClient(await form(ghost));
  });

  it('refuses a revoked agent, and its existing tokens stop working', async () => {
    const doomed = await registerAgent(server, { name: 'doomed', mode: 'autonomous', capabilities: [{ name: 'read:invoices' }] });
    const token = await accessTokenFor(server, doomed);
    const revoked = await server.admin('POST', `/agents/${encodeURIComponent(doomed.id)}/revoke`);
    expect(revoked.status).toBe(204);
    expectInvalidClient(await agentToken(server, doomed));
    const bind = await fetch(server.ctx.urls.transactionToken, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'read:invoices', resource: 'invoice:1', context: {} }),
    });
    expect(bind.status).toBe(401);
  });
});

describe('the MCP SDK as the client', () => {
  it("gets a token with the SDK's own PrivateKeyJwtProvider (Ed25519 JWK) and discovered metadata", async () => {
    const metadata = await discoverAuthorizationServerMetadata(server.ctx.urls.issuer);
    expect(metadata?.token_endpoint).toBe(server.ctx.urls.agentToken);
    const provider = new PrivateKeyJwtProvider({
      clientId: bot.id,
      privateKey: (await exportJWK(bot.privateKey)) as Record<string, unknown>,
      algorithm: 'EdDSA',
      expectedIssuer: server.ctx.urls.issuer,
    });
    const tokens = await fetchToken(provider, server.ctx.urls.issuer, { metadata, resource: new URL(server.ctx.urls.mcp) });
    expect(tokens.token_type).toBe('Bearer');
    const { payload } = await jwtVerify(tokens.access_token, createRemoteJWKSet(new URL(server.ctx.urls.jwks)), {
      issuer: server.ctx.urls.issuer,
      audience: server.ctx.urls.mcp,
    });
    expect(payload.sub).toBe(bot.id);
  });
});

describe('jti replay protection survives a restart', () => {
  it('refuses the same assertion after the server restarts on the same database', async () => {
    const first = await startTestServer();
    const dir = first.dir;
    let second: TestServer | undefined;
    try {
      const agent = await registerAgent(first, { name: 'restarter', mode: 'autonomous', capabilities: [{ name: 'read:invoices' }] });
      const a = await assertion(first, agent, { aud: first.ctx.urls.issuer });
      const fields = { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a };
      expect((await postForm(first.ctx.urls.agentToken, fields)).status).toBe(200);
      await first.close();
      second = await startTestServer({ dir });
      // the issuer follows the new port: the assertion names the old issuer, so sign the same jti afresh
      const replay = await assertion(second, agent, { aud: second.ctx.urls.issuer, jti: JSON.parse(Buffer.from(a.split('.')[1]!, 'base64url').toString()).jti });
      const res = await postForm(second.ctx.urls.agentToken, { ...fields, client_assertion: replay });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
    } finally {
      await second?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
