import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ConfigError } from '../../src/config.js';
import { DEFAULT_DELIVERY_OPTIONS, deliveryOptionsFromEnv, retryDelay } from '../../src/ssf/delivery-worker.js';

describe('retry backoff', () => {
  it('doubles from the base, is capped, and jitters within the upper half of each step', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (failed, base, cap, r) => {
          const step = Math.min(cap, base * 2 ** (failed - 1));
          const d = retryDelay(failed, { retryBaseMs: base, retryMaxDelayMs: cap }, () => r);
          expect(d).toBeGreaterThanOrEqual(Math.floor(step / 2));
          expect(d).toBeLessThanOrEqual(Math.ceil(step));
        },
      ),
    );
    const opts = { retryBaseMs: 1000, retryMaxDelayMs: 300_000 };
    expect([1, 2, 3, 4].map((n) => retryDelay(n, opts, () => 1))).toEqual([1000, 2000, 4000, 8000]);
    expect(retryDelay(30, opts, () => 1)).toBe(300_000);
  });
});

describe('delivery options from the environment', () => {
  it('defaults, reads each variable, and names a bad one', () => {
    expect(deliveryOptionsFromEnv({})).toEqual(DEFAULT_DELIVERY_OPTIONS);
    expect(deliveryOptionsFromEnv({ GATEHOUSE_SSF_RETRY_BASE_MS: '25', GATEHOUSE_SSF_MAX_ATTEMPTS: '3' })).toMatchObject({
      retryBaseMs: 25,
      maxAttempts: 3,
      pollIntervalMs: DEFAULT_DELIVERY_OPTIONS.pollIntervalMs,
    });
    for (const bad of ['0', '-1', '1.5', 'soon', '101']) {
      expect(() => deliveryOptionsFromEnv({ GATEHOUSE_SSF_MAX_ATTEMPTS: bad })).toThrow(ConfigError);
      expect(() => deliveryOptionsFromEnv({ GATEHOUSE_SSF_MAX_ATTEMPTS: bad })).toThrow(/^GATEHOUSE_SSF_MAX_ATTEMPTS: /);
    }
  });
});
