import { randomUUID } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  accessTokenFor,
  authorize,
  bind,
  bindAndDecide,
  createRule,
  enableRule,
  newKeyPair,
  putRole,
  registerAgent,
  type TestAgent,
} from './helpers.js';

const POLICY = `policy "records" version 1

rule "no-prod-deletes" {
  effect deny
  subjects "agent:*"
  relation "delete:records"
  object "record:*"
  when env == "prod"
}

limits "archive:records" for "spiffe://localhost/agent/file-limited" {
  recipients max 10
}
`;

let server: TestServer;
let billing: TestAgent;
let token: string;

const LIMITS = { amount: { max: 500, min: 1 }, currency: { in: ['USD', 'EUR'] }, region: { not_in: ['XX'] }, channel: 'api' };
const GOOD = { amount: 100, currency: 'USD', region: 'FR', channel: 'api' };

beforeAll(async () => {
  server = await startTestServer({ policies: { 'records.policy': POLICY } });
  await putRole(server, 'operator', ['create:refunds', 'delete:records', 'send:emails', 'pay:invoices', 'archive:records']);
  billing = await registerAgent(server, {
    name: 'billing',
    mode: 'autonomous',
    roles: ['operator'],
    capabilities: [
      { name: 'create:refunds', limits: LIMITS },
      { name: 'delete:records' },
      { name: 'send:emails' },
      { name: 'pay:invoices' },
      { name: 'read:secrets' },
    ],
  });
  token = await accessTokenFor(server, billing);
});
afterAll(async () => server?.stop());

const decideFor = (action: string, resource: string, context: Record<string, unknown>) =>
  bindAndDecide(server, billing, token, action, resource, context);

describe('transaction tokens', () => {
  it('binds an action: typ txntoken+jwt, EdDSA, the contract claims, 60 s', async () => {
    const res = await bind(server, token, 'create:refunds', 'refund:r1', GOOD);
    expect(res.status).toBe(200);
    expect(res.body.data.expires_in).toBe(60);
    const jwt = res.body.data.transaction_token;
    expect(decodeProtectedHeader(jwt)).toMatchObject({ alg: 'EdDSA', typ: 'txntoken+jwt' });
    const { payload } = await jwtVerify(jwt, createRemoteJWKSet(new URL(server.ctx.urls.jwks)), {
      issuer: server.ctx.urls.issuer,
      audience: server.ctx.urls.issuer,
      typ: 'txntoken+jwt',
    });
    expect(payload).toMatchObject({
      sub: billing.id,
      req_wl: billing.id,
      scope: 'create:refunds',
      tctx: { action: 'create:refunds', resource: 'refund:r1', context: GOOD },
    });
    expect(payload.exp! - payload.iat!).toBe(60);
    expect(typeof payload.txn).toBe('string');
  });

  it('gives each token a time-ordered txn (a UUID version 7): later bindings sort after earlier ones', async () => {
    const txns: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await bind(server, token, 'create:refunds', `refund:o${i}`, GOOD);
      txns.push(decodeJwt(res.body.data.transaction_token).txn as string);
      await new Promise((r) => setTimeout(r, 3));
    }
    for (const t of txns) expect(t).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(txns).size).toBe(3);
    expect([...txns].sort()).toEqual(txns);
    // The first 48 bits are the clock's milliseconds.
    const ms = Number.parseInt(txns[0]!.replace(/-/g, '').slice(0, 12), 16);
    expect(Math.abs(ms - server.ctx.clock.now())).toBeLessThan(60_000);
  });

  it('refuses an action outside the token capabilities (403 insufficient_scope)', async () => {
    const narrow = await accessTokenFor(server, billing, { scope: 'send:emails' });
    const res = await bind(server, narrow, 'create:refunds', 'refund:r1', GOOD);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('insufficient_scope');
  });

  it('needs a good bearer token and a valid body naming the bad field', async () => {
    const noAuth = await fetch(server.ctx.urls.transactionToken, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noAuth.status).toBe(401);
    expect(((await noAuth.json()) as { error: string }).error).toBe('invalid_token');
    const res = await bind(server, token, '', 'refund:r1', {});
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(JSON.stringify(res.body.issues)).toContain('action');
    const ctxBad = await bind(server, token, 'send:emails', 'email:1', 'not-an-object' as unknown as Record<string, unknown>);
    expect(ctxBad.status).toBe(400);
    expect(JSON.stringify(ctxBad.body.issues)).toContain('context');
  });
});

