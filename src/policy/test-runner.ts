// Runs the test blocks kept beside the policies (`test "..." { ... }` in
// `*.policy` or `*.tests` files) against the policy set of the directory.

import type { Decision, DecisionRequest, JsonLimits } from './types.js';
import type { PolicyFileNode, TestNode } from './ast.js';
import type { PolicySet } from './compile.js';
import { decide } from './decide.js';
import { limitFieldsToJson } from './json.js';

export interface TestResult { name: string; source: string; passed: boolean; decision: Decision; expected: string }

export function testRequest(t: TestNode): DecisionRequest {
  const req: DecisionRequest = {
    agent: {
      id: t.agent?.id ?? '',
      mode: t.agent?.mode === 'delegated' ? 'delegated' : 'autonomous',
      permissions: t.permissions ?? [],
      capabilities: t.capabilities.map((c) => ({ name: c.name, ...(c.limits ? { limits: limitFieldsToJson(c.limits) as JsonLimits } : {}) })),
    },
    action: t.action ?? '',
    resource: t.resource ?? '',
    context: (t.context ?? {}) as Record<string, unknown>,
  };
  if (t.person) req.person = { id: t.person.id, permissions: t.person.permissions };
  if (t.approved) req.approved = true;
  return req;
}

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
