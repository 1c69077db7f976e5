// Validation of the AST: everything the grammar accepts but the language does
// not mean. Every problem is collected as a Diagnostic; nothing throws.

import type { Diagnostic } from './types.js';
import type { Expr, LimitField, LimitsNode, Literal, Loc, PolicyFileNode, RuleNode, TestNode } from './ast.js';
import { checkAgentPattern, checkObjectPattern, checkPermissionKey, checkSubjectPattern } from './patterns.js';

export const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;
export const RESERVED = new Set(['and', 'or', 'not', 'in', 'true', 'false']);
export const KIND_NAME = /^[A-Za-z0-9_.\-]+$/;

export type LitType = 'number' | 'string' | 'boolean' | 'list' | 'other';

export function typeOfLiteral(v: unknown): LitType {
  if (typeof v === 'number') return Number.isFinite(v) ? 'number' : 'other';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'boolean';
  if (Array.isArray(v)) return 'list';
  return 'other';
}

function diag(loc: Loc | undefined, fallback: Loc, message: string): Diagnostic {
  const l = loc ?? fallback;
  return { file: l.file, line: l.line, col: l.col, message };
}

export function checkFieldName(field: string): string | null {
  if (!FIELD_NAME.test(field)) return `field name "${field}" must start with a letter or _ and hold only letters, digits, _ and -`;
  if (RESERVED.has(field)) return `field name "${field}" is a reserved word`;
  return null;
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

const OP_TEXT: Record<string, string> = { gte: '>=', gt: '>', lte: '<=', lt: '<', eq: '==', ne: '!=' };

/** The literal type each field is compared with, to catch incompatible comparisons. */
function validateExpr(e: Expr, at: Loc, out: Diagnostic[], fieldTypes: Map<string, LitType>): void {
  const noteType = (field: string, t: LitType, loc: Loc | undefined) => {
    const prev = fieldTypes.get(field);
    if (prev && prev !== t) out.push(diag(loc, at, `field ${field} is compared with a ${prev} and with a ${t}`));
    else fieldTypes.set(field, t);
  };
  switch (e.type) {
    case 'and':
    case 'or':
      for (const i of e.items) validateExpr(i, at, out, fieldTypes);
      return;
    case 'not':
      validateExpr(e.expr, at, out, fieldTypes);
      return;
    case 'cmp': {
      const fe = checkFieldName(e.field);
      if (fe) out.push(diag(e.loc, at, fe));
      if (e.opText !== undefined) {
        out.push(diag(e.loc, at, `unknown operator "${e.opText}" (use >=, >, <=, <, == or !=)`));
        return;
      }
      const t = typeOfLiteral(e.value);
      if (t === 'list') { out.push(diag(e.loc, at, `cannot compare ${e.field} ${OP_TEXT[e.op]} with a list (use in)`)); return; }
      if (t === 'other') { out.push(diag(e.loc, at, `cannot compare ${e.field} with ${JSON.stringify(e.value)}: use a number, string or boolean`)); return; }
      if ((e.op === 'gt' || e.op === 'gte' || e.op === 'lt' || e.op === 'lte') && t !== 'number') {
        out.push(diag(e.loc, at, `operator ${OP_TEXT[e.op]} compares numbers, not a ${t} (${e.field} ${OP_TEXT[e.op]} ${JSON.stringify(e.value)})`));
        return;
      }
      noteType(e.field, t, e.loc);
      return;
    }
    case 'in': {
      const fe = checkFieldName(e.field);
      if (fe) out.push(diag(e.loc, at, fe));
      const le = checkList(e.values, `${e.field} ${e.negated ? 'not in' : 'in'}`);
      if (le) { out.push(diag(e.loc, at, le)); return; }
      noteType(e.field, typeOfLiteral((e.values as Literal[])[0]), e.loc);
      return;
    }
  }
}

export function validateCondition(e: Expr, at: Loc, out: Diagnostic[]): void {
  validateExpr(e, at, out, new Map());
}

export function validateRule(rule: RuleNode, out: Diagnostic[], where: string): void {
  const at = rule.loc ?? { file: where, line: 1, col: 1 };
  const fl = rule.fieldLocs ?? {};
  if (!rule.name) out.push(diag(fl.name, at, 'a rule needs a non-empty name'));
  for (const d of rule.duplicateFields ?? []) out.push(diag(d.loc, at, `rule "${rule.name}": ${d.field} is given twice`));
  const missing = (f: string) => out.push(diag(at, at, `rule "${rule.name}" has no ${f}`));
  if (rule.effect === '') missing('effect');
  else if (rule.effect !== 'deny' && rule.effect !== 'require_approval') {
    out.push(diag(fl.effect, at, `unknown effect "${rule.effect}" (use deny or require_approval)`));
  }
  if (!fl.subjects && rule.subjects.length === 0 && rule.loc) missing('subjects');
  else if (rule.subjects.length === 0) out.push(diag(fl.subjects, at, `rule "${rule.name}": subjects must name at least one pattern`));
  for (const s of rule.subjects) {
    const e = checkSubjectPattern(s);
    if (e) out.push(diag(fl.subjects, at, e));
  }
  if (rule.relation === '') missing('relation');
  else {
    const e = checkPermissionKey(rule.relation, 'relation', true);
    if (e) out.push(diag(fl.relation, at, e));
  }
  if (rule.object === '') missing('object');
  else {
    const e = checkObjectPattern(rule.object);
    if (e) out.push(diag(fl.object, at, e));
  }
  if (rule.when) validateCondition(rule.when, fl.when ?? at, out);
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

export function validateLimitFields(fields: LimitField[], at: Loc, out: Diagnostic[]): void {
  const seen = new Set<string>();
  for (const f of fields) {
    if (seen.has(f.field)) out.push(diag(f.loc, at, `field ${f.field} is limited twice in one block; put its operators on one line`));
    seen.add(f.field);
    validateLimitField(f, at, out);
  }
}

export function validateLimits(node: LimitsNode, out: Diagnostic[], where: string): void {
  const at = node.loc ?? { file: where, line: 1, col: 1 };
  const ce = checkPermissionKey(node.capability, 'capability', false);
  if (ce) out.push(diag(at, at, ce));
  const ae = checkAgentPattern(node.forAgent);
  if (ae) out.push(diag(at, at, ae));
  validateLimitFields(node.fields, at, out);
}

export function validateTest(t: TestNode, out: Diagnostic[]): void {
  const at = t.loc!;
  const ll = t.lineLocs ?? {};
  if (!t.agent) out.push(diag(at, at, `test "${t.name}" has no agent`));
  else if (t.agent.mode !== undefined && t.agent.mode !== 'delegated' && t.agent.mode !== 'autonomous') {
    out.push(diag(ll.agent, at, `unknown agent mode "${t.agent.mode}" (use delegated or autonomous)`));
  }
  if (!t.action) out.push(diag(at, at, `test "${t.name}" has no action`));
  if (!t.resource) out.push(diag(at, at, `test "${t.name}" has no resource`));
  if (!t.expect) out.push(diag(at, at, `test "${t.name}" has no expect`));
  else if (!['allow', 'deny', 'approval_required'].includes(t.expect.decision)) {
    out.push(diag(ll.expect, at, `unknown decision "${t.expect.decision}" (use allow, deny or approval_required)`));
  }
  t.capabilities.forEach((c, i) => {
    const e = checkPermissionKey(c.name, 'capability', false);
    const l = ll['capability:' + i] ?? at;
    if (e) out.push(diag(l, at, e));
    if (c.limits) validateLimitFields(c.limits, l, out);
  });
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
  for (const item of file.items) {
    if (testsOnly && item.kind !== 'test') {
      out.push(diag(item.loc, first, `a tests file holds only test blocks (found ${item.kind})`));
      continue;
    }
    switch (item.kind) {
      case 'rule': validateRule(item, out, file.path); break;
      case 'limits': validateLimits(item, out, file.path); break;
      case 'kind': {
        if (!KIND_NAME.test(item.plural) || !KIND_NAME.test(item.singular)) {
          out.push(diag(item.loc, first, `kind "${item.plural}" singular "${item.singular}": both must be kind names`));
        }
        break;
      }
      case 'test': validateTest(item, out); break;
    }
  }
}

/** Checks across files and API rules: duplicate names, conflicting singulars. */
export function validateAcross(files: PolicyFileNode[], apiRules: RuleNode[], out: Diagnostic[]): void {
  const ruleNames = new Map<string, string>();
  const policyNames = new Map<string, string>();
  const singulars = new Map<string, { singular: string; where: string }>();
  const testNames = new Map<string, string>();
  const where = (l: Loc | undefined, fallback: string) => (l ? `${l.file}:${l.line}` : fallback);
  for (const f of files) {
    if (f.header && f.header.name) {
      const prev = policyNames.get(f.header.name);
      if (prev) out.push(diag(f.header.loc, { file: f.path, line: 1, col: 1 }, `policy "${f.header.name}" is also declared at ${prev}`));
      else policyNames.set(f.header.name, where(f.header.loc, f.path));
    }
    for (const item of f.items) {
      if (item.kind === 'kind') {
        const prev = singulars.get(item.plural);
        if (prev && prev.singular !== item.singular) {
          out.push(diag(item.loc, item.loc!, `kind "${item.plural}" has singular "${prev.singular}" at ${prev.where}`));
        } else singulars.set(item.plural, { singular: item.singular, where: where(item.loc, f.path) });
      } else if (item.kind === 'test') {
        const prev = testNames.get(item.name);
        if (prev) out.push(diag(item.loc, item.loc!, `test "${item.name}" is also defined at ${prev}`));
        else testNames.set(item.name, where(item.loc, f.path));
      }
    }
  }
  const allRules: { rule: RuleNode; where: string }[] = [];
  for (const f of files) for (const item of f.items) if (item.kind === 'rule') allRules.push({ rule: item, where: where(item.loc, f.path) });
  for (const r of apiRules) allRules.push({ rule: r, where: r.loc ? r.loc.file : 'api' });
  for (const { rule, where: w } of allRules) {
    if (!rule.name) continue;
    const prev = ruleNames.get(rule.name);
    if (prev) out.push(diag(rule.fieldLocs?.name ?? rule.loc, rule.loc ?? { file: w, line: 1, col: 1 }, `duplicate rule name "${rule.name}" (also at ${prev})`));
    else ruleNames.set(rule.name, w);
  }
}
