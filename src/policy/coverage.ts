// Coverage of a policy set by its tests: which rules and limits the tests' decisions evaluated,
// and for each comparison of a rule's condition whether some test saw it true and some test saw
// it false. Measured from outside the evaluator, so it costs the server nothing: each test's
// decision is made by decide() as the server makes it; its trace names every rule whose condition
// decide() evaluated (and every limit it checked); each such condition is walked once more
// against the same request, comparison by comparison, in the order and with the stop the compiled
// condition has (an `and`/`or` stops at a comparison that cannot be evaluated), each comparison
// compiled by the same compiler.
//
// percent = covered / coverable, over: each rule (exercised), each limit (held once, violated
// once), each comparison (true once, false once).

import type { Expr, PolicyFileNode, TestNode } from './ast.js';
import { atomsOf, combine, isGuard, relQuestionsOf, type Atom, type RelQuestion } from './ast.js';
import type { CompiledRule, Cond, PolicySet, Tri } from './compile.js';
import { compileCondition } from './compile.js';
import type { DecisionRequest, TraceStep } from './types.js';
import { decide } from './decide.js';
import { fmtExpr } from './format.js';
import { MemoryIndex } from './relations/index.js';
import { fixtureRelationship } from './relations/validate.js';
import type { Relationship } from './relations/tuple.js';
import { fixturesOf, testRequest } from './test-runner.js';
import { envOf, type Env } from './values.js';

export interface ConditionCoverage { line: number; column: number; text: string; true: boolean; false: boolean }
export interface RuleCoverage { file: string; line: number; name: string; exercised: boolean; conditions: ConditionCoverage[] }
/** A limit: `conditions` holds one entry, the limit itself: true when a test's request kept to it, false when one broke it. */
export interface LimitCoverage { file: string; line: number; name: string; exercised: boolean; conditions: ConditionCoverage[] }
export interface Coverage { percent: number; rules: RuleCoverage[]; limits: LimitCoverage[] }

function splitSource(source: string): { file: string; line: number } | null {
  const i = source.lastIndexOf(':');
  const line = Number(source.slice(i + 1));
  if (i <= 0 || !Number.isInteger(line) || source.startsWith('api:')) return null;
  return { file: source.slice(0, i), line };
}

interface RuleTally { rule: CompiledRule; cov: RuleCoverage; atoms: Map<Atom | RelQuestion, { cond: Cond; cov: ConditionCoverage }> }

/** Walks a condition as the compiled one evaluates it, noting each comparison's value; returns the condition's. */
function walk(e: Expr, env: Env, atoms: RuleTally['atoms']): Tri {
  switch (e.type) {
    case 'and': case 'or': {
      if (e.items.some(isGuard)) return combine(e.type === 'and', e.items, e.items.map((item) => walk(item, env, atoms)));
      const isAnd = e.type === 'and';
      let r: Tri = isAnd ? 1 : 0;
      for (const item of e.items) {
        const x = walk(item, env, atoms);
        if (x === 2) return 2;
        if (isAnd ? x === 0 : x === 1) r = x;
      }
      return r;
    }
    case 'not': {
      const x = walk(e.expr, env, atoms);
      return x === 2 ? 2 : ((1 - x) as Tri);
    }
    default: {
      const a = atoms.get(e)!;
      const x = a.cond(env);
      if (x === 1) a.cov.true = true;
      else if (x === 0) a.cov.false = true;
      return x;
    }
  }
}

/** The request each decision-making test makes, with its relationships, as runTests makes it. */
function testRequests(tests: TestNode[], files: PolicyFileNode[]): DecisionRequest[] {
  const fixtures = fixturesOf(files);
  const out: DecisionRequest[] = [];
  for (const t of tests) {
    if (!t.expect) continue;
    const own = (t.relationships ?? []).map(fixtureRelationship).filter((r): r is Relationship => typeof r !== 'string');
    const index = new MemoryIndex();
    for (const r of [...(fixtures.get(t.loc?.file ?? '') ?? []), ...own]) index.add(r);
    const req = testRequest(t);
    req.relationships = index;
    out.push(req);
  }
  return out;
}

