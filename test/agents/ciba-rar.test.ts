import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assertion, bind, bindAndDecide, Browser, CIBA_GRANT, hiddenInputs, JWT_BEARER, postForm, putRole, registerAgent, type TestAgent } from './helpers.js';

let server: TestServer;
let assistant: TestAgent;
const ALICE = { email: 'alice@example.com', password: 'correct horse battery staple' };

const PAYMENT = {
  type: 'payment_initiation',
  actions: ['pay:invoices'],
  instructedAmount: { currency: 'EUR', amount: 240 },
  creditorName: 'Merchant <A>',
  creditorAccount: { iban: 'DE02100100109307118603' },
};

beforeAll(async () => {
  server = await startTestServer();
  await putRole(server, 'payer', ['read:invoices', 'pay:invoices']);
  expect((await server.admin('POST', '/users', { ...ALICE, name: 'Alice', roles: ['payer'] })).status).toBe(201);
  assistant = await registerAgent(server, {
    name: 'assistant', mode: 'delegated', roles: ['payer'],
    capabilities: [{ name: 'read:invoices' }, { name: 'pay:invoices' }],
  });
  const put = await server.admin('PUT', '/authorization-details-types/payment_initiation', {
    description: 'A payment from your account',
    schema: {
      type: 'object',
      properties: {
        actions: { type: 'array', items: { type: 'string' } },
        instructedAmount: { type: 'object', properties: { currency: { enum: ['EUR', 'USD'] }, amount: { type: 'number', minimum: 0 } }, required: ['currency', 'amount'] },
        creditorName: { type: 'string' },
        creditorAccount: { type: 'object', properties: { iban: { type: 'string' } }, required: ['iban'] },
      },
      required: ['instructedAmount'],
      additionalProperties: false,
    },
  });
  expect(put.status).toBe(201);
});
afterAll(async () => server?.stop());

async function backchannel(fields: Record<string, string>) {
  return postForm(server.ctx.urls.backchannelAuthorize, {
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertion(server, assistant, { aud: server.ctx.urls.issuer }),
    login_hint: ALICE.email,
    ...fields,
  });
}

async function poll(authReqId: string) {
  await server.ctx.store.sql.run("UPDATE agent_approvals SET last_poll_ms = last_poll_ms - 6000 WHERE kind = 'ciba'");
  return postForm(server.ctx.urls.agentToken, {
    grant_type: CIBA_GRANT, auth_req_id: authReqId, client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, assistant),
  });
}

describe('CIBA with authorization details (RFC 9396)', () => {
  let token: string;

  it('the approval page shows what the person approves; the token carries it', async () => {
    const req = await backchannel({ scope: 'read:invoices pay:invoices', binding_message: 'Invoice 42', authorization_details: JSON.stringify([PAYMENT]) });
    expect(req.status).toBe(200);
    const browser = new Browser(server.url);
    await browser.signIn(ALICE.email, ALICE.password);
    const page = await browser.get('/approvals');
    expect(page.text).toContain('payment_initiation');
    expect(page.text).toContain('A payment from your account');
    expect(page.text).toContain('240');
    expect(page.text).toContain('Merchant &lt;A&gt;');
    expect(page.text).not.toContain('Merchant <A>');
    const [pending] = await server.ctx.store.agentAuth.list({ state: 'pending' });
    expect(pending!.authorization_details).toEqual([PAYMENT]);
    expect((await browser.post('/approvals', { ...hiddenInputs(page.text, pending!.id), decision: 'approve' })).status).toBe(303);

    const granted = await poll(req.body.auth_req_id);
    expect(granted.status).toBe(200);
    expect(granted.body.authorization_details).toEqual([PAYMENT]);
    token = granted.body.access_token;
    const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(server.ctx.urls.jwks)), { audience: server.ctx.urls.mcp });
    expect(payload.authorization_details).toEqual([PAYMENT]);
  });

  it('a decision within the details is allowed; one beyond them is denied constraint_violated: authorization_details', async () => {
    const within = await bindAndDecide(server, assistant, token, 'pay:invoices', 'invoice:42', { instructedAmount: { currency: 'EUR', amount: 240 } });
    expect(within.decision!.decision).toBe('allow');

    const above = await bind(server, token, 'pay:invoices', 'invoice:42', { instructedAmount: { currency: 'EUR', amount: 240.01 } });
    expect(above.status).toBe(403);
    expect(above.body.reason).toBe('constraint_violated: authorization_details');
    const [last] = await server.ctx.store.audit.list({ agent_id: assistant.id, limit: 1 });
    // A binding refused by the pipeline is recorded as a refused token.
    expect([last!.kind, last!.decision, last!.reason]).toEqual(['token', 'refused', 'constraint_violated: authorization_details']);

    const otherCurrency = await bind(server, token, 'pay:invoices', 'invoice:42', { instructedAmount: { currency: 'USD', amount: 10 } });
    expect(otherCurrency.body.reason).toBe('constraint_violated: authorization_details');
    const otherAccount = await bind(server, token, 'pay:invoices', 'invoice:42', { creditorAccount: { iban: 'FR7630006000011234567890189' } });
    expect(otherAccount.body.reason).toBe('constraint_violated: authorization_details');
    // An action the details do not list: the person approved a payment, not reading.
    const read = await bind(server, token, 'read:invoices', 'invoice:42', {});
    expect(read.body.reason).toBe('constraint_violated: authorization_details');
  });

  it('an undeclared type or a schema failure is 400 invalid_authorization_details', async () => {
    const undeclared = await backchannel({ scope: 'pay:invoices', authorization_details: JSON.stringify([{ type: 'account_information' }]) });
    expect([undeclared.status, undeclared.body.error]).toEqual([400, 'invalid_authorization_details']);
    const invalid = await backchannel({ scope: 'pay:invoices', authorization_details: JSON.stringify([{ ...PAYMENT, instructedAmount: { currency: 'GBP', amount: 1 } }]) });
    expect([invalid.status, invalid.body.error]).toEqual([400, 'invalid_authorization_details']);
    expect(invalid.body.error_description).toContain('/instructedAmount/currency');
  });
});
