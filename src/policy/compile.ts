// Validated AST → compiled evaluator. Conditions become closures over the
// request; rules are indexed by relation and object kind so that a decision
// looks only at the rules that can apply to its action and resource.
//
// A condition evaluates to one of three answers: false, true, or "cannot be
// evaluated" (a value it reads is missing or of the wrong type, anywhere in the
// condition). Deny and approval rules apply on the third answer (fail closed);
// a permit rule grants nothing on it.

import type { PersonFacts, PolicySetSource, SubjectFacts, ValueRead } from './types.js';
import type { Atom, Expr, LimitField, LimitsNode, Operand, PathNode, PolicyFileNode, RelQuestion, RuleNode, Scalar } from './ast.js';
import { atomsOf, isGuard, pathKey, pathText, relQuestionPaths, relQuestionsOf } from './ast.js';
import { compileObject, compileQuestion, type QuestionAnswer } from './relations/questions.js';
import { fmtExpr, fmtLimitField } from './format.js';
import { compileAgentMatcher, compileTypedMatcher, permissionCovers, splitFirstColon } from './patterns.js';
import { compileReader, MISSING, scalarTypeOf, type Env, type Read } from './values.js';
import { usageLimitOf, type UsageLimit } from './usage.js';
import { buildModel, type RelationModel } from './relations/model.js';
import { actionGroupsOf, ruleRelations, type ActionGroups } from './action-groups.js';
import { declaredTypesOf, fitsType, memberItemType, MISTYPED, NO_DECLARED_TYPES, schemaTypeOf, type DeclaredTypes, type ScalarType } from './declared.js';

export type Ctx = Record<string, unknown>;

/** 0 false, 1 true, 2 cannot be evaluated (a value is missing or mistyped). */
export type Tri = 0 | 1 | 2;
export type Cond = (env: Env) => Tri;

type Person = PersonFacts | SubjectFacts;

