import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { deadUrl, startHangingServer, startUpstream, type TestUpstream } from './upstream.js';

// Medium refunds wait for a person; the capability's limit caps every refund at 500.
const POLICY = `policy "gateway" version 1

rule "approve-medium-refunds" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >= 100
}
`;

interface TestAgent { agentId: string; privateJwk: JWK }

let gh: TestServer;
let upstream: TestUpstream;
let slowUpstream: TestUpstream;
const clients: Client[] = [];

async function registerAgent(name: string, capabilities: { name: string; limits?: Record<string, unknown> }[]): Promise<TestAgent> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const res = await gh.admin('POST', '/agents', {
    name,
    mode: 'autonomous',
    public_jwk: await exportJWK(publicKey),
    roles: ['gateway-user'],
    capabilities,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { agentId: res.body.agent_id, privateJwk: await exportJWK(privateKey) };
}

/** The official SDK client signing in by itself: 401 → metadata → private_key_jwt → token. */
const providers = new WeakMap<Client, PrivateKeyJwtProvider>();

async function connect(agent: TestAgent, scope?: string): Promise<Client> {
  const authProvider = new PrivateKeyJwtProvider({
    clientId: agent.agentId,
    ...(scope ? { scope } : {}),
    privateKey: agent.privateJwk as Record<string, unknown>,
    algorithm: 'EdDSA',
    expectedIssuer: gh.ctx.urls.issuer,
  });
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { authProvider }));
  clients.push(client);
  providers.set(client, authProvider);
  return client;
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const call = async (client: Client, name: string, args: Record<string, unknown>) =>
  (await client.callTool({ name, arguments: args })) as CallToolResult;

