import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  accessTokenFor, agentToken, assertion, authorize, bind, bindAndDecide, CIBA_GRANT, createRule, JWT_BEARER, postForm, putRole, registerAgent, type TestAgent,
} from '../agents/helpers.js';

/** The agent endpoints, deeper: every reason code, the token claims, approvals and audit shapes. */

let s: TestServer;
let jwks: ReturnType<typeof createRemoteJWKSet>;
let bot: TestAgent;
let botToken: string;
let helper: TestAgent;
let aliceId: string;

const LIMITS = { amount: { max: 500, min: 1 }, currency: { in: ['USD', 'EUR'] }, region: { not_in: ['XX'] }, channel: 'api' };
const OK = { amount: 100, currency: 'USD', region: 'EU', channel: 'api' };

beforeAll(async () => {
  s = await startTestServer();
  jwks = createRemoteJWKSet(new URL(`${s.url}/.well-known/jwks.json`));
  await putRole(s, 'refunder', ['create:refunds', 'read:invoices']);
  await putRole(s, 'reader', ['read:invoices']);
  bot = await registerAgent(s, { name: 'deep-bot', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: LIMITS }, { name: 'read:invoices' }, { name: 'delete:invoices' }] });
  botToken = await accessTokenFor(s, bot);
  const alice = await s.admin('POST', '/users', { email: 'alice-deep@example.com', password: 'correct horse battery staple', name: 'Alice', roles: ['reader'] });
  aliceId = alice.body.id;
  helper = await registerAgent(s, { name: 'deep-helper', mode: 'delegated', roles: ['refunder'], capabilities: [{ name: 'create:refunds' }, { name: 'read:invoices' }] });
});
afterAll(() => s.stop());

describe('agent token endpoint', () => {
  it('accepts the issuer as aud; refuses exp more than 5 minutes ahead and a reused jti, each 401 invalid_client', async () => {
    const ok = await postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, bot, { aud: s.ctx.urls.issuer }) });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toContain('no-store');
    expect(ok.body).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
    expect(typeof ok.body.access_token).toBe('string');
    const far = await postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, bot, { expIn: 301 + 60 }) });
    expect([far.status, far.body.error]).toEqual([401, 'invalid_client']);
    const a = await assertion(s, bot);
    const first = await postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a });
    const again = await postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: a });
    expect(first.status).toBe(200);
    expect([again.status, again.body.error]).toEqual([401, 'invalid_client']);
    const otherAud = await postForm(s.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, bot, { aud: `${s.ctx.urls.issuer}/oauth/token` }) });
    expect([otherAud.status, otherAud.body.error]).toEqual([401, 'invalid_client']);
  });

  it('the access token: EdDSA at+jwt, sub = agent, aud = {base_url}/mcp, capabilities and scope', async () => {
    const { payload, protectedHeader } = await jwtVerify(botToken, jwks, { issuer: s.ctx.urls.issuer, audience: `${s.ctx.urls.issuer}/mcp` });
    expect(protectedHeader).toMatchObject({ alg: 'EdDSA', typ: 'at+jwt' });
    expect(payload.sub).toBe(bot.id);
    expect(payload.capabilities).toEqual(expect.arrayContaining(['create:refunds', 'read:invoices', 'delete:invoices']));
    expect(String(payload.scope).split(' ').sort()).toEqual(['create:refunds', 'delete:invoices', 'read:invoices']);
  });
});

describe('transaction token', () => {
  it('200 {data: {transaction_token, expires_in: 60}} with the exact header and claims', async () => {
    const r = await bind(s, botToken, 'create:refunds', 'refund:r1', OK);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['data']);
    expect(r.body.data.expires_in).toBe(60);
    const t = r.body.data.transaction_token;
    expect(decodeProtectedHeader(t)).toMatchObject({ alg: 'EdDSA', typ: 'txntoken+jwt' });
    const { payload } = await jwtVerify(t, jwks, { issuer: s.ctx.urls.issuer, audience: s.ctx.urls.issuer, typ: 'txntoken+jwt' });
    expect(payload.exp! - payload.iat!).toBe(60);
    expect(typeof payload.txn).toBe('string');
    expect(payload).toMatchObject({ sub: bot.id, req_wl: bot.id, scope: 'create:refunds', tctx: { action: 'create:refunds', resource: 'refund:r1', context: OK } });
    const again = await bind(s, botToken, 'create:refunds', 'refund:r1', OK);
    expect(decodeJwtTxn(again.body.data.transaction_token)).not.toBe(payload.txn);
  });

  it('403 insufficient_scope outside the token; 403 invalid_body/constraint_violated for each kind of broken limit', async () => {
    const narrow = await accessTokenFor(s, bot, { scope: 'read:invoices' });
    const out = await bind(s, narrow, 'create:refunds', 'refund:r1', OK);
    expect([out.status, out.body.error]).toEqual([403, 'insufficient_scope']);
    for (const context of [{ ...OK, amount: 501 }, { ...OK, amount: 0 }, { ...OK, currency: 'GBP' }, { ...OK, region: 'XX' }, { ...OK, channel: 'web' }, { currency: 'USD', channel: 'api' }]) {
      const r = await bind(s, botToken, 'create:refunds', 'refund:r1', context);
      expect(r.status, JSON.stringify(context)).toBe(403);
      expect(r.body).toMatchObject({ error: 'invalid_body', error_description: 'constraint_violated' });
      expect(r.body.reason).toMatch(/^constraint_violated: \w+ (max|min|in|not_in|eq|required)$/);
    }
  });
});

