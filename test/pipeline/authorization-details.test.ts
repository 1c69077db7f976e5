import { describe, expect, it } from 'vitest';
import { beyondAuthorizationDetails } from '../../src/authz/authorization-details.js';

const payment = {
  type: 'payment_initiation',
  actions: ['pay'],
  locations: ['https://bank.example/payments'],
  instructedAmount: { currency: 'EUR', amount: 240 },
  creditorAccount: { iban: 'DE02100100109307118603' },
};
const asked = (context: Record<string, unknown>, action = 'pay', resource = 'https://bank.example/payments') => ({ action, resource, context });

describe('an action within the token\'s authorization details', () => {
  it('a token without details is not limited; a malformed claim covers nothing', () => {
    expect(beyondAuthorizationDetails(undefined, asked({}))).toBeUndefined();
    expect(beyondAuthorizationDetails([], asked({}))).toBeUndefined();
    expect(beyondAuthorizationDetails('x', asked({}))).toMatch(/malformed/);
    expect(beyondAuthorizationDetails([1], asked({}))).toMatch(/malformed/);
  });

  it('numbers are maxima, strings must match, objects compare field by field', () => {
    expect(beyondAuthorizationDetails([payment], asked({ instructedAmount: { currency: 'EUR', amount: 240 } }))).toBeUndefined();
    expect(beyondAuthorizationDetails([payment], asked({ instructedAmount: { amount: 10 } }))).toBeUndefined();
    expect(beyondAuthorizationDetails([payment], asked({ instructedAmount: { currency: 'EUR', amount: 241 } }))).toMatch(/instructedAmount.amount 241 is above the approved 240/);
    expect(beyondAuthorizationDetails([payment], asked({ instructedAmount: { amount: '1' } }))).toMatch(/must be a number/);
    expect(beyondAuthorizationDetails([payment], asked({ instructedAmount: { currency: 'USD', amount: 1 } }))).toMatch(/currency differs/);
    expect(beyondAuthorizationDetails([payment], asked({ creditorAccount: 'x' }))).toMatch(/must be an object/);
    // Context fields the detail does not name are not constrained.
    expect(beyondAuthorizationDetails([payment], asked({ memo: 'rent' }))).toBeUndefined();
  });

  it('actions and locations bound the action and resource; arrays list the allowed values', () => {
    expect(beyondAuthorizationDetails([payment], asked({}, 'refund'))).toMatch(/action refund/);
    expect(beyondAuthorizationDetails([payment], asked({}, 'pay', 'https://other.example'))).toMatch(/locations/);
    const files = { type: 'files', datatypes: ['report', 'invoice'], privileges: ['read'] };
    expect(beyondAuthorizationDetails([files], asked({ datatypes: ['report'] }))).toBeUndefined();
    expect(beyondAuthorizationDetails([files], asked({ datatypes: 'invoice', privileges: ['read'] }))).toBeUndefined();
    expect(beyondAuthorizationDetails([files], asked({ privileges: ['read', 'write'] }))).toMatch(/"write" is not among/);
  });

  it('one covering detail is enough', () => {
    const small = { ...payment, instructedAmount: { currency: 'EUR', amount: 10 } };
    const usd = { ...payment, instructedAmount: { currency: 'USD', amount: 500 } };
    expect(beyondAuthorizationDetails([small, usd], asked({ instructedAmount: { currency: 'USD', amount: 400 } }))).toBeUndefined();
    expect(beyondAuthorizationDetails([small, usd], asked({ instructedAmount: { currency: 'EUR', amount: 400 } }))).toMatch(/above the approved 10/);
  });
});
