import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { dpopKey, proof, readJson } from './helpers.js';

// An ID-JAG redeemed (jwt-bearer) by a delegated agent is DPoP-bound like any other token.
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const PARTNER = 'https://partner-idp.example';

let server: TestServer;
let partnerKey: CryptoKey;
let agent: { id: string; key: CryptoKey };

beforeAll(async () => {
  server = await startTestServer();
  await server.admin('POST', '/roles', { name: 'tool-user', permissions: ['invoke:tools'] });
  await server.admin('POST', '/users', { email: 'ada@example.com', password: 'correct horse battery staple', name: 'Ada', roles: ['tool-user'] });
  const agentKeys = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const created = await server.admin('POST', '/agents', {
    name: 'jag-bot', mode: 'delegated', public_jwk: await exportJWK(agentKeys.publicKey), roles: ['tool-user'], capabilities: [{ name: 'invoke:tools' }],
  });
  agent = { id: created.body.agent_id, key: agentKeys.privateKey };
  const partnerKeys = await generateKeyPair('ES256');
  partnerKey = partnerKeys.privateKey;
  const trusted = await server.admin('POST', '/trusted-issuers', {
    issuer: PARTNER, jwks: { keys: [{ ...(await exportJWK(partnerKeys.publicKey)), kid: 'p1', alg: 'ES256' }] }, subject_mapping: 'email',
  });
  expect(trusted.status, JSON.stringify(trusted.body)).toBe(201);
});
afterAll(() => server?.stop());

async function redeem(url: string, dpop?: string) {
  const now = Math.floor(Date.now() / 1000);
  const assertion = await new SignJWT({ sub: 'ada-at-partner', client_id: agent.id, jti: randomUUID(), email: 'ada@example.com', scope: 'invoke:tools', iat: now, exp: now + 300 })
    .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt' })
    .setIssuer(PARTNER)
    .setAudience(server.ctx.urls.issuer)
    .sign(partnerKey);
  const clientAssertion = await new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .setIssuer(agent.id)
    .setSubject(agent.id)
    .setAudience(server.ctx.urls.issuer)
    .setIssuedAt()
    .setExpirationTime('2m')
    .sign(agent.key);
  return readJson(
    await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(dpop ? { dpop } : {}) },
      body: new URLSearchParams({ grant_type: JWT_BEARER, assertion, client_assertion_type: ASSERTION_TYPE, client_assertion: clientAssertion }),
    }),
  );
}

describe('ID-JAG redemption with DPoP', () => {
  it('binds the token at /oauth/token and at the agent token endpoint; a DPoP-bound agent needs the proof', async () => {
    for (const url of [server.ctx.urls.token, server.ctx.urls.agentToken]) {
      const key = await dpopKey();
      const res = await redeem(url, await proof(key, { htm: 'POST', htu: url }));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.token_type).toBe('DPoP');
      expect(decodeJwt(res.body.access_token).cnf).toEqual({ jkt: key.jkt });
      expect((await redeem(url)).body.token_type).toBe('Bearer');
    }
    await server.admin('PATCH', `/agents/${encodeURIComponent(agent.id)}`, { dpop_bound_access_tokens: true });
    for (const url of [server.ctx.urls.token, server.ctx.urls.agentToken]) {
      const res = await redeem(url);
      expect([res.status, res.body.error]).toEqual([400, 'invalid_dpop_proof']);
    }
  });
});