function decodeJwtTxn(t: string): unknown {
  return JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString()).txn;
}

describe('decision endpoint: each step and reason code', () => {
  async function setLimits(limits: Record<string, unknown>) {
    const r = await s.admin('PUT', `/agents/${encodeURIComponent(bot.id)}/capabilities/create:refunds`, { limits });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  }

  it('a limit changed after binding: constraint_violated: <field> <operator> for max, min, in, not_in, eq and required', async () => {
    const cases: [Record<string, unknown>, Record<string, unknown>, string][] = [
      [{ amount: { max: 50 } }, OK, 'constraint_violated: amount max'],
      [{ amount: { min: 200 } }, OK, 'constraint_violated: amount min'],
      [{ currency: { in: ['EUR'] } }, OK, 'constraint_violated: currency in'],
      [{ region: { not_in: ['EU'] } }, OK, 'constraint_violated: region not_in'],
      [{ channel: 'batch' }, OK, 'constraint_violated: channel eq'],
      [{ purpose: 'refund' }, OK, 'constraint_violated: purpose required'],
    ];
    try {
      for (const [limits, context, reason] of cases) {
        await setLimits(LIMITS);
        const b = await bind(s, botToken, 'create:refunds', 'refund:r1', context);
        expect(b.status).toBe(200);
        await setLimits(limits);
        const d = await authorize(s, { agent_id: bot.id, transaction_token: b.body.data.transaction_token, action: 'create:refunds', resource: 'refund:r1', context });
        expect(d.status).toBe(200);
        expect(d.body).toEqual({ data: expect.objectContaining({ decision: 'deny', reason }) });
      }
    } finally {
      await setLimits(LIMITS);
    }
  });

  it('invalid_transaction_token: <why> for another agent, action, resource, context, or a forged token', async () => {
    const b = await bind(s, botToken, 'read:invoices', 'invoice:i1', { n: 1 });
    const t = b.body.data.transaction_token;
    const other = await registerAgent(s, { name: 'deep-other', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'read:invoices' }] });
    const variants = [
      { agent_id: other.id, transaction_token: t, action: 'read:invoices', resource: 'invoice:i1', context: { n: 1 } },
      { agent_id: bot.id, transaction_token: t, action: 'delete:invoices', resource: 'invoice:i1', context: { n: 1 } },
      { agent_id: bot.id, transaction_token: t, action: 'read:invoices', resource: 'invoice:i2', context: { n: 1 } },
      { agent_id: bot.id, transaction_token: t, action: 'read:invoices', resource: 'invoice:i1', context: { n: 2 } },
      { agent_id: bot.id, transaction_token: t.slice(0, -4) + 'AAAA', action: 'read:invoices', resource: 'invoice:i1', context: { n: 1 } },
      { agent_id: bot.id, transaction_token: botToken, action: 'read:invoices', resource: 'invoice:i1', context: { n: 1 } },
    ];
    for (const v of variants) {
      const d = await authorize(s, v);
      expect(d.status).toBe(200);
      expect(d.body.data.decision).toBe('deny');
      expect(d.body.data.reason).toMatch(/^invalid_transaction_token: \S/);
    }
    const good = await authorize(s, { agent_id: bot.id, transaction_token: t, action: 'read:invoices', resource: 'invoice:i1', context: { n: 1 } });
    expect(good.body.data).toMatchObject({ decision: 'allow', reason: 'allowed' });
  });

  it('order: limits before rules before grants before approval; rule_denied, not_granted, approval_required', async () => {
    await createRule(s, { name: 'deep-deny-xy', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'gte', value: 400 } });
    await createRule(s, { name: 'deep-wait', effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'gte', value: 200 } });
    await createRule(s, { name: 'deep-deny-delete', effect: 'deny', subjects: ['agent:*'], relation: 'delete:invoices', object: 'invoice:*', condition: { field: 'hard', op: 'eq', value: true } });
    expect((await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r1', { ...OK, amount: 450 })).decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: deep-deny-xy' });
    // deny rule (step 3) comes before not granted (step 4): delete:invoices is a capability without a permission
    expect((await bindAndDecide(s, bot, botToken, 'delete:invoices', 'invoice:i1', { hard: true })).decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: deep-deny-delete' });
    const ng = (await bindAndDecide(s, bot, botToken, 'delete:invoices', 'invoice:i1', { hard: false })).decision!;
    expect(ng).toMatchObject({ decision: 'deny', reason: expect.stringMatching(/^not_granted: delete:invoices/) });
    // a rule that names a field the request lacks applies (fails closed)
    expect((await bindAndDecide(s, bot, botToken, 'delete:invoices', 'invoice:i1', {})).decision).toMatchObject({ reason: 'rule_denied: deep-deny-delete' });
    const wait = (await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r9', { ...OK, amount: 250 })).decision!;
    expect(wait).toMatchObject({ decision: 'approval_required', reason: 'approval_required: deep-wait' });
    expect(typeof wait.approval_id).toBe('string');

    // /admin/v1/approvals: its documented shape
    const list = await s.admin('GET', '/approvals?state=pending');
    expect(list.status).toBe(200);
    const item = list.body.data.find((a: any) => a.id === wait.approval_id);
    expect(item).toBeDefined();
    for (const k of ['id', 'kind', 'state', 'agent_id', 'user_id', 'binding_message', 'auth_req_id', 'action', 'resource', 'context', 'created_at', 'expires_at']) expect(item).toHaveProperty(k);
    expect(item).toMatchObject({ kind: 'action', state: 'pending', agent_id: bot.id, action: 'create:refunds', resource: 'refund:r9', context: { ...OK, amount: 250 } });
    expect(new Date(item.expires_at).getTime() - new Date(item.created_at).getTime()).toBeGreaterThan(0);

    const ap = await s.admin('POST', `/approvals/${wait.approval_id}/approve`);
    expect(ap.status).toBeLessThan(300);
    expect((await s.admin('GET', '/approvals?state=pending')).body.data.some((a: any) => a.id === wait.approval_id)).toBe(false);
    // allowed once, for the same action only
    expect((await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r9', { ...OK, amount: 251 })).decision!.decision).toBe('approval_required');
    expect((await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r9', { ...OK, amount: 250 })).decision!.decision).toBe('allow');
    expect((await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r9', { ...OK, amount: 250 })).decision!.decision).toBe('approval_required');

    const denyMe = (await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r10', { ...OK, amount: 300 })).decision!;
    expect((await s.admin('POST', `/approvals/${denyMe.approval_id}/deny`)).status).toBeLessThan(300);
    expect((await bindAndDecide(s, bot, botToken, 'create:refunds', 'refund:r10', { ...OK, amount: 300 })).decision!.decision).not.toBe('allow');
    expect((await s.admin('POST', '/approvals/no-such-id/approve')).status).toBe(404);
  });

  it('401 for an unknown agent and for a revoked one', async () => {
    const gone = await registerAgent(s, { name: 'deep-gone', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'read:invoices' }] });
    const tok = await accessTokenFor(s, gone);
    const b = await bind(s, tok, 'read:invoices', 'invoice:i1', {});
    expect((await authorize(s, { agent_id: 'spiffe://localhost/agent/nobody', transaction_token: b.body.data.transaction_token, action: 'read:invoices', resource: 'invoice:i1', context: {} })).status).toBe(401);
    expect((await s.admin('POST', `/agents/${encodeURIComponent(gone.id)}/revoke`)).status).toBe(204);
    expect((await authorize(s, { agent_id: gone.id, transaction_token: b.body.data.transaction_token, action: 'read:invoices', resource: 'invoice:i1', context: {} })).status).toBe(401);
  });

  it('/admin/v1/audit: {data: [{time, agent_id, action, resource, decision, reason, policy_version}]} newest first', async () => {
    await bindAndDecide(s, bot, botToken, 'read:invoices', 'invoice:first', {});
    await bindAndDecide(s, bot, botToken, 'read:invoices', 'invoice:last', {});
    const r = await s.admin('GET', `/audit?agent_id=${encodeURIComponent(bot.id)}&limit=2`);
    expect(r.status).toBe(200);
    expect(r.body.data).toHaveLength(2);
    for (const e of r.body.data) {
      for (const k of ['time', 'agent_id', 'action', 'resource', 'decision', 'reason', 'policy_version']) expect(e).toHaveProperty(k);
      expect(e.agent_id).toBe(bot.id);
    }
    expect(r.body.data[0]).toMatchObject({ resource: 'invoice:last', decision: 'allow', reason: 'allowed' });
    expect(r.body.data[1]).toMatchObject({ resource: 'invoice:first' });
    const all = await s.admin('GET', `/audit?agent_id=${encodeURIComponent(bot.id)}`);
    const times = all.body.data.map((e: any) => new Date(e.time).getTime());
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(all.body.data.some((e: any) => String(e.reason).startsWith('constraint_violated: '))).toBe(true);
    for (const e of all.body.data) expect(['allow', 'deny', 'approval_required']).toContain(e.decision);
  });
});

describe('a delegated agent through CIBA: the person check', () => {
  it('polls through the CIBA errors, gets sub = person and act = agent, and can do only what the person may', async () => {
    const cibaAssertion = async () => ({ client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, helper) });
    const req = await postForm(s.ctx.urls.backchannelAuthorize, { ...(await cibaAssertion()), scope: 'read:invoices create:refunds', login_hint: 'alice-deep@example.com', binding_message: 'deep-1' });
    expect(req.status).toBe(200);
    expect(Object.keys(req.body).sort()).toEqual(['auth_req_id', 'expires_in', 'interval']);
    const poll = async () => postForm(s.ctx.urls.agentToken, { grant_type: CIBA_GRANT, auth_req_id: req.body.auth_req_id, ...(await cibaAssertion()) });
    const early = await poll();
    expect([early.status, early.body.error]).toEqual([400, 'slow_down']);
    const pass = () => s.ctx.store.sql.run("UPDATE agent_approvals SET last_poll_ms = last_poll_ms - 60000 WHERE kind = 'ciba'");
    await pass();
    const pending = await poll();
    expect([pending.status, pending.body.error]).toEqual([400, 'authorization_pending']);
    const item = (await s.admin('GET', '/approvals?state=pending')).body.data.find((a: any) => a.auth_req_id === req.body.auth_req_id || a.binding_message === 'deep-1');
    expect(item).toMatchObject({ kind: 'ciba', agent_id: helper.id, user_id: aliceId, binding_message: 'deep-1' });
    expect((await s.admin('POST', `/approvals/${item.id}/approve`)).status).toBeLessThan(300);
    await pass();
    const tok = await poll();
    expect(tok.status).toBe(200);
    const { payload } = await jwtVerify(tok.body.access_token, jwks, { issuer: s.ctx.urls.issuer });
    expect(payload).toMatchObject({ sub: aliceId, act: { sub: helper.id } });
    await pass();
    const redeemed = await poll();
    expect([redeemed.status, redeemed.body.error]).toEqual([400, 'invalid_grant']);

    // the transaction token's sub is the person; req_wl the agent
    const b = await bind(s, tok.body.access_token, 'read:invoices', 'invoice:i1', {});
    const claims = JSON.parse(Buffer.from(b.body.data.transaction_token.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sub: aliceId, req_wl: helper.id });
    // Alice (reader) may read invoices; she may not create refunds, though the agent may
    expect((await bindAndDecide(s, helper, tok.body.access_token, 'read:invoices', 'invoice:i1', {})).decision).toMatchObject({ decision: 'allow' });
    const refund = await bindAndDecide(s, helper, tok.body.access_token, 'create:refunds', 'refund:r1', { amount: 10 });
    expect(refund.decision).toMatchObject({ decision: 'deny', reason: expect.stringMatching(/^not_granted: create:refunds/) });
  });

  it('access_denied after a denial; invalid_grant for an unknown auth_req_id; client_credentials refused to a delegated agent', async () => {
    const req = await postForm(s.ctx.urls.backchannelAuthorize, { client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, helper), scope: 'read:invoices', login_hint: aliceId, binding_message: 'deep-2' });
    expect(req.status).toBe(200);
    const item = (await s.admin('GET', '/approvals?state=pending')).body.data.find((a: any) => a.binding_message === 'deep-2');
    expect((await s.admin('POST', `/approvals/${item.id}/deny`)).status).toBeLessThan(300);
    await s.ctx.store.sql.run("UPDATE agent_approvals SET last_poll_ms = last_poll_ms - 60000 WHERE kind = 'ciba'");
    const denied = await postForm(s.ctx.urls.agentToken, { grant_type: CIBA_GRANT, auth_req_id: req.body.auth_req_id, client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, helper) });
    expect([denied.status, denied.body.error]).toEqual([400, 'access_denied']);
    const unknown = await postForm(s.ctx.urls.agentToken, { grant_type: CIBA_GRANT, auth_req_id: 'nope', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, helper) });
    expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_grant']);
    const cc = await agentToken(s, helper);
    expect(cc.status).toBeGreaterThanOrEqual(400);
    expect(cc.body.access_token).toBeUndefined();
  });
});
