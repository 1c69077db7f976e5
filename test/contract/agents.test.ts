import { randomUUID } from 'node:crypto';
import { createRemoteJWKSet, decodeJwt, exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The agent endpoints, black-box: token, transaction token, decision. */
let s: TestServer;
let jwks: ReturnType<typeof createRemoteJWKSet>;
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

interface Agent { id: string; key: CryptoKey }

async function register(name: string, mode: 'autonomous' | 'delegated', extra: Record<string, unknown> = {}): Promise<Agent> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const r = await s.admin('POST', '/agents', { name, mode, public_jwk: await exportJWK(publicKey), ...extra });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return { id: r.body.agent_id, key: privateKey };
}

async function assertion(agent: Agent, o: { key?: CryptoKey; jti?: string; alg?: string; aud?: string } = {}) {
  const t = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: agent.id, sub: agent.id, aud: o.aud ?? s.ctx.urls.agentToken, iat: t, exp: t + 60, jti: o.jti ?? randomUUID() })
    .setProtectedHeader({ alg: o.alg ?? 'EdDSA' })
    .sign(o.key ?? agent.key);
}

async function form(path: string, fields: Record<string, string>) {
  const res = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

async function json(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed };
}

async function agentToken(agent: Agent, scope?: string) {
  return form('/apis/regional/v1/ai/auth/token', {
    grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(agent), ...(scope ? { scope } : {}),
  });
}

const TXN = '/apis/regional/v1/ai/auth/transaction-token';
const DECIDE = '/apis/regional/v1/agents/authorize';

let billing: Agent;
let accessToken: string;

beforeAll(async () => {
  s = await startTestServer();
  jwks = createRemoteJWKSet(new URL(`${s.url}/.well-known/jwks.json`));
  await s.admin('PUT', '/roles/refunder', { permissions: ['create:refunds', 'read:refunds'] });
  billing = await register('billing', 'autonomous', {
    roles: ['refunder'],
    capabilities: [
      { name: 'create:refunds', limits: { amount: { max: 500, min: 1 }, currency: { in: ['USD', 'EUR'] }, region: { not_in: ['XX'] }, channel: 'api' } },
      { name: 'read:refunds' },
      { name: 'delete:refunds' },
    ],
  });
  const t = await agentToken(billing);
  if (t.status !== 200) throw new Error(JSON.stringify(t.body));
  accessToken = t.body.access_token;
});
afterAll(() => s.stop());

const okContext = { amount: 100, currency: 'USD', region: 'EU', channel: 'api' };

async function bind(action: string, resource: string, context: unknown, token = accessToken) {
  return json(TXN, { action, resource, context }, { authorization: `Bearer ${token}` });
}

async function decide(agent: Agent, action: string, resource: string, context: Record<string, unknown>, bindContext = context) {
  const b = await bind(action, resource, bindContext);
  expect(b.status, JSON.stringify(b.body)).toBe(200);
  return json(DECIDE, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action, resource, context });
}

