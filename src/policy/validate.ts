// Validation of the AST: everything the grammar accepts but the language does
// not mean. Every problem is collected as a Diagnostic; nothing throws.

import type { Diagnostic } from './types.js';
import type {
  InvariantNode, Atom, Expr, LimitField, LimitsNode, Literal, Loc, Operand, PathNode, PolicyFileNode, RuleNode, SchemaNode, TestNode,
} from './ast.js';
import { INVARIANT_DECISIONS, atomsOf, pathKey, pathText, relQuestionsOf, type RelObject, type RelQuestion } from './ast.js';
import { checkAgentPattern, checkObjectPattern, checkPermissionKey, checkSubjectPattern, meetPatterns, parseTypedPattern, splitFirstColon } from './patterns.js';
import { checkFieldName, FIELD_NAME, KIND_NAME } from './names.js';
import { BUILTINS, VALUE_TYPES, type ValueType } from './values.js';
import { fmtExpr, fmtLiteral, fmtOperand, CMP_TEXT } from './format.js';
import { isIsoDate, isTimeZone, TIME_FIELDS, WEEKDAYS } from './time.js';
import { normalizeUsageKey, validateUsageNodes } from './usage.js';
import { buildModel, validateModel, type RelationModel } from './relations/model.js';
import { parseObject } from './relations/tuple.js';
import { validateRelationshipFixtures } from './relations/validate.js';
import { actionGroupsOf, nearest, ruleRelations, validateActionGroups, validateRuleRelations, type ActionGroups } from './action-groups.js';

export { FIELD_NAME, RESERVED, KIND_NAME, checkFieldName } from './names.js';

export type LitType = 'number' | 'string' | 'boolean' | 'list' | 'other';

export function typeOfLiteral(v: unknown): LitType {
  if (typeof v === 'number') return Number.isFinite(v) ? 'number' : 'other';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'boolean';
  if (Array.isArray(v)) return 'list';
  return 'other';
}

export function diag(loc: Loc | undefined, fallback: Loc, message: string): Diagnostic {
  const l = loc ?? fallback;
  return { file: l.file, line: l.line, col: l.col, message, severity: 'error' };
}

/** A list of scalars of one type, not empty. Returns an error message or null. */
function checkList(v: Literal, what: string): string | null {
  if (!Array.isArray(v)) return `${what} needs a list, got ${typeOfLiteral(v)}`;
  if (v.length === 0) return `${what} has an empty list`;
  const types = new Set(v.map(typeOfLiteral));
  if (types.has('list')) return `${what}: lists cannot be nested`;
  if (types.has('other')) return `${what}: list items must be numbers, strings or booleans`;
  if (types.size > 1) return `${what} mixes ${[...types].join(' and ')} values`;
  return null;
}

export function typeName(t: ValueType): string {
  return t.startsWith('[') ? `list of ${t.slice(1, -1)}s` : t;
}

// ---- the types of paths -------------------------------------------------------------

/** The declared types of a policy set: its `schema` blocks, by full path (`context.amount`). */
export type Schema = Map<string, { type: ValueType; loc?: Loc }>;

/** A built-in path's type (`subject.roles` is a list of strings), or null. */
export function builtinType(p: PathNode): ValueType | null {
  if (p.root === 'action') return p.segs.length === 0 || (p.segs.length === 1 && Object.hasOwn(BUILTINS.action, p.segs[0]!)) ? 'string' : null;
  if (p.root === 'context' || p.segs.length !== 1) return null;
  const t = BUILTINS[p.root][p.segs[0]!];
  return t ?? null;
}

/** Problems of a path on its own (shape, not types). */
function checkPath(p: PathNode): string | null {
  for (const s of p.segs) if (!FIELD_NAME.test(s)) return `"${s}" in ${pathText(p)} is not a name (letters, digits, _ and -, not starting with a digit or -)`;
  if (p.bare && p.segs.length === 1) { const e = checkFieldName(p.segs[0]!); if (e) return e; }
  if (p.root === 'action') {
    if (p.segs.length > 1 || (p.segs.length === 1 && !Object.hasOwn(BUILTINS.action, p.segs[0]!))) return `unknown action value ${pathText(p)} (use action, action.verb or action.kind; context.action reads a context field)`;
    return null;
  }
  if (p.root === 'time') {
    if (!(TIME_FIELDS as readonly string[]).includes(p.segs[0]!)) return `unknown time value ${pathText(p)} (use time.hour, time.minute, time.weekday, time.date or time.epoch)`;
    if (p.segs.length > 1) return `${pathText(p)}: time.${p.segs[0]} has no parts`;
  } else if (p.root !== 'context' && p.segs.length > 1) {
    const t = BUILTINS[p.root][p.segs[0]!];
    if (t) return `${pathText(p)}: ${p.root}.${p.segs[0]} is a ${typeName(t)}; it has no attributes`;
  }
  return null;
}

interface Known { type: ValueType; origin: 'builtin' | 'schema' | 'use'; text: string }

/**
 * Type inference of one condition: each path gets one type, from the built-in facts, the
 * schema, and what it is compared with; a path compared with two types is an error (such a
 * condition could only ever fail closed).
 */