export interface CompiledRule {
  name: string;
  effect: 'deny' | 'require_approval' | 'permit';
  /** file:line or api:rule/<id> */
  source: string;
  apiId?: string;
  /** Global order: the first matching rule (in file order, then API order) is the one reported. */
  index: number;
  /** The time zone of `time.*` in this rule (its file's `timezone`, else UTC). */
  zone: string;
  /** The types the set's schema declares, which fix the item type of a membership test (see declared.ts). */
  declared: DeclaredTypes;
  /** Deny and approval rules: does a subject pattern match the acting subject or its person? */
  matchesAny: (env: Env) => boolean;
  /** Permit rules: does a subject pattern match this agent as the one granted? */
  matchesAgent: (s: SubjectFacts) => boolean;
  /** Permit rules: does a subject pattern match this person (or user subject) as the one granted? */
  matchesPerson: (p: Person) => boolean;
  /** Permit rules: does a subject pattern match this entity subject (neither agent nor person) by its roles or groups? */
  matchesEntity: (s: SubjectFacts) => boolean;
  object: (resource: string) => boolean;
  /** The relations the rule covers, action groups expanded (one for a management API rule). */
  relations: string[];
  cond: Cond | null;
  /** The paths the condition reads, each once, in order, and as written. */
  paths: PathNode[];
  pathTexts: string[];
  readers: ((env: Env) => Read)[];
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

export interface Bucket {
  deny: CompiledRule[];
  approval: CompiledRule[];
  permit: CompiledRule[];
  /** Could a permission `<action>` cover objects of this kind at all (the kind is the singular of the action's kinds)? */
  coherent: boolean;
}

export interface CompiledPolicy {
  files: PolicyFileNode[];
  apiRules: RuleNode[];
  rules: CompiledRule[];
  /** relation pattern → object kind pattern → rules */
  index: Map<string, Map<string, CompiledRule[]>>;
  limits: Map<string, CompiledLimitBlock[]>;
  singulars: Record<string, string>;
  /** action → kind → candidate rules, filled lazily. */
  cache: Map<string, Map<string, Bucket>>;
  /** The types, relations and conditions of the files (empty when they declare none). */
  relations: RelationModel;
  /** Paths the schema declares as references (`resource.customer: entity customer`): full path → entity type. */
  referenceTypes: ReadonlyMap<string, string>;
}

export interface PolicySet {
  version: string;
  sources: PolicySetSource[];
  readonly compiled: CompiledPolicy;
}

const hasOwn = Object.hasOwn;
const isArray = Array.isArray;

// ---- conditions ------------------------------------------------------------------------

/** A reader of one side of a comparison: a value its declared type rules out reads as MISTYPED. */
function operand(o: Operand, zone: string, declared: DeclaredTypes): (env: Env) => Read {
  if (o.type === 'path') {
    const read = compileReader(o, zone);
    const t = schemaTypeOf(o, declared);
    if (t === null) return read;
    return (env) => { const v = read(env); return v === MISSING || fitsType(v, t) ? v : MISTYPED; };
  }
  const v = o.value;
  return () => v;
}

/** `*` matches any text (also none); everything else is literal and case-sensitive. */
export function likeMatcher(pattern: string): (s: string) => boolean {
  if (!pattern.includes('*')) return (s) => s === pattern;
  const parts = pattern.split('*');
  const head = parts[0]!, tail = parts[parts.length - 1]!, mid = parts.slice(1, -1).filter((p) => p !== '');
  const min = head.length + tail.length;
  return (s) => {
    if (s.length < min || !s.startsWith(head) || !s.endsWith(tail)) return false;
    let at = head.length;
    const end = s.length - tail.length;
    for (const m of mid) {
      const i = s.indexOf(m, at);
      if (i < 0 || i + m.length > end) return false;
      at = i + m.length;
    }
    return true;
  };
}

/** A list whose items all have scalar type t (any list when t is null and it is empty). */
function listOfType(v: unknown, t: string): boolean {
  if (!isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (scalarTypeOf(v[i]) !== t) return false;
  return true;
}

/** The one scalar type of the items of two lists together, '' when both are empty, null when they disagree. */
function itemsType(a: unknown[], b: unknown[]): string | null {
  let t: string | null = '';
  for (const list of [a, b]) for (let i = 0; i < list.length; i++) {
    const it = scalarTypeOf(list[i]);
    if (it === null || (t !== '' && it !== t)) return null;
    t = it;
  }
  return t;
}

function compileAtom(a: Atom, zone: string, declared: DeclaredTypes): Cond {
  return compileAtomWith(a, operand(a.left, zone, declared), operand(a.right, zone, declared), memberItemType(a, declared));
}

/**
 * An atom over given readers of its two sides (diff evaluates atoms on values of its own).
 * `item`: the declared item type of a membership test (memberItemType); a value or item of
 * another type cannot be evaluated, also against an empty list.
 */
export function compileAtomWith(a: Atom, L: (env: Env) => Read, R: (env: Env) => Read, item: ScalarType | null = null): Cond {
  switch (a.type) {
    case 'cmp': {
      const op = a.op;
      if (op === 'eq' || op === 'ne') {
        const want: Tri = op === 'eq' ? 1 : 0, other: Tri = op === 'eq' ? 0 : 1;
        if (a.right.type === 'lit' && a.left.type === 'path') {
          const v = a.right.value as Scalar;
          const t = typeof v;
          return (env) => {
            const x = L(env);
            if (typeof x !== t || (t === 'number' && !Number.isFinite(x))) return 2;
            return x === v ? want : other;
          };
        }
        return (env) => {
          const x = L(env), y = R(env);
          const tx = scalarTypeOf(x);
          if (tx === null || tx !== scalarTypeOf(y)) return 2;
          return x === y ? want : other;
        };
      }
      const test = op === 'gt' ? (x: number, y: number) => x > y
        : op === 'gte' ? (x: number, y: number) => x >= y
          : op === 'lt' ? (x: number, y: number) => x < y
            : (x: number, y: number) => x <= y;
      if (a.right.type === 'lit' && a.left.type === 'path') {
        const v = a.right.value as number;
        switch (op) {
          case 'gt': return (env) => { const x = L(env); return typeof x !== 'number' || !Number.isFinite(x) ? 2 : x > v ? 1 : 0; };
          case 'gte': return (env) => { const x = L(env); return typeof x !== 'number' || !Number.isFinite(x) ? 2 : x >= v ? 1 : 0; };
          case 'lt': return (env) => { const x = L(env); return typeof x !== 'number' || !Number.isFinite(x) ? 2 : x < v ? 1 : 0; };
          case 'lte': return (env) => { const x = L(env); return typeof x !== 'number' || !Number.isFinite(x) ? 2 : x <= v ? 1 : 0; };
        }
      }
      return (env) => {
        const x = L(env), y = R(env);
        if (typeof x !== 'number' || typeof y !== 'number' || !Number.isFinite(x) || !Number.isFinite(y)) return 2;
        return test(x, y) ? 1 : 0;
      };
    }
    case 'in': {
      const neg = a.negated;
      if (a.right.type === 'lit') {
        const values = a.right.value as Scalar[];
        const set = new Set<unknown>(values);
        const t = typeof values[0];
        return (env) => {
          const x = L(env);
          if (typeof x !== t || (t === 'number' && !Number.isFinite(x))) return 2;
          return set.has(x) !== neg ? 1 : 0;
        };
      }
      return (env) => {
        const x = L(env), list = R(env);
        const t = scalarTypeOf(x);
        if (t === null || (item !== null && t !== item) || !listOfType(list, t)) return 2;
        return (list as unknown[]).includes(x) !== neg ? 1 : 0;
      };
    }
    case 'contains': {
      if (a.mode === 'one') {
        return (env) => {
          const list = L(env), x = R(env);
          const t = scalarTypeOf(x);
          if (t === null || (item !== null && t !== item) || !listOfType(list, t)) return 2;
          return (list as unknown[]).includes(x) ? 1 : 0;
        };
      }
      const all = a.mode === 'all';
      if (a.right.type === 'lit') {
        const values = a.right.value as Scalar[];
        const t = typeof values[0];
        return (env) => {
          const list = L(env);
          if (!listOfType(list, t)) return 2;
          const l = list as unknown[];
          if (all) { for (const v of values) if (!l.includes(v)) return 0; return 1; }
          for (const v of values) if (l.includes(v)) return 1;
          return 0;
        };
      }
      return (env) => {
        const l = L(env), r = R(env);
        if (!isArray(l) || !isArray(r)) return 2;
        const t = itemsType(l, r);
        if (t === null || (item !== null && t !== '' && t !== item)) return 2;
        if (all) { for (const v of r) if (!l.includes(v)) return 0; return 1; }
        for (const v of r) if (l.includes(v)) return 1;
        return 0;
      };
    }
    case 'present': return (env) => (L(env) === MISSING ? 0 : 1);
    case 'like': {
      const m = likeMatcher(a.right.type === 'lit' ? String(a.right.value) : '');
      const neg = a.negated;
      return (env) => {
        const x = L(env);
        if (typeof x !== 'string') return 2;
        return m(x) !== neg ? 1 : 0;
      };
    }
  }
}

/** A condition compiled to its three-valued answer; every part is evaluated (a problem anywhere is a problem). */
export function compileCondition(e: Expr, zone = 'UTC', declared: DeclaredTypes = NO_DECLARED_TYPES): Cond {
  switch (e.type) {
    case 'and': case 'or': {
      const fs = e.items.map((i) => compileCondition(i, zone, declared));
      const isAnd = e.type === 'and';
      if (e.items.some(isGuard)) {
        // Guards first: a false one decides an `and` (a true one an `or`) before the rest can fail.
        const decisive: Tri = isAnd ? 0 : 1;
        const guards = fs.filter((_, i) => isGuard(e.items[i]!)), rest = fs.filter((_, i) => !isGuard(e.items[i]!));
        return (env) => {
          for (const g of guards) if (g(env) === decisive) return decisive;
          let r: Tri = (1 - decisive) as Tri;
          for (const f of rest) {
            const x = f(env);
            if (x === 2) return 2;
            if (x === decisive) r = decisive;
          }
          return r;
        };
      }
      if (fs.length === 2) {
        const [f, g] = fs as [Cond, Cond];
        return isAnd
          ? (env) => { const x = f(env); if (x === 2) return 2; const y = g(env); return y === 2 ? 2 : ((x & y) as Tri); }
          : (env) => { const x = f(env); if (x === 2) return 2; const y = g(env); return y === 2 ? 2 : ((x | y) as Tri); };
      }
      return (env) => {
        let r: Tri = isAnd ? 1 : 0;
        for (const f of fs) {
          const x = f(env);
          if (x === 2) return 2;
          if (isAnd ? x === 0 : x === 1) r = x;
        }
        return r;
      };
    }
    case 'not': {
      const f = compileCondition(e.expr, zone, declared);
      return (env) => { const x = f(env); return x === 2 ? 2 : ((1 - x) as Tri); };
    }
    case 'has': case 'within': {
      const f = compileRelQuestion(e, zone);
      return (env) => f(env).value;
    }
    default: return compileAtom(e, zone, declared);
  }
}

/** A relationship question compiled to its answer (with the path that granted it, or the error). */
export function compileRelQuestion(q: RelQuestion, zone = 'UTC'): (env: Env) => QuestionAnswer {
  return compileQuestion(q, (o) => compileObject(o, (p) => compileReader(p, zone), MISSING, pathText));
}

/** The paths of a condition, each once (by its written text), in order. */
export function distinctPaths(e: Expr): PathNode[] {
  const seen = new Set<string>();
  const out: PathNode[] = [];
  const add = (o: Operand | PathNode) => {
    if (o.type !== 'path') return;
    const k = pathText(o);
    if (!seen.has(k)) { seen.add(k); out.push(o); }
  };
  for (const a of atomsOf(e)) { add(a.left); add(a.right); }
  for (const q of relQuestionsOf(e)) for (const p of relQuestionPaths(q)) add(p);
  return out;
}

/** What a rule's condition read from a request. */
export function readsOf(rule: CompiledRule, env: Env): ValueRead[] {
  const out: ValueRead[] = new Array(rule.readers.length);
  for (let i = 0; i < out.length; i++) {
    const v = rule.readers[i]!(env);
    out[i] = v === MISSING ? { path: rule.pathTexts[i]!, value: undefined, present: false } : { path: rule.pathTexts[i]!, value: v, present: true };
  }
  return out;
}

// ---- subjects ------------------------------------------------------------------------------

function holds(list: unknown, name: string): boolean {
  return isArray(list) && list.includes(name);
}

function compileSubjects(patterns: string[]): Pick<CompiledRule, 'matchesAny' | 'matchesAgent' | 'matchesPerson' | 'matchesEntity'> {
  const agentAll = patterns.includes('agent:*');
  // Matchers of the id alone (`agent:<p>` matches an agent whose id matches <p>).
  const agent = patterns.filter((p) => p.startsWith('agent:') && p !== 'agent:*').map((p) => compileAgentMatcher(p.slice(6)));
  const user = patterns.filter((p) => p.startsWith('user:')).map((p) => compileAgentMatcher(p.slice(5)));
  const roles = patterns.filter((p) => p.startsWith('role:')).map((p) => p.slice(5));
  const groups = patterns.filter((p) => p.startsWith('group:')).map((p) => p.slice(6));
  const matchesAgent = (s: SubjectFacts): boolean => {
    if (s.type !== 'agent') return false;
    if (agentAll) return true;
    for (const m of agent) if (m(s.id)) return true;
    for (const r of roles) if (holds(s.roles, r)) return true;
    for (const g of groups) if (holds(s.groups, g)) return true;
    return false;
  };
  const matchesPerson = (p: Person): boolean => {
    for (const m of user) if (m(p.id)) return true;
    for (const r of roles) if (holds(p.roles, r)) return true;
    for (const g of groups) if (holds(p.groups, g)) return true;
    return false;
  };
  // An entity is named by neither `agent:` nor `user:` patterns: only its roles and groups match.
  const matchesEntity = (s: SubjectFacts): boolean => {
    if (s.type === 'agent' || s.type === 'user') return false;
    for (const r of roles) if (holds(s.roles, r)) return true;
    for (const g of groups) if (holds(s.groups, g)) return true;
    return false;
  };
  const matchesAny = (env: Env): boolean => {
    const s = env.subject;
    if (s.type === 'agent' && matchesAgent(s)) return true;
    if (s.type !== 'agent' && s.type !== 'user') return matchesEntity(s);
    return env.person !== null && matchesPerson(env.person);
  };
  return { matchesAny, matchesAgent, matchesPerson, matchesEntity };
}

// ---- limits --------------------------------------------------------------------------------

/** A limit field compiled to a check returning the first violated operator. */
export function compileLimitField(f: LimitField, source: string): CompiledLimitField {
  const k = f.field;
  const { max, min } = f;
  const inSet = f.in !== undefined ? new Set(f.in as Scalar[]) : undefined;
  const notIn = f.not_in !== undefined ? new Set(f.not_in as Scalar[]) : undefined;
  const eq = f.eq as Scalar | undefined;
  const required = max !== undefined || min !== undefined || inSet !== undefined || eq !== undefined;
  const test = (c: Ctx): LimitOp | null => {
    if (!hasOwn(c, k) || c[k] === undefined) return required ? 'required' : null;
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

// ---- rules and the index -------------------------------------------------------------------

function ruleSourceOf(r: RuleNode): string {
  if (r.apiId !== undefined || (r.loc && r.loc.file.startsWith('api:'))) return r.loc?.file ?? `api:rule/${r.apiId ?? r.name}`;
  return r.loc ? `${r.loc.file}:${r.loc.line}` : `rule ${r.name}`;
}

const EFFECT_WORD = { deny: 'deny', require_approval: 'approval', permit: 'permit' } as const;

export function compileRule(r: RuleNode, index: number, zone = 'UTC', groups: ActionGroups = new Map(), declared: DeclaredTypes = NO_DECLARED_TYPES): CompiledRule {
  const effect = r.effect as CompiledRule['effect'];
  const paths = r.when ? distinctPaths(r.when) : [];
  const c: CompiledRule = {
    name: r.name,
    effect,
    source: ruleSourceOf(r),
    index,
    zone,
    declared,
    ...compileSubjects(r.subjects),
    object: compileTypedMatcher(r.object),
    relations: ruleRelations(r, groups),
    cond: r.when ? compileCondition(r.when, zone, declared) : null,
    paths,
    pathTexts: paths.map(pathText),
    readers: paths.map((p) => compileReader(p, zone)),
    check: `${EFFECT_WORD[effect] ?? effect} rule "${r.name}"${r.when ? ` when ${fmtExpr(r.when)}` : ''}`,
    ast: r,
  };
  if (r.apiId !== undefined) c.apiId = r.apiId;
  return c;
}

/** The time zone a file's rules read `time.*` in. */
export function zoneOf(file: PolicyFileNode): string {
  for (const item of file.items) if (item.kind === 'timezone') return item.name;
  return 'UTC';
}

export function compilePolicy(files: PolicyFileNode[], apiRules: RuleNode[]): CompiledPolicy {
  const rules: CompiledRule[] = [];
  const limits = new Map<string, CompiledLimitBlock[]>();
  const singulars: Record<string, string> = Object.create(null);
  const groups = actionGroupsOf(files);
  const declared = declaredTypesOf(files);
  for (const f of files) {
    const zone = zoneOf(f);
    for (const item of f.items) {
      if (item.kind === 'rule') rules.push(compileRule(item, rules.length, zone, groups, declared));
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
        if (item.usage?.length) block.usage = item.usage.map((n) => usageLimitOf(n, n.loc ? `${n.loc.file}:${n.loc.line}` : f.path));
        const list = limits.get(item.capability);
        if (list) list.push(block); else limits.set(item.capability, [block]);
      }
    }
  }
  for (const r of apiRules) rules.push(compileRule(r, rules.length, 'UTC', new Map(), declared));
  const index = new Map<string, Map<string, CompiledRule[]>>();
  for (const r of rules) {
    const kind = splitFirstColon(r.ast.object)?.[0] ?? '*';
    for (const relation of r.relations) {
      let byKind = index.get(relation);
      if (!byKind) index.set(relation, (byKind = new Map()));
      const list = byKind.get(kind);
      if (list) list.push(r); else byKind.set(kind, [r]);
    }
  }
  const referenceTypes = new Map<string, string>();
  for (const f of files) for (const item of f.items) {
    if (item.kind === 'schema') for (const e of item.entries) if (e.type.entity !== undefined) referenceTypes.set(pathKey(e.path), e.type.entity);
  }
  return { files, apiRules, rules, index, limits, singulars, cache: new Map(), relations: buildModel(files), referenceTypes };
}

const CACHE_MAX = 4096;

/** The rules whose relation and object kind can match (action, resource kind), in rule order. */
export function candidates(p: CompiledPolicy, action: string, kind: string): Bucket {
  let byKind = p.cache.get(action);
  const hit = byKind?.get(kind);
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
  // A rule with several relations can be found under more than one of them (`push:*` and `*:repos`).
  for (let i = found.length - 1; i > 0; i--) if (found[i] === found[i - 1]) found.splice(i, 1);
  const bucket: Bucket = {
    deny: found.filter((r) => r.effect === 'deny'),
    approval: found.filter((r) => r.effect === 'require_approval'),
    permit: found.filter((r) => r.effect === 'permit'),
    coherent: permissionCovers('*:*', action, kind + ':x', p.singulars),
  };
  if (!byKind) {
    if (p.cache.size >= CACHE_MAX) p.cache.clear();
    p.cache.set(action, (byKind = new Map()));
  }
  if (byKind.size >= CACHE_MAX) byKind.clear();
  byKind.set(kind, bucket);
  return bucket;
}
