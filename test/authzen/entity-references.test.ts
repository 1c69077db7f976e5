// Entity references through the real interface: a refund names its customer, the customer is a
// stored entity, and a rule reads the customer's flag through the refund
// (`resource.customer.fraud`); a missing customer fails closed, and `has` asks without failing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

const POLICY = `
schema {
  resource.customer: entity customer
  resource.customer.fraud: boolean
  resource.customer.account: entity account
  resource.customer.account.flagged: boolean
  resource.payee: entity customer
  resource.payee.fraud: boolean
}

rule "no refunds paid to fraudulent customers" {
  effect deny
  subjects "user:*"
  relation "create:refunds"
  object "refund:*"
  when resource has payee and resource.payee.fraud == true
}

rule "no refunds to fraudulent customers" {
  effect deny
  subjects "user:*"
  relation "create:refunds"
  object "refund:*"
  when resource.customer.fraud == true
}

rule "no refunds to flagged accounts" {
  effect deny
  subjects "user:*"
  relation "create:refunds"
  object "refund:*"
  when resource.customer has account and resource.customer.account.flagged == true
}

rule "support creates refunds" {
  effect permit
  subjects "user:*"
  relation "create:refunds"
  object "refund:*"
}
`;

let f: AuthzenFixture;
let clerk: string;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'refunds.policy': POLICY } });
  clerk = await putUser(f.server, { email: `clerk-${Date.now()}@example.com` });
  const put = async (type: string, id: string, attributes: Record<string, unknown>) => {
    const res = await f.server.admin('PUT', `/entities/${type}/${id}`, { attributes });
    expect([200, 201]).toContain(res.status);
  };
  await put('customer', 'honest', { fraud: false, account: { type: 'account', id: 'a-ok' } });
  await put('customer', 'crook', { fraud: true });
  await put('customer', 'flagged', { fraud: false, account: { type: 'account', id: 'a-bad' } });
  await put('account', 'a-ok', { flagged: false });
  await put('account', 'a-bad', { flagged: true });
  await put('refund', 'r-1', { customer: { type: 'customer', id: 'honest' } });
  await put('refund', 'r-2', { customer: { type: 'customer', id: 'crook' } });
  await put('refund', 'r-3', { customer: { type: 'customer', id: 'nobody' } });
  await put('refund', 'r-4', { customer: { type: 'customer', id: 'flagged' } });
  // a declared reference holds the id alone
  await put('refund', 'r-5', { customer: 'honest', payee: 'crook' });
  await put('refund', 'r-6', { customer: 'honest', payee: 'honest' });
}, 60_000);
afterAll(async () => f?.server.stop());

const decide = async (refund: string) => {
  const res = await f.post('/access/v1/evaluation', { subject: { type: 'user', id: clerk }, action: { name: 'create' }, resource: { type: 'refund', id: refund } });
  expect(res.status).toBe(200);
  if (process.env.DEBUG_REFS) console.log(refund, JSON.stringify(res.body));
  return res.body.decision as boolean;
};

describe('entity references', () => {
  it('a rule reads the stored customer through the refund that names it', async () => {
    expect(await decide('r-1')).toBe(true);
    expect(await decide('r-2')).toBe(false);
  });

  it('a reference to no stored entity fails closed', async () => {
    expect(await decide('r-3')).toBe(false);
  });

  it('where the schema declares a reference, the value is the id alone', async () => {
    expect(await decide('r-5')).toBe(false);
    expect(await decide('r-6')).toBe(true);
  });

  it('references are followed to any depth, and a change to the entity applies to the next decision', async () => {
    expect(await decide('r-4')).toBe(false);
    await f.server.admin('PUT', '/entities/account/a-bad', { attributes: { flagged: false } });
    expect(await decide('r-4')).toBe(true);
  });
});
