// Runs the test blocks kept beside the policies (`test "..." { ... }` in
// `*.policy` or `*.tests` files) against the policy set of the directory.

import type { Decision } from './types.js';
import type { PolicyFileNode, TestNode } from './ast.js';
import type { PolicySet } from './compile.js';
import { decide } from './decide.js';
import { testRequest } from './test-request.js';

export { testRequest } from './test-request.js';

export interface TestResult { name: string; source: string; passed: boolean; decision: Decision; expected: string }

export function collectTests(files: PolicyFileNode[]): TestNode[] {
  return files.flatMap((f) => f.items.filter((i): i is TestNode => i.kind === 'test'));
}

export function runTests(tests: TestNode[], set: PolicySet): TestResult[] {
  return tests.map((t) => {
    const decision = decide(testRequest(t), set);
    const exp = t.expect!;
    const passed = decision.decision === exp.decision && (exp.reason === undefined || decision.reason === exp.reason);
    return {
      name: t.name,
      source: t.loc ? `${t.loc.file}:${t.loc.line}` : t.name,
      passed,
      decision,
      expected: exp.reason !== undefined ? `${exp.decision} "${exp.reason}"` : exp.decision,
    };
  });
}
