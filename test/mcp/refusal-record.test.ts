import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startUpstream, type TestUpstream } from './upstream.js';

// A door does not write a decision record of its own: the gateway's refusals (a tool that does
// not exist, arguments that do not map) are the pipeline's refuse mode. So when the audit trail
// cannot be written, a refusal is not answered as a decision: the gateway fails closed with an
// internal error, as the pipeline does for every decision it cannot record.

let gh: TestServer;
let upstream: TestUpstream;
let client: Client;

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;
const outcome = (p: Promise<CallToolResult>) =>
  p.then(
    (r) => ({ answered: text(r) }),
    (err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }),
  );

beforeAll(async () => {
  gh = await startTestServer({ policies: { 'gateway.policy': 'policy "gateway" version 1\n' } });
  upstream = await startUpstream();
  expect((await gh.admin('POST', '/roles', { name: 'gateway-user', permissions: ['create:refunds'] })).status).toBe(201);
  const created = await gh.admin('POST', '/mcp/upstreams', {
    name: 'billing',
    url: upstream.url,
    tools: { refund: { action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const agent = await gh.admin('POST', '/agents', {
    name: 'refusals',
    mode: 'autonomous',
    public_jwk: await exportJWK(publicKey),
    roles: ['gateway-user'],
    capabilities: [{ name: 'create:refunds' }],
  });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  const authProvider = new PrivateKeyJwtProvider({
    clientId: agent.body.agent_id,
    privateKey: (await exportJWK(privateKey)) as Record<string, unknown>,
    algorithm: 'EdDSA',
    expectedIssuer: gh.ctx.urls.issuer,
  });
  client = new Client({ name: 'refusal-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { authProvider }));
});

afterAll(async () => {
  await client?.close().catch(() => undefined);
  await upstream?.close();
  await gh?.stop();
});

describe('the MCP gateway refuses through the decision pipeline', () => {
  it('records a refusal as a decision while the audit trail can be written', async () => {
    expect(await outcome(call('nowhere.nope', {}))).toEqual({ error: expect.stringContaining('Tool nowhere.nope not found') });
    expect(await outcome(call('billing.refund', { amount: 1 }))).toEqual({ answered: expect.stringContaining('denied: invalid_request') });
    const rows = await gh.ctx.store.audit.list({ limit: 10 });
    const reasons = rows.map((r) => r.reason);
    expect(reasons).toEqual(expect.arrayContaining([expect.stringContaining('no tool named nowhere.nope'), expect.stringContaining('invalid_request')]));
  });

  it('does not answer a refusal it could not record', async () => {
    const audit = gh.ctx.store.audit;
    const appendAll = audit.appendAll;
    audit.appendAll = async () => {
      throw new Error('the audit trail cannot be written');
    };
    try {
      const unknown = await outcome(call('nowhere.nope', {}));
      expect(unknown).toEqual({ error: expect.stringContaining('could not be recorded') });
      const unmapped = await outcome(call('billing.refund', { amount: 1 }));
      expect(unmapped).toEqual({ error: expect.stringContaining('could not be recorded') });
    } finally {
      audit.appendAll = appendAll;
    }
    expect(upstream.calls).toHaveLength(0);
  });
});
