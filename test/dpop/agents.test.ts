import * as client from 'openid-client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertion, CIBA_GRANT, JWT_BEARER, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { startUpstream, type TestUpstream } from '../mcp/upstream.js';
import { agentTokenRequest, dpopKey, proof, readJson, type DpopKey } from './helpers.js';

let gh: TestServer;
let upstream: TestUpstream;
let agent: TestAgent;
const clients: Client[] = [];

beforeAll(async () => {
  gh = await startTestServer();
  upstream = await startUpstream();
  await putRole(gh, 'gateway-user', ['invoke:tools']);
  const created = await gh.admin('POST', '/mcp/upstreams', { name: 'billing', url: upstream.url, timeout_ms: 2000 });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  agent = await registerAgent(gh, { name: 'dpop-bot', mode: 'autonomous', roles: ['gateway-user'], capabilities: [{ name: 'invoke:tools' }] });
  const patched = await gh.admin('PATCH', `/agents/${encodeURIComponent(agent.id)}`, { dpop_bound_access_tokens: true });
  expect(patched.body.dpop_bound_access_tokens).toBe(true);
});
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await upstream?.close();
  await gh?.stop();
});

/**
 * The MCP SDK's client with a fetch that sends the token under the DPoP scheme and, when `key`
 * is given, a fresh proof for each request (`ath` the token's hash), as an agent would write it.
 */
async function connect(token: string, key: DpopKey | undefined, scheme = 'DPoP'): Promise<{ client: Client; proofs: () => number }> {
  let proofs = 0;
  const dpopFetch: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    headers.set('authorization', `${scheme} ${token}`);
    if (key) {
      headers.set('dpop', await proof(key, { htm: init?.method ?? 'GET', htu: `${url.origin}${url.pathname}`, accessToken: token }));
      proofs++;
    }
    return fetch(input, { ...init, headers });
  };
  const c = new Client({ name: 'dpop-agent', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { fetch: dpopFetch }));
  clients.push(c);
  return { client: c, proofs: () => proofs };
}