describe('limits at binding (403 constraint_violated, no token) for every operator at its boundary', () => {
  const cases: [string, Record<string, unknown>, boolean][] = [
    ['max equal passes', { ...GOOD, amount: 500 }, true],
    ['max one over fails', { ...GOOD, amount: 501 }, false],
    ['min equal passes', { ...GOOD, amount: 1 }, true],
    ['min one under fails', { ...GOOD, amount: 0 }, false],
    ['in: a listed value passes', { ...GOOD, currency: 'EUR' }, true],
    ['in: another value fails', { ...GOOD, currency: 'GBP' }, false],
    ['not_in: a listed value fails', { ...GOOD, region: 'XX' }, false],
    ['not_in: absent is fine', { amount: 5, currency: 'USD', channel: 'api' }, true],
    ['bare value: equal passes', { ...GOOD, channel: 'api' }, true],
    ['bare value: different fails', { ...GOOD, channel: 'web' }, false],
    ['missing max/min field fails', { currency: 'USD', channel: 'api' }, false],
    ['missing in field fails', { amount: 5, channel: 'api' }, false],
    ['missing bare-value field fails', { amount: 5, currency: 'USD' }, false],
  ];
  for (const [name, context, ok] of cases) {
    it(name, async () => {
      const res = await bind(server, token, 'create:refunds', 'refund:b', context);
      if (ok) {
        expect(res.status).toBe(200);
        const d = await authorize(server, { agent_id: billing.id, transaction_token: res.body.data.transaction_token, action: 'create:refunds', resource: 'refund:b', context });
        expect(d.body.data).toMatchObject({ decision: 'allow', reason: 'allowed' });
      } else {
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({ error: 'invalid_body', error_description: 'constraint_violated' });
        expect(res.body.reason).toMatch(/^constraint_violated: (amount|currency|region|channel) (max|min|in|not_in|eq|required)$/);
      }
    });
  }
});

