// Validated AST → compiled evaluator. Conditions become closures; rules are
// indexed by relation and object kind so that a decision looks only at the
// rules that can apply to its action and resource.

import type { PolicySetSource } from './types.js';
import type { Expr, LimitField, LimitsNode, Literal, PolicyFileNode, RuleNode, Scalar } from './ast.js';
import { fmtExpr, fmtLimitField } from './format.js';
import { compileAgentMatcher, compileTypedMatcher, splitFirstColon } from './patterns.js';
import type { UsageLimit } from './usage.js';

export type Ctx = Record<string, unknown>;

export interface CompiledRule {
  name: string;
  effect: 'deny' | 'require_approval';
  /** file:line or api:rule/<id> */
  source: string;
  /** Global order: the first matching rule (in file order, then API order) is the one reported. */
  index: number;
  subjects: (agentSubject: string, userSubject: string | null) => boolean;
  object: (resource: string) => boolean;
  /** True when the rule applies to the context (a missing or mistyped field makes it apply). */
  applies: ((ctx: Ctx) => boolean) | null;
  check: string;
  ast: RuleNode;
}

export type LimitOp = 'max' | 'min' | 'in' | 'not_in' | 'eq' | 'required';

export interface CompiledLimitField {
  field: string;
  /** The violated operator, or null. */
  test: (ctx: Ctx) => LimitOp | null;
  check: string;
  source: string;
}

export interface CompiledLimitBlock {
  capability: string;
  forAgent: string;
  agent: (id: string) => boolean;
  fields: CompiledLimitField[];
  /** the block's limits over time (`count max 20 per 1h`) */
  usage?: UsageLimit[];
  source: string;
  ast: LimitsNode;
}

interface Bucketed { deny: CompiledRule[]; approval: CompiledRule[] }

export interface CompiledPolicy {
  files: PolicyFileNode[];
  apiRules: RuleNode[];
  rules: CompiledRule[];
  /** relation pattern → object kind pattern → rules */
  index: Map<string, Map<string, CompiledRule[]>>;
  limits: Map<string, CompiledLimitBlock[]>;
  singulars: Record<string, string>;
  /** (action, kind) → candidate rules, filled lazily. */
  cache: Map<string, Bucketed>;
}

export interface PolicySet {
  version: string;
  sources: PolicySetSource[];
  readonly compiled: CompiledPolicy;
}

const hasOwn = Object.hasOwn;

function scalarType(v: unknown): string {
  const t = typeof v;
  return t === 'number' ? (Number.isFinite(v) ? 'number' : 'nan') : t === 'string' || t === 'boolean' ? t : 'other';
}

/** Fields and the literal type each is compared with in a condition. */
export function conditionFields(e: Expr, out = new Map<string, string>()): Map<string, string> {
  switch (e.type) {
    case 'and': case 'or': for (const i of e.items) conditionFields(i, out); break;
    case 'not': conditionFields(e.expr, out); break;
    case 'cmp': out.set(e.field, scalarType(e.value)); break;
    case 'in': out.set(e.field, scalarType((e.values as Literal[])[0])); break;
  }
  return out;
}

function compileExpr(e: Expr): (ctx: Ctx) => boolean {
  switch (e.type) {
    case 'and': {
      const fs = e.items.map(compileExpr);
      if (fs.length === 2) { const [a, b] = fs as [(c: Ctx) => boolean, (c: Ctx) => boolean]; return (c) => a(c) && b(c); }
      return (c) => { for (const f of fs) if (!f(c)) return false; return true; };
    }
    case 'or': {
      const fs = e.items.map(compileExpr);
      if (fs.length === 2) { const [a, b] = fs as [(c: Ctx) => boolean, (c: Ctx) => boolean]; return (c) => a(c) || b(c); }
      return (c) => { for (const f of fs) if (f(c)) return true; return false; };
    }
    case 'not': { const f = compileExpr(e.expr); return (c) => !f(c); }
    case 'in': {
      const set = new Set(e.values as Scalar[]);
      const k = e.field;
      return e.negated ? (c) => !set.has(c[k] as Scalar) : (c) => set.has(c[k] as Scalar);
    }
    case 'cmp': {
      const k = e.field;
      const v = e.value as Scalar;
      switch (e.op) {
        case 'gt': return (c) => (c[k] as number) > (v as number);
        case 'gte': return (c) => (c[k] as number) >= (v as number);
        case 'lt': return (c) => (c[k] as number) < (v as number);
        case 'lte': return (c) => (c[k] as number) <= (v as number);
        case 'eq': return (c) => c[k] === v;
        case 'ne': return (c) => c[k] !== v;
      }
    }
  }
}

/**
 * A condition compiles to "the rule applies": true when any field it names is
 * missing from the context or holds a value of another type than the literal
 * it is compared with (fail closed), else the value of the expression.
 */
export function compileCondition(e: Expr): (ctx: Ctx) => boolean {
  const fields = [...conditionFields(e)];
  const body = compileExpr(e);
  if (fields.length === 1) {
    const [[k, t]] = fields as [[string, string]];
    return (c) => (!hasOwn(c, k) || typeof c[k] !== t ? true : body(c));
  }
  return (c) => {
    for (const [k, t] of fields) if (!hasOwn(c, k) || typeof c[k] !== t) return true;
    return body(c);
  };
}

