/**
 * The relations engine in process (on demand: `npx tsx --expose-gc bench/relations.ts`).
 *
 * Loads 1,000,000 relationships into the in-memory index (a tree of ~88k folders ten levels
 * deep under one root, 300k documents each in a leaf folder with a viewer and most with an
 * owner, 10k people in 1k groups, the root shared with a group), prints the heap the index
 * takes, then times warm checks one by one (median and p99), the worst case: a person in the
 * root's group viewing a document ten folders below the root, through every parent.
 * `BENCH_RELATIONSHIPS` changes the count (scaled documents); `BENCH_WARM` the warm-up rounds.
 */
import { parsePolicy } from '../src/policy/parser.js';
import { buildModel } from '../src/policy/relations/model.js';
import { MemoryIndex } from '../src/policy/relations/index.js';
import { RelationChecker } from '../src/policy/relations/checker.js';

const MODEL = `type user

type group {
  relation member: [user, group#member]
}

type folder {
  relation parent: [folder]
  relation owner: [user]
  relation viewer: [user, group#member] or owner or viewer from parent
}

type document {
  relation parent: [folder]
  relation owner: [user]
  relation blocked: [user]
  relation editor: [user] or owner
  relation viewer: ([user, user:*, group#member] or editor or viewer from parent) but not blocked
}
`;

const gc = (globalThis as { gc?: () => void }).gc;
const heap = () => { gc?.(); gc?.(); return process.memoryUsage().heapUsed; };
const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

const target = Number(process.env.BENCH_RELATIONSHIPS ?? 1_000_000);
const model = buildModel([parsePolicy('bench.policy', MODEL).file!]);
const before = heap();
const index = new MemoryIndex();
let n = 0;
const add = (object: string, relation: string, subject: string) => { index.add({ object, relation, subject }); n++; };

// Folders: a ternary tree, ten levels below the root.
const levels: string[][] = [['folder:root']];
for (let d = 1; d <= 10; d++) {
  const prev = levels[d - 1]!, next: string[] = [];
  for (const p of prev) for (let k = 0; k < 3; k++) { const f = `folder:${next.length}-${d}`; next.push(f); add(f, 'parent', p); }
  levels.push(next);
}
const leaves = levels[10]!;
add('folder:root', 'viewer', 'group:g0#member');
for (let u = 0; u < 10_000; u++) add(`group:g${u % 1000}`, 'member', `user:u${u}`);
const perDoc = 2.7;
const docs = Math.max(1, Math.floor((target - n) / perDoc));
for (let i = 0; i < docs && n < target; i++) {
  const d = `document:d${i}`;
  add(d, 'parent', leaves[i % leaves.length]!);
  add(d, 'viewer', `user:u${(i * 7) % 10_000}`);
  if (i % 10 < 7 && n < target) add(d, 'owner', `user:u${(i * 13) % 10_000}`);
}
const after = heap();
console.log(`relationships: ${index.size} (${n} written), folders ${levels.flat().length}, documents ${docs}`);
console.log(`index heap: ${mb(after - before)} (${Math.round((after - before) / index.size)} bytes per relationship)`);

const checker = new RelationChecker(model, index);
// user:u0 is in group g0, the root's viewer group: every document is visible to it through ten parents.
const asks = Array.from({ length: 2000 }, (_, i) => `document:d${(i * 9973) % docs}`);
for (const d of asks) if (!checker.holds(d, 'viewer', 'user:u0')) throw new Error(`${d} should be visible`);
for (let w = 0; w < Number(process.env.BENCH_WARM ?? 5); w++) for (const d of asks) checker.holds(d, "viewer", "user:u0");
const times: number[] = [];
for (let r = 0; r < 5; r++) for (const d of asks) {
  const t0 = process.hrtime.bigint();
  checker.check(d, 'viewer', 'user:u0');
  times.push(Number(process.hrtime.bigint() - t0));
}
times.sort((a, b) => a - b);
const q = (p: number) => (times[Math.floor(times.length * p)]! / 1000).toFixed(2);
console.log(`check, 10 folders deep (warm): median ${q(0.5)} µs, p99 ${q(0.99)} µs over ${times.length} checks`);
const denied: number[] = [];
for (const d of asks.slice(0, 500)) {
  const t0 = process.hrtime.bigint();
  checker.check(d, 'viewer', 'user:u1');
  denied.push(Number(process.hrtime.bigint() - t0));
}
denied.sort((a, b) => a - b);
console.log(`check that finds nothing (warm): median ${(denied[denied.length >> 1]! / 1000).toFixed(2)} µs`);
const t1 = process.hrtime.bigint();
const listed = checker.listObjects('user:u5', 'viewer', 'document');
console.log(`list objects for a person: ${'objects' in listed ? listed.objects.length : listed.error?.message} objects in ${(Number(process.hrtime.bigint() - t1) / 1e6).toFixed(1)} ms`);
