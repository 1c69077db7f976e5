import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countersFor, UsageBatch } from '../../src/authz/budgets.js';
import { checkUsageLimit, usageKey, type UsageLimit } from '../../src/policy/usage.js';
import type { Store } from '../../src/store/index.js';
import { EVENT_GRACE_SECONDS } from '../../src/store/usage.js';
import { openTestStore, type TestStore } from '../store/helpers.js';

// Expired usage goes away as decisions go on: a counter's old events as it moves, idle
// counters in the housekeeping pass, neither holding decisions up.

let ts: TestStore;
let store: Store;
beforeEach(async () => {
  ts = await openTestStore();
  store = ts.store;
  await store.sql.run("INSERT INTO agents (agent_id, name, mode, public_jwk, created_at, updated_at) VALUES ('a1', 'a1', 'autonomous', '{}', 0, 0)");
});
afterEach(() => ts.close());

function job(limits: UsageLimit[], resource: string, t: number) {
  return {
    counters: countersFor({ agentId: 'a1', capability: 'send:emails', resource, personId: null }, limits),
    t,
    txn: null,
    async judge(facts: Record<string, number>) {
      const usage = limits.map((l) => checkUsageLimit(l, usageKey(l), {}, facts[usageKey(l)] ?? 0));
      return { decision: { decision: usage.some((u) => u.violated) ? 'deny' : 'allow', usage } };
    },
  };
}

const countRows = async (table: string) => Number((await store.sql.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);

describe('pruning expired usage', () => {
  it("a counter's events long out of its window are pruned as it moves on; its usage stays exact", async () => {
    const rate: UsageLimit = { kind: 'count', field: null, max: 1000, per: '10s', seconds: 10, scope: 'agent', source: 't' };
    const batch = new UsageBatch(store);
    let t = 10_000;
    for (let i = 0; i < 400; i++, t += 5) {
      const { outcome, changes } = await batch.run(job([rate], 'email:1', t));
      expect(outcome.decision.decision).toBe('allow');
      // In (t - 10, t]: the one 5 seconds ago (from the second on) and this one.
      expect(changes[0]).toMatchObject({ before: i === 0 ? 0 : 1, after: i === 0 ? 1 : 2 });
    }
    // What is kept: the window, the grace after it, and at most one pruning period more.
    const kept = (10 + EVENT_GRACE_SECONDS) / 5 + 32;
    expect(await countRows('usage_events')).toBeLessThanOrEqual(kept);
    expect(kept).toBeLessThan(400);
  });

  it('idle counters are dropped one short transaction at a time: a decision is answered while the pass goes on', async () => {
    const perObject: UsageLimit = { kind: 'count', field: null, max: 5, per: '1m', seconds: 60, scope: 'resource', source: 't' };
    const batch = new UsageBatch(store);
    await Promise.all(Array.from({ length: 200 }, (_, i) => batch.run(job([perObject], `email:old-${i}`, 1000))));
    expect(await countRows('usage_counters')).toBe(200);

    const late = 1000 + 60 + EVENT_GRACE_SECONDS;
    const finished: string[] = [];
    const pass = store.usage.purgeIdle(late, 1000).then((n) => { finished.push('pass'); return n; });
    const decision = batch.run(job([perObject], 'email:new', late)).then((r) => { finished.push('decision'); return r; });
    const [dropped, answered] = await Promise.all([pass, decision]);
    expect(dropped).toBe(200);
    expect(answered.outcome.decision.decision).toBe('allow');
    // The decision did not wait for the whole pass.
    expect(finished).toEqual(['decision', 'pass']);
    expect(await countRows('usage_counters')).toBe(1);
    expect(await countRows('usage_events')).toBe(1);
  });

  it('a counter used again since it was first used is kept, with its usage', async () => {
    const rate: UsageLimit = { kind: 'count', field: null, max: 5, per: '1m', seconds: 60, scope: 'agent', source: 't' };
    const batch = new UsageBatch(store);
    await batch.run(job([rate], 'email:1', 1000));
    const late = 1000 + 60 + EVENT_GRACE_SECONDS;
    // Its first use is long gone, but it was used again at `late`: not idle.
    await batch.run(job([rate], 'email:1', late));
    expect(await store.usage.purgeIdle(late, 1000)).toBe(0);
    const { changes } = await batch.run(job([rate], 'email:1', late + 1));
    expect(changes[0]).toMatchObject({ before: 1, after: 2 });
  });
});
