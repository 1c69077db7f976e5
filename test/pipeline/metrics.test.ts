import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bind, bindAndDecide, postJson, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { basic, createApp, postForm } from '../oauth/helpers.js';
import { parseMetrics, type ParsedMetrics } from './metrics-text.js';

let s: TestServer;
let bot: TestAgent;
let token: string;

beforeAll(async () => {
  s = await startTestServer();
  await putRole(s, 'refunder', ['create:refunds']);
  bot = await registerAgent(s, { name: 'metrics-bot', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }] });
  token = await accessTokenFor(s, bot);
});
afterAll(() => s?.stop());

async function scrape(): Promise<ParsedMetrics> {
  const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.adminToken}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

describe('/metrics (Prometheus text format)', () => {
  it('counts decisions by door, outcome and reason code, and tokens by grant', async () => {
    const before = await scrape();
    const allowed = before.sum('gatehouse_decisions_total', { via: 'decision', outcome: 'allow', reason: 'allowed' });
    expect((await bindAndDecide(s, bot, token, 'create:refunds', 'refund:1', { amount: 5 })).decision?.decision).toBe('allow');
    expect((await bindAndDecide(s, bot, token, 'create:refunds', 'refund:2', { amount: 6 })).decision?.decision).toBe('allow');
    expect((await bind(s, token, 'create:refunds', 'refund:3', { amount: 900 })).status).toBe(403);
    const denied = await postJson(s.ctx.urls.agentAuthorize, { agent_id: bot.id, action: 'create:refunds', resource: 'refund:4', context: {} });
    expect(denied.body.data.reason).toBe('invalid_transaction_token: missing');

    const m = await scrape();
    expect(m.types.get('gatehouse_decisions_total')).toBe('counter');
    expect(m.sum('gatehouse_decisions_total', { via: 'decision', outcome: 'allow', reason: 'allowed' })).toBe(allowed + 2);
    expect(m.value('gatehouse_decisions_total', { via: 'bind', outcome: 'deny', reason: 'constraint_violated' })).toBe(1);
    expect(m.value('gatehouse_decisions_total', { via: 'decision', outcome: 'deny', reason: 'invalid_transaction_token' })).toBe(1);
    expect(m.value('gatehouse_tokens_issued_total', { grant: 'agent_client_credentials' })).toBeGreaterThanOrEqual(1);
    expect(m.value('gatehouse_tokens_issued_total', { grant: 'transaction_token' })).toBeGreaterThanOrEqual(2);
    expect(m.types.get('gatehouse_decision_duration_seconds')).toBe('histogram');
    expect(m.value('gatehouse_decision_duration_seconds_count', { via: 'decision' })).toBeGreaterThanOrEqual(3);
  });

  it('has latency histograms per endpoint, on the fast path and through Express alike', async () => {
    const route = '/apis/regional/v1/agents/authorize';
    const count = (m: ParsedMetrics) => m.sum('gatehouse_http_request_duration_seconds_count', { route, method: 'POST' });
    const before = count(await scrape());
    const body = JSON.stringify({ agent_id: bot.id, action: 'create:refunds', resource: 'refund:5', context: {} });
    // A plain request takes the raw fast path; a chunked one (no Content-Length) goes through Express.
    await fetch(`${s.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const chunked = new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(body)), c.close()) });
    await fetch(`${s.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chunked, duplex: 'half' } as RequestInit);
    const m = await scrape();
    expect(count(m)).toBe(before + 2);
    expect(m.value('gatehouse_http_request_duration_seconds_bucket', { route, method: 'POST', status: '200', le: '+Inf' })).toBeGreaterThanOrEqual(2);
    // Routes are patterns: no id ends up in a label.
    await s.admin('GET', `/agents/${encodeURIComponent(bot.id)}`);
    const labels = (await scrape()).samples.filter((x) => x.name === 'gatehouse_http_request_duration_seconds_count').map((x) => x.labels.route);
    expect(labels.some((r) => r.includes(bot.id) || r.includes('spiffe'))).toBe(false);
    expect(labels).toContain('/admin/v1/agents/*agent_id');
  });

  it('counts rate-limiter refusals and OAuth tokens by grant', async () => {
    const m2m = await createApp(s, { type: 'm2m', redirect_uris: [] });
    const ok = await postForm(s.ctx.urls.token, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret!) });
    expect(ok.status).toBe(200);
    for (let i = 0; i < 11; i++) await postForm(s.ctx.urls.token, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, 'wrong') });
    const m = await scrape();
    expect(m.value('gatehouse_tokens_issued_total', { grant: 'client_credentials' })).toBe(1);
    expect(m.value('gatehouse_rate_limited_total', { route: '/oauth/token' })).toBeGreaterThanOrEqual(1);
  });

  it('reports the audit and Shared Signals backlogs and the policy version and status', async () => {
    const stream = await postJson(`${s.url}/v1/ssf/streams`, { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'http://127.0.0.1:9/never' }, events_requested: ['https://schemas.openid.net/secevent/caep/event-type/token-claims-change'] }, { authorization: `Bearer ${s.adminToken}` });
    expect(stream.status).toBe(201);
    const paused = await postJson(`${s.url}/v1/ssf/status`, { stream_id: stream.body.stream_id, status: 'paused' }, { authorization: `Bearer ${s.adminToken}` });
    expect(paused.status).toBe(200);
    const user = await s.admin('POST', '/users', { email: 'metrics@example.com', password: 'correct horse battery', name: 'M' });
    expect((await s.admin('PATCH', `/users/${user.body.id}`, { roles: ['auditor'] })).status).toBe(200);

    const m = await scrape();
    expect(m.value('gatehouse_ssf_backlog')).toBe(1);
    expect(m.value('gatehouse_audit_backlog')).toBe(0);
    const version = (await s.admin('GET', '/policy')).body.version as string;
    expect(m.value('gatehouse_policy_info', { version })).toBe(1);
    expect(m.value('gatehouse_policy_status', { status: 'ok' })).toBe(1);
    expect(m.value('gatehouse_policy_status', { status: 'stale' })).toBe(0);
    // Process metrics come along.
    expect(m.types.get('process_cpu_seconds_total')).toBe('counter');
  });
});
