import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The description's "Discovery document fields" and "JWK Set", checked field by field. */
let s: TestServer;
let base: string;

beforeAll(async () => {
  s = await startTestServer();
  base = s.ctx.urls.issuer;
});
afterAll(() => s.stop());

async function getJson(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return (await res.json()) as Record<string, any>;
}

describe('Discovery document fields: OpenID configuration', () => {
  it('has every field with the stated values, built on the issuer', async () => {
    const d = await getJson('/.well-known/openid-configuration');
    expect(d.issuer).toBe(base);
    expect(d.authorization_endpoint).toBe(`${base}/oauth/authorize`);
    expect(d.token_endpoint).toBe(`${base}/oauth/token`);
    expect(d.userinfo_endpoint).toBe(`${base}/oauth/userinfo`);
    expect(d.jwks_uri).toBe(`${base}/.well-known/jwks.json`);
    expect(d.revocation_endpoint).toBe(`${base}/oauth/token/revoke`);
    expect(d.end_session_endpoint).toBe(`${base}/oauth/logout`);
    expect(d.introspection_endpoint).toBe(`${base}/oauth/token/introspect`);
    expect(d.response_types_supported).toEqual(['code']);
    expect([...d.grant_types_supported].sort()).toEqual([
      'authorization_code', 'client_credentials', 'refresh_token',
      'urn:ietf:params:oauth:grant-type:jwt-bearer', 'urn:ietf:params:oauth:grant-type:token-exchange',
    ]);
    expect(d.identity_chaining_requested_token_types_supported).toEqual(['urn:ietf:params:oauth:token-type:id-jag']);
    expect(d.subject_types_supported).toEqual(['public']);
    expect(d.id_token_signing_alg_values_supported).toEqual(['RS256']);
    expect([...d.token_endpoint_auth_methods_supported].sort()).toEqual(['client_secret_basic', 'client_secret_post', 'none']);
    expect(d.code_challenge_methods_supported).toEqual(['S256']);
    expect([...d.scopes_supported].sort()).toEqual(['email', 'offline_access', 'openid', 'profile']);
    expect([...d.claims_supported].sort()).toEqual(
      ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'c_hash', 'email', 'email_verified', 'name', 'scope', 'groups', 'roles'].sort(),
    );
    expect([...d.acr_values_supported].sort()).toEqual(
      ['urn:service:acr:1fa', 'urn:service:acr:mfa', 'urn:service:acr:passkey', 'urn:service:acr:passkey_mfa'].sort(),
    );
  });

  it('needs no authentication, even with a bogus Authorization header', async () => {
    const d = await getJson('/.well-known/openid-configuration', { authorization: 'Bearer nonsense' });
    expect(d.issuer).toBe(base);
  });
});

describe('Discovery document fields: authorization server metadata for agents', () => {
  it('has the RFC 8414 fields of the description', async () => {
    const d = await getJson('/.well-known/oauth-authorization-server');
    expect(d.issuer).toBe(base);
    expect(d.token_endpoint).toBe(`${base}/apis/regional/v1/ai/auth/token`);
    expect(d.jwks_uri).toBe(`${base}/.well-known/jwks.json`);
    expect([...d.grant_types_supported].sort()).toEqual(['client_credentials', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'urn:ietf:params:oauth:grant-type:token-exchange', 'urn:openid:params:grant-type:ciba']);
    expect(d.token_endpoint_auth_methods_supported).toEqual(['private_key_jwt']);
    expect(d.token_endpoint_auth_signing_alg_values_supported).toEqual(['EdDSA']);
    expect(d.access_token_signing_alg_values_supported).toEqual(['EdDSA']);
    expect(d.backchannel_authentication_endpoint).toBe(`${base}/apis/regional/v1/ai/auth/backchannel-authorize`);
    expect(d.backchannel_token_delivery_modes_supported).toEqual(['poll']);
    expect(d.backchannel_user_code_parameter_supported).toBe(false);
    expect(d.agent_configuration_endpoint).toBe(`${base}/.well-known/agent-configuration`);
    expect(d.response_types_supported).toEqual([]);
    // the MCP SDK needs it
    expect(d.authorization_endpoint).toBe(`${base}/oauth/authorize`);
  });
});

describe('Discovery document fields: agent configuration', () => {
  it('has modes, algorithms, scheme, approval methods, location and endpoints', async () => {
    const d = await getJson('/.well-known/agent-configuration');
    expect([...d.modes].sort()).toEqual(['autonomous', 'delegated']);
    expect(d.algorithms).toEqual(['EdDSA']);
    expect(d.agent_id_scheme).toBe('spiffe');
    expect([...d.approval_methods].sort()).toEqual(['ciba', 'service_hitl']);
    expect(d.default_location).toBe(`${base}/mcp`);
    expect(d.endpoints.token).toBe(`${base}/apis/regional/v1/ai/auth/token`);
    expect(d.endpoints.backchannel_authorize).toBe(`${base}/apis/regional/v1/ai/auth/backchannel-authorize`);
  });
});

