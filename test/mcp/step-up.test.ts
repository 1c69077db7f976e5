import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { LoggingMessageNotificationSchema, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, type TestAgent as AgentKeys } from '../agents/helpers.js';
import { startUpstream, type TestUpstream } from './upstream.js';

// An upstream `jobs` whose `report` tool needs the capability run:jobs and reports progress and
// log lines while it works.
let gh: TestServer;
let upstream: TestUpstream;
const clients: Client[] = [];

interface Agent { agentId: string; privateJwk: JWK; keys: AgentKeys }

async function registerAgent(name: string, capabilities: string[]): Promise<Agent> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const res = await gh.admin('POST', '/agents', { name, mode: 'autonomous', public_jwk: publicJwk, roles: ['runner'], capabilities: capabilities.map((c) => ({ name: c })) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { agentId: res.body.agent_id, privateJwk: await exportJWK(privateKey), keys: { id: res.body.agent_id, privateKey, publicJwk } };
}

async function connect(agent: Agent): Promise<{ client: Client; provider: PrivateKeyJwtProvider }> {
  const provider = new PrivateKeyJwtProvider({
    clientId: agent.agentId,
    privateKey: agent.privateJwk as Record<string, unknown>,
    algorithm: 'EdDSA',
    expectedIssuer: gh.ctx.urls.issuer,
  });
  const client = new Client({ name: 'step-up-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { authProvider: provider }));
  clients.push(client);
  return { client, provider };
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

const rawCall = (token: string, name: string, args: Record<string, unknown>) =>
  fetch(`${gh.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: args } }),
  });

beforeAll(async () => {
  gh = await startTestServer();
  upstream = await startUpstream({ reporting: true });
  expect((await gh.admin('POST', '/roles', { name: 'runner', permissions: ['invoke:tools', 'run:jobs'] })).status).toBe(201);
  const created = await gh.admin('POST', '/mcp/upstreams', {
    name: 'jobs',
    url: upstream.url,
    tools: { report: { action: 'run:jobs', resource: 'job:nightly' } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await upstream?.close();
  await gh?.stop();
});

describe('protected-resource metadata (RFC 9728)', () => {
  it('is served at the well-known URL with the resource path too', async () => {
    const root = await (await fetch(`${gh.url}/.well-known/oauth-protected-resource`)).json();
    const res = await fetch(`${gh.url}/.well-known/oauth-protected-resource/mcp`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(root);
    expect(root).toMatchObject({ resource: `${gh.ctx.urls.issuer}/mcp` });
  });
});

describe('a token without the capability a tool needs', () => {
  it('gets 403 insufficient_scope with the scope to ask for and the metadata, and the refusal is audited', async () => {
    const agent = await registerAgent('narrow', ['invoke:tools', 'run:jobs']);
    const token = await accessTokenFor(gh, agent.keys, { scope: 'invoke:tools' });
    const before = upstream.calls.length;
    const res = await rawCall(token, 'jobs.report', { job: 'j1' });
    expect(res.status).toBe(403);
    const challenge = res.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/^Bearer error="insufficient_scope", /);
    expect(challenge).toContain(', scope="run:jobs", ');
    expect(challenge).toContain(`resource_metadata="${gh.ctx.urls.issuer}/.well-known/oauth-protected-resource"`);
    expect(res.headers.get('access-control-expose-headers')).toContain('WWW-Authenticate');
    expect(await res.json()).toMatchObject({ error: 'insufficient_scope', reason: 'not_granted: run:jobs (capability)' });
    expect(upstream.calls.length).toBe(before);

    const audit = await gh.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.agentId)}`);
    expect(audit.body.data[0]).toMatchObject({ kind: 'decision', action: 'run:jobs', resource: 'job:nightly', decision: 'deny', reason: 'not_granted: run:jobs (capability)' });
  });

  it('that the agent does not hold at all is a tool error instead: no token could carry it', async () => {
    const agent = await registerAgent('lacking', ['invoke:tools']);
    const token = await accessTokenFor(gh, agent.keys);
    const res = await rawCall(token, 'jobs.report', { job: 'j2' });
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(body).toContain('not_granted: run:jobs (capability)');
    expect(body).toContain('"isError":true');
  });

  it('lets the SDK client step up: a capability added after sign-in is used on the next call, unaided', async () => {
    const agent = await registerAgent('stepper', ['invoke:tools']);
    const { client, provider } = await connect(agent);
    const first = provider.tokens()!.access_token;
    // The agent gains the capability; its current token does not carry it.
    expect((await gh.admin('PUT', `/agents/${encodeURIComponent(agent.agentId)}/capabilities/run:jobs`, {})).status).toBe(200);
    const result = (await client.callTool({ name: 'jobs.report', arguments: { job: 'j3' } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(text(result)).toBe('j3: done');
    const second = provider.tokens()!.access_token;
    expect(second).not.toBe(first);
    const claims = JSON.parse(Buffer.from(second.split('.')[1]!, 'base64url').toString()) as { capabilities: string[] };
    expect(claims.capabilities).toContain('run:jobs');
  });
});

describe('notifications of an upstream call', () => {
  it('reach the caller: progress (for its progress token) and log messages, before the result', async () => {
    const agent = await registerAgent('watcher', ['invoke:tools', 'run:jobs']);
    const { client } = await connect(agent);
    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data));
    const progress: Progress[] = [];
    const result = (await client.callTool({ name: 'jobs.report', arguments: { job: 'j4' } }, undefined, {
      onprogress: (p) => void progress.push(p),
    })) as CallToolResult;
    expect(text(result)).toBe('j4: done');
    expect(progress.map((p) => [p.progress, p.total, p.message])).toEqual([
      [1, 3, 'step 1'],
      [2, 3, 'step 2'],
      [3, 3, 'step 3'],
    ]);
    expect(logs).toEqual(['j4: step 1', 'j4: step 2', 'j4: step 3']);
  });

  it('of two concurrent calls go each to its own caller', async () => {
    const agent = await registerAgent('pair', ['invoke:tools', 'run:jobs']);
    const a = await connect(agent);
    const b = await connect(agent);
    const logsA: unknown[] = [];
    const logsB: unknown[] = [];
    a.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logsA.push(n.params.data));
    b.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logsB.push(n.params.data));
    await Promise.all([
      a.client.callTool({ name: 'jobs.report', arguments: { job: 'A' } }),
      b.client.callTool({ name: 'jobs.report', arguments: { job: 'B' } }),
    ]);
    expect(logsA).toEqual(['A: step 1', 'A: step 2', 'A: step 3']);
    expect(logsB).toEqual(['B: step 1', 'B: step 2', 'B: step 3']);
  });
});
