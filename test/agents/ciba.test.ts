import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  accessTokenFor,
  assertion,
  bindAndDecide,
  Browser,
  CIBA_GRANT,
  createRule,
  hiddenInputs,
  JWT_BEARER,
  postForm,
  putRole,
  registerAgent,
  type TestAgent,
} from './helpers.js';

let server: TestServer;
let assistant: TestAgent;
let robot: TestAgent;
let aliceId: string;
const ALICE = { email: 'alice@example.com', password: 'correct horse battery staple' };

beforeAll(async () => {
  server = await startTestServer();
  await putRole(server, 'invoice-agent', ['read:invoices', 'pay:invoices']);
  await putRole(server, 'invoice-reader', ['read:invoices']);
  const alice = await server.admin('POST', '/users', { ...ALICE, name: 'Alice', roles: ['invoice-reader'] });
  expect(alice.status).toBe(201);
  aliceId = alice.body.id;
  assistant = await registerAgent(server, {
    name: 'assistant',
    mode: 'delegated',
    roles: ['invoice-agent'],
    capabilities: [{ name: 'read:invoices' }, { name: 'pay:invoices' }],
  });
  robot = await registerAgent(server, { name: 'robot', mode: 'autonomous', capabilities: [{ name: 'read:invoices' }] });
});
afterAll(async () => server?.stop());

async function backchannel(agent: TestAgent, fields: Record<string, string>) {
  return postForm(server.ctx.urls.backchannelAuthorize, {
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertion(server, agent, { aud: server.ctx.urls.issuer }),
    ...fields,
  });
}

async function poll(agent: TestAgent, authReqId: string) {
  return postForm(server.ctx.urls.agentToken, {
    grant_type: CIBA_GRANT,
    auth_req_id: authReqId,
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertion(server, agent),
  });
}

/** As if `interval` seconds had passed since the last poll (poll times live in the database). */
async function letIntervalPass(): Promise<void> {
  await server.ctx.store.sql.run("UPDATE agent_approvals SET last_poll_ms = last_poll_ms - 6000 WHERE kind = 'ciba'");
}

async function approvalIdOf(authReqId: string): Promise<string> {
  const a = (await server.ctx.store.agentAuth.list({})).find((x) => x.auth_req_enc && server.ctx.box.open(x.auth_req_enc) === authReqId);
  return a!.id;
}