/** The coverage of `set`'s file rules and limits by the decisions of `tests`. */
export function measureCoverage(set: PolicySet, tests: TestNode[], files: PolicyFileNode[] = set.compiled.files): Coverage {
  const rules = new Map<string, RuleTally>(); // by source and name
  for (const rule of set.compiled.rules) {
    const at = splitSource(rule.source);
    if (!at) continue;
    const atoms: RuleTally['atoms'] = new Map();
    // Each comparison, and each relationship question, is a condition that can be seen true and false.
    for (const atom of rule.ast.when ? [...atomsOf(rule.ast.when), ...relQuestionsOf(rule.ast.when)] : []) {
      atoms.set(atom, {
        cond: compileCondition(atom, rule.zone, rule.declared),
        cov: { line: atom.loc?.line ?? at.line, column: atom.loc?.col ?? 1, text: fmtExpr(atom), true: false, false: false },
      });
    }
    rules.set(`${rule.source}\0${rule.name}`, { rule, atoms, cov: { file: at.file, line: at.line, name: rule.name, exercised: false, conditions: [...atoms.values()].map((a) => a.cov).sort((x, y) => x.line - y.line || x.column - y.column) } });
  }
  const limits = new Map<string, LimitCoverage>(); // by source and check
  for (const blocks of set.compiled.limits.values()) for (const b of blocks) {
    for (const c of b.fields) {
      const at = splitSource(c.source);
      if (!at) continue;
      const field = b.ast.fields.find((f) => f.loc?.line === at.line);
      limits.set(`${c.source}\0${c.check}`, {
        file: at.file, line: at.line, name: `${b.capability} for ${b.forAgent}: ${c.check}`, exercised: false,
        conditions: [{ line: at.line, column: field?.loc?.col ?? 1, text: c.check, true: false, false: false }],
      });
    }
  }
  // Limits over time trace their own text; they are counted by source when their step names one.
  const usageBySource = new Map<string, LimitCoverage>();
  for (const blocks of set.compiled.limits.values()) for (const b of blocks) for (const u of b.usage ?? []) {
    const at = splitSource(u.source);
    if (!at || usageBySource.has(u.source)) continue;
    const node = b.ast.usage?.find((n) => n.loc?.line === at.line);
    const text = `${u.field === null ? 'count' : `${u.field} sum`} max ${u.max} per ${u.per}${u.scope === 'resource' ? ' per resource' : ''}`;
    const cov: LimitCoverage = { file: at.file, line: at.line, name: `${b.capability} for ${b.forAgent}: ${text}`, exercised: false, conditions: [{ line: at.line, column: node?.loc?.col ?? 1, text, true: false, false: false }] };
    usageBySource.set(u.source, cov);
  }

  for (const req of testRequests(tests, files)) {
    const d = decide(req, set);
    const env = envOf(req);
    for (const step of d.trace) {
      if (!step.source) continue;
      if (step.rule !== undefined) { noteRule(rules.get(`${step.source}\0${step.rule}`), step, env); continue; }
      if (step.step !== 'limits' || step.outcome === 'skip') continue;
      const lim = limits.get(`${step.source}\0${step.check}`) ?? usageBySource.get(step.source);
      if (!lim) continue;
      lim.exercised = true;
      if (step.outcome === 'pass') lim.conditions[0]!.true = true;
      else lim.conditions[0]!.false = true;
    }
  }

  return combineCoverage([{ percent: 0, rules: [...rules.values()].map((t) => t.cov), limits: [...limits.values(), ...usageBySource.values()] }]);
}

/** Several sets' coverage (the directories `policy test` ran) as one, the percent over all. */
export function combineCoverage(parts: Coverage[]): Coverage {
  const ruleList = parts.flatMap((p) => p.rules).sort(byPlace);
  const limitList = parts.flatMap((p) => p.limits).sort(byPlace);
  let covered = 0;
  let coverable = 0;
  for (const r of ruleList) {
    coverable += 1 + 2 * r.conditions.length;
    covered += (r.exercised ? 1 : 0) + r.conditions.reduce((n, c) => n + (c.true ? 1 : 0) + (c.false ? 1 : 0), 0);
  }
  for (const l of limitList) {
    coverable += 2;
    covered += (l.conditions[0]!.true ? 1 : 0) + (l.conditions[0]!.false ? 1 : 0);
  }
  const percent = coverable === 0 ? 100 : Math.floor((covered / coverable) * 1000) / 10;
  return { percent, rules: ruleList, limits: limitList };
}

