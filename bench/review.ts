// Review tools on demand:
//  - `policy verify` of the ten invariants policies/examples states (target: under 2 s), timed
//    as the CLI does the work (read, compile, prove);
//  - `policy replay`: decision records with their facts written straight into a fresh SQLite
//    audit trail (REPLAY_RECORDS, default 1,000,000), then every one of them replayed under a
//    draft that changes some; the time the replay took and its rate (records per second)
//    (target: 1,000,000 in under 60 s).
//
// Run: npx tsx bench/review.ts   (on demand; not part of npm test)

import { join } from 'node:path';
import { projectRoot } from '../src/paths.js';
import { loadPolicySet, readPolicyDir } from '../src/policy/index.js';
import { verifyInvariants } from '../src/policy/verify.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { openDatabase, migrate } from '../src/store/db.js';
import { createStore } from '../src/store/index.js';
import { replay } from '../src/authz/replay.js';
import { auditFacts } from '../src/authz/core.js';
import type { AuditInput } from '../src/store/audit.js';

async function benchVerify(): Promise<void> {
  const dir = join(projectRoot, 'policies', 'examples');
  const runs: number[] = [];
  let count = 0;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const files = (await readPolicyDir(dir)).filter((f) => f.path.endsWith('.policy'));
    const { policySet, diagnostics } = loadPolicySet({ files });
    if (!policySet) throw new Error(`policies/examples does not load: ${diagnostics.map((d) => d.message).join('; ')}`);
    const results = verifyInvariants(policySet);
    runs.push(performance.now() - t0);
    count = results.length;
    const bad = results.filter((r) => !r.holds);
    if (bad.length) throw new Error(`invariants do not hold: ${bad.map((r) => r.name).join(', ')}`);
  }
  runs.sort((a, b) => a - b);
  console.log(`policy verify: ${count} invariants over policies/examples, median ${runs[2]!.toFixed(0)} ms (min ${runs[0]!.toFixed(0)}, max ${runs[4]!.toFixed(0)}; target < 2000 ms)`);
}

const REPLAY_POLICY = (threshold: number) => `rule "agents refund" {
  effect permit
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when currency in ["EUR", "USD"]
}

rule "large refunds wait" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > ${threshold}
}

rule "no refunds at night" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when time.hour < 6
}
`;

async function benchReplay(): Promise<void> {
  const n = Number(process.env.REPLAY_RECORDS ?? 1_000_000);
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-replay-'));
  const db = await openDatabase({ file: join(dir, 'bench.db') });
  try {
    await migrate(db);
    const store = createStore(db);
    const { policySet: live } = loadPolicySet({ files: [{ path: 'refunds.policy', text: REPLAY_POLICY(50_000) }] });
    const { policySet: draft } = loadPolicySet({ files: [{ path: 'refunds.policy', text: REPLAY_POLICY(25_000) }] });
    const { decide } = await import('../src/policy/index.js');
    const until = Math.floor(Date.now() / 1000);
    const t0 = performance.now();
    for (let i = 0; i < n; i += 1000) {
      const batch: AuditInput[] = [];
      for (let j = i; j < Math.min(n, i + 1000); j++) {
        const now = (until - 6 * 86_400 + Math.floor((j / n) * 6 * 86_400)) * 1000;
        const subject = { type: 'agent', id: `spiffe://localhost/agent/a${j % 50}`, mode: 'autonomous' as const, roles: [], groups: [], permissions: [], attributes: {}, capabilities: [{ name: 'create:refunds' }] };
        const request = { subject, action: 'create:refunds', resource: `refund:r${j}`, context: { amount: (j * 7919) % 100_000, currency: j % 10 ? 'EUR' : 'GBP' }, now };
        const d = decide(request, live!);
        batch.push({ kind: 'decision', time: Math.floor(now / 1000), agent_id: subject.id, action: request.action, resource: request.resource, context: request.context, decision: d.decision, reason: d.reason, policy_version: live!.version, facts: auditFacts(request) });
      }
      await store.audit.appendAll(batch);
    }
    const written = performance.now() - t0;
    const t1 = performance.now();
    const r = await replay(store, draft!, { since: until - 7 * 86_400, until });
    const took = (performance.now() - t1) / 1000;
    const rate = r.decisions / took;
    if (r.decisions !== n) throw new Error(`replayed ${r.decisions} of the ${n} decisions written`);
    const verdict = n >= 1_000_000 ? `; target 1,000,000 in < 60 s: ${took < 60 ? 'met' : 'NOT met'}` : ` (fewer than 1,000,000: REPLAY_RECORDS=${n})`;
    console.log(`policy replay: ${r.decisions} recorded decisions (written in ${(written / 1000).toFixed(1)} s) replayed in ${took.toFixed(1)} s: ${Math.round(rate)} decisions/s, ${r.changed} changed${verdict}`);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await benchVerify();
await benchReplay();
