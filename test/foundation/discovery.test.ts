import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let base: string;

beforeAll(async () => {
  server = await startTestServer();
  base = server.ctx.urls.issuer;
});
afterAll(async () => server.stop());

async function getJson(path: string) {
  const res = await fetch(`${server.url}${path}`);
  return { res, body: (await res.json()) as Record<string, any> };
}

describe('discovery documents', () => {
  it('openid-configuration has exactly the fields and values of the description', async () => {
    const { res, body } = await getJson('/.well-known/openid-configuration');
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
    expect(body).toEqual({
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      userinfo_endpoint: `${base}/oauth/userinfo`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      revocation_endpoint: `${base}/oauth/token/revoke`,
      end_session_endpoint: `${base}/oauth/logout`,
      introspection_endpoint: `${base}/oauth/token/introspect`,
      response_types_supported: ['code'],
      grant_types_supported: [
        'authorization_code', 'refresh_token', 'client_credentials',
        'urn:ietf:params:oauth:grant-type:token-exchange', 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      ],
      identity_chaining_requested_token_types_supported: ['urn:ietf:params:oauth:token-type:id-jag'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
      claims_supported: [
        'sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'c_hash',
        'email', 'email_verified', 'name', 'scope', 'groups', 'roles',
      ],
      acr_values_supported: [
        'urn:service:acr:1fa', 'urn:service:acr:mfa', 'urn:service:acr:passkey', 'urn:service:acr:passkey_mfa',
      ],
      pushed_authorization_request_endpoint: `${base}/oauth/par`,
      require_pushed_authorization_requests: false,
      authorization_details_types_supported: [],
      client_id_metadata_document_supported: true,
      dpop_signing_alg_values_supported: ['ES256', 'EdDSA'],
    });
  });

  it('the agents authorization server metadata (RFC 8414) carries authorization_endpoint too', async () => {
    const { body } = await getJson('/.well-known/oauth-authorization-server');
    expect(body).toEqual({
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/apis/regional/v1/ai/auth/token`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      grant_types_supported: ['client_credentials', 'urn:openid:params:grant-type:ciba', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'urn:ietf:params:oauth:grant-type:token-exchange'],
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      token_endpoint_auth_signing_alg_values_supported: ['EdDSA'],
      access_token_signing_alg_values_supported: ['EdDSA'],
      backchannel_authentication_endpoint: `${base}/apis/regional/v1/ai/auth/backchannel-authorize`,
      backchannel_token_delivery_modes_supported: ['poll'],
      backchannel_user_code_parameter_supported: false,
      agent_configuration_endpoint: `${base}/.well-known/agent-configuration`,
      response_types_supported: [],
      dpop_signing_alg_values_supported: ['ES256', 'EdDSA'],
      authorization_details_types_supported: [],
    });
  });

  it('agent-configuration', async () => {
    const { body } = await getJson('/.well-known/agent-configuration');
    expect(body).toEqual({
      modes: ['delegated', 'autonomous'],
      algorithms: ['EdDSA'],
      agent_id_scheme: 'spiffe',
      approval_methods: ['ciba', 'service_hitl'],
      default_location: `${base}/mcp`,
      endpoints: {
        token: `${base}/apis/regional/v1/ai/auth/token`,
        backchannel_authorize: `${base}/apis/regional/v1/ai/auth/backchannel-authorize`,
      },
    });
  });

  it('oauth-protected-resource (RFC 9728) names the MCP gateway', async () => {
    const { body } = await getJson('/.well-known/oauth-protected-resource');
    expect(body).toEqual({
      resource: `${base}/mcp`,
      authorization_servers: [base],
      dpop_signing_alg_values_supported: ['ES256', 'EdDSA'],
      dpop_bound_access_tokens_required: false,
    });
  });

  it('ssf-configuration lists the four event types and the stream endpoints', async () => {
    const { body } = await getJson('/.well-known/ssf-configuration');
    expect(body.issuer).toBe(base);
    expect(body.jwks_uri).toBe(`${base}/.well-known/jwks.json`);
    expect(body.configuration_endpoint).toBe(`${base}/v1/ssf/streams`);
    expect(body.delivery_methods_supported).toEqual(['urn:ietf:rfc:8935']);
    expect(body.spec_version).toBe('1_0');
    expect(body.events_supported).toEqual([
      'https://schemas.openid.net/secevent/caep/event-type/session-revoked',
      'https://schemas.openid.net/secevent/caep/event-type/token-claims-change',
      'https://schemas.openid.net/secevent/risc/event-type/account-purged',
      'https://schemas.openid.net/secevent/risc/event-type/credential-compromise',
    ]);
    for (const f of ['status_endpoint', 'add_subject_endpoint', 'remove_subject_endpoint', 'verification_endpoint']) {
      expect(body[f]).toMatch(new RegExp(`^${base}/v1/ssf/`));
    }
  });
});

describe('keys', () => {
  it('publishes one RS256 and one Ed25519 key with public members only, on both paths', async () => {
    const { res, body } = await getJson('/.well-known/jwks.json');
    expect(res.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    const algs = body.keys.map((k: any) => k.alg).sort();
    expect(algs).toEqual(['EdDSA', 'RS256']);
    for (const k of body.keys) {
      expect(k.kid).toMatch(/^[\w-]{43}$/);
      for (const priv of ['d', 'p', 'q', 'dp', 'dq', 'qi']) expect(k).not.toHaveProperty(priv);
    }
    expect(body.keys.find((k: any) => k.alg === 'EdDSA')).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
    expect(body.keys.find((k: any) => k.alg === 'RS256')).toMatchObject({ kty: 'RSA', e: 'AQAB' });
    const oidc = await getJson('/oidc/.well-known/jwks.json');
    expect(oidc.body).toEqual(body);
  });

  it('a JWT the service signed verifies against the JWK Set, for each algorithm', async () => {
    const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
    for (const alg of ['RS256', 'EdDSA'] as const) {
      const token = await server.ctx.keys.sign(alg, { iss: base, sub: 'x', aud: 'y', exp: Math.floor(Date.now() / 1000) + 60 }, 'at+jwt');
      const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: base, audience: 'y', algorithms: [alg] });
      expect(payload.sub).toBe('x');
      expect(protectedHeader.kid).toBe(await server.ctx.keys.activeKid(alg));
      expect(decodeProtectedHeader(token).typ).toBe('at+jwt');
    }
  });

  it('refuses to verify alg none and another algorithm than asked', async () => {
    const token = await server.ctx.keys.sign('RS256', { sub: 'x' });
    await expect(server.ctx.keys.verify(token, 'EdDSA')).rejects.toThrow();
    const [, payload] = token.split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: await server.ctx.keys.activeKid('RS256') })).toString('base64url')}.${payload}.`;
    await expect(server.ctx.keys.verify(none, 'RS256')).rejects.toThrow();
  });
});

describe('service basics', () => {
  it('healthz', async () => {
    const { res, body } = await getJson('/healthz');
    expect(res.status).toBe(200);
    expect(body).toEqual({ status: 'ok' });
  });

  it('echoes or makes a request id', async () => {
    const a = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'abc-123' } });
    expect(a.headers.get('x-request-id')).toBe('abc-123');
    const b = await fetch(`${server.url}/healthz`);
    expect(b.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('/mcp without a valid token answers 401 with the resource metadata challenge', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-a-token' }] as Record<string, string>[]) {
      const res = await fetch(`${server.url}/mcp`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource"`,
      );
    }
  });

  it('/mcp answers a CORS preflight without a token and lets browsers read the challenge', async () => {
    const pre = await fetch(`${server.url}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: 'https://inspector.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    const res = await fetch(`${server.url}/mcp`, { method: 'POST', headers: { origin: 'https://inspector.example', 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers.get('access-control-expose-headers')).toMatch(/WWW-Authenticate/);
  });

  it('an unknown path is a 404 in the error shape', async () => {
    const res = await fetch(`${server.url}/no/such/thing`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'not_found', error_description: 'no such endpoint' });
  });

  it('malformed JSON is a 400 and an oversized body a 413, never a 500', async () => {
    const bad = await fetch(`${server.url}/admin/v1/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{"email": ',
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('invalid_request');
    const big = await fetch(`${server.url}/admin/v1/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pad: 'x'.repeat(400_000) }),
    });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: string }).error).toBe('invalid_request');
  });
});
