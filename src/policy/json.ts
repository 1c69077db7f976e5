// The JSON rule and limit shapes of the management API → the same AST as
// the file language, so that both compile (and format) the same way.

import type { ConditionOp, Diagnostic, JsonRule } from './types.js';
import type { Expr, LimitField, Literal, Loc, RuleNode } from './ast.js';
import { checkFieldName } from './names.js';
import { validateLimitFields, validateRule } from './validate.js';
import { parseExpr } from './parser.js';
import { fmtExpr } from './format.js';
import { isCountEntry, jsonUsageLimits } from './usage.js';
import { isJsonObject, setOwn } from './own.js';

const OPS: ReadonlySet<string> = new Set(['gte', 'gt', 'lte', 'lt', 'eq', 'ne']);

export function ruleSource(rule: { id?: unknown; name?: unknown }): string {
  const id = typeof rule.id === 'string' && rule.id ? rule.id : typeof rule.name === 'string' ? rule.name : '?';
  return `api:rule/${id}`;
}

function toLiteral(v: unknown): Literal | undefined {
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (Array.isArray(v)) {
    const items = v.map(toLiteral);
    return items.every((i) => i !== undefined) ? (items as Literal[]) : undefined;
  }
  return undefined;
}

/** JSON rule → AST, with shape errors. The AST is null when the shape is too broken to build one. */
export function jsonRuleToAst(rule: unknown, source?: string): { rule: RuleNode | null; diagnostics: Diagnostic[] } {
  const src = source ?? (isJsonObject(rule) ? ruleSource(rule) : 'api:rule/?');
  const loc: Loc = { file: src, line: 1, col: 1 };
  const out: Diagnostic[] = [];
  const err = (message: string) => out.push({ ...loc, message, severity: 'error' });
  if (!isJsonObject(rule)) { err('a rule must be a JSON object'); return { rule: null, diagnostics: out }; }
  const str = (k: string): string => {
    const v = rule[k];
    if (typeof v !== 'string') { err(`${k} must be a string`); return ''; }
    if (v === '') err(`${k} must not be empty`);
    return v;
  };
  const name = str('name');
  const effect = str('effect');
  const relation = str('relation');
  const object = str('object');
  let subjects: string[] = [];
  if (!Array.isArray(rule.subjects) || rule.subjects.length === 0) err('subjects must be a non-empty array of patterns such as "agent:*"');
  else if (!rule.subjects.every((s): s is string => typeof s === 'string')) err('subjects must hold strings');
  else subjects = rule.subjects;
  let when: Expr | undefined;
  const c = rule.condition;
  if (c !== undefined && c !== null) {
    if (!isJsonObject(c)) err('condition must be an object {field, op, value} or {expr}, or null');
    else if ('expr' in c) {
      // The file syntax, parsed where it stands: positions are columns of the expr string.
      if (typeof c.expr !== 'string' || c.expr.trim() === '') err('condition.expr must be a condition in the file syntax, such as "resource.owner == person.email"');
      else if (Object.keys(c).length > 1) err('condition has either expr or field, op and value');
      else {
        const r = parseExpr(c.expr, src);
        if (!r.expr) for (const d of r.diagnostics) out.push({ ...d, message: `condition.expr: ${d.message}` });
        else when = r.expr;
      }
    } else {
      const field = c.field;
      const op = c.op;
      if (typeof field !== 'string') err('condition.field must be a string');
      else { const fe = checkFieldName(field); if (fe) err(`condition.field: ${fe}`); }
      if (typeof op !== 'string' || !OPS.has(op)) err(`condition.op: unknown operator ${JSON.stringify(op)} (use gte, gt, lte, lt, eq or ne)`);
      const value = toLiteral(c.value);
      if (value === undefined || Array.isArray(value)) err('condition.value must be a number, string or boolean');
      if (typeof field === 'string' && typeof op === 'string' && OPS.has(op) && value !== undefined && !Array.isArray(value)) {
        when = {
          type: 'cmp', op: op as ConditionOp, loc,
          left: { type: 'path', root: 'context', segs: [field], bare: true, loc },
          right: { type: 'lit', value, loc },
        };
      }
    }
  }
  const node: RuleNode = {
    kind: 'rule', name, effect, subjects, relation, object, loc,
    fieldLocs: { name: loc, effect: loc, subjects: loc, relation: loc, object: loc, when: loc },
  };
  if (when) node.when = when;
  if (typeof rule.id === 'string') node.apiId = rule.id;
  if (out.length) return { rule: null, diagnostics: out };
  validateRule(node, out, src);
  return { rule: out.length ? null : node, diagnostics: out };
}

