import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startUpstream, type TestUpstream } from '../mcp/upstream.js';
import { accessTokenFor, bind, registerAgent as registerTestAgent } from '../agents/helpers.js';

/** The MCP gateway with the official SDK client: the 401 challenge, the metadata chain, filtered tools, decisions as tool errors. */

const POLICY = `policy "mcp-contract" version 1

rule "no-refunds-in-xyz" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when currency == "XYZ"
}

rule "wait-for-big-refunds" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >= 100
}
`;

let s: TestServer;
let upstream: TestUpstream;
let agentId: string;
let privateJwk: JWK;
let client: Client;
const calls = () => upstream.calls.length;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

beforeAll(async () => {
  s = await startTestServer({ policies: { 'mcp.policy': POLICY } });
  upstream = await startUpstream();
  await s.admin('PUT', '/roles/mcp-user', { permissions: ['invoke:tools', 'create:refunds'] });
  const up = await s.admin('POST', '/mcp/upstreams', {
    name: 'pay', url: upstream.url,
    tools: {
      refund: { action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } },
      delete_account: { action: 'delete:accounts', resource_from_argument: { kind: 'account', argument: 'account_id' } },
    },
  });
  expect(up.status, JSON.stringify(up.body)).toBe(201);
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const reg = await s.admin('POST', '/agents', {
    name: 'mcp-contract-bot', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['mcp-user'],
    capabilities: [{ name: 'invoke:tools' }, { name: 'create:refunds', limits: { amount: { max: 1000 } } }, { name: 'delete:accounts' }],
  });
  expect(reg.status).toBe(201);
  agentId = reg.body.agent_id;
  privateJwk = await exportJWK(privateKey);
});
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await upstream?.close();
  await s?.stop();
});

describe('MCP gateway', () => {
  const challenge = () => `Bearer resource_metadata="${s.ctx.urls.issuer}/.well-known/oauth-protected-resource"`;
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const post = (authorization?: string) => fetch(`${s.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(authorization ? { authorization } : {}) },
    body: JSON.stringify(init),
  });

  it('401 with the exact challenge for no token and for tokens that are not a valid agent access token', async () => {
    const other = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const t = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ sub: agentId, client_id: agentId, scope: 'invoke:tools', aud: `${s.ctx.urls.issuer}/mcp` })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt' }).setIssuer(s.ctx.urls.issuer).setIssuedAt(t).setExpirationTime(t + 600).sign(other.privateKey);
    const helperAgent = await registerTestAgent(s, { name: 'mcp-txn', mode: 'autonomous', roles: ['mcp-user'], capabilities: [{ name: 'invoke:tools' }] });
    const access = await accessTokenFor(s, helperAgent);
    const txn = (await bind(s, access, 'invoke:tools', 'tool:echo', {})).body.data.transaction_token;
    for (const authorization of [undefined, 'Bearer not-a-token', `Bearer ${forged}`, `Bearer ${txn}`, 'Basic abc']) {
      const res = await post(authorization);
      expect(res.status, String(authorization)).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(challenge());
    }
    // a revoked agent's token stops working
    expect((await post(`Bearer ${access}`)).status).not.toBe(401);
    expect((await s.admin('POST', `/agents/${encodeURIComponent(helperAgent.id)}/revoke`)).status).toBe(204);
    expect((await post(`Bearer ${access}`)).status).toBe(401);
  });

  it('the metadata chain: protected resource → the agents authorization server (with authorization_endpoint)', async () => {
    const pr = await (await fetch(`${s.url}/.well-known/oauth-protected-resource`)).json();
    expect(pr).toMatchObject({ resource: `${s.ctx.urls.issuer}/mcp`, authorization_servers: [s.ctx.urls.issuer] });
    const as = await (await fetch(`${s.url}/.well-known/oauth-authorization-server`)).json();
    expect(as).toMatchObject({
      issuer: s.ctx.urls.issuer,
      token_endpoint: `${s.ctx.urls.issuer}/apis/regional/v1/ai/auth/token`,
      authorization_endpoint: `${s.ctx.urls.issuer}/oauth/authorize`,
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      token_endpoint_auth_signing_alg_values_supported: ['EdDSA'],
    });
  });

  it('the SDK client with PrivateKeyJwtProvider connects unaided and sees only the tools it may use', async () => {
    const authProvider = new PrivateKeyJwtProvider({ clientId: agentId, privateKey: privateJwk as Record<string, unknown>, algorithm: 'EdDSA', expectedIssuer: s.ctx.urls.issuer });
    client = new Client({ name: 'contract-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { authProvider }));
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['pay.refund', 'pay.echo']));
    expect(names.some((n) => n.includes('delete_account'))).toBe(false);
  });

  it('tools/call: allow forwards; deny and approval_required are tool errors carrying the reason', async () => {
    let n = calls();
    const ok = await call('pay.refund', { refund_id: 'r-1', amount: 10, currency: 'USD' });
    expect(ok.isError).toBeFalsy();
    expect(text(ok)).toContain('refunded 10 USD on r-1');
    expect(calls()).toBe(n + 1);

    n = calls();
    const limit = await call('pay.refund', { refund_id: 'r-1', amount: 5000, currency: 'USD' });
    expect(limit.isError).toBe(true);
    expect(text(limit)).toContain('constraint_violated: amount max');
    const rule = await call('pay.refund', { refund_id: 'r-1', amount: 10, currency: 'XYZ' });
    expect(rule.isError).toBe(true);
    expect(text(rule)).toContain('rule_denied: no-refunds-in-xyz');
    const grant = await call('pay.delete_account', { account_id: 'a-1' });
    expect(grant.isError).toBe(true);
    expect(text(grant)).toContain('not_granted: delete:accounts');
    const wait = await call('pay.refund', { refund_id: 'r-2', amount: 150, currency: 'USD' });
    expect(wait.isError).toBe(true);
    expect(text(wait)).toContain('approval_required: wait-for-big-refunds');
    expect(calls()).toBe(n); // nothing reached the upstream

    const pending = (await s.admin('GET', '/approvals?state=pending')).body.data.find((a: any) => a.agent_id === agentId && a.resource === 'refund:r-2');
    expect(pending).toMatchObject({ kind: 'action', action: 'create:refunds' });
    expect((await s.admin('POST', `/approvals/${pending.id}/approve`)).status).toBeLessThan(300);
    const approved = await call('pay.refund', { refund_id: 'r-2', amount: 150, currency: 'USD' });
    expect(approved.isError).toBeFalsy();
    expect(calls()).toBe(n + 1);
    const audit = await s.admin('GET', `/audit?agent_id=${encodeURIComponent(agentId)}&limit=1`);
    expect(audit.body.data[0]).toMatchObject({ action: 'create:refunds', resource: 'refund:r-2', decision: 'allow' });
  });
});
