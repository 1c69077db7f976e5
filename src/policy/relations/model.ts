// The relation model of a policy set: every `type` and `condition` of its files, checked
// (unknown types and relations, impossible type restrictions, tuplesets that are not direct,
// operators mixed without parentheses, ill-typed conditions) and indexed for the checker.
// Semantics are OpenFGA's schema 1.1.

import type { Diagnostic } from '../types.js';
import type { Loc, PolicyFileNode } from '../ast.js';
import type { ConditionNode, RelExpr, TypeNode, TypeRefNode } from './ast.js';
import { checkCondition, compileCondition, type CompiledCondition } from './conditions.js';
import { fmtTypeRef } from './format.js';
import { parseObject, parseSubject, type Relationship } from './tuple.js';
import { englishPlural, singularOf } from '../patterns.js';

export interface RelationDef {
  type: string;
  name: string;
  expr: RelExpr;
  /** Every direct type restriction of the definition (at most one `[...]`). */
  direct: TypeRefNode[];
  loc?: Loc;
}

export interface TypeDef { name: string; relations: Map<string, RelationDef>; loc?: Loc }

export interface RelationModel {
  types: Map<string, TypeDef>;
  conditions: Map<string, CompiledCondition>;
}

export function emptyModel(): RelationModel {
  return { types: new Map(), conditions: new Map() };
}

export function hasRelations(m: RelationModel): boolean {
  return m.types.size > 0;
}

export function relationOf(m: RelationModel, type: string, relation: string): RelationDef | undefined {
  return m.types.get(type)?.relations.get(relation);
}

function directRefs(e: RelExpr, out: TypeRefNode[] = []): TypeRefNode[] {
  switch (e.op) {
    case 'direct': out.push(...e.refs); break;
    case 'union': case 'intersection': for (const i of e.items) directRefs(i, out); break;
    case 'exclusion': directRefs(e.base, out); directRefs(e.subtract, out); break;
  }
  return out;
}

function directCount(e: RelExpr): number {
  switch (e.op) {
    case 'direct': return 1;
    case 'union': case 'intersection': return e.items.reduce((n, i) => n + directCount(i), 0);
    case 'exclusion': return directCount(e.base) + directCount(e.subtract);
    default: return 0;
  }
}

/** The model of a set of files (the first declaration of a name wins; the rest are reported by validateModel). */
export function buildModel(files: PolicyFileNode[]): RelationModel {
  const m = emptyModel();
  for (const f of files) for (const item of f.items) {
    if (item.kind === 'type' && !m.types.has(item.name)) {
      const t: TypeDef = { name: item.name, relations: new Map(), ...(item.loc ? { loc: item.loc } : {}) };
      for (const r of item.relations) {
        if (t.relations.has(r.name)) continue;
        t.relations.set(r.name, { type: item.name, name: r.name, expr: r.expr, direct: directRefs(r.expr), ...(r.loc ? { loc: r.loc } : {}) });
      }
      m.types.set(item.name, t);
    } else if (item.kind === 'condition' && !m.conditions.has(item.name)) {
      m.conditions.set(item.name, compileCondition(item));
    }
  }
  return m;
}

