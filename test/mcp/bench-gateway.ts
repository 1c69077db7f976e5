/**
 * Gateway overhead (on demand: `npx tsx test/mcp/bench-gateway.ts`; BENCH_SECONDS, default 5).
 *
 * One in-process server (as the tests start it) and the test upstream. Measures with autocannon,
 * 10 connections: a `tools/call` of `echo` straight to the upstream, the same call through
 * `/mcp` (token check, decision with its audit write, forward), and `tools/list` through `/mcp`
 * (served from the cached upstream list). Prints a markdown table.
 */
import { createRequire } from 'node:module';
import { exportJWK, generateKeyPair } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { startTestServer } from '../helpers/server.js';
import { startUpstream } from './upstream.js';

interface CannonResult { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number }
const autocannon = createRequire(import.meta.url)('autocannon') as (o: Record<string, unknown>) => Promise<CannonResult>;
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);

const gh = await startTestServer();
const upstream = await startUpstream();
await gh.admin('POST', '/roles', { name: 'bench', permissions: ['invoke:tools'] });
await gh.admin('POST', '/mcp/upstreams', { name: 'up', url: upstream.url });
const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
const agent = await gh.admin('POST', '/agents', {
  name: 'bench-bot', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: ['bench'], capabilities: [{ name: 'invoke:tools' }],
});
const provider = new PrivateKeyJwtProvider({
  clientId: agent.body.agent_id, privateKey: (await exportJWK(privateKey)) as Record<string, unknown>, algorithm: 'EdDSA', expectedIssuer: gh.ctx.urls.issuer,
});
const client = new Client({ name: 'bench', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${gh.url}/mcp`), { authProvider: provider }));
await client.callTool({ name: 'up.echo', arguments: { text: 'warm' } });
const token = provider.tokens()!.access_token;

const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const callEcho = rpc('tools/call', { name: 'echo', arguments: { text: 'hi' } });

const runs: [string, string, Record<string, string>, string][] = [
  ['upstream directly: tools/call', upstream.url, headers, callEcho],
  ['through /mcp: tools/call (decision + audit + forward)', `${gh.url}/mcp`, { ...headers, authorization: `Bearer ${token}` }, rpc('tools/call', { name: 'up.echo', arguments: { text: 'hi' } })],
  ['through /mcp: tools/list (cached upstream list)', `${gh.url}/mcp`, { ...headers, authorization: `Bearer ${token}` }, rpc('tools/list', {})],
];
console.log('| request | req/s | p50 ms | p99 ms | non-2xx |\n|---|---|---|---|---|');
for (const [label, url, h, body] of runs) {
  const r = await autocannon({ url, method: 'POST', headers: h, body, connections: 10, duration: DURATION });
  console.log(`| ${label} | ${Math.round(r.requests.average)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors} |`);
}
await client.close();
await upstream.close();
await gh.stop();
process.exit(0);
