// Decision throughput of the compiled evaluator against @cedar-policy/cedar-wasm evaluating
// the same policy set, with entities and attribute conditions, at 10, 100, 1,000 and 10,000
// rules, in the same run.
//
// The request: Ada (role editor) updates her own todo. It passes an ownership rule (the todo's
// owner is Ada's email), a role membership (editor), a list test (the todo's tags hold no
// "vip") and a comparison with a context value. The other rules are of the same shapes
// (ownership and tags) on other relations and kinds, as a real policy set grows.
//
// Run: npx tsx bench/policy.ts   (on demand; not part of npm test)

import { decide, loadPolicySet, type DecisionRequest } from '../src/policy/index.js';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';

const BASE = `policy "todos" version 1

rule "editors-update-their-own-todos" {
  effect permit
  subjects "role:editor"
  relation "update:todos"
  object "todo:*"
  when resource.owner == subject.email
}

rule "vip-todos-need-vip-support" {
  effect deny
  subjects "user:*"
  relation "update:todos"
  object "todo:*"
  when resource.tags contains "vip" and not (subject.roles contains "vip-support")
}

rule "large-updates-wait" {
  effect require_approval
  subjects "user:*"
  relation "update:todos"
  object "todo:*"
  when context.amount > 1000
}
`;

const request: DecisionRequest = {
  subject: { type: 'user', id: 'ada', email: 'ada@example.com', roles: ['editor'], groups: [], permissions: [], attributes: {} },
  action: 'update:todos',
  resource: 'todo:t1',
  resourceAttributes: { owner: 'ada@example.com', tags: ['work', 'q3'] },
  context: { amount: 250 },
  now: Date.parse('2026-03-30T10:00:00Z'),
};

/** The other rules: ownership and tags, permit and deny alternating, each on a relation and kind of its own. */
function filler(i: number): string {
  return i % 2
    ? `rule "thing${i}-owners" {\n  effect permit\n  subjects "role:editor"\n  relation "update:things${i}"\n  object "thing${i}:*"\n  when resource.owner == subject.email\n}\n`
    : `rule "thing${i}-vip" {\n  effect deny\n  subjects "user:*"\n  relation "update:things${i}"\n  object "thing${i}:*"\n  when resource.tags contains "vip" and not (subject.roles contains "vip-support")\n}\n`;
}

function ourSet(n: number) {
  let text = BASE;
  for (let i = 0; i < n - 3; i++) text += '\n' + filler(i);
  const r = loadPolicySet({ files: [{ path: 'todos.policy', text }] });
  if (!r.policySet) throw new Error(JSON.stringify(r.diagnostics.slice(0, 3)));
  return r.policySet;
}

/** The same policy set in Cedar: roles are parents of the user, approval a forbid that does not apply here. */
function cedarSet(n: number): string {
  const out = [
    'permit (principal in Role::"editor", action == Action::"update:todos", resource is Todo) when { resource.owner == principal.email };',
    'forbid (principal is User, action == Action::"update:todos", resource is Todo) when { resource.tags.contains("vip") && !(principal in Role::"vip-support") };',
    'forbid (principal is User, action == Action::"update:todos", resource is Todo) when { context.amount > 1000 };',
  ];
  for (let i = 0; i < n - 3; i++) {
    out.push(i % 2
      ? `permit (principal in Role::"editor", action == Action::"update:things${i}", resource is Thing${i}) when { resource.owner == principal.email };`
      : `forbid (principal is User, action == Action::"update:things${i}", resource is Thing${i}) when { resource.tags.contains("vip") && !(principal in Role::"vip-support") };`);
  }
  return out.join('\n');
}

const cedarEntities = [
  { uid: { type: 'User', id: 'ada' }, attrs: { email: 'ada@example.com' }, parents: [{ type: 'Role', id: 'editor' }] },
  { uid: { type: 'Role', id: 'editor' }, attrs: {}, parents: [] },
  { uid: { type: 'Todo', id: 't1' }, attrs: { owner: 'ada@example.com', tags: ['work', 'q3'] }, parents: [] },
];

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

const sizes = (process.env.BENCH_SIZES ?? '10,100,1000,10000').split(',').map(Number);
const rows: string[][] = [];

// Ours first for every size (Cedar's wasm heap grows large at 10,000 policies and disturbs what follows).
const oursAt = new Map<number, { medianUs: number; perSec: number }>();
for (const n of sizes) {
  const set = ourSet(n);
  const d = decide(request, set);
  if (d.decision !== 'allow') throw new Error(`unexpected decision ${d.decision}: ${d.reason}`);
  if (decide({ ...request, resourceAttributes: { owner: 'bob@example.com', tags: [] } }, set).decision !== 'deny') throw new Error('ownership is not checked');
  oursAt.set(n, measure(() => { decide(request, set); }, 2000, 2));
}
const baseMedian = oursAt.get(sizes[0]!)!.medianUs;

for (const n of sizes) {
  const ours = oursAt.get(n)!;
  const id = `bench-${n}`;
  const parsed = cedar.preparsePolicySet(id, { staticPolicies: cedarSet(n) });
  if (parsed.type !== 'success') throw new Error(JSON.stringify(parsed));
  const call = {
    principal: { type: 'User', id: 'ada' },
    action: { type: 'Action', id: 'update:todos' },
    resource: { type: 'Todo', id: 't1' },
    context: request.context as Record<string, number>,
    preparsedPolicySetId: id,
    entities: cedarEntities,
  };
  const answer = cedar.statefulIsAuthorized(call as never);
  if (answer.type !== 'success' || answer.response.decision !== 'allow') throw new Error('cedar: ' + JSON.stringify(answer).slice(0, 500));
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
