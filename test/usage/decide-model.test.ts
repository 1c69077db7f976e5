import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countersFor, decideOnce } from '../../src/authz/budgets.js';
import { decide, loadPolicySet, usageLimitsFor, type DecisionRequest, type PolicySet } from '../../src/policy/index.js';
import type { Store } from '../../src/store/index.js';
import { openTestStore, type TestStore } from '../store/helpers.js';

// decide() with the counters around it, against a reference model that knows nothing of
// counters: it keeps every allowed request and, at each new one, replays that history through
// the limits as the documentation states them.

interface Entry { max: number; per: number; scope?: 'agent' | 'resource' }
interface Limits { plainMax: number | null; sums: Entry[]; counts: Entry[] }
interface Step { dt: number; amount: number | 'missing' | 'text'; resource: string; repeat: boolean }
interface Allowed { t: number; amount: number; resource: string; txn: string }

const windowText = (s: number) => `${s}s`;

function limitsJson(l: Limits): Record<string, unknown> {
  const amount: Record<string, unknown> = {};
  if (l.plainMax !== null) amount.max = l.plainMax;
  if (l.sums.length) amount.sum = l.sums.map((e) => ({ max: e.max, per: windowText(e.per), ...(e.scope ? { scope: e.scope } : {}) }));
  const out: Record<string, unknown> = {};
  if (Object.keys(amount).length) out.amount = amount;
  if (l.counts.length) out.count = l.counts.map((e) => ({ max: e.max, per: windowText(e.per), ...(e.scope ? { scope: e.scope } : {}) }));
  return out;
}

/** The model: the decision and reason for a request at `t`, from the history of allowed ones. */
function model(l: Limits, history: Allowed[], t: number, amount: unknown, resource: string, own: Allowed | undefined): string {
  if (l.plainMax !== null) {
    if (amount === undefined) return 'deny constraint_violated: amount required';
    if (!(typeof amount === 'number' && amount <= l.plainMax)) return 'deny constraint_violated: amount max';
  }
  const inWindow = (e: Entry) => history.filter((h) => h !== own && h.t > t - e.per && (e.scope !== 'resource' || h.resource === resource));
  for (const e of l.sums) {
    if (amount === undefined) return 'deny constraint_violated: amount required';
    if (typeof amount !== 'number') return 'deny constraint_violated: amount sum';
    if (inWindow(e).reduce((s, h) => s + h.amount, 0) + amount > e.max) return 'deny constraint_violated: amount sum';
  }
  for (const e of l.counts) if (inWindow(e).length + 1 > e.max) return 'deny constraint_violated: count';
  return 'allow allowed';
}

let ts: TestStore;
let store: Store;
beforeAll(async () => {
  ts = await openTestStore();
  store = ts.store;
  await store.sql.run("INSERT INTO agents (agent_id, name, mode, public_jwk, created_at, updated_at) VALUES ('a1', 'a1', 'autonomous', '{}', 0, 0)");
});
afterAll(() => ts.close());

const policy: PolicySet = loadPolicySet({ files: [] }).policySet!;

describe('decide() with counters against a model that replays the history', () => {
  it('agree on every decision and reason', async () => {
    const entry = fc.record({ max: fc.integer({ min: 0, max: 12 }), per: fc.constantFrom(5, 10, 30), scope: fc.constantFrom(undefined, 'agent' as const, 'resource' as const) });
    const limits = fc.record({
      plainMax: fc.option(fc.integer({ min: 2, max: 8 }), { nil: null }),
      sums: fc.array(entry, { maxLength: 2 }),
      counts: fc.array(entry, { maxLength: 2 }),
    }).filter((l) => l.sums.length + l.counts.length > 0);
    const step = fc.record({
      dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 12 })),
      amount: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constantFrom<'missing' | 'text'>('missing', 'text')),
      resource: fc.constantFrom('refund:1', 'refund:2'),
      repeat: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(limits, fc.array(step, { minLength: 1, maxLength: 40 }), async (l: Limits, steps: Step[]) => {
        await store.sql.exec('DELETE FROM usage_events; DELETE FROM usage_counters');
        const json = limitsJson(l);
        const history: Allowed[] = [];
        const asked: { txn: string; t: number; amount: unknown; resource: string }[] = [];
        let t = 50_000;
        for (const [i, s] of steps.entries()) {
          t += s.dt;
          let amount: unknown = s.amount === 'missing' ? undefined : s.amount === 'text' ? 'five' : s.amount;
          let { resource } = s;
          let txn = `txn-${i}`;
          // A repeat asks again under a transaction token still alive (60 seconds).
          const previous = asked.filter((a) => a.t > t - 60).at(-1);
          if (s.repeat && previous) ({ txn, amount, resource } = previous);
          else asked.push({ txn, t, amount, resource });
          const request: DecisionRequest = {
            subject: { type: 'agent', id: 'a1', mode: 'autonomous', roles: [], groups: [], attributes: {}, permissions: ['create:refunds'], capabilities: [{ name: 'create:refunds', limits: json }] },
            action: 'create:refunds',
            resource,
            context: amount === undefined ? {} : { amount },
            now: t * 1000,
          };
          const counters = countersFor({ agentId: 'a1', capability: 'create:refunds', resource, personId: null }, usageLimitsFor(request, policy));
          const { outcome } = await store.transaction((tx) =>
            decideOnce(tx, counters, t, txn, async (usage) => ({ decision: decide({ ...request, usage }, policy) })),
          );
          const d = outcome.decision;
          const own = history.find((h) => h.txn === txn);
          const expected = model(l, history, t, amount, resource, own);
          expect(`${d.decision} ${d.reason}`).toBe(expected);
          if (d.decision === 'allow' && !own) history.push({ t, amount: amount as number, resource, txn });
        }
      }),
      { numRuns: 200 },
    );
  });
});
