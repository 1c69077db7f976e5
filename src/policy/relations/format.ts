// The canonical text of types, relations, conditions and relationship fixtures (`policy fmt`).
// Parentheses are printed exactly where the grammar needs them, so that parsing the output
// gives the same tree.

import type { CExpr, ConditionNode, ParamTypeNode, RelAssertion, RelExpr, RelationshipLineNode, TypeRefNode } from './ast.js';
import type { JsonValue } from '../ast.js';

function fmtString(s: string): string {
  return JSON.stringify(s);
}

export function fmtTypeRef(r: TypeRefNode): string {
  const base = r.relation !== undefined ? `${r.type}#${r.relation}` : r.wildcard ? `${r.type}:*` : r.type;
  return r.condition !== undefined ? `${base} with ${r.condition}` : base;
}

const composite = (e: RelExpr) => e.op === 'union' || e.op === 'intersection' || e.op === 'exclusion';

export function fmtRelExpr(e: RelExpr): string {
  const sub = (c: RelExpr) => (composite(c) ? `(${fmtRelExpr(c)})` : fmtRelExpr(c));
  switch (e.op) {
    case 'direct': return `[${e.refs.map(fmtTypeRef).join(', ')}]`;
    case 'computed': return e.relation;
    case 'ttu': return `${e.relation} from ${e.tupleset}`;
    case 'union': return e.items.map(sub).join(' or ');
    case 'intersection': return e.items.map(sub).join(' and ');
    case 'exclusion': return `${sub(e.base)} but not ${sub(e.subtract)}`;
  }
}

export function fmtParamType(t: ParamTypeNode): string {
  return t.arg ? `${t.name}<${fmtParamType(t.arg)}>` : t.name;
}

/** Binding strength, loosest first: or, and, not/quantifier, comparison, sum, unary, postfix, atom. */
function prec(e: CExpr): number {
  switch (e.op) {
    case 'or': return 0;
    case 'and': return 1;
    case 'not': case 'quant': return 2;
    case 'in': case 'contains': case 'cmp': return 3;
    case 'add': case 'sub': return 4;
    case 'neg': return 5;
    case 'index': return 6;
    case 'num': return e.value < 0 || Object.is(e.value, -0) ? 5 : 7;
    default: return 7;
  }
}

export function fmtCExpr(e: CExpr): string {
  // A quantifier's body runs to the end, so a quantifier inside anything is parenthesized.
  const sub = (c: CExpr, min: number) => (prec(c) < min || (c.op === 'quant') ? `(${fmtCExpr(c)})` : fmtCExpr(c));
  switch (e.op) {
    case 'or': return e.items.map((i) => sub(i, 1)).join(' or ');
    case 'and': return e.items.map((i) => sub(i, 2)).join(' and ');
    case 'not': return `not ${sub(e.expr, 2)}`;
    case 'quant': return `${e.quant} ${e.name} in ${sub(e.list, 4)}: ${fmtCExpr(e.body)}`;
    case 'in': return `${sub(e.left, 4)} ${e.negated ? 'not in' : 'in'} ${sub(e.right, 4)}`;
    case 'contains': return `${sub(e.left, 4)} contains ${sub(e.right, 4)}`;
    case 'cmp': return `${sub(e.left, 4)} ${e.cmp} ${sub(e.right, 4)}`;
    case 'add': return `${sub(e.left, 4)} + ${sub(e.right, 5)}`;
    case 'sub': return `${sub(e.left, 4)} - ${sub(e.right, 5)}`;
    case 'neg': return `-${sub(e.expr, 5)}`;
    case 'index': return `${sub(e.target, 6)}[${fmtCExpr(e.index)}]`;
    case 'list': return `[${e.items.map(fmtCExpr).join(', ')}]`;
    case 'call': return `${e.fn}(${e.args.map(fmtCExpr).join(', ')})`;
    case 'num': return (Object.is(e.value, -0) ? '0' : String(e.value)) + (e.uint ? 'u' : '');
    case 'str': return fmtString(e.value);
    case 'bool': return String(e.value);
    case 'null': return 'null';
    case 'name': return e.name;
  }
}

export function fmtConditionHead(c: ConditionNode): string {
  return `condition ${c.name}(${c.params.map((p) => `${p.name}: ${fmtParamType(p.type)}`).join(', ')}) {`;
}

/** `"document:1#viewer@user:anne" with office_hours { start: 9 }` */
export function fmtRelationshipLine(l: RelationshipLineNode, json: (v: JsonValue) => string): string {
  if (!l.condition) return fmtString(l.text);
  const ctx = l.condition.context !== undefined ? ' ' + json(l.condition.context) : '';
  return `${fmtString(l.text)} with ${l.condition.name}${ctx}`;
}

export function fmtAssertion(a: RelAssertion, json: (v: JsonValue) => string): string {
  const ctx = a.context !== undefined ? ` context ${json(a.context)}` : '';
  const list = (v: string[] | 'error') => (v === 'error' ? 'error' : `[${v.map(fmtString).join(', ')}]`);
  switch (a.kind) {
    case 'check': return `check ${fmtString(a.subject)} ${fmtString(a.relation)} ${fmtString(a.object)}${ctx} expect ${a.expect}`;
    case 'list_objects': return `list objects ${fmtString(a.subject)} ${fmtString(a.relation)} ${fmtString(a.type)}${ctx} expect ${list(a.expect)}`;
    case 'list_subjects': return `list subjects ${fmtString(a.object)} ${fmtString(a.relation)} ${fmtString(a.subjectType)}${ctx} expect ${list(a.expect)}`;
  }
}