function diag(loc: Loc | undefined, fallback: Loc, message: string, severity: 'error' | 'warning' = 'error', code?: string): Diagnostic {
  const l = loc ?? fallback;
  const d: Diagnostic = { file: l.file, line: l.line, col: l.col, message, severity };
  if (code) d.code = code;
  return d;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** Errors of the types and conditions of a set of files. */
export function validateModel(files: PolicyFileNode[], out: Diagnostic[]): void {
  const types = new Map<string, TypeNode>();
  const conditions = new Map<string, ConditionNode>();
  const where = (l: Loc | undefined) => (l ? `${l.file}:${l.line}` : 'elsewhere');
  for (const f of files) for (const item of f.items) {
    const first: Loc = item.loc ?? { file: f.path, line: 1, col: 1 };
    if (item.kind === 'type') {
      const prev = types.get(item.name);
      if (prev) out.push(diag(item.loc, first, `type ${item.name} is also declared at ${where(prev.loc)}`));
      else types.set(item.name, item);
      if (!NAME.test(item.name)) out.push(diag(item.loc, first, `"${item.name}" is not a type name (letters, digits, _ and -)`));
    } else if (item.kind === 'condition') {
      const prev = conditions.get(item.name);
      if (prev) out.push(diag(item.loc, first, `condition ${item.name} is also declared at ${where(prev.loc)}`));
      else conditions.set(item.name, item);
      for (const p of checkCondition(item)) out.push(diag(p.loc, first, p.message));
    }
  }
  const model = buildModel(files);
  for (const t of types.values()) {
    const seen = new Map<string, Loc | undefined>();
    for (const r of t.relations) {
      const at = r.loc ?? t.loc!;
      if (seen.has(r.name)) { out.push(diag(at, at, `relation ${r.name} of type ${t.name} is also declared at ${where(seen.get(r.name))}`)); continue; }
      seen.set(r.name, r.loc);
      for (const p of r.problems ?? []) out.push(diag(p.loc, at, `relation ${t.name}#${r.name}: ${p.message}`));
      if (directCount(r.expr) > 1) out.push(diag(at, at, `relation ${t.name}#${r.name}: at most one [...] of direct types per definition`));
      checkExpr(model, t.name, r.name, r.expr, at, out);
    }
  }
}

function checkExpr(m: RelationModel, type: string, rel: string, e: RelExpr, at: Loc, out: Diagnostic[]): void {
  const here = `relation ${type}#${rel}`;
  const relations = m.types.get(type)!.relations;
  switch (e.op) {
    case 'direct': {
      const seen = new Set<string>();
      for (const ref of e.refs) {
        const l = ref.loc ?? at;
        const text = fmtTypeRef(ref);
        if (seen.has(text)) out.push(diag(l, at, `${here}: ${text} is listed twice`));
        seen.add(text);
        const target = m.types.get(ref.type);
        if (!target) { out.push(diag(l, at, `${here}: unknown type ${ref.type}`)); continue; }
        if (ref.relation !== undefined && !target.relations.has(ref.relation)) {
          out.push(diag(l, at, `${here}: ${ref.type}#${ref.relation} is impossible: type ${ref.type} has no relation ${ref.relation}`));
        }
        if (ref.condition !== undefined && !m.conditions.has(ref.condition)) out.push(diag(l, at, `${here}: unknown condition ${ref.condition}`));
      }
      break;
    }
    case 'computed':
      if (!relations.has(e.relation)) out.push(diag(e.loc ?? at, at, `${here}: type ${type} has no relation ${e.relation}`));
      else if (e.relation === rel) out.push(diag(e.loc ?? at, at, `${here}: a relation cannot be defined as itself`));
      break;
    case 'ttu': {
      const l = e.loc ?? at;
      const ts = relations.get(e.tupleset);
      if (!ts) { out.push(diag(l, at, `${here}: type ${type} has no relation ${e.tupleset} (in "${e.relation} from ${e.tupleset}")`)); break; }
      if (ts.expr.op !== 'direct') { out.push(diag(l, at, `${here}: "from ${e.tupleset}" needs ${type}#${e.tupleset} to be direct types only, such as [folder]`)); break; }
      const bad = ts.direct.find((r) => r.relation !== undefined || r.wildcard);
      if (bad) { out.push(diag(l, at, `${here}: "from ${e.tupleset}" needs ${type}#${e.tupleset} to list plain types, not ${fmtTypeRef(bad)}`)); break; }
      const targets = ts.direct.map((r) => r.type).filter((t) => m.types.has(t));
      if (targets.length && !targets.some((t) => m.types.get(t)!.relations.has(e.relation))) {
        out.push(diag(l, at, `${here}: none of the types of ${type}#${e.tupleset} (${[...new Set(targets)].join(', ')}) has a relation ${e.relation}`));
      }
      break;
    }
    case 'union': case 'intersection': for (const i of e.items) checkExpr(m, type, rel, i, at, out); break;
    case 'exclusion': checkExpr(m, type, rel, e.base, at, out); checkExpr(m, type, rel, e.subtract, at, out); break;
  }
}

/**
 * Warnings (for `policy check`): relations that can never hold, whatever relationships are
 * written (nothing reaches them: no direct types on any path, or an intersection with one).
 */
export function modelWarnings(files: PolicyFileNode[]): Diagnostic[] {
  const m = buildModel(files);
  const can = new Set<string>();
  const key = (t: string, r: string) => `${t}#${r}`;
  const possible = (t: string, e: RelExpr): boolean => {
    switch (e.op) {
      case 'direct': return e.refs.length > 0;
      case 'computed': return can.has(key(t, e.relation));
      case 'ttu': {
        const ts = relationOf(m, t, e.tupleset);
        return !!ts && ts.direct.some((r) => can.has(key(r.type, e.relation)));
      }
      case 'union': return e.items.some((i) => possible(t, i));
      case 'intersection': return e.items.every((i) => possible(t, i));
      case 'exclusion': return possible(t, e.base);
    }
  };
  for (let changed = true; changed;) {
    changed = false;
    for (const t of m.types.values()) for (const r of t.relations.values()) {
      if (!can.has(key(t.name, r.name)) && possible(t.name, r.expr)) { can.add(key(t.name, r.name)); changed = true; }
    }
  }
  const out: Diagnostic[] = [];
  // A relation is the permission `<relation>:<plural of its type>`: a type no plural reads back
  // to (a name ending in a single "s": "bus", whose "buses" reads as "buse") needs a `kind`.
  const declared = new Set<string>();
  for (const f of files) for (const i of f.items) if (i.kind === 'kind') declared.add(i.singular);
  for (const t of m.types.values()) {
    if (!t.relations.size || declared.has(t.name) || singularOf(englishPlural(t.name)) === t.name) continue;
    const at = t.loc ?? { file: '<policy>', line: 1, col: 1 };
    const first = t.relations.keys().next().value!;
    out.push(diag(at, at, `type ${t.name}: no plural reads back as "${t.name}" ("${englishPlural(t.name)}" reads as "${singularOf(englishPlural(t.name))}"), so its relations are no permission (${first}:<plural>) until one is declared: kind "${englishPlural(t.name)}" singular "${t.name}"`, 'warning', 'relation_not_a_permission'));
  }
  for (const t of m.types.values()) for (const r of t.relations.values()) {
    if (can.has(key(t.name, r.name))) continue;
    const at = r.loc ?? t.loc ?? { file: '<policy>', line: 1, col: 1 };
    out.push(diag(at, at, `relation ${t.name}#${r.name} can never hold: no relationship can reach it`, 'warning', 'unreachable_relation'));
  }
  return out;
}

/**
 * Why the model does not allow a relationship (unknown type or relation, a subject or a
 * condition its type restrictions do not list), or null when it does.
 */
export function disallowed(m: RelationModel, r: Relationship): string | null {
  const o = parseObject(r.object);
  if (typeof o === 'string') return o;
  const s = parseSubject(r.subject);
  if (typeof s === 'string') return s;
  const t = m.types.get(o.type);
  if (!t) return `unknown type ${o.type}`;
  const def = t.relations.get(r.relation);
  if (!def) return `type ${o.type} has no relation ${r.relation}`;
  if (!def.direct.length) return `${o.type}#${r.relation} takes no relationships of its own (it is derived)`;
  if (r.condition && !m.conditions.has(r.condition.name)) return `unknown condition ${r.condition.name}`;
  if (!allows(def, s.type, s.relation, s.wildcard, r.condition?.name)) {
    const subject = s.relation !== undefined ? `${s.type}#${s.relation}` : s.wildcard ? `${s.type}:*` : s.type;
    const allowed = def.direct.map(fmtTypeRef).join(', ');
    return `${o.type}#${r.relation} does not allow ${subject}${r.condition ? ` with ${r.condition.name}` : ''} (it allows ${allowed})`;
  }
  return null;
}

/** Does a relation's type restriction list this kind of subject, with this condition (or none)? */
export function allows(def: RelationDef, type: string, relation: string | undefined, wildcard: boolean, condition: string | undefined): boolean {
  for (const ref of def.direct) {
    if (ref.type !== type || ref.relation !== relation || (ref.wildcard === true) !== wildcard) continue;
    if (ref.condition === condition) return true;
  }
  return false;
}