class Types {
  private known = new Map<string, Known>();
  private same: { a: PathNode; b: PathNode; loc?: Loc }[] = [];
  private listOf: { list: PathNode; item: PathNode; loc?: Loc }[] = [];

  constructor(private readonly schema: Schema | null, private readonly out: Diagnostic[], private readonly at: Loc) {}

  private seed(p: PathNode): Known | undefined {
    const k = pathKey(p);
    let cur = this.known.get(k);
    if (!cur) {
      const b = builtinType(p);
      const s = this.schema?.get(k);
      if (b) cur = { type: b, origin: 'builtin', text: pathText(p) };
      else if (s) cur = { type: s.type, origin: 'schema', text: pathText(p) };
      if (cur) this.known.set(k, cur);
    }
    return cur;
  }

  /** Path p must have type t. Returns false (and reports) on a conflict. */
  is(p: PathNode, t: ValueType, loc: Loc | undefined): boolean {
    const cur = this.seed(p);
    if (!cur) { this.known.set(pathKey(p), { type: t, origin: 'use', text: pathText(p) }); return true; }
    if (cur.type === t) return true;
    const text = pathText(p);
    const msg = cur.origin === 'builtin'
      ? `${text} is a ${typeName(cur.type)}; it cannot be compared with a ${typeName(t)}`
      : cur.origin === 'schema'
        ? `${text} is declared ${cur.type} in the schema; it cannot be compared with a ${typeName(t)}`
        : `${text} is compared with a ${typeName(cur.type)} and with a ${typeName(t)}`;
    this.out.push(diag(loc, this.at, msg));
    return false;
  }

  typeOf(p: PathNode): ValueType | undefined {
    return this.seed(p)?.type;
  }

  sameType(a: PathNode, b: PathNode, loc: Loc | undefined): void { this.seed(a); this.seed(b); this.same.push({ a, b, loc }); }
  itemOf(list: PathNode, item: PathNode, loc: Loc | undefined): void { this.seed(list); this.seed(item); this.listOf.push({ list, item, loc }); }

  /** Propagate through path-to-path comparisons until nothing changes. */
  solve(): void {
    const reported = new Set<unknown>();
    for (let changed = true; changed;) {
      changed = false;
      const set = (p: PathNode, t: ValueType, c: unknown, loc: Loc | undefined) => {
        if (reported.has(c)) return;
        const had = this.known.get(pathKey(p));
        if (had && had.type === t) return;
        if (!this.is(p, t, loc)) reported.add(c);
        else changed = true;
      };
      for (const c of this.same) {
        const ta = this.typeOf(c.a), tb = this.typeOf(c.b);
        if (ta && !tb) set(c.b, ta, c, c.loc);
        else if (tb && !ta) set(c.a, tb, c, c.loc);
        else if (ta && tb && ta !== tb) set(c.b, ta, c, c.loc);
      }
      for (const c of this.listOf) {
        const tl = this.typeOf(c.list), ti = this.typeOf(c.item);
        if (tl && !tl.startsWith('[')) {
          if (!reported.has(c)) { reported.add(c); this.out.push(diag(c.loc, this.at, `${pathText(c.list)} is a ${typeName(tl)}, not a list`)); }
          continue;
        }
        if (ti && ti.startsWith('[')) {
          if (!reported.has(c)) { reported.add(c); this.out.push(diag(c.loc, this.at, `${pathText(c.item)} is a ${typeName(ti)}; a list holds numbers, strings or booleans`)); }
          continue;
        }
        if (tl && !ti) set(c.item, tl.slice(1, -1) as ValueType, c, c.loc);
        else if (ti && !tl) set(c.list, `[${ti}]` as ValueType, c, c.loc);
        else if (ti && tl && tl !== `[${ti}]`) set(c.item, tl.slice(1, -1) as ValueType, c, c.loc);
      }
    }
  }
}

function scalarLit(o: Operand): 'number' | 'string' | 'boolean' | null {
  if (o.type !== 'lit') return null;
  const t = typeOfLiteral(o.value);
  return t === 'number' || t === 'string' || t === 'boolean' ? t : null;
}

/** Checks of the literal values a built-in time value is compared with. */
function checkTimeLiteral(p: PathNode, o: Operand, at: Loc, loc: Loc | undefined, out: Diagnostic[]): void {
  if (p.root !== 'time' || o.type !== 'lit') return;
  const values = Array.isArray(o.value) ? o.value : [o.value];
  for (const v of values) {
    if (typeof v !== 'string') continue;
    if (p.segs[0] === 'weekday' && !(WEEKDAYS as readonly string[]).includes(v)) {
      out.push(diag(loc, at, `time.weekday is one of ${WEEKDAYS.map((d) => `"${d}"`).join(', ')}, not ${JSON.stringify(v)}`));
    }
    if (p.segs[0] === 'date' && !isIsoDate(v)) out.push(diag(loc, at, `time.date is written "YYYY-MM-DD" (a real date), not ${JSON.stringify(v)}`));
  }
}

