// Shared helpers of the policy tests: arbitraries and a reference interpreter.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';
import fc from 'fast-check';
import type { Expr, Item, LimitField, LimitsNode, PolicyFileNode, RuleNode, Scalar } from '../../src/policy/ast.js';
import type { Decision, DecisionRequest, JsonLimits } from '../../src/policy/types.js';
import { formatFile } from '../../src/policy/format.js';
import { loadPolicySet } from '../../src/policy/load.js';
import type { PolicySet } from '../../src/policy/compile.js';

/** Remove what the parser adds (locations, comments) so ASTs compare by meaning. */
export function strip<T>(x: T): T {
  return JSON.parse(JSON.stringify(x, (k, v) => (['loc', 'fieldLocs', 'comments', 'lineLocs', 'duplicateFields'].includes(k) ? undefined : v)));
}

export function setOf(text: string, path = 'p.policy'): PolicySet {
  const r = loadPolicySet({ files: [{ path, text }] });
  if (!r.policySet) throw new Error(r.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`).join('\n'));
  return r.policySet;
}

// ---- a small vocabulary for random policies ------------------------------------------

export const AGENTS = ['spiffe://h/agent/a', 'spiffe://h/agent/b', 'spiffe://g/agent/a', 'spiffe://h/agent/zz', 'lonely'];
export const ACTIONS = ['create:refunds', 'delete:refunds', 'create:deployments'];
export const RESOURCE_FOR: Record<string, string[]> = {
  'create:refunds': ['refund:r1', 'refund:r2'],
  'delete:refunds': ['refund:r1', 'refund:r9'],
  'create:deployments': ['deployment:d1', 'deployment:r1'],
};

const num = fc.constantFrom(0, 10, 100, 5);
const str = fc.constantFrom('USD', 'EUR');
export const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr; leaf: Expr }>((tie) => ({
  leaf: fc.oneof(
    fc.record({ type: fc.constant('cmp' as const), field: fc.constant('amount'), op: fc.constantFrom('gte', 'gt', 'lte', 'lt', 'eq', 'ne' as const), value: num }),
    fc.record({ type: fc.constant('cmp' as const), field: fc.constant('currency'), op: fc.constantFrom('eq', 'ne' as const), value: str }),
    fc.record({ type: fc.constant('cmp' as const), field: fc.constant('flag'), op: fc.constantFrom('eq', 'ne' as const), value: fc.boolean() }),
    fc.record({ type: fc.constant('in' as const), field: fc.constant('currency'), negated: fc.boolean(), values: fc.uniqueArray(str, { minLength: 1, maxLength: 2 }) }),
  ) as fc.Arbitrary<Expr>,
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tie('leaf'),
    fc.record({ type: fc.constant('not' as const), expr: tie('e') }),
    fc.record({ type: fc.constantFrom('and' as const, 'or' as const), items: fc.array(tie('e'), { minLength: 2, maxLength: 3 }) }),
  ) as fc.Arbitrary<Expr>,
})).e.map(normalize);

/** Flatten nested and/or, as the parser does. */
export function normalize(e: Expr): Expr {
  switch (e.type) {
    case 'and': case 'or': {
      const items = e.items.map(normalize).flatMap((i) => (i.type === e.type ? (i as { items: Expr[] }).items : [i]));
      return { type: e.type, items } as Expr;
    }
    case 'not': return { type: 'not', expr: normalize(e.expr) };
    default: return e;
  }
}

export const arbRule = (i: number): fc.Arbitrary<RuleNode> => fc.record({
  effect: fc.constantFrom('deny', 'require_approval'),
  subjects: fc.uniqueArray(fc.constantFrom('agent:*', 'agent:spiffe://h/agent/a', 'agent:spiffe://h/agent/*', 'agent:spiffe://*/agent/a', 'user:u1', 'user:*'), { minLength: 1, maxLength: 2 }),
  relation: fc.constantFrom('create:refunds', 'create:*', '*:refunds', 'delete:refunds', '*:*'),
  object: fc.constantFrom('refund:*', 'refund:r1', '*:*', '*:r1', 'deployment:*'),
  when: fc.option(arbExpr, { nil: undefined }),
}).map((r) => {
  const node: RuleNode = { kind: 'rule', name: `rule-${i}`, effect: r.effect, subjects: r.subjects, relation: r.relation, object: r.object };
  if (r.when) node.when = r.when;
  return node;
});

export const arbLimitField: fc.Arbitrary<LimitField> = fc.oneof(
  fc.record({ max: fc.option(fc.constantFrom(10, 100), { nil: undefined }), min: fc.option(fc.constantFrom(0, 5), { nil: undefined }) })
    .map((o) => ({ field: 'amount', ...(o.max !== undefined ? { max: o.max } : {}), ...(o.min !== undefined || o.max === undefined ? { min: o.min ?? 0 } : {}) })),
  fc.record({ op: fc.constantFrom('in' as const, 'not_in' as const), v: fc.uniqueArray(str, { minLength: 1, maxLength: 2 }) }).map((o) => ({ field: 'currency', [o.op]: o.v })),
  fc.boolean().map((b) => ({ field: 'flag', eq: b })),
);

export const arbLimits: fc.Arbitrary<LimitsNode> = fc.record({
  capability: fc.constantFrom('create:refunds', 'delete:refunds', 'create:deployments'),
  forAgent: fc.constantFrom('*', 'spiffe://h/agent/a', 'spiffe://h/agent/*'),
  fields: fc.uniqueArray(arbLimitField, { minLength: 1, maxLength: 3, selector: (f) => f.field }),
}).map((l) => ({ kind: 'limits', ...l }));

export const arbPolicyFile: fc.Arbitrary<PolicyFileNode> = fc.tuple(
  fc.integer({ min: 0, max: 4 }).chain((n) => (n === 0 ? fc.constant([] as RuleNode[]) : fc.tuple(...Array.from({ length: n }, (_, i) => arbRule(i))))),
  fc.array(arbLimits, { maxLength: 2 }),
).map(([rules, limits]) => ({ path: 'r.policy', header: { name: 'r', version: 1 }, items: [...rules, ...limits] as Item[] }));

export function setFromAst(file: PolicyFileNode): PolicySet {
  return setOf(formatFile(file), file.path);
}

export const arbContext: fc.Arbitrary<Record<string, unknown>> = fc.record({
  amount: fc.constantFrom(-5, 0, 5, 7, 10, 50, 100, 150, 'x', null, undefined),
  currency: fc.constantFrom('USD', 'EUR', 'GBP', 5, undefined),
  flag: fc.constantFrom(true, false, 'true', undefined),
}).map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)));

export const arbRequest: fc.Arbitrary<DecisionRequest> = fc.record({
  agent: fc.constantFrom(...AGENTS),
  mode: fc.constantFrom('delegated' as const, 'autonomous' as const),
  person: fc.option(fc.constantFrom('u1', 'u2'), { nil: undefined }),
  action: fc.constantFrom(...ACTIONS),
  r: fc.nat(1),
  context: arbContext,
  permissions: fc.subarray(['create:refunds', 'delete:refunds', 'create:deployments', '*:refunds', 'create:*']),
  personPermissions: fc.subarray(['create:refunds', 'delete:refunds', 'create:deployments', '*:*']),
  caps: fc.subarray(ACTIONS),
  apiLimits: fc.option(fc.constantFrom<JsonLimits>({ amount: { max: 50 } }, { currency: 'USD' }, { currency: { not_in: ['EUR'] } }, { amount: { min: 6, max: 200 } }), { nil: undefined }),
  approved: fc.boolean(),
}).map((g) => {
  const req: DecisionRequest = {
    agent: {
      id: g.agent, mode: g.mode, permissions: g.permissions,
      capabilities: g.caps.map((name) => ({ name, ...(name === g.action && g.apiLimits ? { limits: g.apiLimits } : {}) })),
    },
    action: g.action,
    resource: RESOURCE_FOR[g.action]![g.r]!,
    context: g.context,
  };
  if (g.person) req.person = { id: g.person, permissions: g.personPermissions };
  if (g.approved) req.approved = true;
  return req;
});

// ---- the reference interpreter: obviously correct, slow ------------------------------

function globMatch(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  const ps = pattern.split('/'), vs = value.split('/');
  return ps.length === vs.length && ps.every((p, i) => (p === '*' ? vs[i] !== '' : p === vs[i]));
}

function typedMatch(pattern: string, value: string): boolean {
  const pi = pattern.indexOf(':'), vi = value.indexOf(':');
  if (pi < 0 || vi < 0) return false;
  const pt = pattern.slice(0, pi), vt = value.slice(0, vi);
  return (pt === '*' || pt === vt) && globMatch(pattern.slice(pi + 1), value.slice(vi + 1));
}

function fieldsOf(e: Expr): [string, Scalar][] {
  switch (e.type) {
    case 'and': case 'or': return e.items.flatMap(fieldsOf);
    case 'not': return fieldsOf(e.expr);
    case 'cmp': return [[e.field, e.value as Scalar]];
    case 'in': return [[e.field, (e.values as Scalar[])[0]!]];
  }
}

function evalExpr(e: Expr, c: Record<string, unknown>): boolean {
  switch (e.type) {
    case 'and': return e.items.every((i) => evalExpr(i, c));
    case 'or': return e.items.some((i) => evalExpr(i, c));
    case 'not': return !evalExpr(e.expr, c);
    case 'in': return (e.values as Scalar[]).includes(c[e.field] as Scalar) !== e.negated;
    case 'cmp': {
      const a = c[e.field] as number, b = e.value as number;
      return { gte: a >= b, gt: a > b, lte: a <= b, lt: a < b, eq: a === b, ne: a !== b }[e.op];
    }
  }
}

function ruleApplies(r: RuleNode, req: DecisionRequest): boolean {
  const subjects = ['agent:' + req.agent.id, ...(req.person ? ['user:' + req.person.id] : [])];
  if (!r.subjects.some((p) => subjects.some((s) => s.startsWith(p.split(':')[0] + ':') && typedMatch(p, s)))) return false;
  if (!typedMatch(r.relation, req.action) || !typedMatch(r.object, req.resource)) return false;
  if (!r.when) return true;
  for (const [f, lit] of fieldsOf(r.when)) {
    if (!(f in req.context) || typeof req.context[f] !== typeof lit) return true;
  }
  return evalExpr(r.when, req.context);
}

function limitViolation(f: { field: string; max?: unknown; min?: unknown; in?: unknown; not_in?: unknown; eq?: unknown }, c: Record<string, unknown>): string | null {
  if (!(f.field in c)) return f.max !== undefined || f.min !== undefined || f.in !== undefined || f.eq !== undefined ? 'required' : null;
  const v = c[f.field];
  if (f.max !== undefined && (typeof v !== 'number' || v > (f.max as number))) return 'max';
  if (f.min !== undefined && (typeof v !== 'number' || v < (f.min as number))) return 'min';
  if (f.in !== undefined && !(f.in as unknown[]).includes(v)) return 'in';
  if (f.not_in !== undefined && (f.not_in as unknown[]).includes(v)) return 'not_in';
  if (f.eq !== undefined && v !== f.eq) return 'eq';
  return null;
}

function covers(p: string, action: string, resource: string): boolean {
  const [pv, pk] = p.split(':') as [string, string];
  const [av, ak] = action.split(':') as [string, string];
  const singular = ak.endsWith('s') ? ak.slice(0, -1) : ak;
  return (pv === '*' || pv === av) && (pk === '*' || pk === ak) && resource.split(':')[0] === singular;
}

export function reference(file: PolicyFileNode, req: DecisionRequest): Pick<Decision, 'decision' | 'reason'> {
  const cap = req.agent.capabilities.find((c) => c.name === req.action);
  const apiFields = Object.entries(cap?.limits ?? {}).map(([field, spec]) =>
    typeof spec === 'object' && spec !== null ? { field, ...(spec as object) } : { field, eq: spec });
  const fileFields = file.items.filter((i): i is LimitsNode => i.kind === 'limits' && i.capability === req.action && globMatch(i.forAgent, req.agent.id)).flatMap((l) => l.fields);
  for (const f of [...apiFields, ...fileFields]) {
    const v = limitViolation(f, req.context);
    if (v) return { decision: 'deny', reason: `constraint_violated: ${f.field} ${v}` };
  }
  const rules = file.items.filter((i): i is RuleNode => i.kind === 'rule');
  const d = rules.find((r) => r.effect === 'deny' && ruleApplies(r, req));
  if (d) return { decision: 'deny', reason: `rule_denied: ${d.name}` };
  if (!cap) return { decision: 'deny', reason: `not_granted: ${req.action} (capability)` };
  if (!req.agent.permissions.some((p) => covers(p, req.action, req.resource))) return { decision: 'deny', reason: `not_granted: ${req.action}` };
  if (req.agent.mode === 'delegated' && req.person && !req.person.permissions.some((p) => covers(p, req.action, req.resource))) {
    return { decision: 'deny', reason: `not_granted: ${req.action} (person)` };
  }
  const approvals = rules.filter((r) => r.effect === 'require_approval' && ruleApplies(r, req));
  if (approvals.length && !req.approved) return { decision: 'approval_required', reason: `approval_required: ${approvals[0]!.name}` };
  if (approvals.length) return { decision: 'allow', reason: `allowed: approved ${approvals[0]!.name}` };
  return { decision: 'allow', reason: 'allowed' };
}

export const RUNS = { numRuns: 200 };

/** CONTRACT.md section 5's example, verbatim (test/fixtures/contract-example.policy). */
export const CONTRACT_EXAMPLE = readFileSync(join(projectRoot, 'test', 'fixtures', 'contract-example.policy'), 'utf8');
