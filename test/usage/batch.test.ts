import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countersFor, UsageBatch } from '../../src/authz/budgets.js';
import { checkUsageLimit, usageKey, type UsageLimit } from '../../src/policy/usage.js';
import type { Store } from '../../src/store/index.js';
import { EVENT_GRACE_SECONDS } from '../../src/store/usage.js';
import { openTestStore, type TestStore } from '../store/helpers.js';

let ts: TestStore;
let root: Store;
let transactions: number;
/** The store, counting its transactions. */
const host = {
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    transactions++;
    return root.transaction(fn);
  },
};

beforeEach(async () => {
  ts = await openTestStore();
  root = ts.store;
  await root.sql.run("INSERT INTO agents (agent_id, name, mode, public_jwk, created_at, updated_at) VALUES ('a1', 'a1', 'autonomous', '{}', 0, 0)");
  transactions = 0;
});
afterEach(() => ts.close());

const rate: UsageLimit = { kind: 'count', field: null, max: 10, per: '1h', seconds: 3600, scope: 'agent', source: 't' };
const budget: UsageLimit = { kind: 'sum', field: 'amount', max: 100, per: '1d', seconds: 86400, scope: 'agent', source: 't' };
const subject = { agentId: 'a1', capability: 'create:refunds', resource: 'refund:1', personId: null };

function job(limits: UsageLimit[], context: Record<string, unknown>, t: number, txn: string | null = null) {
  return {
    counters: countersFor(subject, limits),
    t,
    txn,
    async judge(facts: Record<string, number>) {
      const usage = limits.map((l) => checkUsageLimit(l, usageKey(l), context, facts[usageKey(l)] ?? 0));
      return { decision: { decision: usage.some((u) => u.violated) ? 'deny' : 'allow', usage } };
    },
  };
}