describe('the decision order', () => {
  it('(1) an unknown agent is 401 invalid_client', async () => {
    const b = await bind(server, token, 'send:emails', 'email:1', {});
    const res = await authorize(server, { agent_id: 'spiffe://localhost/agent/nobody', transaction_token: b.body.data.transaction_token, action: 'send:emails', resource: 'email:1', context: {} });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });

  it('(1) a revoked agent is 401, even with a token bound before', async () => {
    const gone = await registerAgent(server, { name: 'gone', mode: 'autonomous', roles: ['operator'], capabilities: [{ name: 'send:emails' }] });
    const t = await accessTokenFor(server, gone);
    const b = await bind(server, t, 'send:emails', 'email:1', {});
    expect(b.status).toBe(200);
    expect((await server.admin('POST', `/agents/${encodeURIComponent(gone.id)}/revoke`)).status).toBe(204);
    const res = await authorize(server, { agent_id: gone.id, transaction_token: b.body.data.transaction_token, action: 'send:emails', resource: 'email:1', context: {} });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });

  it('a transaction token reused for another action, resource, context or agent is denied', async () => {
    const b = await bind(server, token, 'send:emails', 'email:1', { to: 'a@example.com', n: 1 });
    const txn = b.body.data.transaction_token;
    const ask = (body: Record<string, unknown>) =>
      authorize(server, { agent_id: billing.id, transaction_token: txn, action: 'send:emails', resource: 'email:1', context: { to: 'a@example.com', n: 1 }, ...body });
    // key order does not matter
    expect((await ask({ context: { n: 1, to: 'a@example.com' } })).body.data.decision).toBe('allow');
    const other = await ask({ action: 'pay:invoices' });
    expect(other.status).toBe(200);
    expect(other.body.data.decision).toBe('deny');
    expect(other.body.data.reason).toMatch(/^invalid_transaction_token: /);
    expect((await ask({ resource: 'email:2' })).body.data.reason).toMatch(/^invalid_transaction_token: /);
    expect((await ask({ context: { to: 'b@example.com', n: 1 } })).body.data.reason).toMatch(/^invalid_transaction_token: /);
    const stranger = await registerAgent(server, { name: 'stranger', mode: 'autonomous', roles: ['operator'], capabilities: [{ name: 'send:emails' }] });
    expect((await ask({ agent_id: stranger.id })).body.data.reason).toMatch(/^invalid_transaction_token: /);
    expect((await ask({ transaction_token: 'not.a.token' })).body.data.reason).toMatch(/^invalid_transaction_token: /);
  });

  it('an expired transaction token is denied', async () => {
    const t = Math.floor(Date.now() / 1000) - 120;
    const expired = await server.ctx.keys.sign(
      'EdDSA',
      { iss: server.ctx.urls.issuer, aud: server.ctx.urls.issuer, iat: t, exp: t + 60, txn: randomUUID(), sub: billing.id, req_wl: billing.id, scope: 'send:emails', tctx: { action: 'send:emails', resource: 'email:1', context: {} } },
      'txntoken+jwt',
    );
    const res = await authorize(server, { agent_id: billing.id, transaction_token: expired, action: 'send:emails', resource: 'email:1', context: {} });
    expect(res.body.data).toMatchObject({ decision: 'deny', reason: 'invalid_transaction_token: expired' });
  });

  it('(2) a limit lowered between binding and decision denies', async () => {
    const context = { ...GOOD, amount: 400 };
    const b = await bind(server, token, 'create:refunds', 'refund:low', context);
    expect(b.status).toBe(200);
    const put = await server.admin('PUT', `/agents/${encodeURIComponent(billing.id)}/capabilities/create:refunds`, { limits: { ...LIMITS, amount: { max: 300, min: 1 } } });
    expect(put.status).toBe(200);
    try {
      const res = await authorize(server, { agent_id: billing.id, transaction_token: b.body.data.transaction_token, action: 'create:refunds', resource: 'refund:low', context });
      expect(res.body.data).toMatchObject({ decision: 'deny', reason: 'constraint_violated: amount max' });
    } finally {
      await server.admin('PUT', `/agents/${encodeURIComponent(billing.id)}/capabilities/create:refunds`, { limits: LIMITS });
    }
  });

  it('(3) a policy file rule denies', async () => {
    const prod = await decideFor('delete:records', 'record:7', { env: 'prod' });
    expect(prod.decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-prod-deletes' });
    expect(prod.decision!.policy_version).toBeTruthy();
    expect((await decideFor('delete:records', 'record:7', { env: 'dev' })).decision!.decision).toBe('allow');
  });

  it('(3) a rule moved draft → live applies from then on', async () => {
    const ctx = { to: 'all@example.com' };
    const id = await createRule(server, { name: 'no-mass-mail', effect: 'deny', subjects: ['agent:*'], relation: 'send:emails', object: 'email:*', condition: { field: 'to', op: 'eq', value: 'all@example.com' } }, false);
    expect((await decideFor('send:emails', 'email:9', ctx)).decision!.decision).toBe('allow');
    await enableRule(server, id);
    expect((await decideFor('send:emails', 'email:9', ctx)).decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-mass-mail' });
  });

  it('(4) an action the agent holds as capability but not as permission is not granted', async () => {
    const res = await decideFor('read:secrets', 'secret:1', {});
    expect(res.decision!.decision).toBe('deny');
    expect(res.decision!.reason).toMatch(/^not_granted: /);
  });

  it('(5) approval_required, approved once within the window, then required again', async () => {
    await createRule(server, { name: 'big-payments', effect: 'require_approval', subjects: ['agent:*'], relation: 'pay:invoices', object: 'invoice:*', condition: { field: 'amount', op: 'gte', value: 1000 } });
    const ctx = { amount: 5000 };
    expect((await decideFor('pay:invoices', 'invoice:1', { amount: 10 })).decision!.decision).toBe('allow');
    const first = await decideFor('pay:invoices', 'invoice:1', ctx);
    expect(first.decision).toMatchObject({ decision: 'approval_required', reason: 'approval_required: big-payments' });
    const approvalId = first.decision!.approval_id!;
    expect(approvalId).toBeTruthy();
    // the same action again, before anyone answers: the same pending approval
    expect((await decideFor('pay:invoices', 'invoice:1', ctx)).decision!.approval_id).toBe(approvalId);

    const pending = await server.admin('GET', '/approvals?state=pending');
    expect(pending.status).toBe(200);
    const item = pending.body.data.find((a: { id: string }) => a.id === approvalId);
    expect(item).toMatchObject({ kind: 'action', state: 'pending', agent_id: billing.id, user_id: null, action: 'pay:invoices', resource: 'invoice:1', context: ctx });

    expect((await server.admin('POST', `/approvals/${approvalId}/approve`)).status).toBe(200);
    expect((await server.admin('POST', `/approvals/${approvalId}/approve`)).status).toBe(409);
    // another resource is another action: still waits
    expect((await decideFor('pay:invoices', 'invoice:2', ctx)).decision!.decision).toBe('approval_required');
    const allowed = await decideFor('pay:invoices', 'invoice:1', ctx);
    expect(allowed.decision!.decision).toBe('allow');
    // once only
    const again = await decideFor('pay:invoices', 'invoice:1', ctx);
    expect(again.decision!.decision).toBe('approval_required');
    expect(again.decision!.approval_id).not.toBe(approvalId);
  });

  it('(5) a denied approval stays denied', async () => {
    const ctx = { amount: 7000 };
    const first = await decideFor('pay:invoices', 'invoice:3', ctx);
    const id = first.decision!.approval_id!;
    expect((await server.admin('POST', `/approvals/${id}/deny`)).status).toBe(200);
    const after = await decideFor('pay:invoices', 'invoice:3', ctx);
    expect(after.decision!.decision).toBe('deny');
    expect(after.decision!.reason).toMatch(/^rule_denied: big-payments \(a person denied the approval\)/);
    expect((await server.admin('POST', '/approvals/no-such-id/approve')).status).toBe(404);
  });

  it('(2) limits from a policy file apply to the agent they name, beside the API limits', async () => {
    const keys = await newKeyPair();
    const created = await server.admin('POST', '/agents', {
      agent_id: 'spiffe://localhost/agent/file-limited',
      name: 'file-limited',
      mode: 'autonomous',
      public_jwk: keys.publicJwk,
      roles: ['operator'],
      capabilities: [{ name: 'archive:records', limits: { priority: { in: ['low', 'normal'] } } }],
    });
    expect(created.status).toBe(201);
    const agent = { id: created.body.agent_id as string, ...keys };
    const t = await accessTokenFor(server, agent);
    const ok = await bindAndDecide(server, agent, t, 'archive:records', 'record:1', { recipients: 10, priority: 'low' });
    expect(ok.decision!.decision).toBe('allow');
    const tooMany = await bind(server, t, 'archive:records', 'record:1', { recipients: 11, priority: 'low' });
    expect(tooMany.status).toBe(403);
    const apiLimit = await bind(server, t, 'archive:records', 'record:1', { recipients: 1, priority: 'urgent' });
    expect(apiLimit.status).toBe(403);
    // an agent the file block does not name is not held to it
    const other = await registerAgent(server, { name: 'archivist', mode: 'autonomous', roles: ['operator'], capabilities: [{ name: 'archive:records' }] });
    expect((await bind(server, await accessTokenFor(server, other), 'archive:records', 'record:1', { recipients: 11 })).status).toBe(200);
  });

  it('writes every decision to the audit trail with its reason and policy version', async () => {
    const res = await decideFor('delete:records', 'record:audit', { env: 'prod' });
    const [last] = await server.ctx.store.audit.list({ agent_id: billing.id, kind: 'decision', limit: 1 });
    expect(last).toMatchObject({
      agent_id: billing.id,
      action: 'delete:records',
      resource: 'record:audit',
      context: { env: 'prod' },
      decision: 'deny',
      reason: 'rule_denied: no-prod-deletes',
      policy_version: res.decision!.policy_version,
    });
    expect((await server.ctx.store.audit.verify()).broken).toBeNull();
    const page = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(billing.id)}&limit=1`);
    expect(page.status).toBe(200);
    expect(page.body.data[0]).toMatchObject({ agent_id: billing.id, action: 'delete:records', decision: 'deny', reason: 'rule_denied: no-prod-deletes' });
  });

  it('documents the approvals operations in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${server.url}/admin/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/approvals', '/approvals/{id}/approve', '/approvals/{id}/deny']));
  });

  it('a body without a required field is 400 naming it', async () => {
    const res = await authorize(server, { agent_id: billing.id, transaction_token: 'x', resource: 'email:1', context: {} });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(JSON.stringify(res.body.issues)).toContain('action');
  });

  it('no transaction token is a deny with invalid_transaction_token: missing', async () => {
    const res = await authorize(server, { agent_id: billing.id, action: 'send:emails', resource: 'email:1', context: {} });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ decision: 'deny', reason: 'invalid_transaction_token: missing' });
  });

  it('an unknown agent is 401 before the rest of the body is looked at', async () => {
    const res = await authorize(server, { agent_id: 'spiffe://localhost/agent/nobody', context: 'not an object' });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });
});