beforeAll(async () => {
  gh = await startTestServer({ policies: { 'gateway.policy': POLICY } });
  upstream = await startUpstream();
  slowUpstream = await startUpstream({ slowMs: 3000 });
  const role = await gh.admin('POST', '/roles', { name: 'gateway-user', permissions: ['invoke:tools', 'create:refunds'] });
  expect(role.status, JSON.stringify(role.body)).toBe(201);
  const created = await gh.admin('POST', '/mcp/upstreams', {
    name: 'billing',
    url: upstream.url,
    headers: { 'X-Upstream-Key': 'upstream-secret-1' },
    timeout_ms: 2000,
    tools: {
      refund: { action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } },
      delete_account: { action: 'delete:accounts', resource_from_argument: { kind: 'account', argument: 'account_id' } },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await upstream?.close();
  await slowUpstream?.close();
  await gh?.stop();
});

describe('management API of the upstreams', () => {
  it('shows an upstream without its header values, validates fields, refuses duplicates', async () => {
    const got = await gh.admin('GET', '/mcp/upstreams/billing');
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ name: 'billing', url: upstream.url, header_names: ['X-Upstream-Key'], timeout_ms: 2000 });
    expect(JSON.stringify(got.body)).not.toContain('upstream-secret-1');
    const row = (await gh.ctx.store.sql.get<{ headers_sealed: string }>('SELECT headers_sealed FROM mcp_upstreams WHERE name = ?', ['billing']))!;
    expect(row.headers_sealed).not.toContain('upstream-secret-1');

    const bad = await gh.admin('POST', '/mcp/upstreams', { name: 'x.y', url: 'not a url', timeout_ms: -1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(['name', 'timeout_ms', 'url']);

    const both = await gh.admin('POST', '/mcp/upstreams', {
      name: 'other',
      url: upstream.url,
      tools: { t: { resource: 'refund:1', resource_from_argument: { kind: 'refund', argument: 'id' } } },
    });
    expect(both.status).toBe(400);

    expect((await gh.admin('POST', '/mcp/upstreams', { name: 'billing', url: upstream.url })).status).toBe(409);
    expect((await gh.admin('GET', '/mcp/upstreams/nope')).status).toBe(404);
    expect((await gh.admin('DELETE', '/mcp/upstreams/nope')).status).toBe(404);
    const list = await gh.admin('GET', '/mcp/upstreams');
    expect(list.body.data.map((u: { name: string }) => u.name)).toContain('billing');

    const noToken = await fetch(`${gh.url}/admin/v1/mcp/upstreams`);
    expect(noToken.status).toBe(401);
  });
});

describe('the gateway at /mcp', () => {
  let agent: TestAgent;
  let client: Client;

  beforeAll(async () => {
    agent = await registerAgent('billing-bot', [
      { name: 'invoke:tools' },
      { name: 'create:refunds', limits: { amount: { max: 500 } } },
      { name: 'delete:accounts' },
    ]);
  });

  it('answers a request without a valid agent token with 401 and the resource-metadata challenge', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const get = await fetch(`${gh.url}/mcp`);
    expect(get.status).toBe(401);
    for (const authorization of [undefined, 'Bearer not-a-token']) {
      const res = await fetch(`${gh.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(init),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${gh.ctx.urls.issuer}/.well-known/oauth-protected-resource"`,
      );
    }
  });

  it('lets the SDK client sign in unaided and lists only the tools the agent holds a permission for', async () => {
    client = await connect(agent);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    // delete_account maps to delete:accounts, which no role of the agent grants.
    expect(names).toEqual(['billing.echo', 'billing.refund', 'billing.slow']);
    expect(tools.find((t) => t.name === 'billing.refund')?.inputSchema.properties).toHaveProperty('refund_id');

    // Stateless: no standalone event stream and no session to end.
    const token = providers.get(client)!.tokens()!.access_token;
    const get = await fetch(`${gh.url}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('forwards an allowed call to the upstream, with the configured headers, and returns its answer', async () => {
    const before = upstream.calls.length;
    const result = await call(client, 'billing.echo', { text: 'hello' });
    expect(result.isError).toBeFalsy();
    expect(text(result)).toBe('echo: hello');
    expect(upstream.calls.slice(before)).toHaveLength(1);
    expect(upstream.calls.at(-1)).toMatchObject({ tool: 'echo', args: { text: 'hello' } });
    expect(upstream.calls.at(-1)!.headers['x-upstream-key']).toBe('upstream-secret-1');
    // The other naming form reaches the same tool.
    expect(text(await call(client, 'billing__echo', { text: 'again' }))).toBe('echo: again');
    // So does the bare name, while only one upstream has a tool of that name.
    expect(text(await call(client, 'echo', { text: 'bare' }))).toBe('echo: bare');
  });

  it('refuses a call that breaks a limit without calling the upstream, giving the reason', async () => {
    const before = upstream.calls.length;
    const result = await call(client, 'billing.refund', { refund_id: 'r-1', amount: 900, currency: 'USD' });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain('constraint_violated: amount max');
    expect(upstream.calls.length).toBe(before);
  });

  it('refuses a tool the agent holds no permission for, even when called by name', async () => {
    const before = upstream.calls.length;
    const result = await call(client, 'billing.delete_account', { account_id: 'a-1' });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain('not_granted: delete:accounts');
    expect(upstream.calls.length).toBe(before);
  });

  it('holds a call for approval, then forwards the same call once a person approves it', async () => {
    const args = { refund_id: 'r-2', amount: 250, currency: 'USD' };
    const before = upstream.calls.length;
    const waiting = await call(client, 'billing.refund', args);
    expect(waiting.isError).toBe(true);
    expect(text(waiting)).toContain('approval_required');
    const approvalId = (waiting._meta?.['io.gatehouse/decision'] as { approval_id?: string } | undefined)?.approval_id;
    expect(approvalId).toBeTruthy();
    expect(text(waiting)).toContain(approvalId!);
    expect(upstream.calls.length).toBe(before);

    const approved = await gh.admin('POST', `/approvals/${approvalId}/approve`);
    expect([200, 204]).toContain(approved.status);

    const done = await call(client, 'billing.refund', args);
    expect(done.isError).toBeFalsy();
    expect(text(done)).toBe('refunded 250 USD on r-2');
    expect(upstream.calls.at(-1)).toMatchObject({ tool: 'refund', args });
  });

  it('writes every call to the audit trail', async () => {
    const audit = await gh.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.agentId)}&limit=50`);
    expect(audit.status).toBe(200);
    const decisions = audit.body.data.filter((r: { action: string }) => r.action === 'create:refunds').map((r: { decision: string }) => r.decision);
    expect(decisions).toEqual(expect.arrayContaining(['deny', 'approval_required', 'allow']));
  });

  it('gives a clear tool error, promptly, for an upstream that is down or too slow', async () => {
    expect((await gh.admin('POST', '/mcp/upstreams', { name: 'gone', url: await deadUrl(), timeout_ms: 1000 })).status).toBe(201);
    expect((await gh.admin('POST', '/mcp/upstreams', { name: 'laggy', url: slowUpstream.url, timeout_ms: 300 })).status).toBe(201);

    const down = await call(client, 'gone.anything', {});
    expect(down.isError).toBe(true);
    expect(text(down)).toMatch(/^upstream_unavailable: upstream "gone" cannot be reached/);

    const slow = await call(client, 'laggy.slow', {});
    expect(slow.isError).toBe(true);
    expect(text(slow)).toBe('upstream_timeout: upstream "laggy" did not answer within 300 ms');

    // An upstream that accepts the connection and never answers: the initialize is bounded too.
    const hanging = await startHangingServer();
    try {
      expect((await gh.admin('POST', '/mcp/upstreams', { name: 'hung', url: hanging.url, timeout_ms: 300 })).status).toBe(201);
      const hung = await call(client, 'hung.anything', {});
      expect(hung.isError).toBe(true);
      expect(text(hung)).toBe('upstream_timeout: upstream "hung" did not answer within 300 ms');
      expect((await gh.admin('DELETE', '/mcp/upstreams/hung')).status).toBe(204);
    } finally {
      await hanging.close();
    }

    // The listing still works, without the upstream that is down.
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('billing.echo');
    expect(names).toContain('laggy.slow');
    expect(names.some((n) => n.startsWith('gone.'))).toBe(false);
  });

  it('shows and allows only the capabilities the token was asked for (scope); a call outside them is 403 insufficient_scope', async () => {
    const narrow = await connect(agent, 'invoke:tools');
    expect((await narrow.listTools()).tools.map((t) => t.name)).not.toContain('billing.refund');
    const before = upstream.calls.length;
    // The client steps up with its configured scope, gets the same narrow token, and gives up.
    await expect(call(narrow, 'billing.refund', { refund_id: 'r-9', amount: 5, currency: 'USD' })).rejects.toThrow(/403/);
    expect(upstream.calls.length).toBe(before);
    const audit = await gh.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.agentId)}`);
    expect(audit.body.data[0]).toMatchObject({ action: 'create:refunds', decision: 'deny', reason: 'not_granted: create:refunds (capability)' });
  });

  it('follows a change of the upstream configuration at once', async () => {
    const cur = (await gh.admin('GET', '/mcp/upstreams/billing')).body;
    const put = await gh.admin('PUT', '/mcp/upstreams/billing', {
      url: cur.url,
      timeout_ms: cur.timeout_ms,
      tools: { ...cur.tools, echo: { action: 'delete:accounts', resource: 'account:any' } },
    });
    expect(put.status).toBe(200);
    expect(put.body.header_names).toEqual(['X-Upstream-Key']); // absent headers are kept
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('billing.echo');
    expect(text(await call(client, 'billing.echo', { text: 'x' }))).toContain('not_granted: delete:accounts');

    const back = await gh.admin('PUT', '/mcp/upstreams/billing', { url: cur.url, timeout_ms: cur.timeout_ms, tools: cur.tools });
    expect(back.status).toBe(200);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('billing.echo');
    expect(upstream.calls.at(-1)!.headers['x-upstream-key']).toBe('upstream-secret-1');
  });

  it('reuses a session with a stateful upstream, and opens a new one when the upstream restarts', async () => {
    let stateful = await startUpstream({ stateful: true });
    try {
      expect((await gh.admin('POST', '/mcp/upstreams', { name: 'crm', url: stateful.url })).status).toBe(201);
      expect(text(await call(client, 'crm.echo', { text: 'one' }))).toBe('echo: one');
      const sessionId = stateful.calls.at(-1)!.headers['mcp-session-id'];
      expect(sessionId).toBeTruthy();
      expect(text(await call(client, 'crm.echo', { text: 'two' }))).toBe('echo: two');
      expect(stateful.calls.at(-1)!.headers['mcp-session-id']).toBe(sessionId);

      const port = stateful.port;
      await stateful.close();
      stateful = await startUpstream({ stateful: true, port });
      expect(text(await call(client, 'crm.echo', { text: 'three' }))).toBe('echo: three');
      expect(stateful.calls.at(-1)!.headers['mcp-session-id']).not.toBe(sessionId);
    } finally {
      await stateful.close();
    }
  });

  it('refuses a revoked agent with 401', async () => {
    const doomed = await registerAgent('doomed-bot', [{ name: 'invoke:tools' }]);
    const c = await connect(doomed);
    expect(text(await call(c, 'billing.echo', { text: 'before' }))).toBe('echo: before');
    const token = providers.get(c)!.tokens()!.access_token;
    expect((await gh.admin('POST', `/agents/${encodeURIComponent(doomed.agentId)}/revoke`)).status).toBe(204);

    const raw = await fetch(`${gh.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(raw.status).toBe(401);
    expect(raw.headers.get('www-authenticate')).toContain('resource_metadata=');

    // The token the SDK holds is refused, and signing in again fails too.
    await expect(c.callTool({ name: 'billing.echo', arguments: { text: 'after' } })).rejects.toThrow();
    await expect(connect(doomed)).rejects.toThrow();
    expect(upstream.calls.some((x) => x.args.text === 'after')).toBe(false);
  });
});