export function validateJsonRule(rule: unknown, source?: string): Diagnostic[] {
  return jsonRuleToAst(rule, source).diagnostics;
}

/** JSON limits → limit fields of the AST. */
export function jsonLimitsToAst(limits: unknown, source = 'api:limits'): { fields: LimitField[] | null; diagnostics: Diagnostic[] } {
  const loc: Loc = { file: source, line: 1, col: 1 };
  const out: Diagnostic[] = [];
  if (limits === null || limits === undefined) return { fields: [], diagnostics: [] };
  if (!isJsonObject(limits)) return { fields: null, diagnostics: [{ ...loc, message: 'limits must be a JSON object {field: value | {max, min, in, not_in}}', severity: 'error' }] };
  const fields: LimitField[] = [];
  for (const [field, v] of Object.entries(limits)) {
    // Limits over time (`count`, a field's `sum`) are read by jsonUsageLimits below.
    if (isCountEntry(field, v)) continue;
    if (isJsonObject(v) && Object.hasOwn(v, 'sum') && Object.keys(v).length === 1) continue;
    const f: LimitField = { field, loc };
    if (isJsonObject(v)) {
      for (const [op, raw] of Object.entries(v)) {
        if (op === 'sum') continue;
        const lit = toLiteral(raw);
        if (op !== 'max' && op !== 'min' && op !== 'in' && op !== 'not_in') {
          (f.bad ??= []).push({ message: `${field}: unknown operator "${op}" (use max, min, in or not_in)`, loc });
        } else if (lit === undefined) {
          (f.bad ??= []).push({ message: `${field} ${op}: value must be a number, string, boolean or a list of them`, loc });
        } else f[op] = lit;
      }
      if (Object.keys(v).length === 0) (f.bad ??= []).push({ message: `${field} has no limit`, loc });
    } else {
      const lit = toLiteral(v);
      if (lit === undefined || Array.isArray(lit)) {
        (f.bad ??= []).push({ message: `${field}: a bare limit must be a number, string or boolean (or an object of max, min, in, not_in)`, loc });
      } else f.eq = lit;
    }
    fields.push(f);
  }
  validateLimitFields(fields, loc, out);
  out.push(...jsonUsageLimits(limits, source).diagnostics);
  return { fields: out.length ? null : fields, diagnostics: out };
}

export function validateJsonLimits(limits: unknown, source?: string): Diagnostic[] {
  return jsonLimitsToAst(limits, source).diagnostics;
}

/** AST limit fields → the JSON shape (for explain and the API). */
export function limitFieldsToJson(fields: LimitField[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    if (f.eq !== undefined && f.max === undefined && f.min === undefined && f.in === undefined && f.not_in === undefined) {
      setOwn(out, f.field, f.eq);
      continue;
    }
    const o: Record<string, unknown> = {};
    for (const k of ['max', 'min', 'in', 'not_in'] as const) if (f[k] !== undefined) o[k] = f[k];
    setOwn(out, f.field, o);
  }
  return out;
}

/** A rule AST → the JSON shape: `{field, op, value}` for a context field against a constant, else `{expr}`. */
export function ruleToJson(rule: RuleNode): JsonRule {
  const base: JsonRule = {
    name: rule.name, effect: rule.effect as JsonRule['effect'], subjects: [...rule.subjects], relation: rule.relation, object: rule.object,
  };
  const w = rule.when;
  if (!w) return { ...base, condition: null };
  if (w.type === 'cmp' && w.opText === undefined && w.left.type === 'path' && w.left.root === 'context' && w.left.segs.length === 1
    && w.right.type === 'lit' && !Array.isArray(w.right.value)) {
    return { ...base, condition: { field: w.left.segs[0]!, op: w.op, value: w.right.value } };
  }
  return { ...base, condition: { expr: fmtExpr(w) } };
}