function compileSubjects(patterns: string[]): CompiledRule['subjects'] {
  if (patterns.includes('agent:*')) return () => true;
  const agent = patterns.filter((p) => p.startsWith('agent:')).map(compileTypedMatcher);
  const user = patterns.filter((p) => p.startsWith('user:')).map(compileTypedMatcher);
  return (a, u) => {
    for (const m of agent) if (m(a)) return true;
    if (u !== null) for (const m of user) if (m(u)) return true;
    return false;
  };
}

/** A limit field compiled to a check returning the first violated operator. */
export function compileLimitField(f: LimitField, source: string): CompiledLimitField {
  const k = f.field;
  const { max, min } = f;
  const inSet = f.in !== undefined ? new Set(f.in as Scalar[]) : undefined;
  const notIn = f.not_in !== undefined ? new Set(f.not_in as Scalar[]) : undefined;
  const eq = f.eq as Scalar | undefined;
  const required = max !== undefined || min !== undefined || inSet !== undefined || eq !== undefined;
  const test = (c: Ctx): LimitOp | null => {
    if (!hasOwn(c, k)) return required ? 'required' : null;
    const v = c[k];
    if (max !== undefined && !(typeof v === 'number' && v <= (max as number))) return 'max';
    if (min !== undefined && !(typeof v === 'number' && v >= (min as number))) return 'min';
    if (inSet !== undefined && !inSet.has(v as Scalar)) return 'in';
    if (notIn !== undefined && notIn.has(v as Scalar)) return 'not_in';
    if (eq !== undefined && v !== eq) return 'eq';
    return null;
  };
  return { field: k, test, check: fmtLimitField(f), source };
}

function ruleSourceOf(r: RuleNode): string {
  if (r.apiId !== undefined || (r.loc && r.loc.file.startsWith('api:'))) return r.loc?.file ?? `api:rule/${r.apiId ?? r.name}`;
  return r.loc ? `${r.loc.file}:${r.loc.line}` : `rule ${r.name}`;
}

export function compileRule(r: RuleNode, index: number): CompiledRule {
  return {
    name: r.name,
    effect: r.effect as CompiledRule['effect'],
    source: ruleSourceOf(r),
    index,
    subjects: compileSubjects(r.subjects),
    object: compileTypedMatcher(r.object),
    applies: r.when ? compileCondition(r.when) : null,
    check: `${r.effect === 'deny' ? 'deny' : 'approval'} rule "${r.name}"${r.when ? ` when ${fmtExpr(r.when)}` : ''}`,
    ast: r,
  };
}

export function compilePolicy(files: PolicyFileNode[], apiRules: RuleNode[]): CompiledPolicy {
  const rules: CompiledRule[] = [];
  const limits = new Map<string, CompiledLimitBlock[]>();
  const singulars: Record<string, string> = Object.create(null);
  for (const f of files) {
    for (const item of f.items) {
      if (item.kind === 'rule') rules.push(compileRule(item, rules.length));
      else if (item.kind === 'kind') singulars[item.plural] = item.singular;
      else if (item.kind === 'limits') {
        const block: CompiledLimitBlock = {
          capability: item.capability,
          forAgent: item.forAgent,
          agent: compileAgentMatcher(item.forAgent),
          fields: item.fields.map((fl) => compileLimitField(fl, fl.loc ? `${fl.loc.file}:${fl.loc.line}` : `${f.path}`)),
          source: item.loc ? `${item.loc.file}:${item.loc.line}` : f.path,
          ast: item,
        };
        const list = limits.get(item.capability);
        if (list) list.push(block); else limits.set(item.capability, [block]);
      }
    }
  }
  for (const r of apiRules) rules.push(compileRule(r, rules.length));
  const index = new Map<string, Map<string, CompiledRule[]>>();
  for (const r of rules) {
    const kind = splitFirstColon(r.ast.object)?.[0] ?? '*';
    let byKind = index.get(r.ast.relation);
    if (!byKind) index.set(r.ast.relation, (byKind = new Map()));
    const list = byKind.get(kind);
    if (list) list.push(r); else byKind.set(kind, [r]);
  }
  return { files, apiRules, rules, index, limits, singulars, cache: new Map() };
}

const CACHE_MAX = 4096;

/** The rules whose relation and object kind can match (action, resource kind), in rule order. */
export function candidates(p: CompiledPolicy, action: string, kind: string): Bucketed {
  const key = action + '\u0000' + kind;
  const hit = p.cache.get(key);
  if (hit) return hit;
  const ci = action.indexOf(':');
  const relations = ci < 0 ? [] : [action, '*:' + action.slice(ci + 1), action.slice(0, ci) + ':*', '*:*'];
  const found: CompiledRule[] = [];
  for (const rel of new Set(relations)) {
    const byKind = p.index.get(rel);
    if (!byKind) continue;
    const a = byKind.get(kind);
    if (a) found.push(...a);
    if (kind !== '*') { const b = byKind.get('*'); if (b) found.push(...b); }
  }
  found.sort((x, y) => x.index - y.index);
  const bucket: Bucketed = { deny: found.filter((r) => r.effect === 'deny'), approval: found.filter((r) => r.effect === 'require_approval') };
  if (p.cache.size >= CACHE_MAX) p.cache.clear();
  p.cache.set(key, bucket);
  return bucket;
}
