// Decision throughput of the compiled evaluator against @cedar-policy/cedar-wasm
// evaluating an equivalent policy set, for 10, 100, 1,000 and 10,000 rules.
// Run: npx tsx bench/policy.ts   (on demand; not part of npm test)

import { decide, loadPolicySet, type DecisionRequest, type JsonRule } from '../src/policy/index.js';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';

const FILE = `policy "refunds" version 3

rule "block-large-refunds" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 10000
}

rule "approve-medium-refunds" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >= 1000 and currency == "USD"
}

limits "create:refunds" for "spiffe://localhost/agent/billing" {
  amount max 500 min 1
  currency in ["USD", "EUR"]
}
`;

const request: DecisionRequest = {
  subject: { type: 'agent', id: 'spiffe://localhost/agent/billing', mode: 'autonomous', roles: [], groups: [], attributes: {}, permissions: ['create:refunds'], capabilities: [{ name: 'create:refunds' }] },
  action: 'create:refunds',
  resource: 'refund:r-1001',
  context: { amount: 250, currency: 'USD' },
  now: Date.parse('2026-03-30T10:00:00Z'),
};

/** n rules in all: the two of the file plus n - 2 unrelated rules from the management API. */
function ourSet(n: number) {
  const rules: JsonRule[] = [];
  for (let i = 0; i < n - 2; i++) {
    rules.push({
      id: `r${i}`, name: `rule-${i}`, effect: i % 2 ? 'deny' : 'require_approval', subjects: ['agent:*'],
      relation: `create:things${i}`, object: `thing${i}:*`, condition: { field: 'amount', op: 'gt', value: i },
    });
  }
  const r = loadPolicySet({ files: [{ path: 'refunds.policy', text: FILE }], rules });
  if (!r.policySet) throw new Error(JSON.stringify(r.diagnostics.slice(0, 3)));
  return r.policySet;
}

/** The same policy set in Cedar: one forbid per rule, plus one permit standing for the grants. */
function cedarSet(n: number): string {
  const out = [
    'permit(principal, action, resource);',
    'forbid(principal, action == Action::"create:refunds", resource is Refund) when { context.amount > 10000 };',
    'forbid(principal, action == Action::"create:refunds", resource is Refund) when { context.amount >= 1000 && context.currency == "USD" && context.amount > 100000000 };',
    'forbid(principal == Agent::"spiffe://localhost/agent/billing", action == Action::"create:refunds", resource) unless { context.amount <= 500 && context.amount >= 1 && ["USD", "EUR"].contains(context.currency) };',
  ];
  for (let i = 0; i < n - 2; i++) out.push(`forbid(principal, action == Action::"create:things${i}", resource is Thing${i}) when { context.amount > ${i} };`);
  return out.join('\n');
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** Median µs per call over batches, and calls per second overall. */
function measure(fn: () => void, batch: number, seconds: number): { medianUs: number; perSec: number } {
  for (let i = 0; i < batch * 3; i++) fn(); // warm up
  const samples: number[] = [];
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  for (;;) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) fn();
    const t1 = process.hrtime.bigint();
    samples.push(Number(t1 - t0) / 1000 / batch);
    calls += batch;
    if (t1 > end && samples.length >= 5) break;
  }
  const total = Number(process.hrtime.bigint() - start) / 1e9;
  return { medianUs: median(samples), perSec: calls / total };
}

const sizes = [10, 100, 1000, 10000];
const rows: string[][] = [];

// Ours first for every size (Cedar's wasm heap grows large at 10,000 policies and disturbs what follows).
const oursAt = new Map<number, { medianUs: number; perSec: number }>();
for (const n of sizes) {
  const set = ourSet(n);
  const d = decide(request, set);
  if (d.decision !== 'allow') throw new Error(`unexpected decision ${d.decision}: ${d.reason}`);
  oursAt.set(n, measure(() => { decide(request, set); }, 2000, 2));
}
const baseMedian = oursAt.get(sizes[0]!)!.medianUs;

for (const n of sizes) {
  const ours = oursAt.get(n)!;
  const id = `bench-${n}`;
  const parsed = cedar.preparsePolicySet(id, { staticPolicies: cedarSet(n) });
  if (parsed.type !== 'success') throw new Error(JSON.stringify(parsed));
  const call = {
    principal: { type: 'Agent', id: request.subject.id },
    action: { type: 'Action', id: 'create:refunds' },
    resource: { type: 'Refund', id: 'r-1001' },
    context: request.context as Record<string, string | number>,
    preparsedPolicySetId: id,
    entities: [],
  };
  const answer = cedar.statefulIsAuthorized(call as never);
  if (answer.type !== 'success' || answer.response.decision !== 'allow') throw new Error('cedar: ' + JSON.stringify(answer).slice(0, 300));
  const c = measure(() => { cedar.statefulIsAuthorized(call as never); }, n >= 1000 ? 5 : 50, n >= 1000 ? 3 : 1.5);
  rows.push([
    n.toLocaleString('en-US'),
    Math.round(ours.perSec).toLocaleString('en-US'),
    ours.medianUs.toFixed(2),
    Math.round(c.perSec).toLocaleString('en-US'),
    c.medianUs.toFixed(1),
    `${Math.round(ours.perSec / c.perSec).toLocaleString('en-US')}×`,
    `${(ours.medianUs / baseMedian).toFixed(2)}×`,
  ]);
}

const head = ['rules', 'gatehouse decisions/s', 'gatehouse median µs', 'cedar-wasm decisions/s', 'cedar-wasm median µs', 'speed-up', 'growth vs 10'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => '| ' + cells.map((c, i) => c.padStart(widths[i]!)).join(' | ') + ' |';
console.log(`node ${process.version}, cedar-wasm ${cedar.getCedarVersion()}`);
console.log(line(head));
console.log('|' + widths.map((w) => '-'.repeat(w + 1) + ':').join('|') + '|');
for (const r of rows) console.log(line(r));