describe('CIBA back-channel request', () => {
  it('answers {auth_req_id, expires_in, interval}', async () => {
    const res = await backchannel(assistant, { scope: 'read:invoices', login_hint: ALICE.email, binding_message: 'Pay invoice 42' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    expect(res.body).toEqual({ auth_req_id: expect.any(String), expires_in: 300, interval: 5 });
    const short = await backchannel(assistant, { scope: 'read:invoices', login_hint: aliceId, requested_expiry: '120' });
    expect(short.body.expires_in).toBe(120);
    const long = await backchannel(assistant, { scope: 'read:invoices', login_hint: aliceId, requested_expiry: '99999' });
    expect(long.body.expires_in).toBe(3600);
  });

  it('reports the CIBA errors', async () => {
    const err = async (fields: Record<string, string>, agent = assistant) => {
      const r = await backchannel(agent, fields);
      return [r.status, r.body.error];
    };
    expect(await err({ scope: 'read:invoices' })).toEqual([400, 'invalid_request']);
    expect(await err({ scope: 'read:invoices', login_hint: 'nobody@example.com' })).toEqual([400, 'unknown_user_id']);
    expect(await err({ scope: 'fly:planes', login_hint: ALICE.email })).toEqual([400, 'invalid_scope']);
    expect(await err({ scope: 'read:invoices', login_hint: ALICE.email, binding_message: 'x'.repeat(300) })).toEqual([400, 'invalid_binding_message']);
    expect(await err({ scope: 'read:invoices', login_hint: ALICE.email, binding_message: 'line\nbreak' })).toEqual([400, 'invalid_binding_message']);
    expect(await err({ scope: 'read:invoices', login_hint: ALICE.email, requested_expiry: 'soon' })).toEqual([400, 'invalid_request']);
    expect(await err({ scope: 'read:invoices', login_hint: ALICE.email }, robot)).toEqual([400, 'unauthorized_client']);
    const noAuth = await postForm(server.ctx.urls.backchannelAuthorize, { scope: 'read:invoices', login_hint: ALICE.email });
    expect([noAuth.status, noAuth.body.error]).toEqual([401, 'invalid_client']);
  });
});

describe('CIBA from request to token', () => {
  it('the person approves on /approvals, then the agent gets a delegated token exactly once', async () => {
    const req = await backchannel(assistant, { scope: 'openid read:invoices pay:invoices', login_hint: ALICE.email, binding_message: 'Code 7391' });
    const authReqId = req.body.auth_req_id as string;

    // polled at once: sooner than the interval
    const fast = await poll(assistant, authReqId);
    expect([fast.status, fast.body.error]).toEqual([400, 'slow_down']);
    await letIntervalPass();
    const pending = await poll(assistant, authReqId);
    expect([pending.status, pending.body.error]).toEqual([400, 'authorization_pending']);
    // someone else's auth_req_id, and one that never existed
    expect((await poll(robot, authReqId)).body.error).toBe('invalid_grant');
    expect((await poll(assistant, 'no-such-request')).body.error).toBe('invalid_grant');

    // the person: signed out → sign-in page; signed in → the request with its binding message
    const browser = new Browser(server.url);
    const out = await browser.get('/approvals');
    expect(out.status).toBe(302);
    expect(out.location).toBe('/login?return_to=/approvals');
    await browser.signIn(ALICE.email, ALICE.password);
    const page = await browser.get('/approvals');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Code 7391');
    const id = await approvalIdOf(authReqId);
    const fields = hiddenInputs(page.text, id);
    expect(fields.id).toBe(id);
    // without the CSRF value nothing happens
    expect((await browser.post('/approvals', { id, decision: 'approve' })).status).toBe(403);
    const answered = await browser.post('/approvals', { ...fields, decision: 'approve' });
    expect(answered.status).toBe(303);
    expect((await browser.get('/approvals')).text).not.toContain('Code 7391');

    await letIntervalPass();
    const granted = await poll(assistant, authReqId);
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
    const jwks = createRemoteJWKSet(new URL(server.ctx.urls.jwks));
    const { payload } = await jwtVerify(granted.body.access_token, jwks, { issuer: server.ctx.urls.issuer, audience: server.ctx.urls.mcp, typ: 'at+jwt' });
    expect(payload).toMatchObject({
      sub: aliceId,
      act: { sub: assistant.id },
      client_id: assistant.id,
      scope: 'read:invoices pay:invoices',
      capabilities: ['read:invoices', 'pay:invoices'],
    });
    expect(decodeProtectedHeader(granted.body.id_token).alg).toBe('RS256');
    const idt = await jwtVerify(granted.body.id_token, jwks, { issuer: server.ctx.urls.issuer, audience: assistant.id });
    expect(idt.payload).toMatchObject({ sub: aliceId, email: ALICE.email });

    await letIntervalPass();
    expect((await poll(assistant, authReqId)).body.error).toBe('invalid_grant');
  });

  it('a denied request answers access_denied; an expired one expired_token', async () => {
    const denied = (await backchannel(assistant, { scope: 'read:invoices', login_hint: ALICE.email })).body.auth_req_id;
    const adminList = await server.admin('GET', '/approvals?state=pending');
    const item = adminList.body.data.find((a: { auth_req_id: string }) => a.auth_req_id === denied);
    expect(item).toMatchObject({ kind: 'ciba', state: 'pending', agent_id: assistant.id, user_id: aliceId });
    expect((await server.admin('POST', `/approvals/${item.id}/deny`)).status).toBe(200);
    await letIntervalPass();
    const res = await poll(assistant, denied);
    expect([res.status, res.body.error]).toEqual([400, 'access_denied']);

    const expiring = (await backchannel(assistant, { scope: 'read:invoices', login_hint: ALICE.email })).body.auth_req_id;
    await server.ctx.store.sql.run('UPDATE agent_approvals SET expires_at = expires_at - 1000 WHERE id = ?', [await approvalIdOf(expiring)]);
    await letIntervalPass();
    const exp = await poll(assistant, expiring);
    expect([exp.status, exp.body.error]).toEqual([400, 'expired_token']);
  });
});

describe('a delegated agent acts for its person', () => {
  let token: string;
  beforeAll(async () => {
    const authReqId = (await backchannel(assistant, { scope: 'read:invoices pay:invoices', login_hint: ALICE.email })).body.auth_req_id;
    expect((await server.admin('POST', `/approvals/${await approvalIdOf(authReqId)}/approve`)).status).toBe(200);
    await letIntervalPass();
    token = (await poll(assistant, authReqId)).body.access_token;
  });

  it('needs the person to hold the permission too', async () => {
    const read = await bindAndDecide(server, assistant, token, 'read:invoices', 'invoice:1', {});
    expect(read.decision!.decision).toBe('allow');
    // the agent may pay invoices, Alice may not
    const pay = await bindAndDecide(server, assistant, token, 'pay:invoices', 'invoice:1', {});
    expect(pay.decision!.decision).toBe('deny');
    expect(pay.decision!.reason).toMatch(/^not_granted: .*person/);
    const [last] = await server.ctx.store.audit.list({ agent_id: assistant.id, kind: 'decision', limit: 1 });
    expect(last!.user_id).toBe(aliceId);
  });

  it("an approval_required action waits on the person's /approvals page, then is allowed once", async () => {
    await createRule(server, { name: 'sensitive-reads', effect: 'require_approval', subjects: ['agent:*'], relation: 'read:invoices', object: 'invoice:*', condition: { field: 'sensitive', op: 'eq', value: true } });
    const ctx = { sensitive: true };
    const first = await bindAndDecide(server, assistant, token, 'read:invoices', 'invoice:9', ctx);
    expect(first.decision).toMatchObject({ decision: 'approval_required', reason: 'approval_required: sensitive-reads' });
    const id = first.decision!.approval_id!;

    const browser = new Browser(server.url);
    await browser.signIn(ALICE.email, ALICE.password);
    const page = await browser.get('/approvals');
    expect(page.text).toContain('invoice:9');
    expect((await browser.post('/approvals', { ...hiddenInputs(page.text, id), decision: 'approve' })).status).toBe(303);

    expect((await bindAndDecide(server, assistant, token, 'read:invoices', 'invoice:9', ctx)).decision!.decision).toBe('allow');
    expect((await bindAndDecide(server, assistant, token, 'read:invoices', 'invoice:9', ctx)).decision!.decision).toBe('approval_required');
  });
});

describe('an autonomous agent acts for itself', () => {
  it('its token has sub = the agent and no act claim', async () => {
    const t = await accessTokenFor(server, robot);
    const payload = JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString());
    expect(payload.sub).toBe(robot.id);
    expect(payload.act).toBeUndefined();
  });
});