describe('a turn of decisions on counters in one transaction', () => {
  it('50 at once against a rate of 10: exactly 10 allowed, in one commit', async () => {
    const batch = new UsageBatch(host);
    const results = await Promise.all(Array.from({ length: 50 }, () => batch.run(job([rate], {}, 1000))));
    expect(results.filter((r) => r.outcome.decision.decision === 'allow')).toHaveLength(10);
    expect(transactions).toBe(1);
    // The audit's view: the eleventh saw 10 before and after.
    expect(results[10]!.changes).toEqual([expect.objectContaining({ counter: 'count per 1h', max: 10, before: 10, after: 10 })]);
  });

  it('instances sharing the database (on PostgreSQL, separate pools): still exactly 10 of 50', async () => {
    const peers = await ts.peers(4);
    const batches = peers.map((p) => new UsageBatch(p));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => batches[i % 4]!.run(job([rate, budget], { amount: 1 }, 1000 + (i % 2)))));
    expect(results.filter((r) => r.outcome.decision.decision === 'allow')).toHaveLength(10);
  });

  it('amounts that fit only in some orders never pass the budget together', async () => {
    const batch = new UsageBatch(host);
    const amounts = [60, 30, 50, 20, 45, 5, 35, 70, 10, 25];
    const results = await Promise.all(amounts.map((amount) => batch.run(job([budget], { amount }, 1000))));
    const allowed = amounts.filter((_, i) => results[i]!.outcome.decision.decision === 'allow');
    expect(allowed.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(100);
    // One after another in the order they came: 60 and 30 fit, then only 5 does.
    expect(allowed).toEqual([60, 30, 5]);
  });

  it('the same transaction token consumes once, however often it asks', async () => {
    const batch = new UsageBatch(host);
    const results = await Promise.all(Array.from({ length: 5 }, () => batch.run(job([rate, budget], { amount: 40 }, 1000, 'txn-1'))));
    expect(results.every((r) => r.outcome.decision.decision === 'allow')).toBe(true);
    const again = await batch.run(job([rate, budget], { amount: 40 }, 1001, 'txn-1'));
    expect(again.outcome.decision.decision).toBe('allow');
    expect(again.changes.map((c) => [c.counter, c.before, c.after])).toEqual(
      expect.arrayContaining([['count per 1h', 1, 1], ['amount sum per 1d', 40, 40]]),
    );
    // With 80 of 100 used, a new 40 is denied, but a repeat of one of those 40s is judged without itself.
    await batch.run(job([budget], { amount: 40 }, 1002, 'txn-2'));
    expect((await batch.run(job([budget], { amount: 40 }, 1003, 'txn-2'))).outcome.decision.decision).toBe('allow');
    expect((await batch.run(job([budget], { amount: 40 }, 1003, 'txn-3'))).outcome.decision.decision).toBe('deny');
  });

  it('usage leaves the window to the second', async () => {
    const batch = new UsageBatch(host);
    const one: UsageLimit = { ...rate, max: 1, per: '10m', seconds: 600 };
    expect((await batch.run(job([one], {}, 5000))).outcome.decision.decision).toBe('allow');
    expect((await batch.run(job([one], {}, 5599))).outcome.decision.decision).toBe('deny');
    expect((await batch.run(job([one], {}, 5600))).outcome.decision.decision).toBe('allow');
  });

  it('drops counters nothing in their window uses any more', async () => {
    const batch = new UsageBatch(host);
    await batch.run(job([rate], {}, 1000));
    const count = async () => Number((await root.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM usage_counters'))!.n);
    expect(await root.usage.purgeIdle(1000 + 3600 + EVENT_GRACE_SECONDS - 1)).toBe(0);
    expect(await count()).toBe(1);
    expect(await root.usage.purgeIdle(1000 + 3600 + EVENT_GRACE_SECONDS)).toBe(1);
    expect(await count()).toBe(0);
    expect(Number((await root.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM usage_events'))!.n)).toBe(0);
  });
});

describe('a turn of decisions against a model that takes them one at a time', () => {
  it('agree, whatever the times and tokens within one turn', async () => {
    const limits: UsageLimit[] = [
      { kind: 'count', field: null, max: 4, per: '10s', seconds: 10, scope: 'agent', source: 't' },
      { kind: 'sum', field: 'amount', max: 12, per: '20s', seconds: 20, scope: 'resource', source: 't' },
    ];
    const step = fc.record({ dt: fc.integer({ min: 0, max: 6 }), amount: fc.integer({ min: 0, max: 5 }), resource: fc.constantFrom('r:1', 'r:2'), txn: fc.integer({ min: 0, max: 6 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(step, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 8 }), async (turns) => {
        await root.sql.exec('DELETE FROM usage_events; DELETE FROM usage_counters');
        const batch = new UsageBatch(host);
        const history: { t: number; amount: number; resource: string; txn: string }[] = [];
        const firstAsk = new Map<string, { amount: number; resource: string }>();
        let t = 10_000;
        for (const turn of turns) {
          // Times may differ within one turn (a turn can straddle a second).
          const jobs = turn.map((s) => {
            t += s.dt;
            const txn = `txn-${s.txn}`;
            // A token is bound to one action: asking again repeats the first ask.
            if (!firstAsk.has(txn)) firstAsk.set(txn, { amount: s.amount, resource: s.resource });
            const { amount, resource } = firstAsk.get(txn)!;
            return { t, txn, amount, resource };
          });
          const results = await Promise.all(jobs.map((j) => batch.run({
            counters: countersFor({ ...subject, resource: j.resource }, limits),
            t: j.t,
            txn: j.txn,
            async judge(facts: Record<string, number>) {
              const usage = limits.map((l) => checkUsageLimit(l, usageKey(l), { amount: j.amount }, facts[usageKey(l)] ?? 0));
              return { decision: { decision: usage.some((u) => u.violated) ? 'deny' : 'allow', usage } };
            },
          })));
          for (const [i, j] of jobs.entries()) {
            const own = history.find((h) => h.txn === j.txn);
            const count = history.filter((h) => h !== own && h.t > j.t - 10).length;
            const sum = history.filter((h) => h !== own && h.t > j.t - 20 && h.resource === j.resource).reduce((a, h) => a + h.amount, 0);
            const allow = count + 1 <= 4 && sum + j.amount <= 12;
            expect(results[i]!.outcome.decision.decision).toBe(allow ? 'allow' : 'deny');
            if (allow && !own) history.push(j);
          }
        }
      }),
      { numRuns: 100 },
    );
  });
});