describe('Discovery document fields: protected resource metadata', () => {
  it('names the MCP gateway and the issuer', async () => {
    const d = await getJson('/.well-known/oauth-protected-resource');
    expect(d.resource).toBe(`${base}/mcp`);
    expect(d.authorization_servers).toEqual([base]);
  });

  it('the gateway answers 401 with the resource_metadata challenge', async () => {
    for (const init of [{}, { headers: { authorization: 'Bearer not-a-token' } }, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }] as RequestInit[]) {
      const res = await fetch(`${base}/mcp`, init);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain(`Bearer resource_metadata="${base}/.well-known/oauth-protected-resource"`);
    }
  });
});

describe('Discovery document fields: Shared Signals configuration', () => {
  it('has issuer, jwks_uri, configuration_endpoint, delivery methods, events and spec_version', async () => {
    const d = await getJson('/.well-known/ssf-configuration');
    expect(d.issuer).toBe(base);
    expect(d.jwks_uri).toBe(`${base}/.well-known/jwks.json`);
    expect(d.configuration_endpoint).toBe(`${base}/v1/ssf/streams`);
    expect(d.delivery_methods_supported).toEqual(['urn:ietf:rfc:8935']);
    expect([...d.events_supported].sort()).toEqual([
      'https://schemas.openid.net/secevent/caep/event-type/session-revoked',
      'https://schemas.openid.net/secevent/caep/event-type/token-claims-change',
      'https://schemas.openid.net/secevent/risc/event-type/account-purged',
      'https://schemas.openid.net/secevent/risc/event-type/credential-compromise',
    ].sort());
    expect(d.spec_version).toBe('1_0');
  });
});

describe('JWK Set', () => {
  it('holds one RS256 key and one EdDSA (Ed25519) key with RFC 7517 fields and no private parts', async () => {
    const set = await getJson('/.well-known/jwks.json');
    const rsa = set.keys.filter((k: any) => k.alg === 'RS256');
    const ed = set.keys.filter((k: any) => k.alg === 'EdDSA');
    expect(rsa).toHaveLength(1);
    expect(ed).toHaveLength(1);
    expect(rsa[0]).toMatchObject({ kty: 'RSA', use: 'sig' });
    expect(typeof rsa[0].kid).toBe('string');
    expect(typeof rsa[0].n).toBe('string');
    expect(ed[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
    expect(typeof ed[0].kid).toBe('string');
    for (const k of set.keys) for (const priv of ['d', 'p', 'q', 'dp', 'dq', 'qi']) expect(k[priv]).toBeUndefined();
  });

  it('/oidc/.well-known/jwks.json holds the same keys', async () => {
    expect(await getJson('/oidc/.well-known/jwks.json')).toEqual(await getJson('/.well-known/jwks.json'));
  });

  it('a rotated key stays published; the new key signs', async () => {
    const before = await getJson('/.well-known/jwks.json');
    const r = await s.admin('POST', '/keys/rotate', { alg: 'RS256' });
    expect(r.status).toBeLessThan(300);
    const after = await getJson('/.well-known/jwks.json');
    const kids = after.keys.map((k: any) => k.kid);
    for (const k of before.keys) expect(kids).toContain(k.kid);
    expect(after.keys.filter((k: any) => k.alg === 'RS256')).toHaveLength(2);
  });
});

describe('SAML metadata', () => {
  it('GET /saml/metadata is an IdP EntityDescriptor with a certificate', async () => {
    const res = await fetch(`${base}/saml/metadata`);
    expect(res.status).toBe(200);
    const xml = await res.text();
    expect(xml).toContain('EntityDescriptor');
    expect(xml).toContain('IDPSSODescriptor');
    expect(xml).toMatch(/X509Certificate>[A-Za-z0-9+/=\s]{100,}</);
  });

  it('GET /saml/sp/{unknown}/metadata is a 404, not a crash', async () => {
    const res = await fetch(`${base}/saml/sp/${encodeURIComponent('nö such<>')}/metadata`);
    expect(res.status).toBe(404);
  });
});

describe('Running it', () => {
  it('GET /healthz answers {"status":"ok"}', async () => {
    expect(await getJson('/healthz')).toEqual({ status: 'ok' });
  });
});
