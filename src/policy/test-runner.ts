// Runs the test blocks kept beside the policies (`test "..." { ... }` in
// `*.policy` or `*.tests` files) against the policy set of the directory.
// A test may make a decision (`action ... expect allow`), assert relationships
// (`check`, `list objects`, `list subjects`), or both; its relationships are its
// file's `relationships { }` fixtures and its own `relationship` lines.

import type { Decision } from './types.js';
import type { PolicyFileNode, TestNode } from './ast.js';
import type { PolicySet } from './compile.js';
import type { RelAssertion } from './relations/ast.js';
import { decide } from './decide.js';
import { testRequest } from './test-request.js';
import { MemoryIndex } from './relations/index.js';
import { relationChecker, type CheckResult, type ListResult } from './relations/checker.js';
import { fixtureRelationship } from './relations/validate.js';
import type { Relationship } from './relations/tuple.js';

export { testRequest } from './test-request.js';

export interface TestResult {
  name: string;
  source: string;
  passed: boolean;
  /** The decision, for a test that makes one. */
  decision?: Decision;
  expected: string;
  /** What did not come out as expected, one line each (empty when passed). */
  failures: string[];
}

export function collectTests(files: PolicyFileNode[]): TestNode[] {
  return files.flatMap((f) => f.items.filter((i): i is TestNode => i.kind === 'test'));
}

/** The `relationships { }` fixtures of each file, by path. */
export function fixturesOf(files: PolicyFileNode[]): Map<string, Relationship[]> {
  const out = new Map<string, Relationship[]>();
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'relationships') continue;
    const list = out.get(f.path) ?? [];
    for (const l of item.lines) {
      const r = fixtureRelationship(l);
      if (typeof r !== 'string') list.push(r);
    }
    out.set(f.path, list);
  }
  return out;
}

function indexOf(relationships: Relationship[]): MemoryIndex {
  const index = new MemoryIndex();
  for (const r of relationships) index.add(r);
  return index;
}

function sameSet(a: string[], b: string[]): boolean {
  const x = [...new Set(a)].sort(), y = [...new Set(b)].sort();
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

function describe(a: RelAssertion): string {
  const q = JSON.stringify;
  switch (a.kind) {
    case 'check': return `check ${q(a.subject)} ${q(a.relation)} ${q(a.object)}`;
    case 'list_objects': return `list objects ${q(a.subject)} ${q(a.relation)} ${q(a.type)}`;
    case 'list_subjects': return `list subjects ${q(a.object)} ${q(a.relation)} ${q(a.subjectType)}`;
  }
}

function gotOf(r: CheckResult | ListResult<'objects'> | ListResult<'subjects'>): string {
  if ('error' in r && r.error) return `error (${r.error.message})`;
  if ('allowed' in r) return String(r.allowed);
  if ('objects' in r) return JSON.stringify(r.objects);
  return JSON.stringify((r as { subjects: string[] }).subjects);
}

/** A failure line for an assertion, or null when it holds. */
function runAssertion(a: RelAssertion, set: PolicySet, index: MemoryIndex): string | null {
  const checker = relationChecker(set.compiled.relations, index);
  const opts = a.context ? { context: a.context as Record<string, unknown> } : {};
  if (a.kind === 'check') {
    const r = checker.check(a.object, a.relation, a.subject, opts);
    const got = 'error' in r ? 'error' : String(r.allowed);
    return got === a.expect ? null : `${describe(a)}: expected ${a.expect}, got ${gotOf(r)}`;
  }
  const r = a.kind === 'list_objects' ? checker.listObjects(a.subject, a.relation, a.type, opts) : checker.listSubjects(a.object, a.relation, a.subjectType, opts);
  const expected = a.expect === 'error' ? 'error' : JSON.stringify(a.expect);
  if (r.error) return a.expect === 'error' ? null : `${describe(a)}: expected ${expected}, got ${gotOf(r)}`;
  if (a.expect === 'error') return `${describe(a)}: expected error, got ${gotOf(r)}`;
  const got = 'objects' in r ? r.objects : (r as { subjects: string[] }).subjects;
  return sameSet(got, a.expect) ? null : `${describe(a)}: expected ${expected}, got ${gotOf(r)}`;
}

/** `files`: the parsed files the tests come from, for their `relationships { }` fixtures. */
export function runTests(tests: TestNode[], set: PolicySet, files: PolicyFileNode[] = set.compiled.files): TestResult[] {
  const fixtures = fixturesOf(files);
  return tests.map((t) => {
    const own = (t.relationships ?? []).map(fixtureRelationship).filter((r): r is Relationship => typeof r !== 'string');
    const index = indexOf([...(fixtures.get(t.loc?.file ?? '') ?? []), ...own]);
    const failures: string[] = [];
    let decision: Decision | undefined;
    let expected = '';
    if (t.expect) {
      const req = testRequest(t);
      req.relationships = index;
      decision = decide(req, set);
      const exp = t.expect;
      expected = exp.reason !== undefined ? `${exp.decision} "${exp.reason}"` : exp.decision;
      const ok = decision.decision === exp.decision && (exp.reason === undefined || decision.reason === exp.reason);
      if (!ok) failures.push(`expected ${expected}, got ${decision.decision} "${decision.reason}"`);
    }
    for (const a of t.assertions ?? []) {
      const f = runAssertion(a, set, index);
      if (f) failures.push(f);
    }
    if (!t.expect) expected = `${t.assertions?.length ?? 0} relationship assertion${t.assertions?.length === 1 ? '' : 's'}`;
    const result: TestResult = { name: t.name, source: t.loc ? `${t.loc.file}:${t.loc.line}` : t.name, passed: failures.length === 0, expected, failures };
    if (decision) result.decision = decision;
    return result;
  });
}