function noteRule(t: RuleTally | undefined, step: TraceStep, env: Env): void {
  // A rule traced as skipped was not evaluated (its subjects did not match, or the step was not reached).
  if (!t || (step.outcome === 'skip' && step.why === 'subjects do not match')) return;
  t.cov.exercised = true;
  if (t.rule.ast.when) walk(t.rule.ast.when, env, t.atoms);
}

function byPlace(a: { file: string; line: number }, b: { file: string; line: number }): number {
  return a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line;
}

/** Coverage for people: a summary, then each rule and limit with what was not exercised. */
export function coverageText(c: Coverage): string {
  const out: string[] = [`coverage: ${c.percent}%`];
  const mark = (x: ConditionCoverage) => `${x.true ? 'true' : '    '} ${x.false ? 'false' : '     '}`;
  for (const r of c.rules) {
    out.push(`${r.exercised ? '  ok  ' : '  --  '}rule "${r.name}"  ${r.file}:${r.line}${r.exercised ? '' : '  (never evaluated)'}`);
    for (const x of r.conditions) {
      const missing = [x.true ? '' : 'never true', x.false ? '' : 'never false'].filter(Boolean).join(', ');
      out.push(`        ${mark(x)}  ${x.text}  ${r.file}:${x.line}:${x.column}${missing ? `  (${missing})` : ''}`);
    }
  }
  for (const l of c.limits) {
    const x = l.conditions[0]!;
    const missing = [x.true ? '' : 'never kept', x.false ? '' : 'never broken'].filter(Boolean).join(', ');
    out.push(`${l.exercised ? '  ok  ' : '  --  '}limit ${l.name}  ${l.file}:${l.line}${missing ? `  (${missing})` : ''}`);
  }
  return out.join('\n') + '\n';
}

/**
 * Coverage as LCOV for CI tools: per file, a DA line per rule and limit (hit when exercised), a
 * BRDA pair per comparison (true, false) and per limit (kept, broken), with the totals.
 */
export function coverageLcov(c: Coverage): string {
  const files = [...new Set([...c.rules, ...c.limits].map((x) => x.file))].sort();
  const out: string[] = [];
  for (const file of files) {
    out.push('TN:', `SF:${file}`);
    const rules = c.rules.filter((r) => r.file === file);
    const limits = c.limits.filter((l) => l.file === file);
    for (const r of rules) out.push(`FN:${r.line},${r.name}`);
    for (const r of rules) out.push(`FNDA:${r.exercised ? 1 : 0},${r.name}`);
    out.push(`FNF:${rules.length}`, `FNH:${rules.filter((r) => r.exercised).length}`);
    let brf = 0;
    let brh = 0;
    const branches = (block: number, x: ConditionCoverage, exercised: boolean) => {
      for (const [i, hit] of [x.true, x.false].entries()) {
        brf++;
        if (hit) brh++;
        out.push(`BRDA:${x.line},${block},${i},${exercised ? (hit ? 1 : 0) : '-'}`);
      }
    };
    let block = 0;
    for (const r of rules) for (const x of r.conditions) branches(block++, x, r.exercised);
    for (const l of limits) branches(block++, l.conditions[0]!, l.exercised);
    out.push(`BRF:${brf}`, `BRH:${brh}`);
    const lines = new Map<number, number>();
    for (const x of [...rules, ...limits]) lines.set(x.line, Math.max(lines.get(x.line) ?? 0, x.exercised ? 1 : 0));
    for (const [line, hit] of [...lines].sort((a, b) => a[0] - b[0])) out.push(`DA:${line},${hit}`);
    out.push(`LF:${lines.size}`, `LH:${[...lines.values()].filter((h) => h > 0).length}`, 'end_of_record');
  }
  return out.join('\n') + '\n';
}