function validateAtom(a: Atom, at: Loc, out: Diagnostic[], types: Types): void {
  const loc = a.loc;
  const err = (m: string) => out.push(diag(loc, at, m));
  for (const o of [a.left, a.right]) {
    if (o.type !== 'path') continue;
    const pe = checkPath(o);
    if (pe) { out.push(diag(o.loc ?? loc, at, pe)); return; }
  }
  const l = a.left, r = a.right;
  if (l.type === 'lit' && r.type === 'lit') { err(`a comparison needs a path on one side (${fmtExpr(a)})`); return; }
  switch (a.type) {
    // Any path can be tested for presence; it says nothing of the value's type.
    case 'present': return;
    case 'cmp': {
      if (a.opText !== undefined) { err(`unknown operator "${a.opText}" (use >=, >, <=, <, == or !=)`); return; }
      const op = CMP_TEXT[a.op];
      const ordering = a.op !== 'eq' && a.op !== 'ne';
      for (const [o, other] of [[l, r], [r, l]] as const) {
        if (o.type !== 'lit') continue;
        const t = typeOfLiteral(o.value);
        if (t === 'list') { err(`cannot compare ${fmtOperand(other)} ${op} with a list (use in)`); return; }
        if (t === 'other') { err(`cannot compare ${fmtOperand(other)} with ${JSON.stringify(o.value)}: use a number, string or boolean`); return; }
        if (ordering && t !== 'number') { err(`operator ${op} compares numbers, not a ${t} (${fmtExpr(a)})`); return; }
      }
      if (l.type === 'path' && r.type === 'path') {
        if (ordering) { types.is(l, 'number', loc); types.is(r, 'number', loc); }
        else {
          for (const p of [l, r]) { const t = types.typeOf(p); if (t && t.startsWith('[')) { err(`${pathText(p)} is a ${typeName(t)}; compare it with contains or in`); return; } }
          types.sameType(l, r, loc);
        }
        if (l.root === 'time' && r.root === 'time') err(`${fmtExpr(a)} compares two time values`);
        return;
      }
      const p = (l.type === 'path' ? l : r) as PathNode;
      const lit = l.type === 'path' ? r : l;
      types.is(p, ordering ? 'number' : scalarLit(lit)!, loc);
      checkTimeLiteral(p, lit, at, loc, out);
      return;
    }
    case 'in': {
      const what = `${fmtOperand(l)} ${a.negated ? 'not in' : 'in'}`;
      if (r.type === 'lit') {
        const le = checkList(r.value, what);
        if (le) { err(typeOfLiteral(r.value) !== 'list' ? `${what} needs a list or a path to one, got ${typeOfLiteral(r.value)}` : le); return; }
        if (l.type !== 'path') return;
        types.is(l, typeOfLiteral((r.value as Literal[])[0]) as ValueType, loc);
        checkTimeLiteral(l, r, at, loc, out);
        return;
      }
      if (l.type === 'lit') {
        const t = scalarLit(l);
        if (!t) { err(`${fmtOperand(l)} in ${pathText(r)}: the value must be a number, string or boolean`); return; }
        types.is(r, `[${t}]` as ValueType, loc);
        return;
      }
      types.itemOf(r, l, loc);
      return;
    }
    case 'contains': {
      const what = `contains${a.mode === 'one' ? '' : ' ' + a.mode}`;
      if (l.type !== 'path') { err(`${what} needs a path to a list on its left (${fmtExpr(a)})`); return; }
      if (a.mode === 'one') {
        if (r.type === 'lit') {
          const t = scalarLit(r);
          if (!t) { err(typeOfLiteral(r.value) === 'list' ? `${pathText(l)} contains ${fmtLiteral(r.value)}: use contains any or contains all with a list` : `contains needs a number, string or boolean`); return; }
          types.is(l, `[${t}]` as ValueType, loc);
          return;
        }
        types.itemOf(l, r, loc);
        return;
      }
      if (r.type === 'lit') {
        const le = checkList(r.value, `${pathText(l)} ${what}`);
        if (le) { err(le); return; }
        types.is(l, `[${typeOfLiteral((r.value as Literal[])[0])}]` as ValueType, loc);
        return;
      }
      const tl = types.typeOf(l), tr = types.typeOf(r);
      if (tl && !tl.startsWith('[')) { err(`${pathText(l)} is a ${typeName(tl)}, not a list`); return; }
      if (tr && !tr.startsWith('[')) { err(`${pathText(r)} is a ${typeName(tr)}, not a list`); return; }
      types.sameType(l, r, loc);
      return;
    }
    case 'like': {
      const kw = a.negated ? 'not like' : 'like';
      if (l.type !== 'path') { err(`${kw} needs a path on its left (${fmtExpr(a)})`); return; }
      if (r.type !== 'lit' || typeof r.value !== 'string') { err(`${kw} needs a pattern in quotes, such as "*@example.com"`); return; }
      types.is(l, 'string', loc);
      return;
    }
  }
}

