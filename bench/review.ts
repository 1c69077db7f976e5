// Review tools on demand: `policy verify` of the ten invariants policies/examples states
// (target: under 2 s), timed as the CLI does the work (read, compile, prove).
//
// Run: npx tsx bench/review.ts   (on demand; not part of npm test)

import { join } from 'node:path';
import { projectRoot } from '../src/paths.js';
import { loadPolicySet, readPolicyDir } from '../src/policy/index.js';
import { verifyInvariants } from '../src/policy/verify.js';

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

await benchVerify();
