import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countersFor, CounterSession, decideOnce, readUsage, type UsageSubject } from '../../src/authz/budgets.js';
import { checkUsageLimit, usageKey, type UsageLimit } from '../../src/policy/usage.js';
import type { Store } from '../../src/store/index.js';
import { testServerUrl } from '../helpers/database.js';
import { openTestStore, type TestStore } from '../store/helpers.js';

// The counters against a reference model that keeps every allowed action and replays the
// history at each decision: usage in a window is the sum of what was allowed in it.

let t: TestStore;
let store: Store;
beforeEach(async () => {
  t = await openTestStore();
  store = t.store;
  await store.sql.run("INSERT INTO agents (agent_id, name, mode, public_jwk, created_at, updated_at) VALUES ('a1', 'a1', 'autonomous', '{}', 0, 0)");
});
afterEach(() => t.close());

const limits: UsageLimit[] = [
  { kind: 'count', field: null, max: 3, per: '10s', seconds: 10, scope: 'agent', source: 't' },
  { kind: 'sum', field: 'amount', max: 10, per: '20s', seconds: 20, scope: 'agent', source: 't' },
  { kind: 'count', field: null, max: 2, per: '15s', seconds: 15, scope: 'resource', source: 't' },
];

interface Step { dt: number; amount: number; resource: string; txn: 'new' | 'none' | number }
interface Allowed { t: number; amount: number; resource: string; txn: string | null }

/** The model: what a decision at `t` sees and decides, from the whole history of allows. */
function modelDecide(history: Allowed[], t: number, amount: number, resource: string, txn: string | null) {
  const own = txn === null ? undefined : history.find((h) => h.txn === txn);
  const inWindow = (h: Allowed, l: UsageLimit) => h.t > t - l.seconds && (l.scope !== 'resource' || h.resource === resource) && h !== own;
  let allow = true;
  for (const l of limits) {
    const used = history.filter((h) => inWindow(h, l)).reduce((s, h) => s + (l.kind === 'count' ? 1 : h.amount), 0);
    if (used + (l.kind === 'count' ? 1 : amount) > l.max) allow = false;
  }
  return { allow, consumes: allow && own === undefined };
}

describe('usage counters against a model that replays the history', () => {
  it('agree on every decision and on what an allow consumes', async () => {
    const step = fc.record({
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 25 })),
      amount: fc.integer({ min: 0, max: 6 }),
      resource: fc.constantFrom('r:1', 'r:2'),
      txn: fc.oneof(fc.constant<'new'>('new'), fc.constant<'none'>('none'), fc.integer({ min: 0, max: 5 })),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps: Step[]) => {
        await store.sql.exec('DELETE FROM usage_events; DELETE FROM usage_counters');
        const history: Allowed[] = [];
        const txns: { id: string; t: number; resource: string; amount: number }[] = [];
        let now = 1_000_000;
        for (const [i, s] of steps.entries()) {
          now += s.dt;
          let txn: string | null = null;
          let { amount, resource } = s;
          if (s.txn === 'new') {
            txn = `txn-${i}`;
            txns.push({ id: txn, t: now, resource, amount });
          } else if (typeof s.txn === 'number') {
            // A repeat is the same request under a token that is still valid (60 seconds).
            const live = txns.filter((x) => x.t > now - 60);
            const pick = live[s.txn % Math.max(1, live.length)];
            if (pick) ({ id: txn, resource, amount } = pick);
          }
          const subject: UsageSubject = { agentId: 'a1', capability: 'create:refunds', resource, personId: null };
          const counters = countersFor(subject, limits);
          const expected = modelDecide(history, now, amount, resource, txn);
          const got = await store.transaction((tx) =>
            decideOnce(tx, counters, now, txn, async (facts) => {
              const checks = limits.map((l) => checkUsageLimit(l, usageKey(l), { amount }, facts[usageKey(l)] ?? 0));
              return { decision: { decision: checks.some((c) => c.violated) ? 'deny' : 'allow', usage: checks } };
            }),
          );
          // What the store holds afterwards, read in a transaction of its own.
          const stored = await store.transaction(async (tx) => {
            const read = await readUsage(new CounterSession(tx), tx, counters, now, null);
            return read.facts;
          });
          expect(got.outcome.decision.decision).toBe(expected.allow ? 'allow' : 'deny');
          if (expected.consumes) history.push({ t: now, amount, resource, txn });
          // What the store holds after the decision is what the model holds.
          for (const c of got.changes) {
            const l = limits.find((x) => usageKey(x) === c.counter)!;
            expect(stored[c.counter]).toBe(c.after);
            const want = history
              .filter((h) => h.t > now - l.seconds && (l.scope !== 'resource' || h.resource === c.key))
              .reduce((sum, h) => sum + (l.kind === 'count' ? 1 : h.amount), 0);
            expect(c.after).toBe(want);
          }
        }
      }),
      { numRuns: testServerUrl() ? 40 : 150 },
    );
  }, 120_000);
});