/** Checks of one condition. With a schema, every path that is not built in must be declared. */
export function validateCondition(e: Expr, at: Loc, out: Diagnostic[], schema: Schema | null = null): void {
  const types = new Types(schema, out, at);
  for (const a of atomsOf(e)) validateAtom(a, at, out, types);
  types.solve();
  if (schema) {
    const seen = new Set<string>();
    for (const a of atomsOf(e)) for (const o of [a.left, a.right]) {
      if (o.type !== 'path' || builtinType(o) || o.root === 'time' || checkPath(o)) continue;
      const k = pathKey(o);
      if (schema.has(k) || declaredReferences.get(schema)?.has(k) || seen.has(k)) continue;
      seen.add(k);
      const near = nearest(k, schema.keys());
      const hint = near === null ? '' : ` (did you mean ${o.bare && near.startsWith('context.') ? near.slice('context.'.length) : near}?)`;
      out.push(diag(o.loc ?? a.loc, at, `${pathText(o)} is not declared in the schema${hint}`));
    }
  }
}

/** `groups`: the set's action groups (files only; a management API rule names one relation). */
export function validateRule(rule: RuleNode, out: Diagnostic[], where: string, schema: Schema | null = null, groups?: ActionGroups): void {
  const at = rule.loc ?? { file: where, line: 1, col: 1 };
  const fl = rule.fieldLocs ?? {};
  if (!rule.name) out.push(diag(fl.name, at, 'a rule needs a non-empty name'));
  for (const d of rule.duplicateFields ?? []) out.push(diag(d.loc, at, `rule "${rule.name}": ${d.field} is given twice`));
  const missing = (f: string) => out.push(diag(at, at, `rule "${rule.name}" has no ${f}`));
  if (rule.effect === '') missing('effect');
  else if (rule.effect !== 'deny' && rule.effect !== 'require_approval' && rule.effect !== 'permit') {
    out.push(diag(fl.effect, at, `unknown effect "${rule.effect}" (use deny, require_approval or permit)`));
  }
  if (!fl.subjects && rule.subjects.length === 0 && rule.loc) missing('subjects');
  else if (rule.subjects.length === 0) out.push(diag(fl.subjects, at, `rule "${rule.name}": subjects must name at least one pattern`));
  rule.subjects.forEach((s, i) => {
    const e = checkSubjectPattern(s);
    if (e) out.push(diag(rule.subjectLocs?.[i] ?? fl.subjects, at, e));
  });
  if (rule.relation === '') missing('relation');
  else if (groups) validateRuleRelations(rule, groups, out, at);
  else {
    const e = checkPermissionKey(rule.relation, 'relation', true);
    if (e) out.push(diag(fl.relation, at, e));
  }
  if (rule.object === '') missing('object');
  else {
    const e = checkObjectPattern(rule.object);
    if (e) out.push(diag(fl.object, at, e));
  }
  if (rule.when) validateCondition(rule.when, fl.when ?? at, out, schema);
}