describe('a DPoP-bound agent', () => {
  it('gets no token without a proof (dpop_bound_access_tokens), a bound one with', async () => {
    const without = await agentTokenRequest(gh, agent);
    expect([without.status, without.body.error]).toEqual([400, 'invalid_dpop_proof']);
    const key = await dpopKey('EdDSA');
    const res = await agentTokenRequest(gh, agent, await proof(key, { htm: 'POST', htu: gh.ctx.urls.agentToken }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
    expect(decodeJwt(res.body.access_token).cnf).toEqual({ jkt: key.jkt });
  });

  it('works at the MCP gateway with a proof on each request, and not without', async () => {
    const key = await dpopKey();
    const token = (await agentTokenRequest(gh, agent, await proof(key, { htm: 'POST', htu: gh.ctx.urls.agentToken }))).body.access_token as string;
    const { client: c, proofs } = await connect(token, key);
    const tools = await c.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('billing.echo');
    const result = (await c.callTool({ name: 'billing.echo', arguments: { text: 'bound' } })) as CallToolResult;
    expect(result.content).toEqual([{ type: 'text', text: 'echo: bound' }]);
    expect(proofs()).toBeGreaterThanOrEqual(3);

    await expect(connect(token, undefined)).rejects.toThrow();
    await expect(connect(token, undefined, 'Bearer')).rejects.toThrow();
    const thief = await dpopKey();
    await expect(connect(token, thief)).rejects.toThrow();

    // what a client without proofs sees: 401 with a DPoP challenge naming the error
    const raw = await fetch(`${gh.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(raw.status).toBe(401);
    const challenge = raw.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/^DPoP error="invalid_token"/);
    expect(challenge).toContain(`resource_metadata="${gh.ctx.urls.protectedResource}"`);

    // a token that is not valid at all is refused under the scheme it came with
    for (const scheme of ['DPoP', 'Bearer']) {
      const bad = await fetch(`${gh.url}/mcp`, {
        method: 'POST',
        headers: { authorization: `${scheme} ${token.slice(0, -4)}AAAA`, dpop: await proof(key, { htm: 'POST', htu: gh.ctx.urls.mcp }), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(bad.status).toBe(401);
      const refused = bad.headers.get('www-authenticate')!;
      if (scheme === 'DPoP') expect(refused).toMatch(/^DPoP error="invalid_token", error_description="[^"]+", algs="[^"]+", resource_metadata="/);
      else expect(refused).toBe(`Bearer resource_metadata="${gh.ctx.urls.protectedResource}"`);
    }
  });

  it('a delegated agent polling CIBA with a proof gets a bound token', async () => {
    await putRole(gh, 'reader', ['read:invoices']);
    const user = await gh.admin('POST', '/users', { email: 'dora@example.com', password: 'a long enough password', name: 'Dora', roles: ['reader'] });
    const helper = await registerAgent(gh, { name: 'dpop-helper', mode: 'delegated', roles: ['reader'], capabilities: [{ name: 'read:invoices' }] });
    const req = await readJson(
      await fetch(gh.ctx.urls.backchannelAuthorize, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          client_assertion_type: JWT_BEARER,
          client_assertion: await assertion(gh, helper, { aud: gh.ctx.urls.issuer }),
          login_hint: 'dora@example.com',
          scope: 'read:invoices',
        }),
      }),
    );
    expect(req.status).toBe(200);
    const pending = (await gh.ctx.store.agentAuth.list({})).find((x) => x.auth_req_enc && gh.ctx.box.open(x.auth_req_enc) === req.body.auth_req_id)!;
    expect((await gh.admin('POST', `/approvals/${pending.id}/approve`)).status).toBe(200);
    await gh.ctx.store.sql.run("UPDATE agent_approvals SET last_poll_ms = last_poll_ms - 6000 WHERE kind = 'ciba'");
    const key = await dpopKey();
    const polled = await readJson(
      await fetch(gh.ctx.urls.agentToken, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(key, { htm: 'POST', htu: gh.ctx.urls.agentToken }) },
        body: new URLSearchParams({
          grant_type: CIBA_GRANT,
          auth_req_id: req.body.auth_req_id,
          client_assertion_type: JWT_BEARER,
          client_assertion: await assertion(gh, helper),
        }),
      }),
    );
    expect(polled.status, JSON.stringify(polled.body)).toBe(200);
    expect(polled.body.token_type).toBe('DPoP');
    expect(decodeJwt(polled.body.access_token)).toMatchObject({ sub: user.body.id, act: { sub: helper.id }, cnf: { jkt: key.jkt } });
  });
});

describe('an AuthZEN caller with a DPoP-bound token', () => {
  it('evaluates with a proof; the token alone is refused', async () => {
    const api = `${gh.ctx.urls.issuer}/access/v1`;
    const app = (await gh.admin('POST', '/applications', { name: 'pep', type: 'm2m' })).body as { client_id: string; client_secret: string };
    expect((await gh.admin('PUT', `/applications/${app.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
    const config = await client.discovery(new URL(gh.ctx.urls.issuer), app.client_id, app.client_secret, client.ClientSecretBasic(app.client_secret), {
      execute: [client.allowInsecureRequests],
    });
    const key = await dpopKey();
    const tokenRes = await readJson(
      await fetch(gh.ctx.urls.token, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}`,
          dpop: await proof(key, { htm: 'POST', htu: gh.ctx.urls.token }),
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource: api }),
      }),
    );
    expect(tokenRes.body.token_type).toBe('DPoP');
    const token = tokenRes.body.access_token as string;
    expect(config.serverMetadata().dpop_signing_alg_values_supported).toEqual(['ES256', 'EdDSA']);
    const url = `${gh.ctx.urls.issuer}/access/v1/evaluation`;
    const body = JSON.stringify({ subject: { type: 'user', id: 'u1' }, action: { name: 'read' }, resource: { type: 'doc', id: 'd1' } });
    const ask = (headers: Record<string, string>) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const ok = await ask({ authorization: `DPoP ${token}`, dpop: await proof(key, { htm: 'POST', htu: url, accessToken: token }) });
    expect(ok.status, await ok.clone().text()).toBe(200);
    const bearer = await ask({ authorization: `Bearer ${token}` });
    expect(bearer.status).toBe(401);
    expect(bearer.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
  });
});

describe('two instances on one database', () => {
  it('a proof used at one is refused at the other', async () => {
    const ISSUER = 'http://gatehouse.test';
    const a = await startTestServer({ env: { GATEHOUSE_ISSUER: ISSUER } });
    const b = await startTestServer({ dir: a.dir, role: 'worker', env: { GATEHOUSE_ISSUER: ISSUER } });
    try {
      const m2m = (await a.admin('POST', '/applications', { name: 'svc', type: 'm2m' })).body as { client_id: string; client_secret: string };
      const key = await dpopKey();
      const p = await proof(key, { htm: 'POST', htu: `${ISSUER}/oauth/token` });
      const at = async (server: TestServer) =>
        readJson(
          await fetch(`${server.url}/oauth/token`, {
            method: 'POST',
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              authorization: `Basic ${Buffer.from(`${m2m.client_id}:${m2m.client_secret}`).toString('base64')}`,
              dpop: p,
            },
            body: new URLSearchParams({ grant_type: 'client_credentials' }),
          }),
        );
      expect((await at(a)).status).toBe(200);
      const replay = await at(b);
      expect([replay.status, replay.body.error]).toEqual([400, 'invalid_dpop_proof']);
    } finally {
      await b.close();
      await a.stop();
    }
  });
});
