import { describe, expect, it } from 'vitest';
import { jsonEqual, schemaProblems, validateJson } from '../../src/oauth/json-schema.js';
import { guardedLookup, OutboundRefused } from '../../src/outbound.js';
import { cacheSeconds, checkDocument, documentUrlProblem } from '../../src/oauth/client-metadata-document.js';

describe('the JSON Schema subset', () => {
  const schema = {
    type: 'object',
    properties: {
      amount: { type: 'number', exclusiveMinimum: 0, maximum: 100, multipleOf: 0.01 },
      currency: { enum: ['EUR', 'USD'] },
      kind: { const: 'transfer' },
      count: { type: 'integer', minimum: 1 },
      tags: { type: 'array', items: { type: 'string', minLength: 2, maxLength: 4, pattern: '^[a-z]+$' }, minItems: 1, maxItems: 3, uniqueItems: true },
      note: { type: ['string', 'null'] },
    },
    required: ['amount'],
    additionalProperties: false,
    maxProperties: 6,
  };

  it('accepts a valid value and names each problem of an invalid one by its pointer', () => {
    expect(schemaProblems(schema)).toEqual([]);
    expect(validateJson(schema, { amount: 12.5, currency: 'EUR', kind: 'transfer', count: 2, tags: ['ab', 'cd'], note: null })).toEqual([]);
    const problems = validateJson(schema, { amount: 0, currency: 'GBP', kind: 'x', count: 1.5, tags: ['ab', 'ab', 'Zz', 'toolong'], extra: 1 });
    expect(problems).toEqual(expect.arrayContaining([
      '/amount: must be above 0',
      '/currency: must be one of "EUR", "USD"',
      '/kind: must be "transfer"',
      '/count: must be integer (got number)',
      '/tags/2: must match ^[a-z]+$',
      '/tags/3: must be at most 4 characters',
      '/tags: may have at most 3 items',
      '/tags: items must be unique',
      '/extra: is not allowed',
    ]));
    expect(validateJson(schema, {})).toEqual(['/amount: is required']);
    expect(validateJson(schema, [])).toEqual(['/: must be object (got array)']);
    expect(validateJson(schema, { amount: 100.001 })).toContain('/amount: must be at most 100');
  });

  it('refuses keywords it does not check, and malformed values of the ones it does', () => {
    expect(schemaProblems({ anyOf: [] })).toEqual(['/anyOf: the keyword anyOf is not supported']);
    expect(schemaProblems({ properties: { a: { $ref: '#' } } })).toEqual(['/properties/a/$ref: the keyword $ref is not supported']);
    expect(schemaProblems({ pattern: '(' })).toEqual(['/pattern: not a valid regular expression']);
    expect(schemaProblems({ type: 'money', minLength: -1, required: 'a' })).toHaveLength(3);
    expect(schemaProblems({ title: 'x', description: 'y', $schema: 'https://json-schema.org/draft/2020-12/schema' })).toEqual([]);
  });

  it('compares JSON values whatever the key order', () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false);
  });
});

describe('the outbound rule on the connection itself', () => {
  it('a name that resolves to loopback is refused when connecting, unless private addresses are allowed', async () => {
    const resolve = (allowPrivate: boolean) =>
      new Promise<{ err: unknown; address: unknown }>((done) => guardedLookup(allowPrivate)('localhost', {}, (err, address) => done({ err, address })));
    expect((await resolve(false)).err).toBeInstanceOf(OutboundRefused);
    const allowed = await resolve(true);
    expect(allowed.err).toBeNull();
    expect(['127.0.0.1', '::1']).toContain(allowed.address);
  });
});

describe('client metadata documents', () => {
  it('a client_id URL: https, a path, no fragment, credentials or dot segments', () => {
    expect(documentUrlProblem('https://app.example/client.json')).toBeUndefined();
    expect(documentUrlProblem('http://app.example/client.json')).toContain('https');
    expect(documentUrlProblem('https://app.example/')).toContain('path');
    expect(documentUrlProblem('https://app.example/a#b')).toContain('fragment');
    expect(documentUrlProblem('https://u:p@app.example/a')).toContain('credentials');
    expect(documentUrlProblem('https://app.example/a/../b')).toContain('segments');
  });

  it('cache time from Cache-Control or Expires, between one minute and a day', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(cacheSeconds({ 'cache-control': 'public, max-age=600' }, now)).toBe(600);
    expect(cacheSeconds({ 'cache-control': 'no-store' }, now)).toBe(60);
    expect(cacheSeconds({ 'cache-control': 'max-age=99999999' }, now)).toBe(86400);
    expect(cacheSeconds({ expires: 'Thu, 01 Jan 2026 00:30:00 GMT' }, now)).toBe(1800);
    expect(cacheSeconds({}, now)).toBe(3600);
  });

  it('the document checks', () => {
    const url = 'https://app.example/client.json';
    const good = { client_id: url, redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' };
    expect(checkDocument(url, good)).toMatchObject({ name: 'app.example', auth_method: 'none', jwks_uri: null });
    expect(() => checkDocument(url, { ...good, client_id: `${url}/` })).toThrow(/client_id must equal/);
    expect(() => checkDocument(url, { ...good, redirect_uris: [] })).toThrow(/redirect_uris/);
    expect(() => checkDocument(url, { ...good, redirect_uris: ['https://app.example/cb#x'] })).toThrow(/fragment/);
    expect(() => checkDocument(url, { ...good, token_endpoint_auth_method: undefined })).toThrow(/none or private_key_jwt/);
    expect(() => checkDocument(url, { ...good, client_secret: 's' })).toThrow(/client_secret/);
    expect(() => checkDocument(url, { ...good, token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'http://app.example/jwks' })).toThrow(/jwks_uri/);
  });
});