/** An invariant: its decision, then its relations, object and condition as a rule's. */
export function validateInvariant(inv: InvariantNode, out: Diagnostic[], where: string, schema: Schema | null = null, groups?: ActionGroups): void {
  const at = inv.loc ?? { file: where, line: 1, col: 1 };
  if (!(INVARIANT_DECISIONS as readonly string[]).includes(inv.never)) {
    out.push(diag(inv.fieldLocs?.never, at, `invariant "${inv.name}": unknown decision "${inv.never}" (use never allow, never deny or never approval_required)`));
  }
  const inner: Diagnostic[] = [];
  validateRule(invariantAsRule(inv), inner, where, schema, groups);
  for (const d of inner) out.push({ ...d, message: d.message.replace(/^rule "/, 'invariant "') });
}

/** An invariant's relations, object and condition in the shape of a rule, so that they are read as a rule's are. */
export function invariantAsRule(inv: InvariantNode): RuleNode {
  const r: RuleNode = {
    kind: 'rule', name: inv.name, effect: 'permit', subjects: ['agent:*', 'user:*'], relation: inv.relations[0] ?? '', object: inv.object,
    fieldLocs: { ...(inv.fieldLocs?.name ? { name: inv.fieldLocs.name } : {}), ...(inv.fieldLocs?.relation ? { relation: inv.fieldLocs.relation } : {}), ...(inv.fieldLocs?.object ? { object: inv.fieldLocs.object } : {}), ...(inv.fieldLocs?.when ? { when: inv.fieldLocs.when } : {}) },
  };
  if (inv.relations.length !== 1 || !inv.relations[0]!.includes(':')) r.relations = inv.relations;
  if (inv.relationLocs) r.relationLocs = inv.relationLocs;
  if (inv.when) r.when = inv.when;
  if (inv.loc) r.loc = inv.loc;
  return r;
}

export function validateLimitField(f: LimitField, at: Loc, out: Diagnostic[]): void {
  const loc = f.loc ?? at;
  const fe = checkFieldName(f.field);
  if (fe) out.push(diag(loc, at, fe));
  for (const b of f.bad ?? []) out.push(diag(b.loc, at, b.message));
  const types = new Set<LitType>();
  for (const op of ['max', 'min'] as const) {
    const v = f[op];
    if (v === undefined) continue;
    if (typeOfLiteral(v) !== 'number') out.push(diag(loc, at, `${f.field} ${op} needs a number, got ${typeOfLiteral(v)}`));
    else types.add('number');
  }
  if (typeof f.max === 'number' && typeof f.min === 'number' && f.min > f.max) {
    out.push(diag(loc, at, `${f.field}: min ${f.min} is above max ${f.max}`));
  }
  for (const op of ['in', 'not_in'] as const) {
    const v = f[op];
    if (v === undefined) continue;
    const e = checkList(v, `${f.field} ${op}`);
    if (e) out.push(diag(loc, at, e));
    else types.add(typeOfLiteral((v as Literal[])[0]));
  }
  if (f.eq !== undefined) {
    const t = typeOfLiteral(f.eq);
    if (t === 'list' || t === 'other') out.push(diag(loc, at, `${f.field} must equal a number, string or boolean, not a ${t}`));
    else types.add(t);
  }
  if (types.size > 1) out.push(diag(loc, at, `${f.field} is limited with values of different types (${[...types].join(', ')})`));
  if (f.max === undefined && f.min === undefined && f.in === undefined && f.not_in === undefined && f.eq === undefined && !f.bad?.length) {
    out.push(diag(loc, at, `${f.field} has no limit`));
  }
}

/** The scalar type a limit field's values have, or null when they do not agree (reported elsewhere). */
export function limitFieldType(f: LimitField): ValueType | null {
  const ts = new Set<LitType>();
  for (const op of ['max', 'min'] as const) if (f[op] !== undefined) ts.add(typeOfLiteral(f[op]));
  for (const op of ['in', 'not_in'] as const) { const v = f[op]; if (Array.isArray(v) && v.length) ts.add(typeOfLiteral(v[0])); }
  if (f.eq !== undefined) ts.add(typeOfLiteral(f.eq));
  const [t] = [...ts];
  return ts.size === 1 && (t === 'number' || t === 'string' || t === 'boolean') ? t : null;
}

export function validateLimitFields(fields: LimitField[], at: Loc, out: Diagnostic[]): void {
  const seen = new Set<string>();
  for (const f of fields) {
    if (seen.has(f.field)) out.push(diag(f.loc, at, `field ${f.field} is limited twice in one block; put its operators on one line`));
    seen.add(f.field);
    validateLimitField(f, at, out);
  }
}

export function validateLimits(node: LimitsNode, out: Diagnostic[], where: string, schema: Schema | null = null): void {
  const at = node.loc ?? { file: where, line: 1, col: 1 };
  const ce = checkPermissionKey(node.capability, 'capability', false);
  if (ce) out.push(diag(at, at, ce));
  const ae = checkAgentPattern(node.forAgent);
  if (ae) out.push(diag(at, at, ae));
  validateLimitFields(node.fields, at, out);
  validateUsageNodes(node.usage ?? [], node.fields, at, out, schema ? (f) => schema.get('context.' + f)?.type : undefined);
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO 8601 instant with its offset (`2026-03-29T01:30:00+01:00`, `...Z`) → milliseconds, or null. */
export function parseInstant(s: string): number | null {
  if (!ISO_INSTANT.test(s)) return null;
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : null;
}

export function validateTest(t: TestNode, out: Diagnostic[]): void {
  const at = t.loc!;
  const ll = t.lineLocs ?? {};
  for (const d of t.duplicateLines ?? []) out.push(diag(d.loc, at, `test "${t.name}": ${d.line} is given twice`));
  // A test of relationships alone (`check`, `list objects`, `list subjects`) has no decision to make.
  const decisionLines = t.agent || t.user || t.action !== undefined || t.resource !== undefined || t.expect || t.permissions || t.person
    || t.capabilities.length || t.facts || t.context !== undefined || t.now !== undefined || t.used?.length || t.approved;
  if (!decisionLines && t.assertions?.length) return;
  if (!t.agent && !t.user) out.push(diag(at, at, `test "${t.name}" has no agent (or user)`));
  if (t.agent && t.user) out.push(diag(ll.user, at, `test "${t.name}": give an agent or a user, not both`));
  if (t.agent?.mode !== undefined && t.agent.mode !== 'delegated' && t.agent.mode !== 'autonomous') {
    out.push(diag(ll.agent, at, `unknown agent mode "${t.agent.mode}" (use delegated or autonomous)`));
  }
  if (t.user && t.person) out.push(diag(ll.person, at, `test "${t.name}": a user acts for itself; person is for delegated agents`));
  if (t.user && t.capabilities.length) out.push(diag(ll['capability:0'], at, `test "${t.name}": capabilities belong to agents, not users`));
  if (!t.action) out.push(diag(at, at, `test "${t.name}" has no action`));
  if (!t.resource) out.push(diag(at, at, `test "${t.name}" has no resource`));
  if (t.now !== undefined && parseInstant(t.now) === null) {
    out.push(diag(ll.now, at, `now must be an ISO 8601 instant with its offset, such as "2026-03-29T01:30:00+01:00", not ${JSON.stringify(t.now)}`));
  }
  if (!t.expect) out.push(diag(at, at, `test "${t.name}" has no expect`));
  else if (!['allow', 'deny', 'approval_required'].includes(t.expect.decision)) {
    out.push(diag(ll.expect, at, `unknown decision "${t.expect.decision}" (use allow, deny or approval_required)`));
  }
  t.capabilities.forEach((c, i) => {
    const e = checkPermissionKey(c.name, 'capability', false);
    const l = ll['capability:' + i] ?? at;
    if (e) out.push(diag(l, at, e));
    if (c.limits) validateLimitFields(c.limits, l, out);
    if (c.usage) validateUsageNodes(c.usage, c.limits ?? [], l, out);
  });
  (t.used ?? []).forEach((u, i) => {
    const l = ll['used:' + i] ?? u.loc ?? at;
    const k = normalizeUsageKey(`${u.what === 'count' ? 'count' : `${u.what} sum`} per ${u.per}${u.scope !== undefined ? ` per ${u.scope}` : ''}`);
    if ('error' in k) out.push(diag(l, at, `used: ${k.error}`));
    if (typeof u.amount !== 'number' || !Number.isFinite(u.amount) || u.amount < 0) out.push(diag(l, at, `used ${u.what}: the amount must be a number, not negative`));
  });
}

const SCHEMA_BASES = new Set(['number', 'string', 'boolean']);

export function validateSchema(s: SchemaNode, out: Diagnostic[], at: Loc): void {
  const seen = new Set<string>();
  for (const e of s.entries) {
    const loc = e.loc ?? at;
    const pe = checkPath(e.path);
    if (pe) { out.push(diag(loc, at, pe)); continue; }
    if (e.type.entity !== undefined) {
      if (!KIND_NAME.test(e.type.entity)) out.push(diag(e.type.loc ?? loc, at, `entity "${e.type.entity}": an entity type is a kind name`));
      if (e.path.root === 'time' || e.path.root === 'action' || builtinType(e.path)) out.push(diag(loc, at, `${pathText(e.path)} is built in; declare only attributes and context fields`));
      continue;
    }
    if (!SCHEMA_BASES.has(e.type.base)) {
      out.push(diag(e.type.loc ?? loc, at, `unknown type "${e.type.base}" (use number, string, boolean, or a list such as [string])`));
      continue;
    }
    if (e.path.root === 'time' || builtinType(e.path)) {
      out.push(diag(loc, at, `${pathText(e.path)} is built in${builtinType(e.path) ? ` (a ${typeName(builtinType(e.path)!)})` : ''}; declare only attributes and context fields`));
      continue;
    }
    const k = pathKey(e.path);
    if (seen.has(k)) out.push(diag(loc, at, `${pathText(e.path)} is declared twice`));
    seen.add(k);
  }
  // A path cannot be a value and hold attributes at once.
  const keys = s.entries.map((e) => pathKey(e.path));
  for (const e of s.entries) {
    const k = pathKey(e.path);
    const child = keys.find((o) => o.startsWith(k + '.'));
    // A reference holds the attributes of the entity it names: `resource.customer.fraud` beside `resource.customer: entity customer`.
    if (child && e.type.entity === undefined) out.push(diag(e.loc ?? at, at, `${pathText(e.path)} is declared a ${e.type.list ? 'list' : e.type.base} and also holds ${child}`));
  }
}

/** Checks of one file on its own. `testsOnly` for `*.tests` files. */
export function validateFile(file: PolicyFileNode, out: Diagnostic[], testsOnly = false): void {
  const first: Loc = { file: file.path, line: 1, col: 1 };
  if (file.header) {
    const v = file.header.version;
    if (!Number.isInteger(v) || v < 0) out.push(diag(file.header.loc, first, `version must be a whole number, got ${v}`));
    if (!file.header.name) out.push(diag(file.header.loc, first, 'the policy needs a non-empty name'));
    if (testsOnly) out.push(diag(file.header.loc, first, 'a tests file holds only test blocks'));
  }
  let zones = 0;
  for (const item of file.items) {
    if (testsOnly && item.kind !== 'test' && item.kind !== 'relationships') {
      out.push(diag(item.loc, first, `a tests file holds only test blocks and relationships (found ${item.kind})`));
      continue;
    }
    switch (item.kind) {
      // Rules are checked across the set (validateAcross), where the schema is known.
      case 'rule': break;
      // Limits are checked across the set too, where the schema is known.
      case 'limits': break;
      case 'kind': {
        if (!KIND_NAME.test(item.plural) || !KIND_NAME.test(item.singular)) {
          out.push(diag(item.loc, first, `kind "${item.plural}" singular "${item.singular}": both must be kind names`));
        }
        break;
      }
      case 'timezone':
        if (++zones > 1) out.push(diag(item.loc, first, 'a file has at most one timezone'));
        if (!isTimeZone(item.name)) out.push(diag(item.loc, first, `unknown time zone "${item.name}" (use an IANA name such as "Europe/Berlin" or "UTC")`));
        break;
      case 'schema': validateSchema(item, out, item.loc ?? first); break;
      case 'test': validateTest(item, out); break;
    }
  }
}

/** The paths a schema declares as references (`entity customer`): declared, though they hold no value type. */
const declaredReferences = new WeakMap<Schema, Set<string>>();

/** The schema of a set: every `schema` block of every file, merged. Conflicts are reported. */
export function schemaOf(files: PolicyFileNode[], out: Diagnostic[]): Schema | null {
  let schema: Schema | null = null;
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'schema') continue;
    schema ??= new Map();
    for (const e of item.entries) {
      if (e.type.entity !== undefined) {
        let refs = declaredReferences.get(schema);
        if (!refs) declaredReferences.set(schema, (refs = new Set()));
        refs.add(pathKey(e.path));
        continue;
      }
      if (!SCHEMA_BASES.has(e.type.base) || checkPath(e.path) || builtinType(e.path) || e.path.root === 'time') continue;
      const k = pathKey(e.path);
      const type = (e.type.list ? `[${e.type.base}]` : e.type.base) as ValueType;
      if (!VALUE_TYPES.includes(type)) continue;
      const prev = schema.get(k);
      if (prev && prev.type !== type) {
        const l = e.loc ?? item.loc!;
        const p = prev.loc ? ` at ${prev.loc.file}:${prev.loc.line}` : '';
        out.push(diag(l, l, `${pathText(e.path)} is declared ${type} here and ${prev.type}${p}`));
      } else if (!prev) schema.set(k, { type, ...(e.loc ? { loc: e.loc } : {}) });
    }
  }
  return schema;
}

/** Checks across files and API rules: rules (with the set's schema), duplicate names, conflicting singulars. */
export function validateAcross(files: PolicyFileNode[], apiRules: RuleNode[], out: Diagnostic[]): void {
  const ruleNames = new Map<string, string>();
  const policyNames = new Map<string, string>();
  const singulars = new Map<string, { singular: string; where: string }>();
  const testNames = new Map<string, string>();
  const invariantNames = new Map<string, string>();
  const where = (l: Loc | undefined, fallback: string) => (l ? `${l.file}:${l.line}` : fallback);
  const schema = schemaOf(files, out);
  const groups = actionGroupsOf(files);
  validateActionGroups(files, out);
  for (const f of files) {
    if (f.header && f.header.name) {
      const prev = policyNames.get(f.header.name);
      if (prev) out.push(diag(f.header.loc, { file: f.path, line: 1, col: 1 }, `policy "${f.header.name}" is also declared at ${prev}`));
      else policyNames.set(f.header.name, where(f.header.loc, f.path));
    }
    for (const item of f.items) {
      if (item.kind === 'rule') validateRule(item, out, f.path, schema, groups);
      else if (item.kind === 'invariant') {
        validateInvariant(item, out, f.path, schema, groups);
        const prev = invariantNames.get(item.name);
        if (prev) out.push(diag(item.loc, item.loc!, `invariant "${item.name}" is also stated at ${prev}`));
        else invariantNames.set(item.name, where(item.loc, f.path));
      } else if (item.kind === 'kind') {
        const prev = singulars.get(item.plural);
        if (prev && prev.singular !== item.singular) {
          out.push(diag(item.loc, item.loc!, `kind "${item.plural}" has singular "${prev.singular}" at ${prev.where}`));
        } else singulars.set(item.plural, { singular: item.singular, where: where(item.loc, f.path) });
      } else if (item.kind === 'test') {
        const prev = testNames.get(item.name);
        if (prev) out.push(diag(item.loc, item.loc!, `test "${item.name}" is also defined at ${prev}`));
        else testNames.set(item.name, where(item.loc, f.path));
      } else if (item.kind === 'limits') {
        validateLimits(item, out, f.path, schema);
        if (!schema) continue;
        for (const lf of item.fields) {
          const d = schema.get('context.' + lf.field);
          const at = lf.loc ?? item.loc!;
          const t = limitFieldType(lf);
          if (!d) out.push(diag(at, at, `context.${lf.field} is not declared in the schema`));
          else if (t && d.type !== t) out.push(diag(at, at, `context.${lf.field} is declared ${d.type} in the schema; it cannot be limited with a ${t}`));
        }
      }
    }
  }
  const allRules: { rule: RuleNode; where: string }[] = [];
  for (const f of files) for (const item of f.items) if (item.kind === 'rule') allRules.push({ rule: item, where: where(item.loc, f.path) });
  for (const r of apiRules) {
    allRules.push({ rule: r, where: r.loc ? r.loc.file : 'api' });
    // An API rule is checked on its own when it is turned into an AST; the schema needs the files.
    if (schema && r.when) {
      const at = r.fieldLocs?.when ?? r.loc ?? { file: 'api', line: 1, col: 1 };
      const plain: Diagnostic[] = [], own: Diagnostic[] = [];
      validateCondition(r.when, at, plain, null);
      validateCondition(r.when, at, own, schema);
      const known = new Set(plain.map((d) => `${d.line}:${d.col}:${d.message}`));
      out.push(...own.filter((d) => !known.has(`${d.line}:${d.col}:${d.message}`)));
    }
  }
  for (const { rule, where: w } of allRules) {
    if (!rule.name) continue;
    const prev = ruleNames.get(rule.name);
    if (prev) out.push(diag(rule.fieldLocs?.name ?? rule.loc, rule.loc ?? { file: w, line: 1, col: 1 }, `duplicate rule name "${rule.name}" (also at ${prev})`));
    else ruleNames.set(rule.name, w);
  }
  checkValueAndObject(allRules.map((r) => r.rule), groups, out);
  validateModel(files, out);
  const model = buildModel(files);
  for (const { rule, where: w } of allRules) {
    if (!rule.when) continue;
    for (const q of relQuestionsOf(rule.when)) validateRelQuestion(q, rule, model, rule.fieldLocs?.when ?? rule.loc ?? { file: w, line: 1, col: 1 }, out);
  }
  validateRelationshipFixtures(files, out);
}

/**
 * A relationship question against the model: the relation is declared (on the object's type,
 * where the rule or a constant says which type the object is), a constant is an object of a
 * declared type, an object path is a path that can hold one, and a `through` relation takes
 * only plain objects as its subjects (so the relationships stored for it are all there is).
 */
function validateRelQuestion(q: RelQuestion, rule: RuleNode, model: RelationModel, at: Loc, out: Diagnostic[]): void {
  const relAt = q.relationLoc ?? q.loc ?? at;
  if (!model.types.size) { out.push(diag(q.loc, at, `rule "${rule.name}" asks a relationship question, but no types and relations are declared`)); return; }
  const holders = [...model.types.values()].filter((t) => t.relations.has(q.relation));
  if (!holders.length) { out.push(diag(relAt, at, `unknown relation ${q.relation}: no type declares it`)); return; }
  const objectType = (o: RelObject, role: string): string | null => {
    if (o.type === 'resource') {
      const kind = splitFirstColon(rule.object)?.[0];
      return kind && kind !== '*' ? kind : null;
    }
    if (o.type === 'lit') {
      const parsed = typeof o.value === 'string' ? parseObject(o.value) : 'an object is a string "<type>:<id>"';
      if (typeof parsed === 'string') { out.push(diag(o.loc ?? q.loc, at, `${role}: ${parsed}`)); return null; }
      if (!model.types.has(parsed.type)) { out.push(diag(o.loc ?? q.loc, at, `${role}: unknown type ${parsed.type}`)); return null; }
      return parsed.type;
    }
    const e = checkPath(o);
    if (e) out.push(diag(o.loc ?? q.loc, at, e));
    else if (o.root === 'time' || (builtinType(o) ?? 'string') !== 'string') {
      out.push(diag(o.loc ?? q.loc, at, `${pathText(o)} cannot hold an object ("<type>:<id>" or {"type", "id"})`));
    }
    return null;
  };
  if (q.type === 'has') {
    const t = objectType(q.object, 'the object');
    if (t !== null && model.types.has(t) && !model.types.get(t)!.relations.has(q.relation)) {
      out.push(diag(relAt, at, `type ${t} has no relation ${q.relation}`));
    }
    return;
  }
  objectType(q.object, 'the object');
  objectType(q.ancestor, 'the ancestor');
  for (const t of holders) {
    const def = t.relations.get(q.relation)!;
    const plain = def.expr.op === 'direct' && def.direct.every((r) => r.relation === undefined && r.wildcard !== true);
    if (!plain) {
      out.push(diag(relAt, at, `"through ${q.relation}" follows relationships to objects: ${t.name}#${q.relation} must be only direct objects ([type, ...], no usersets, wildcards or derived parts)`));
    }
  }
}

/**
 * A path read as a value in one rule and stepped into in another (`resource.owner` and
 * `resource.owner.team`) is an error where both rules can apply to one request: their
 * relations and their objects overlap. `diff` and `check` give each path a request reads one
 * dimension of values, which a value and an object inside it cannot share. Rules on objects
 * of different kinds (`document:*`, `customer:*`) or on different actions never read the
 * same request, so each may use the name its own way.
 */
function checkValueAndObject(rules: RuleNode[], groups: ActionGroups, out: Diagnostic[]): void {
  interface Use { k: string; p: PathNode; loc?: Loc; rule: RuleNode }
  const uses: Use[] = [];
  for (const r of rules) {
    if (!r.when) continue;
    const seen = new Set<string>();
    for (const a of atomsOf(r.when)) for (const o of [a.left, a.right]) {
      // A presence test reads no value: `resource has customer` beside `resource.customer.tier` is fine.
      if (o.type !== 'path' || o.root === 'time' || builtinType(o) || a.type === 'present') continue;
      const k = pathKey(o);
      if (!seen.has(k)) { seen.add(k); uses.push({ k, p: o, loc: o.loc ?? a.loc ?? r.loc, rule: r }); }
    }
  }
  /** Can both rules apply to one request? (Patterns that do not parse are reported elsewhere: taken as overlapping.) */
  const overlap = (x: RuleNode, y: RuleNode) => {
    if (x === y) return true;
    const meets = (a: string, b: string) => {
      const pa = parseTypedPattern(a), pb = parseTypedPattern(b);
      return !pa || !pb || meetPatterns(pa, pb) !== null;
    };
    const rx = ruleRelations(x, groups), ry = ruleRelations(y, groups);
    return rx.some((a) => ry.some((b) => meets(a, b))) && meets(x.object, y.object);
  };
  const reported = new Set<string>();
  for (const u of uses) {
    if (reported.has(u.k)) continue;
    const child = uses.filter((o) => o.k.startsWith(u.k + '.') && overlap(u.rule, o.rule)).sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))[0];
    if (!child) continue;
    reported.add(u.k);
    const at = u.loc ?? { file: 'api', line: 1, col: 1 };
    out.push(diag(at, at, `${pathText(u.p)} is read as a value here and as an object elsewhere (${pathText(child.p)})`));
  }
}
