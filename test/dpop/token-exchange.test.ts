import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discover, signInAndExchange, startFixture, type Fixture } from '../oauth/helpers.js';
import { putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

// A token exchange at the agent token endpoint (a delegated agent acting for a person who
// consented) is DPoP-bound when its request carries a proof, like the endpoint's other grants.
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

let f: Fixture;
let planner: TestAgent;
let personToken: string;

beforeAll(async () => {
  f = await startFixture();
  await putRole(f.server, 'docs', ['read:docs']);
  expect((await f.server.admin('PATCH', `/users/${f.user.id}`, { roles: ['docs'] })).status).toBe(200);
  planner = await registerAgent(f.server, { name: 'planner', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
  expect((await f.server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(planner.id)}`, { capabilities: ['read:docs'] })).status).toBe(204);
  const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
  personToken = tokens.access_token;
});
afterAll(() => f?.server.stop());

function agentConfig(agent: TestAgent): client.Configuration {
  const metadata = { issuer: f.server.ctx.urls.issuer, token_endpoint: f.server.ctx.urls.agentToken };
  const auth = client.PrivateKeyJwt(agent.privateKey, { [client.modifyAssertion]: (header) => void (header.alg = 'EdDSA') });
  const config = new client.Configuration(metadata, agent.id, undefined, auth);
  client.allowInsecureRequests(config);
  return config;
}

describe('token exchange with DPoP', () => {
  it('binds the exchanged token to the proof key (openid-client DPoP handle)', async () => {
    const config = agentConfig(planner);
    const keys = await client.randomDPoPKeyPair('ES256');
    const tokens = await client.genericGrantRequest(config, EXCHANGE, { subject_token: personToken, subject_token_type: ACCESS }, { DPoP: client.getDPoPHandle(config, keys) });
    expect(tokens.token_type).toBe('dpop');
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ sub: f.user.id, act: { sub: planner.id } });
    expect(claims.cnf).toEqual({ jkt: await calculateJwkThumbprint(await exportJWK(keys.publicKey), 'sha256') });
    const plain = await client.genericGrantRequest(config, EXCHANGE, { subject_token: personToken, subject_token_type: ACCESS });
    expect(plain.token_type).toBe('bearer');
  });
});
