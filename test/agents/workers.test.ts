import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { dpopKey, proof } from '../dpop/helpers.js';
import { assertion, CIBA_GRANT, JWT_BEARER, postForm, postJson, putRole, readJson, registerAgent, type TestAgent } from './helpers.js';

// A server and a worker on one SQLite file and one issuer: what two worker processes share.
const ISSUER = 'http://gatehouse.test';
let a: TestServer;
let b: TestServer;
let agent: TestAgent;

beforeAll(async () => {
  a = await startTestServer({ env: { GATEHOUSE_ISSUER: ISSUER } });
  b = await startTestServer({ dir: a.dir, role: 'worker', env: { GATEHOUSE_ISSUER: ISSUER } });
  await putRole(a, 'mailer', ['send:emails']);
  agent = await registerAgent(a, { name: 'shared', mode: 'autonomous', roles: ['mailer'], capabilities: [{ name: 'send:emails' }] });
});
afterAll(async () => {
  await b?.close();
  await a?.stop();
});

const tokenAt = async (server: TestServer, clientAssertion: string) =>
  postForm(`${server.url}/apis/regional/v1/ai/auth/token`, {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: clientAssertion,
  });

describe('state shared across worker processes', () => {
  it('a jti used on one worker is refused on the other', async () => {
    const once = await assertion(a, agent, { aud: ISSUER });
    expect((await tokenAt(a, once)).status).toBe(200);
    const replay = await tokenAt(b, once);
    expect([replay.status, replay.body.error]).toEqual([401, 'invalid_client']);
  });

  it('one DPoP proof sent to both workers at once gets one token: the single-use record is shared', async () => {
    const key = await dpopKey();
    const dpop = await proof(key, { htm: 'POST', htu: `${ISSUER}/apis/regional/v1/ai/auth/token` });
    const send = async (server: TestServer) =>
      readJson(
        await fetch(`${server.url}/apis/regional/v1/ai/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', dpop },
          body: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, agent, { aud: ISSUER }) }),
        }),
      );
    const answers = await Promise.all([a, b, a, b, a, b].map(send));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of answers.filter((r) => r.status !== 200)) expect([r.status, r.body.error]).toEqual([400, 'invalid_dpop_proof']);
  });

  it('a token bound on one worker is decided on the other; a revocation on one is seen at once by the other', async () => {
    const token = (await tokenAt(a, await assertion(a, agent, { aud: ISSUER }))).body.access_token;
    const action = { action: 'send:emails', resource: 'email:1', context: { to: 'x@example.com' } };
    const bound = await postJson(`${a.url}/apis/regional/v1/ai/auth/transaction-token`, action, { authorization: `Bearer ${token}` });
    expect(bound.status).toBe(200);
    const ask = () => postJson(`${b.url}/apis/regional/v1/agents/authorize`, { agent_id: agent.id, transaction_token: bound.body.data.transaction_token, ...action });
    expect((await ask()).body.data.decision).toBe('allow');
    expect((await a.admin('POST', `/agents/${encodeURIComponent(agent.id)}/revoke`)).status).toBe(204);
    const after = await ask();
    expect([after.status, after.body.error]).toEqual([401, 'invalid_client']);
  });

  it('CIBA poll times are shared: a poll on the other worker right after the request is slow_down', async () => {
    await putRole(a, 'reader', ['read:invoices']);
    const user = await a.admin('POST', '/users', { email: 'bob@example.com', password: 'a long enough password', name: 'Bob', roles: ['reader'] });
    expect(user.status).toBe(201);
    const helper = await registerAgent(a, { name: 'helper', mode: 'delegated', roles: ['reader'], capabilities: [{ name: 'read:invoices' }] });
    const req = await postForm(`${a.url}/apis/regional/v1/ai/auth/backchannel-authorize`, {
      client_assertion_type: JWT_BEARER,
      client_assertion: await assertion(a, helper, { aud: ISSUER }),
      login_hint: 'bob@example.com',
      scope: 'read:invoices',
    });
    expect(req.status).toBe(200);
    const poll = await postForm(`${b.url}/apis/regional/v1/ai/auth/token`, {
      grant_type: CIBA_GRANT,
      auth_req_id: req.body.auth_req_id,
      client_assertion_type: JWT_BEARER,
      client_assertion: await assertion(b, helper, { aud: ISSUER }),
    });
    expect([poll.status, poll.body.error]).toEqual([400, 'slow_down']);
  });
});
