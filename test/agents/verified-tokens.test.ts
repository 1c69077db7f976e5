import { generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { VerifiedTokenCache } from '../../src/authz/verified-tokens.js';

let token: string;
const NOW = 1_900_000_000;
const claims = { iss: 'https://gh.example', txn: 'a-txn', exp: NOW + 60, tctx: { action: 'create:refunds', context: { amount: 5 } } };

beforeAll(async () => {
  const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  token = await new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: 'txntoken+jwt' }).sign(privateKey);
});

describe('tokens already verified', () => {
  it('knows a remembered token again, its claims and header read from the token itself', () => {
    const cache = new VerifiedTokenCache();
    expect(cache.get(token, NOW)).toBeUndefined();
    cache.set(token, claims);
    const hit = cache.get(token, NOW);
    expect(hit?.payload).toEqual(claims);
    expect(hit?.header).toEqual({ alg: 'EdDSA', typ: 'txntoken+jwt' });
  });

  it('knows only the byte-identical token: one character off in any part is a stranger', () => {
    const cache = new VerifiedTokenCache();
    cache.set(token, claims);
    const parts = token.split('.');
    for (let i = 0; i < 3; i++) {
      const changed = [...parts];
      const p = changed[i]!;
      changed[i] = p.slice(0, -1) + (p.endsWith('A') ? 'B' : 'A');
      expect(cache.get(changed.join('.'), NOW)).toBeUndefined();
    }
    expect(cache.get(`${token} `, NOW)).toBeUndefined();
  });

  it('forgets a token at its expiry', () => {
    const cache = new VerifiedTokenCache();
    cache.set(token, claims);
    expect(cache.get(token, NOW + 59)).toBeDefined();
    expect(cache.get(token, NOW + 60)).toBeUndefined();
    expect(cache.size).toBe(0);
    // A token with no expiry is never remembered.
    cache.set(token, { ...claims, exp: undefined });
    expect(cache.get(token, NOW)).toBeUndefined();
  });

  it('stays within its bound, dropping the oldest first', () => {
    const cache = new VerifiedTokenCache({ max: 10 });
    const tokens = Array.from({ length: 25 }, (_, i) => `${token}${i}`);
    for (const t of tokens) cache.set(t, claims);
    expect(cache.size).toBeLessThanOrEqual(10);
    expect(cache.get(tokens[0]!, NOW)).toBeUndefined();
    // The newest is still known (it decodes: the suffix only changes the signature part).
    expect(cache.get(tokens[24]!, NOW)?.payload).toEqual(claims);
  });

  it('hands what it remembers to another cache by digest (as one worker tells the others)', () => {
    const told: [string, number][] = [];
    const here = new VerifiedTokenCache({ onRemember: (digest, exp) => told.push([digest, exp]) });
    let adopted = 0;
    const there = new VerifiedTokenCache({ onAdopt: () => adopted++ });
    here.set(token, claims);
    expect(told).toHaveLength(1);
    expect(told[0]![0]).not.toContain(token.slice(0, 20));
    for (const [digest, exp] of told) there.adopt(digest, exp);
    expect(adopted).toBe(1);
    expect(there.get(token, NOW)?.payload).toEqual(claims);
    expect(there.get(token, NOW + 60)).toBeUndefined();
  });

  it('counts hits and misses', () => {
    const seen: boolean[] = [];
    const cache = new VerifiedTokenCache({ onLookup: (hit) => seen.push(hit) });
    cache.get(token, NOW);
    cache.set(token, claims);
    cache.get(token, NOW);
    expect(seen).toEqual([false, true]);
  });
});