describe('Agent token endpoint (private_key_jwt, EdDSA)', () => {
  it('an autonomous agent gets an EdDSA access token with capabilities and scope', async () => {
    const t = await agentToken(billing);
    expect(t.status).toBe(200);
    expect(t.headers.get('cache-control')).toContain('no-store');
    expect(t.body.token_type).toBe('Bearer');
    expect(Number.isInteger(t.body.expires_in)).toBe(true);
    const { payload, protectedHeader } = await jwtVerify(t.body.access_token, jwks, { issuer: s.url, algorithms: ['EdDSA'] });
    expect(protectedHeader.kid).toBeTruthy();
    expect(payload.sub).toBe(billing.id);
    expect(payload.aud).toBe(`${s.url}/mcp`);
    expect(payload.capabilities).toEqual(expect.arrayContaining(['create:refunds', 'read:refunds']));
    expect(String(payload.scope).split(' ')).toEqual(expect.arrayContaining(['create:refunds', 'read:refunds']));
  });

  it('an assertion signed by another key, with alg none, reused, or missing: 401 invalid_client', async () => {
    const other = (await generateKeyPair('EdDSA', { crv: 'Ed25519' })).privateKey;
    const good = await assertion(billing);
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${good.split('.')[1]}.`;
    const jti = randomUUID();
    const first = await form('/apis/regional/v1/ai/auth/token', { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(billing, { jti }) });
    expect(first.status).toBe(200);
    for (const a of [await assertion(billing, { key: other }), none, await assertion(billing, { jti }), 'garbage', await assertion(billing, { aud: 'https://elsewhere.example' })]) {
      const r = await form('/apis/regional/v1/ai/auth/token', { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a });
      expect(r.status, a.slice(0, 30)).toBe(401);
      expect(r.body.error).toBe('invalid_client');
    }
  });

  it('the agent token is not shown to an application that is neither its client nor its audience', async () => {
    const web = await s.admin('POST', '/applications', { name: 'rs', type: 'api' });
    const r = await form('/oauth/token/introspect', { token: accessToken, client_id: web.body.client_id, client_secret: web.body.client_secret });
    expect(r.body).toEqual({ active: false });
  });
});

describe('CIBA: back-channel request and polling errors', () => {
  it('answers {auth_req_id, expires_in, interval}; an early poll is slow_down; an unknown id is invalid_grant', async () => {
    const person = await s.admin('POST', '/users', { email: 'approver@example.com', password: 'pw-approver-12345', name: 'Approver' });
    const helper = await register('helper', 'delegated', { roles: ['refunder'], capabilities: [{ name: 'read:refunds' }] });
    const r = await form('/apis/regional/v1/ai/auth/backchannel-authorize', {
      client_assertion_type: JWT_BEARER, client_assertion: await assertion(helper, { aud: s.url }),
      scope: 'read:refunds', login_hint: 'approver@example.com', binding_message: 'Read refund 42',
    });
    expect(r.status).toBe(200);
    expect(typeof r.body.auth_req_id).toBe('string');
    expect(Number.isInteger(r.body.expires_in)).toBe(true);
    expect(Number.isInteger(r.body.interval)).toBe(true);
    const poll = async (id: string) => form('/apis/regional/v1/ai/auth/token', {
      grant_type: 'urn:openid:params:grant-type:ciba', auth_req_id: id, client_assertion_type: JWT_BEARER, client_assertion: await assertion(helper),
    });
    const early = await poll(r.body.auth_req_id);
    expect(early.status).toBe(400);
    expect(['slow_down', 'authorization_pending']).toContain(early.body.error);
    const unknown = await poll('no-such-request');
    expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_grant']);
    const pending = await s.admin('GET', '/approvals?state=pending');
    const item = pending.body.data.find((x: { auth_req_id: string }) => x.auth_req_id === r.body.auth_req_id);
    expect(item).toMatchObject({ kind: 'ciba', agent_id: helper.id, user_id: person.body.id, binding_message: 'Read refund 42' });
    // a delegated agent may not use client_credentials
    const cc = await agentToken(helper);
    expect(cc.status).toBeGreaterThanOrEqual(400);
    expect(cc.status).toBeLessThan(500);
  });
});

describe('POST /apis/regional/v1/ai/auth/transaction-token', () => {
  it('binds an action: {data: {transaction_token, expires_in: 60}}, EdDSA, 60 s', async () => {
    const r = await bind('create:refunds', 'refund:r1', okContext);
    expect(r.status).toBe(200);
    expect(r.body.data.expires_in).toBe(60);
    const { payload, protectedHeader } = await jwtVerify(r.body.data.transaction_token, jwks, { issuer: s.url, algorithms: ['EdDSA'] });
    expect(protectedHeader.typ).toBe('txntoken+jwt');
    expect(payload.exp! - payload.iat!).toBe(60);
    expect(payload.tctx).toMatchObject({ action: 'create:refunds', resource: 'refund:r1', context: okContext });
  });

  it('details that break a limit: 403 {"error":"invalid_body","error_description":"constraint_violated"} plus the field and operator', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ ...okContext, amount: 501 }, 'constraint_violated: amount max'],
      [{ ...okContext, amount: 0 }, 'constraint_violated: amount min'],
      [{ ...okContext, currency: 'GBP' }, 'constraint_violated: currency in'],
      [{ ...okContext, region: 'XX' }, 'constraint_violated: region not_in'],
      [{ ...okContext, channel: 'web' }, 'constraint_violated: channel eq'],
    ];
    for (const [ctx, reason] of cases) {
      const r = await bind('create:refunds', 'refund:r1', ctx);
      expect(r.status, JSON.stringify(ctx)).toBe(403);
      expect(r.body).toEqual({ error: 'invalid_body', error_description: 'constraint_violated', reason });
    }
  });

  it('no bearer, a person\'s token, or an action outside the capabilities is refused', async () => {
    expect((await json(TXN, { action: 'create:refunds', resource: 'refund:1', context: okContext })).status).toBe(401);
    expect((await bind('create:refunds', 'refund:1', okContext, 'not.a.token')).status).toBe(401);
    const outside = await bind('approve:loans', 'loan:1', {});
    expect(outside.status).toBe(403);
    expect(outside.body.error).toBe('insufficient_scope');
  });

  it('hostile bodies: 400, never 500', async () => {
    for (const b of ['{', '[]', 'null', { action: ['create:refunds'], resource: 'refund:1', context: {} }, { action: 'create:refunds', resource: 'refund:1', context: [] },
      { action: 'create:refunds', resource: 'refund:1', context: 'x' }, { action: 'create:refunds', resource: 'r'.repeat(100000), context: {} },
      { action: 'create:refunds', resource: 'refund:1', context: { __proto__: { amount: 1 } } }]) {
      const res = await fetch(`${s.url}${TXN}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` }, body: typeof b === 'string' ? b : JSON.stringify(b) });
      expect(res.status, JSON.stringify(b).slice(0, 60)).toBeGreaterThanOrEqual(400);
      expect(res.status, JSON.stringify(b).slice(0, 60)).toBeLessThan(500);
    }
  });
});

describe('POST /apis/regional/v1/agents/authorize: the decision order', () => {
  it('allow: {"data": {"decision": "allow", "reason": ...}}', async () => {
    const r = await decide(billing, 'create:refunds', 'refund:r1', okContext);
    expect(r.status).toBe(200);
    expect(r.body.data.decision).toBe('allow');
    expect(typeof r.body.data.reason).toBe('string');
  });

  it('an unknown agent is 401', async () => {
    const b = await bind('read:refunds', 'refund:1', {});
    const r = await json(DECIDE, { agent_id: 'spiffe://localhost/agent/nobody', transaction_token: b.body.data.transaction_token, action: 'read:refunds', resource: 'refund:1', context: {} });
    expect(r.status).toBe(401);
  });

  it('a field limited by max, in or a bare value must be sent: missing is deny', async () => {
    const { amount: _a, ...noAmount } = okContext;
    const r = await decide(billing, 'create:refunds', 'refund:r1', noAmount, okContext);
    expect(r.body.data.decision).toBe('deny');
  });

  it('a limit lowered after binding: deny with constraint_violated: <field> <operator>', async () => {
    const agent = await register('lowered', 'autonomous', { roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }] });
    const t = await agentToken(agent);
    const ctx = { amount: 300 };
    const b = await json(TXN, { action: 'create:refunds', resource: 'refund:9', context: ctx }, { authorization: `Bearer ${t.body.access_token}` });
    expect(b.status).toBe(200);
    const put = await s.admin('PUT', `/agents/${encodeURIComponent(agent.id)}/capabilities/create:refunds`, { limits: { amount: { max: 100 } } });
    expect(put.status).toBeLessThan(300);
    const r = await json(DECIDE, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action: 'create:refunds', resource: 'refund:9', context: ctx });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ decision: 'deny' });
    expect(r.body.data.reason).toMatch(/^constraint_violated: amount max/);
    const audit = await s.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.id)}&limit=5`);
    expect(audit.body.data[0]).toMatchObject({ agent_id: agent.id, action: 'create:refunds', resource: 'refund:9', decision: 'deny', reason: r.body.data.reason });
  });

  it('not granted (a capability without the role permission): deny not_granted', async () => {
    const r = await decide(billing, 'delete:refunds', 'refund:r1', {});
    expect(r.body.data.decision).toBe('deny');
    expect(r.body.data.reason).toMatch(/^not_granted/);
  });

  it('a live deny rule: deny rule_denied; a live require_approval rule: approval_required with approval_id', async () => {
    const mk = async (body: Record<string, unknown>) => {
      const r = await s.admin('POST', '/rules', { subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', ...body });
      await s.admin('POST', `/rules/${r.body.id}/validate`);
      const e = await s.admin('POST', `/rules/${r.body.id}/enable`);
      expect(e.body.state).toBe('live');
    };
    await mk({ name: 'approve-over-200', effect: 'require_approval', condition: { field: 'amount', op: 'gte', value: 200 } });
    await mk({ name: 'deny-eu-400', effect: 'deny', condition: { field: 'amount', op: 'gte', value: 400 } });
    const ap = await decide(billing, 'create:refunds', 'refund:r2', { ...okContext, amount: 250 });
    expect(ap.status).toBe(200);
    expect(ap.body.data.decision).toBe('approval_required');
    expect(typeof ap.body.data.approval_id).toBe('string');
    const dn = await decide(billing, 'create:refunds', 'refund:r3', { ...okContext, amount: 450 });
    expect(dn.body.data.decision).toBe('deny');
    expect(dn.body.data.reason).toMatch(/^rule_denied/);
    const ok = await decide(billing, 'create:refunds', 'refund:r4', { ...okContext, amount: 50 });
    expect(ok.body.data.decision).toBe('allow');

    // Live rules hold for agents registered later too.
    const late = await register('late-comer', 'autonomous', { roles: ['refunder'], capabilities: [{ name: 'create:refunds' }] });
    const lateToken = (await agentToken(late)).body.access_token;
    const lb = await bind('create:refunds', 'refund:r5', { amount: 450 }, lateToken);
    expect(lb.status).toBe(200);
    const ld = await json(DECIDE, { agent_id: late.id, transaction_token: lb.body.data.transaction_token, action: 'create:refunds', resource: 'refund:r5', context: { amount: 450 } });
    expect(ld.body.data.decision).toBe('deny');
    expect(ld.body.data.reason).toMatch(/^rule_denied/);

    // The waiting action is listed with its fields; once approved it is allowed once.
    const pending = await s.admin('GET', '/approvals?state=pending');
    const item = pending.body.data.find((x: { id: string }) => x.id === ap.body.data.approval_id);
    expect(item).toBeDefined();
    for (const k of ['id', 'kind', 'state', 'agent_id', 'user_id', 'binding_message', 'auth_req_id', 'action', 'resource', 'context', 'created_at', 'expires_at']) {
      expect(Object.hasOwn(item, k), k).toBe(true);
    }
    expect(item).toMatchObject({ kind: 'action', state: 'pending', agent_id: billing.id, action: 'create:refunds', resource: 'refund:r2' });
    expect((await s.admin('POST', `/approvals/${item.id}/approve`)).status).toBeLessThan(300);
    const approved = await decide(billing, 'create:refunds', 'refund:r2', { ...okContext, amount: 250 });
    expect(approved.body.data.decision).toBe('allow');
    const once = await decide(billing, 'create:refunds', 'refund:r2', { ...okContext, amount: 250 });
    expect(once.body.data.decision).toBe('approval_required');
  });

  it('a transaction token bound to other details: deny invalid_transaction_token', async () => {
    const r = await decide(billing, 'create:refunds', 'refund:r1', { ...okContext, amount: 99 }, okContext);
    expect(r.body.data.decision).toBe('deny');
    expect(r.body.data.reason).toMatch(/^invalid_transaction_token/);
    const forged = await new SignJWT({ iss: s.url }).setProtectedHeader({ alg: 'EdDSA', typ: 'txntoken+jwt' }).sign((await generateKeyPair('EdDSA', { crv: 'Ed25519' })).privateKey);
    const f = await json(DECIDE, { agent_id: billing.id, transaction_token: forged, action: 'read:refunds', resource: 'refund:1', context: {} });
    expect(f.body.data.decision).toBe('deny');
  });

  it('a revoked agent is 401', async () => {
    const agent = await register('to-revoke', 'autonomous', { roles: ['refunder'], capabilities: [{ name: 'read:refunds' }] });
    const t = await agentToken(agent);
    const b = await json(TXN, { action: 'read:refunds', resource: 'refund:1', context: {} }, { authorization: `Bearer ${t.body.access_token}` });
    expect((await s.admin('POST', `/agents/${encodeURIComponent(agent.id)}/revoke`)).status).toBe(204);
    const r = await json(DECIDE, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action: 'read:refunds', resource: 'refund:1', context: {} });
    expect(r.status).toBe(401);
  });

  it('hostile bodies: 4xx, never 500', async () => {
    for (const b of ['{', '[]', 'null', { agent_id: ['x'] }, { agent_id: 'x', transaction_token: 1, action: {}, resource: [], context: 'x' }, { agent_id: 'a'.repeat(100000), transaction_token: 'x', action: 'a:b', resource: 'b:1', context: {} }]) {
      const r = await json(DECIDE, b);
      expect(r.status, JSON.stringify(b).slice(0, 60)).toBeGreaterThanOrEqual(400);
      expect(r.status, JSON.stringify(b).slice(0, 60)).toBeLessThan(500);
    }
    const decoded = decodeJwt(accessToken);
    expect(decoded.sub).toBe(billing.id);
  });
});
