import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startUpstream, type TestUpstream } from './upstream.js';

let gh: TestServer;
let upstream: TestUpstream;
let client: Client;

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

async function assertion(agentId: string, key: CryptoKey, aud: string): Promise<string> {
  return new SignJWT({ jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .setIssuer(agentId)
    .setSubject(agentId)
    .setAudience(aud)
    .setIssuedAt()
    .setExpirationTime('2m')
    .sign(key);
}

async function form(url: string, fields: Record<string, string>) {
  const res = await fetch(url, { method: 'POST', body: new URLSearchParams(fields) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** A delegated agent's token through CIBA: ask, a person approves, poll. */
async function delegatedToken(name = 'assistant', extra: Record<string, string> = {}): Promise<string> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const agent = await gh.admin('POST', '/agents', {
    name,
    mode: 'delegated',
    public_jwk: await exportJWK(publicKey),
    roles: ['gateway-user'],
    capabilities: [{ name: 'invoke:tools' }, { name: 'create:refunds', limits: { amount: { max: 50 } } }],
  });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  const agentId: string = agent.body.agent_id;
  const assertionFields = async () => ({
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await assertion(agentId, privateKey, gh.ctx.urls.issuer),
  });
  const asked = await form(gh.ctx.urls.backchannelAuthorize, {
    ...(await assertionFields()),
    scope: 'invoke:tools create:refunds',
    login_hint: 'pat@example.com',
    binding_message: 'refunds through the gateway',
    ...extra,
  });
  expect(asked.status, JSON.stringify(asked.body)).toBe(200);
  const pending = await gh.admin('GET', '/approvals?state=pending');
  const request = pending.body.data.find((a: { auth_req_id?: string }) => a.auth_req_id === asked.body.auth_req_id);
  expect([200, 204]).toContain((await gh.admin('POST', `/approvals/${request.id}/approve`)).status);
  await new Promise((r) => setTimeout(r, asked.body.interval * 1000 + 100));
  const token = await form(gh.ctx.urls.agentToken, {
    ...(await assertionFields()),
    grant_type: 'urn:openid:params:grant-type:ciba',
    auth_req_id: asked.body.auth_req_id,
  });
  expect(token.status, JSON.stringify(token.body)).toBe(200);
  return token.body.access_token;
}

beforeAll(async () => {
  gh = await startTestServer();
  upstream = await startUpstream();
  expect((await gh.admin('POST', '/roles', { name: 'gateway-user', permissions: ['invoke:tools', 'create:refunds'] })).status).toBe(201);
  // The person may create refunds, but holds no invoke:tools.
  expect((await gh.admin('POST', '/roles', { name: 'refunder', permissions: ['create:refunds'] })).status).toBe(201);
  const user = await gh.admin('POST', '/users', { email: 'pat@example.com', password: 'correct horse battery', name: 'Pat', roles: ['refunder'] });
  expect(user.status, JSON.stringify(user.body)).toBe(201);
  const up = await gh.admin('POST', '/mcp/upstreams', {
    name: 'billing',
    url: upstream.url,
    tools: [{ name: 'refund', action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } }],
  });
  expect(up.status).toBe(201);
  const token = await delegatedToken();
  client = new Client({ name: 'delegated-agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
}, 20_000);

afterAll(async () => {
  await client?.close();
  await upstream?.close();
  await gh?.stop();
});

describe('a delegated agent through the gateway', () => {
  it('sees and uses only what both the agent and the person may do', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('billing.refund');
    expect(names).not.toContain('billing.echo');

    const refused = (await client.callTool({ name: 'billing.echo', arguments: { text: 'hi' } })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('not_granted: invoke:tools (person)');
    expect(upstream.calls).toHaveLength(0);

    const args = { refund_id: 'r-7', amount: 20, currency: 'EUR' };
    const done = (await client.callTool({ name: 'billing.refund', arguments: args })) as CallToolResult;
    expect(done.isError).toBeFalsy();
    expect(upstream.calls).toEqual([expect.objectContaining({ tool: 'refund', args })]);

    const audit = await gh.admin('GET', `/audit?limit=5`);
    expect(audit.body.data[0]).toMatchObject({ action: 'create:refunds', resource: 'refund:r-7', decision: 'allow' });
  });

  it('with authorization details approved through CIBA, a call beyond them is refused constraint_violated: authorization_details', async () => {
    const declared = await gh.admin('PUT', '/authorization-details-types/refund', {
      description: 'A refund',
      schema: { type: 'object', properties: { amount: { type: 'number' }, currency: { type: 'string' } }, required: ['amount'] },
    });
    expect(declared.status).toBe(201);
    const token = await delegatedToken('refund-assistant', { authorization_details: JSON.stringify([{ type: 'refund', amount: 30, currency: 'EUR' }]) });
    const detailed = new Client({ name: 'detailed-agent', version: '1.0.0' });
    await detailed.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    try {
      const before = upstream.calls.length;
      const within = (await detailed.callTool({ name: 'billing.refund', arguments: { refund_id: 'r-8', amount: 30, currency: 'EUR' } })) as CallToolResult;
      expect(within.isError).toBeFalsy();
      const beyond = (await detailed.callTool({ name: 'billing.refund', arguments: { refund_id: 'r-9', amount: 31, currency: 'EUR' } })) as CallToolResult;
      expect(beyond.isError).toBe(true);
      expect(text(beyond)).toContain('constraint_violated: authorization_details');
      expect(upstream.calls.length).toBe(before + 1);
      const audit = await gh.admin('GET', '/audit?limit=1');
      expect(audit.body.data[0]).toMatchObject({ resource: 'refund:r-9', decision: 'deny', reason: 'constraint_violated: authorization_details' });
    } finally {
      await detailed.close();
    }
  }, 20_000);
});
