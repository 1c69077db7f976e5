// Text → Ohm match → CST → AST with source locations, via one semantics
// operation (`ast`). Parse errors are collected with locations; when a file
// does not parse, each top-level block is parsed on its own so that every
// broken block is reported, not only the first.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ohm from 'ohm-js';
import type { Diagnostic, ConditionOp } from './types.js';
import type {
  ActionGroupNode, Comments, Expr, Item, JsonValue, KindNode, LimitField, Literal, LimitsNode, Loc, Operand, PathNode, PolicyFileNode, RelObject, RelWho, Root,
  InvariantNode, RuleNode, SchemaEntry, SchemaNode, TestFacts, TestNode, TimezoneNode,
} from './ast.js';
import { ROOTS } from './ast.js';
import type { UsedLine } from './ast.js';
import type { UsageLimitNode } from './usage.js';
import { projectRoot } from '../paths.js';
import { setOwn } from './own.js';
import { nearest } from './action-groups.js';
import type {
  CExpr, CondParamNode, ConditionNode, ParamTypeNode, RelAssertion, RelExpr, RelationNode, RelationshipLineNode, RelationshipsNode, TypeNode, TypeRefNode,
} from './relations/ast.js';

let grammarCache: ohm.Grammar | undefined;
let semanticsCache: ohm.Semantics | undefined;

export function policyGrammar(): ohm.Grammar {
  if (!grammarCache) grammarCache = ohm.grammar(readFileSync(join(projectRoot, 'grammar', 'policy.ohm'), 'utf8'));
  return grammarCache;
}

/** Offsets → line/col, in O(log n) per lookup. */
class LineIndex {
  private starts: number[] = [0];
  constructor(readonly file: string, text: string, readonly base = 0, readonly baseLine = 1) {
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) this.starts.push(i + 1);
  }
  loc(offset: number): Loc {
    let lo = 0, hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= offset) lo = mid; else hi = mid - 1;
    }
    return { file: this.file, line: lo + 1, col: offset - this.starts[lo]! + 1 };
  }
}

// The state of the one parse in progress (semantics operations are synchronous).
let lines: LineIndex;
interface Anchor { start: number; end: number; target: Record<string, Comments>; key: string }
let anchors: Anchor[] = [];
/** Problems of the relation being built (operators mixed without parentheses). */
let relProblems: { message: string; loc: Loc }[] = [];

const REL_OP_TEXT: Record<string, string> = { or: 'or', and: 'and', butnot: 'but not' };

function flatten(op: 'union' | 'intersection', e: RelExpr): RelExpr[] {
  return e.op === op ? e.items : [e];
}

function withLoc(e: RelExpr, loc: Loc): RelExpr {
  if (e.loc === undefined) e.loc = loc;
  return e;
}

function locOf(node: ohm.Node): Loc {
  return lines.loc(node.source.startIdx);
}

function anchor(target: { comments?: Record<string, Comments> }, key: string, node: ohm.Node | { startIdx: number; endIdx: number }): void {
  target.comments ??= {};
  const src = 'source' in node ? node.source : node;
  anchors.push({ start: src.startIdx, end: src.endIdx, target: target.comments, key });
}

const CMP: Record<string, ConditionOp> = { '>=': 'gte', '>': 'gt', '<=': 'lte', '<': 'lt', '==': 'eq', '!=': 'ne' };

function unescape(raw: string): string {
  let out = '';
  for (let i = 1; i < raw.length - 1; i++) {
    const c = raw[i]!;
    if (c !== '\\') { out += c; continue; }
    const e = raw[++i]!;
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': out += String.fromCharCode(parseInt(raw.slice(i + 1, i + 5), 16)); i += 4; break;
      default: out += e;
    }
  }
  return out;
}

type RuleField = { key: 'effect' | 'subjects' | 'relation' | 'object' | 'when'; value: unknown; loc: Loc; node: ohm.Node };
/** `parts`: for a line that opens a block (`capability "x" {`, `person "p" {`), the opening, each inner line and the `}`, so that their comments stay with them. */
type TestLine = { key: string; apply: (t: TestNode) => void; loc: Loc; node: ohm.Node; parts?: SubLine[] };
type SubLine = { key: string; node: ohm.Node | { startIdx: number; endIdx: number } };
type FactLine = { key: 'roles' | 'groups' | 'email' | 'attributes'; apply: (f: TestFacts) => void };

/** `amount` is the context field; `subject.x` starts at a root; `amount.x` is a nested context field. */
export function pathFromText(text: string, loc?: Loc): PathNode {
  const parts = text.split('.');
  // `action` alone is the action asked; `context.action` is a context field of that name.
  const node: PathNode = (ROOTS as readonly string[]).includes(parts[0]!) && (parts.length > 1 || parts[0] === 'action')
    ? { type: 'path', root: parts[0] as Root, segs: parts.slice(1) }
    : { type: 'path', root: 'context', segs: parts, bare: true };
  if (loc) node.loc = loc;
  return node;
}

function listOf(node: ohm.Node): ohm.Node[] {
  return node.asIteration().children;
}

/** The location of each string of a StringList (`["a", "b"]` or `"a", "b"`). */
function stringLocs(list: ohm.Node): Loc[] {
  const alt = list.child(0);
  return listOf(alt.ctorName === 'StringList_brackets' ? alt.child(1) : alt.child(0)).map(locOf);
}

function semantics(): ohm.Semantics {
  if (semanticsCache) return semanticsCache;
  const s = policyGrammar().createSemantics();
  s.addOperation('ast', {
    File(header, items) {
      const file: PolicyFileNode = { path: lines.file, items: items.children.map((c) => c.ast() as Item) };
      if (header.numChildren) {
        file.header = header.children[0]!.ast();
        file.comments = {};
        anchors.push({ start: header.source.startIdx, end: header.source.endIdx, target: file.comments as Record<string, Comments>, key: 'header' });
      }
      return file;
    },
    Header(_p, name, _v, version) {
      return { name: name.ast(), version: version.ast(), loc: locOf(this) };
    },
    Item(item) { return item.ast(); },
    Rule(_kw, name, _open, fields, close) {
      const rule: RuleNode = { kind: 'rule', name: name.ast(), effect: '', subjects: [], relation: '', object: '', loc: locOf(this), fieldLocs: { name: locOf(name) } };
      anchor(rule, 'item', { startIdx: this.source.startIdx, endIdx: fields.numChildren ? _open.source.endIdx : this.source.endIdx });
      const seen = new Set<string>();
      for (const f of fields.children.map((c) => c.ast() as RuleField)) {
        if (seen.has(f.key)) (rule.duplicateFields ??= []).push({ field: f.key, loc: f.loc });
        seen.add(f.key);
        rule.fieldLocs![f.key] = f.loc;
        anchor(rule, f.key, f.node);
        if (f.key === 'subjects') { rule.subjects = f.value as string[]; rule.subjectLocs = stringLocs(f.node.child(1)); }
        else if (f.key === 'when') rule.when = f.value as Expr;
        else if (f.key === 'relation') {
          const list = f.value as string[];
          rule.relation = list[0] ?? '';
          rule.relationLocs = stringLocs(f.node.child(1));
          if (list.length !== 1 || !list[0]!.includes(':')) rule.relations = list;
        }
        else rule[f.key] = f.value as string;
      }
      if (fields.numChildren) anchor(rule, 'end', close);
      return rule;
    },
    Invariant(_kw, name, _open, _never, decision, list, _on, object, when, _close) {
      const relations = list.ast() as string[];
      const node: InvariantNode = {
        kind: 'invariant', name: name.ast(), never: decision.sourceString, relations, object: object.ast(), loc: locOf(this),
        fieldLocs: { name: locOf(name), never: locOf(decision), relation: locOf(list), object: locOf(object) },
        relationLocs: stringLocs(list),
      };
      if (when.numChildren) { node.when = when.children[0]!.ast(); node.fieldLocs!.when = locOf(when.children[0]!.child(1)); }
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: _open.source.endIdx });
      anchor(node, 'never', { startIdx: _never.source.startIdx, endIdx: (when.numChildren ? when : object).source.endIdx });
      anchor(node, 'end', _close);
      return node;
    },
    InvariantWhen(_kw, e) { return e.ast(); },
    RuleField_effect(_kw, w) { return { key: 'effect', value: w.sourceString, loc: locOf(w), node: this }; },
    RuleField_subjects(_kw, l) { return { key: 'subjects', value: l.ast(), loc: locOf(l), node: this }; },
    RuleField_relation(_kw, l) { return { key: 'relation', value: l.ast(), loc: locOf(l), node: this }; },
    RuleField_object(_kw, v) { return { key: 'object', value: v.ast(), loc: locOf(v), node: this }; },
    RuleField_when(_kw, e) { return { key: 'when', value: e.ast(), loc: locOf(e), node: this }; },
    StringList_brackets(_o, list, _c) { return listOf(list).map((c) => c.ast()); },
    StringList_bare(list) { return listOf(list).map((c) => c.ast()); },

    Expr(list) {
      const items = listOf(list).map((c) => c.ast() as Expr);
      if (items.length === 1) return items[0];
      return { type: 'or', items: items.flatMap((i) => (i.type === 'or' ? i.items : [i])), loc: locOf(this) };
    },
    AndExpr(list) {
      const items = listOf(list).map((c) => c.ast() as Expr);
      if (items.length === 1) return items[0];
      return { type: 'and', items: items.flatMap((i) => (i.type === 'and' ? i.items : [i])), loc: locOf(this) };
    },
    NotExpr_not(_n, e) { return { type: 'not', expr: e.ast(), loc: locOf(this) }; },
    Primary_paren(_o, e, _c) { return e.ast(); },
    Primary_has(who, _h, rel, _on, obj) {
      return { type: 'has', who: who.sourceString as RelWho, relation: rel.sourceString, object: obj.ast(), loc: locOf(this), relationLoc: locOf(rel) };
    },
    Primary_present(base, _h, field) {
      const path = pathFromText(`${base.sourceString}.${field.sourceString}`, locOf(base));
      return { type: 'present', left: path, right: { type: 'lit', value: true }, loc: locOf(this) } satisfies Expr;
    },
    Primary_within(obj, _in, anc, _t, rel) {
      return { type: 'within', object: obj.ast(), ancestor: anc.ast(), relation: rel.sourceString, loc: locOf(this), relationLoc: locOf(rel) };
    },
    RelObject(o) {
      if (o.ctorName === 'path') {
        // `resource` alone is the resource itself (a path needs a field after a root).
        if (o.sourceString === 'resource') return { type: 'resource', loc: locOf(this) } satisfies RelObject;
        return o.ast();
      }
      return { type: 'lit', value: o.ast(), loc: locOf(this) } satisfies RelObject;
    },
    Primary_notin(l, _n, _i, r) { return { type: 'in', left: l.ast(), negated: true, right: r.ast(), loc: locOf(this) }; },
    Primary_in(l, _i, r) { return { type: 'in', left: l.ast(), negated: false, right: r.ast(), loc: locOf(this) }; },
    Primary_notlike(l, _n, _k, r) { return { type: 'like', left: l.ast(), negated: true, right: r.ast(), loc: locOf(this) }; },
    Primary_like(l, _k, r) { return { type: 'like', left: l.ast(), negated: false, right: r.ast(), loc: locOf(this) }; },
    Primary_containsany(l, _c, _a, r) { return { type: 'contains', left: l.ast(), mode: 'any', right: r.ast(), loc: locOf(this) }; },
    Primary_containsall(l, _c, _a, r) { return { type: 'contains', left: l.ast(), mode: 'all', right: r.ast(), loc: locOf(this) }; },
    Primary_contains(l, _c, r) { return { type: 'contains', left: l.ast(), mode: 'one', right: r.ast(), loc: locOf(this) }; },
    Primary_cmp(l, op, r) {
      const text = op.sourceString;
      const e: Expr = { type: 'cmp', left: l.ast(), op: CMP[text] ?? 'eq', right: r.ast(), loc: locOf(this) };
      if (!CMP[text]) e.opText = text;
      return e;
    },
    Operand(o) {
      if (o.ctorName === 'path') return o.ast();
      return { type: 'lit', value: o.ast(), loc: locOf(this) } satisfies Operand;
    },
    path(_f, _dots, _words) { return pathFromText(this.sourceString, locOf(this)); },

    // ---- types and relations ----
    TypeDecl(_kw, name, body) {
      const node: TypeNode = { kind: 'type', name: name.sourceString, relations: [], loc: locOf(this) };
      if (!body.numChildren) { anchor(node, 'item', this); return node; }
      const [open, rels, close] = body.children[0]!.children as [ohm.Node, ohm.Node, ohm.Node];
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: open.source.endIdx });
      for (const r of rels.children) {
        node.relations.push(r.ast() as RelationNode);
        anchor(node, 'relation:' + (node.relations.length - 1), r);
      }
      if (rels.numChildren) anchor(node, 'end', close);
      return node;
    },
    RelationDecl(_kw, name, _colon, expr) {
      relProblems = [];
      const rel: RelationNode = { name: name.sourceString, expr: expr.ast() as RelExpr, loc: locOf(name) };
      if (relProblems.length) rel.problems = relProblems;
      relProblems = [];
      return rel;
    },
    RelExpr(first, tails) {
      const head = first.ast() as RelExpr;
      if (!tails.numChildren) return head;
      const parts = tails.children.map((t) => ({ op: t.child(0).ctorName.slice('RelTail_'.length), term: t.ast() as RelExpr, loc: locOf(t) }));
      const ops = new Set(parts.map((p) => p.op));
      if (ops.size > 1) {
        const at = parts.find((p) => p.op !== parts[0]!.op)!;
        relProblems.push({ message: `"${REL_OP_TEXT[parts[0]!.op]}" and "${REL_OP_TEXT[at.op]}" are mixed without parentheses; add parentheses to say which applies first`, loc: at.loc });
      }
      if (parts[0]!.op === 'butnot' || ops.has('butnot')) {
        // Left to right, as written; more than one `but not` at one level is reported above or here.
        if (ops.size === 1 && parts.length > 1) {
          relProblems.push({ message: '"but not" takes one base and one subtracted operand; add parentheses', loc: parts[1]!.loc });
        }
      }
      // Build left to right: a chain of one operator is one node; a mixed chain (an error) still gets a tree.
      let acc = head;
      for (const p of parts) {
        if (p.op === 'butnot') acc = { op: 'exclusion', base: acc, subtract: p.term, loc: locOf(this) };
        else {
          const op = p.op === 'or' ? 'union' : 'intersection';
          if (acc.op === op && acc.loc === undefined) acc.items.push(...flatten(op, p.term));
          else acc = { op, items: [...flatten(op, acc), ...flatten(op, p.term)] };
        }
      }
      return withLoc(acc, locOf(this));
    },
    RelTail_or(_op, t) { return t.ast(); },
    RelTail_and(_op, t) { return t.ast(); },
    RelTail_butnot(_b, _n, t) { return t.ast(); },
    RelTerm_paren(_o, e, _c) { return e.ast(); },
    RelTerm_direct(_o, list, _c) { return { op: 'direct', refs: listOf(list).map((c) => c.ast() as TypeRefNode), loc: locOf(this) }; },
    RelTerm_ttu(rel, _from, ts) { return { op: 'ttu', relation: rel.sourceString, tupleset: ts.sourceString, loc: locOf(this) }; },
    RelTerm_computed(rel) { return { op: 'computed', relation: rel.sourceString, loc: locOf(this) }; },
    TypeRef(ref, _with, condName) {
      const text = ref.sourceString;
      const node: TypeRefNode = { type: text, loc: locOf(this) };
      const h = text.indexOf('#');
      if (h >= 0) { node.type = text.slice(0, h); node.relation = text.slice(h + 1); }
      else if (text.endsWith(':*')) { node.type = text.slice(0, -2); node.wildcard = true; }
      if (condName.numChildren) node.condition = condName.children[0]!.sourceString;
      return node;
    },

    // ---- conditions ----
    ConditionDecl(_kw, name, _o, params, _c, open, body, close) {
      const node: ConditionNode = { kind: 'condition', name: name.sourceString, params: listOf(params).map((p) => p.ast() as CondParamNode), body: body.ast() as CExpr, loc: locOf(this) };
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: open.source.endIdx });
      anchor(node, 'body', body);
      anchor(node, 'end', close);
      return node;
    },
    CondParam(name, _colon, t) { return { name: name.sourceString, type: t.ast(), loc: locOf(this) }; },
    ParamType_generic(name, _o, arg, _c) { return { name: name.sourceString, arg: arg.ast() as ParamTypeNode, loc: locOf(this) }; },
    ParamType_simple(name) { return { name: name.sourceString, loc: locOf(this) }; },
    CExpr(list) {
      const items = listOf(list).map((c) => c.ast() as CExpr);
      if (items.length === 1) return items[0];
      return { op: 'or', items: items.flatMap((i) => (i.op === 'or' ? i.items : [i])), loc: locOf(this) };
    },
    CAnd(list) {
      const items = listOf(list).map((c) => c.ast() as CExpr);
      if (items.length === 1) return items[0];
      return { op: 'and', items: items.flatMap((i) => (i.op === 'and' ? i.items : [i])), loc: locOf(this) };
    },
    CNot_not(_n, e) { return { op: 'not', expr: e.ast(), loc: locOf(this) }; },
    CNot_quant(q, name, _in, list, _colon, body) {
      return { op: 'quant', quant: q.sourceString as 'any' | 'all' | 'one', name: name.sourceString, list: list.ast(), body: body.ast(), loc: locOf(this) };
    },
    CRel_notin(l, _n, _i, r) { return { op: 'in', negated: true, left: l.ast(), right: r.ast(), loc: locOf(this) }; },
    CRel_in(l, _i, r) { return { op: 'in', negated: false, left: l.ast(), right: r.ast(), loc: locOf(this) }; },
    CRel_contains(l, _c, r) { return { op: 'contains', left: l.ast(), right: r.ast(), loc: locOf(this) }; },
    CRel_cmp(l, op, r) { return { op: 'cmp', cmp: op.sourceString, left: l.ast(), right: r.ast(), loc: locOf(op) }; },
    CRel_plain(e) { return e.ast(); },
    CSum_add(l, _p, r) { return { op: 'add', left: l.ast(), right: r.ast(), loc: locOf(this) }; },
    CSum_sub(l, _m, r) { return { op: 'sub', left: l.ast(), right: r.ast(), loc: locOf(this) }; },
    CUnary_neg(_m, e) {
      const inner = e.ast() as CExpr;
      // `-1` is the number -1, so that fmt and literals agree.
      if (inner.op === 'num' && !inner.uint) return { op: 'num', value: inner.value === 0 ? 0 : -inner.value, loc: locOf(this) };
      return { op: 'neg', expr: inner, loc: locOf(this) };
    },
    CPost_index(t, _o, i, _c) { return { op: 'index', target: t.ast(), index: i.ast(), loc: locOf(this) }; },
    CAtom_paren(_o, e, _c) { return e.ast(); },
    CAtom_list(_o, items, _comma, _c) { return { op: 'list', items: listOf(items).map((c) => c.ast() as CExpr), loc: locOf(this) }; },
    CAtom_call(fn, _o, args, _c) { return { op: 'call', fn: fn.sourceString, args: listOf(args).map((c) => c.ast() as CExpr), loc: locOf(this) }; },
    CAtom_num(n) {
      const text = n.sourceString;
      const uint = text.endsWith('u');
      const value = Number(uint ? text.slice(0, -1) : text);
      return uint ? { op: 'num', value, uint: true, loc: locOf(this) } : { op: 'num', value, loc: locOf(this) };
    },
    CAtom_str(s) { return { op: 'str', value: s.ast(), loc: locOf(this) }; },
    CAtom_bool(b) { return { op: 'bool', value: b.sourceString === 'true', loc: locOf(this) }; },
    CAtom_null(_n) { return { op: 'null', loc: locOf(this) }; },
    CAtom_name(f) { return { op: 'name', name: f.sourceString, loc: locOf(this) }; },

    // ---- relationships ----
    Relationships(_kw, open, rlines, close) {
      const node: RelationshipsNode = { kind: 'relationships', lines: [], loc: locOf(this) };
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: open.source.endIdx });
      for (const l of rlines.children) {
        node.lines.push(l.ast() as RelationshipLineNode);
        anchor(node, 'line:' + (node.lines.length - 1), l);
      }
      if (rlines.numChildren) anchor(node, 'end', close);
      return node;
    },
    RelationshipLine(text, cond) {
      const line: RelationshipLineNode = { text: text.ast(), loc: locOf(text) };
      if (cond.numChildren) line.condition = cond.children[0]!.ast();
      return line;
    },
    RelCondition(_w, name, ctx) {
      return ctx.numChildren ? { name: name.sourceString, context: ctx.children[0]!.ast() } : { name: name.sourceString };
    },
    TestLine_relationship(_k, text, cond) {
      const line: RelationshipLineNode = { text: text.ast(), loc: locOf(text) };
      if (cond.numChildren) line.condition = cond.children[0]!.ast();
      return { key: 'relationship', loc: locOf(this), node: this, apply: (t: TestNode) => { (t.relationships ??= []).push(line); } };
    },
    TestLine_check(_k, subject, relation, object, ctx, _e, w) {
      const a: RelAssertion = { kind: 'check', subject: subject.ast(), relation: relation.ast(), object: object.ast(), expect: w.sourceString, loc: locOf(this) };
      if (ctx.numChildren) a.context = ctx.children[0]!.ast();
      return { key: 'assert', loc: locOf(this), node: this, apply: (t: TestNode) => { (t.assertions ??= []).push(a); } };
    },
    TestLine_listobjects(_l, _o, subject, relation, type, ctx, _e, exp) {
      const a: RelAssertion = { kind: 'list_objects', subject: subject.ast(), relation: relation.ast(), type: type.ast(), expect: exp.ast(), loc: locOf(this) };
      if (ctx.numChildren) a.context = ctx.children[0]!.ast();
      return { key: 'assert', loc: locOf(this), node: this, apply: (t: TestNode) => { (t.assertions ??= []).push(a); } };
    },
    TestLine_listsubjects(_l, _s, object, relation, type, ctx, _e, exp) {
      const a: RelAssertion = { kind: 'list_subjects', object: object.ast(), relation: relation.ast(), subjectType: type.ast(), expect: exp.ast(), loc: locOf(this) };
      if (ctx.numChildren) a.context = ctx.children[0]!.ast();
      return { key: 'assert', loc: locOf(this), node: this, apply: (t: TestNode) => { (t.assertions ??= []).push(a); } };
    },
    ContextArg(_k, obj) { return obj.ast(); },
    ExpectList_list(l) { return l.ast(); },
    ExpectList_error(_e) { return 'error'; },
    StringList(l) { return l.ast(); },

    Timezone(_kw, name) {
      const node: TimezoneNode = { kind: 'timezone', name: name.ast(), loc: locOf(this) };
      anchor(node, 'item', this);
      return node;
    },
    Schema(_kw, _open, entries, close) {
      const node: SchemaNode = { kind: 'schema', entries: [], loc: locOf(this) };
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: _open.source.endIdx });
      for (const e of entries.children) {
        node.entries.push(e.ast() as SchemaEntry);
        anchor(node, 'entry:' + (node.entries.length - 1), e);
      }
      if (entries.numChildren) anchor(node, 'end', close);
      return node;
    },
    SchemaEntry(p, _colon, t) { return { path: p.ast(), type: t.ast(), loc: locOf(this) }; },
    SchemaType_list(_o, w, _c) { return { base: w.sourceString, list: true, loc: locOf(this) }; },
    SchemaType_entity(_k, w) { return { base: 'entity', entity: w.sourceString, list: false, loc: locOf(this) }; },
    SchemaType_scalar(w) { return { base: w.sourceString, list: false, loc: locOf(this) }; },

    Limits(_kw, cap, _for, agent, _open, lines_, close) {
      const node: LimitsNode = { kind: 'limits', capability: cap.ast(), forAgent: agent.ast(), fields: [], loc: locOf(this) };
      anchor(node, 'item', { startIdx: this.source.startIdx, endIdx: _open.source.endIdx });
      for (const l of lines_.children) {
        const f = l.ast() as LimitField | { usage: UsageLimitNode };
        if ('usage' in f) {
          (node.usage ??= []).push(f.usage);
          anchor(node, 'usage:' + (node.usage.length - 1), l);
          continue;
        }
        node.fields.push(f);
        anchor(node, 'field:' + (node.fields.length - 1), l);
      }
      if (lines_.numChildren) anchor(node, 'end', close);
      return node;
    },
    LimitLine_sum(f, _s, _m, max, _p, w, scope) {
      const usage: UsageLimitNode = { kind: 'sum', field: f.sourceString, max: max.ast(), per: w.sourceString, loc: locOf(this) };
      if (scope.numChildren) usage.scope = scope.children[0]!.children[1]!.sourceString;
      return { usage };
    },
    LimitLine_count(_c, _m, max, _p, w, scope) {
      const usage: UsageLimitNode = { kind: 'count', field: null, max: max.ast(), per: w.sourceString, loc: locOf(this) };
      if (scope.numChildren) usage.scope = scope.children[0]!.children[1]!.sourceString;
      return { usage };
    },
    LimitLine_eq(f, op, lit) {
      const field: LimitField = { field: f.sourceString, eq: lit.ast(), loc: locOf(f) };
      if (op.sourceString !== '=' && op.sourceString !== '==') {
        field.bad = [{ message: `unknown operator "${op.sourceString}" in limits (use =, max, min, in or not_in)`, loc: locOf(op) }];
      }
      return field;
    },
    LimitLine_ops(f, ops) {
      const field: LimitField = { field: f.sourceString, loc: locOf(f) };
      for (const o of ops.children) {
        const word = o.children[0]!.sourceString;
        const value = o.children[1]!.ast() as Literal;
        const l = locOf(o);
        if (word !== 'max' && word !== 'min' && word !== 'in' && word !== 'not_in' && word !== 'eq') {
          (field.bad ??= []).push({ message: `unknown operator "${word}" in limits (use max, min, in, not_in or =)`, loc: l });
        } else if (field[word] !== undefined) {
          (field.bad ??= []).push({ message: `operator ${word} given twice for field ${field.field}`, loc: l });
        } else {
          field[word] = value;
        }
      }
      return field;
    },

    ActionGroup(_k, name, _eq, list) {
      const node: ActionGroupNode = { kind: 'actions', name: name.ast(), members: list.ast(), memberLocs: stringLocs(list), loc: locOf(this) };
      anchor(node, 'item', this);
      return node;
    },
    KindDecl(_k, plural, _s, singular) {
      const node: KindNode = { kind: 'kind', plural: plural.ast(), singular: singular.ast(), loc: locOf(this) };
      anchor(node, 'item', this);
      return node;
    },

    Test(_kw, name, _open, tlines, close) {
      const t: TestNode = { kind: 'test', name: name.ast(), capabilities: [], approved: false, loc: locOf(this), lineLocs: {} };
      anchor(t, 'item', { startIdx: this.source.startIdx, endIdx: _open.source.endIdx });
      for (const l of tlines.children) {
        const line = l.ast() as TestLine;
        const key = line.key === 'capability' ? 'capability:' + t.capabilities.length : line.key === 'used' ? 'used:' + (t.used?.length ?? 0)
          : line.key === 'relationship' ? 'relationship:' + (t.relationships?.length ?? 0) : line.key === 'assert' ? 'assert:' + (t.assertions?.length ?? 0) : line.key;
        line.apply(t);
        // Only capability and used lines may repeat; any other line given twice would silently replace the first.
        if (Object.hasOwn(t.lineLocs!, key)) (t.duplicateLines ??= []).push({ line: line.key, loc: line.loc });
        else t.lineLocs![key] = line.loc;
        if (line.parts) for (const part of line.parts) anchor(t, key + part.key, part.node);
        else anchor(t, key, line.node);
      }
      if (tlines.numChildren) anchor(t, 'end', close);
      return t;
    },
    TestLine_agent(_k, id, mode) {
      return { key: 'agent', loc: locOf(this), node: this, apply: (t: TestNode) => { t.agent = { id: id.ast(), ...(mode.numChildren ? { mode: mode.sourceString } : {}) }; } };
    },
    TestLine_user(_k, id) {
      return { key: 'user', loc: locOf(this), node: this, apply: (t: TestNode) => { t.user = { id: id.ast() }; } };
    },
    TestLine_permissions(_k, list) {
      const perms: string[] = list.numChildren ? list.children[0]!.ast() : [];
      return { key: 'permissions', loc: locOf(this), node: this, apply: (t: TestNode) => { t.permissions = perms; } };
    },
    TestLine_capability(_k, name, limits) {
      const cap: TestNode['capabilities'][number] = { name: name.ast() };
      let parts: SubLine[] | undefined;
      if (limits.numChildren) {
        const block = limits.children[0]!;
        const lines = block.ast() as (LimitField | { usage: UsageLimitNode })[];
        cap.limits = lines.filter((l): l is LimitField => !('usage' in l));
        const usage = lines.filter((l): l is { usage: UsageLimitNode } => 'usage' in l).map((l) => l.usage);
        if (usage.length) cap.usage = usage;
        // Inner lines are keyed as fmt prints them: plain limits, then limits over time, each in order.
        const [open, inner, close] = block.children as [ohm.Node, ohm.Node, ohm.Node];
        let fields = 0, usages = 0;
        parts = [
          { key: '', node: { startIdx: this.source.startIdx, endIdx: open.source.endIdx } },
          ...inner.children.map((c, i) => ({ key: 'usage' in lines[i]! ? `:usage:${usages++}` : `:field:${fields++}`, node: c })),
          { key: ':end', node: close },
        ];
      }
      return { key: 'capability', loc: locOf(this), node: this, apply: (t: TestNode) => { t.capabilities.push(cap); }, ...(parts ? { parts } : {}) };
    },
    CapabilityLimits(_o, ls, _c) { return ls.children.map((c) => c.ast()); },
    TestLine_used(_k, what, amount, _in, w, scope) {
      const line: UsedLine = { what: what.sourceString, amount: amount.ast(), per: w.sourceString, loc: locOf(this) };
      if (scope.numChildren) line.scope = scope.children[0]!.children[1]!.sourceString;
      return { key: 'used', loc: locOf(this), node: this, apply: (t: TestNode) => { (t.used ??= []).push(line); } };
    },
    TestLine_person(_k, id, _p, list) {
      let perms: string[] = [];
      if (list.numChildren && list.children[0]!.numChildren) perms = list.children[0]!.children[0]!.ast();
      return { key: 'person', loc: locOf(this), node: this, apply: (t: TestNode) => { t.person = { id: id.ast(), permissions: perms }; } };
    },
    TestLine_personblock(_k, id, facts) {
      const person: NonNullable<TestNode['person']> = { id: id.ast(), permissions: [] };
      const lines = facts.ast() as (FactLine | { key: 'permissions'; perms: string[] })[];
      for (const line of lines) {
        if ('perms' in line) person.permissions = line.perms; else line.apply(person);
      }
      const [open, inner, close] = facts.children as [ohm.Node, ohm.Node, ohm.Node];
      const parts: SubLine[] = [
        { key: '', node: { startIdx: this.source.startIdx, endIdx: open.source.endIdx } },
        ...inner.children.map((c, i) => ({ key: ':' + lines[i]!.key, node: c })),
        { key: ':end', node: close },
      ];
      return { key: 'person', loc: locOf(this), node: this, apply: (t: TestNode) => { t.person = person; }, parts };
    },
    PersonFacts(_o, lines_, _c) { return lines_.children.map((c) => c.ast()); },
    PersonLine_permissions(_k, list) { return { key: 'permissions', perms: list.numChildren ? list.children[0]!.ast() : [] }; },
    PersonLine_fact(f) { return f.ast(); },
    TestLine_fact(f) {
      const line = f.ast() as FactLine;
      return { key: line.key, loc: locOf(this), node: this, apply: (t: TestNode) => { line.apply((t.facts ??= {})); } };
    },
    FactLine_roles(_k, list) {
      const v: string[] = list.numChildren ? list.children[0]!.ast() : [];
      return { key: 'roles', apply: (f: TestFacts) => { f.roles = v; } };
    },
    FactLine_groups(_k, list) {
      const v: string[] = list.numChildren ? list.children[0]!.ast() : [];
      return { key: 'groups', apply: (f: TestFacts) => { f.groups = v; } };
    },
    FactLine_email(_k, v) { const e: string = v.ast(); return { key: 'email', apply: (f: TestFacts) => { f.email = e; } }; },
    FactLine_attributes(_k, obj) { const o = obj.ast(); return { key: 'attributes', apply: (f: TestFacts) => { f.attributes = o; } }; },
    TestLine_action(_k, v) { return { key: 'action', loc: locOf(this), node: this, apply: (t: TestNode) => { t.action = v.ast(); } }; },
    TestLine_resource(_k, v, attrs) {
      const a = attrs.numChildren ? attrs.children[0]!.ast() : undefined;
      return { key: 'resource', loc: locOf(this), node: this, apply: (t: TestNode) => { t.resource = v.ast(); if (a) t.resourceAttributes = a; } };
    },
    TestLine_now(_k, v) { return { key: 'now', loc: locOf(this), node: this, apply: (t: TestNode) => { t.now = v.ast(); } }; },
    TestLine_context(_k, obj) { return { key: 'context', loc: locOf(this), node: this, apply: (t: TestNode) => { t.context = obj.ast(); } }; },
    TestLine_approved(_k) { return { key: 'approved', loc: locOf(this), node: this, apply: (t: TestNode) => { t.approved = true; } }; },
    TestLine_expect(_k, w, reason) {
      return {
        key: 'expect', loc: locOf(this), node: this,
        apply: (t: TestNode) => { t.expect = { decision: w.sourceString, ...(reason.numChildren ? { reason: reason.children[0]!.ast() } : {}) }; },
      };
    },
    Object(_o, pairs, _comma, _c) {
      const out: Record<string, JsonValue> = {};
      for (const p of listOf(pairs)) {
        const [k, v] = p.ast() as [string, JsonValue];
        setOwn(out, k, v);
      }
      return out;
    },
    Pair(k, _colon, v) {
      const key = k.ctorName === 'string' ? k.ast() : k.sourceString;
      return [key, v.ast()];
    },
    Value(v) { return v.ast(); },
    ValueList(_o, items, _comma, _c) { return listOf(items).map((c) => c.ast()); },
    null(_n) { return null; },

    Literal(l) { return l.ast(); },
    List(_o, items, _comma, _c) { return listOf(items).map((c) => c.ast()); },
    scalar(s) { return s.ast(); },
    string(_o, _chars, _c) { return unescape(this.sourceString); },
    number(_m, _d, _dot, _f, _e) {
      const n = Number(this.sourceString);
      return Object.is(n, -0) ? 0 : n;
    },
    boolean(_b) { return this.sourceString === 'true'; },
    _iter(...children) { return children.map((c) => c.ast()); },
  });
  semanticsCache = s;
  return s;
}

/** Every comment in a text that parsed, with its offset (strings are skipped). */
function scanComments(text: string): { start: number; end: number; text: string }[] {
  const out: { start: number; end: number; text: string }[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if ((c === '#' && !(i > 0 && /[A-Za-z0-9_-]/.test(text[i - 1]!) && /[A-Za-z_]/.test(text[i + 1] ?? ''))) || (c === '/' && text[i + 1] === '/')) {
      let j = i;
      while (j < text.length && text[j] !== '\n') j++;
      out.push({ start: i, end: j, text: text.slice(i, j).trimEnd() });
      i = j;
    }
  }
  return out;
}

function attachComments(file: PolicyFileNode, text: string): void {
  const comments = scanComments(text);
  if (!comments.length) return;
  anchors.sort((a, b) => a.start - b.start);
  const lineOf = (o: number) => lines.loc(o).line;
  // Comments above everything, set apart by a blank line, stay at the top of the file.
  const firstStart = anchors.length ? anchors[0]!.start : text.length;
  const lead = comments.filter((c) => c.end <= firstStart);
  if (lead.length && anchors.length && /\n[ \t]*\n/.test(text.slice(lead[lead.length - 1]!.end, firstStart))) {
    file.comments ??= {};
    file.comments.top = lead.map((c) => c.text);
    comments.splice(0, lead.length);
  }
  for (const c of comments) {
    const cl = lineOf(c.start);
    // Trailing: the last anchor that ends on the comment's line, before it.
    let trailing: Anchor | undefined;
    for (const a of anchors) if (a.end <= c.start && lineOf(Math.max(a.start, a.end - 1)) === cl) trailing = a;
    if (trailing) {
      const slot = (trailing.target[trailing.key] ??= {});
      slot.after = slot.after ? slot.after + ' ' + c.text : c.text;
      continue;
    }
    const next = anchors.find((a) => a.start > c.start);
    if (next) {
      const slot = (next.target[next.key] ??= {});
      (slot.before ??= []).push(c.text);
    } else {
      file.comments ??= {};
      (file.comments.end ??= []).push(c.text);
    }
  }
}

export interface ParseResult { file: PolicyFileNode | null; diagnostics: Diagnostic[] }

const KEYWORDS = ['policy', 'version', 'rule', 'invariant', 'never', 'effect', 'subjects', 'relation', 'object', 'when', 'limits', 'for', 'kind', 'singular', 'actions',
  'timezone', 'schema', 'test', 'type', 'condition', 'relationships', 'and', 'or', 'not', 'in', 'like', 'contains', 'any', 'all', 'has', 'on', 'through',
  'agent', 'user', 'permissions', 'capability', 'person', 'roles', 'groups', 'email', 'attributes', 'action', 'resource', 'context', 'now', 'used',
  'approved', 'expect', 'relationship', 'check', 'list', 'objects', 'sum', 'max', 'min', 'count', 'per'];

/**
 * A parse error: where the match stopped and what would have fitted there; where an opening
 * parenthesis before it is never closed, the error points at that parenthesis; where a word
 * stands that is close to one that fits (`efect`), the nearest is suggested.
 */
function failure(m: ohm.FailedMatchResult, file: string, idx: LineIndex, offset: number, text: string): Diagnostic {
  const pos = m.getRightmostFailurePosition();
  const expected = m.getExpectedText();
  const open = unclosedParen(text, pos);
  if (open !== null && /"\)"/.test(expected)) {
    const at = idx.loc(offset + open), stop = idx.loc(offset + pos);
    return { file, line: at.line, col: at.col, message: `this "(" is never closed (expected ")" by line ${stop.line}, column ${stop.col})`, severity: 'error' };
  }
  const loc = idx.loc(offset + pos);
  const word = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(text.slice(pos))?.[0];
  let hint = '';
  if (word) {
    const fits = [...expected.matchAll(/"([A-Za-z_]+)"/g)].map((x) => x[1]!);
    const near = nearest(word, fits.length ? fits : KEYWORDS);
    if (near && near !== word) hint = ` (did you mean "${near}"?)`;
  }
  return { file, line: loc.line, col: loc.col, message: `expected ${expected}${hint}`, severity: 'error' };
}

/** The offset of the last "(" before `end` that no ")" closes (strings and comments skipped), or null. */
function unclosedParen(text: string, end: number): number | null {
  const stack: number[] = [];
  for (let i = 0; i < end && i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') { for (i++; i < end && text[i] !== '"' && text[i] !== '\n'; i++) if (text[i] === '\\') i++; continue; }
    if (c === '#' || (c === '/' && text[i + 1] === '/')) { while (i < end && text[i] !== '\n') i++; continue; }
    if (c === '{' || c === '}') stack.length = 0;
    else if (c === '(') stack.push(i);
    else if (c === ')') stack.pop();
  }
  return stack.length ? stack[stack.length - 1]! : null;
}

/**
 * How deep brackets (of any kind) and runs of `not` may nest. The grammar is matched by
 * recursion, and nesting a few hundred deep exhausts the stack; no policy written by hand comes
 * near this, so deeper text is an error at the bracket or `not` that passes the bound.
 */
export const MAX_NESTING = 100;

/** The error at the first bracket or `not` nested deeper than MAX_NESTING (strings and comments skipped), or null. */
function tooDeep(path: string, text: string, idx: LineIndex): Diagnostic | null {
  const at = (offset: number, what: string): Diagnostic => {
    const { line, col } = idx.loc(offset);
    return { file: path, line, col, message: `too deeply nested: ${what}`, severity: 'error' };
  };
  let depth = 0;
  let nots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') { for (i++; i < text.length && text[i] !== '"' && text[i] !== '\n'; i++) if (text[i] === '\\') i++; nots = 0; continue; }
    if (c === '#' || (c === '/' && text[i + 1] === '/')) { while (i < text.length && text[i] !== '\n') i++; continue; }
    if (c === '(' || c === '[' || c === '{') {
      if (++depth > MAX_NESTING) return at(i, `brackets nested more than ${MAX_NESTING} deep`);
    } else if (c === ')' || c === ']' || c === '}') {
      depth = Math.max(0, depth - 1);
      nots = 0;
    } else if (c === 'n' && text.startsWith('not', i) && !/[A-Za-z0-9_]/.test(text[i - 1] ?? ' ') && !/[A-Za-z0-9_-]/.test(text[i + 3] ?? ' ')) {
      if (++nots > MAX_NESTING) return at(i, `more than ${MAX_NESTING} "not" in a row`);
      i += 2;
    } else if (!/\s/.test(c)) nots = 0;
  }
  return null;
}

/** Parse one policy or tests file. The AST is null when the text does not parse. */
export function parsePolicy(path: string, text: string): ParseResult {
  const g = policyGrammar();
  const idx = new LineIndex(path, text);
  const deep = tooDeep(path, text, idx);
  if (deep) return { file: null, diagnostics: [deep] };
  const m = g.match(text, 'File');
  if (m.failed()) return { file: null, diagnostics: recover(g, path, text, idx, failure(m as ohm.FailedMatchResult, path, idx, 0, text)) };
  lines = idx;
  anchors = [];
  const file = semantics()(m).ast() as PolicyFileNode;
  attachComments(file, text);
  for (const item of file.items) pruneComments(item);
  if (file.comments && !file.comments.header && !file.comments.end && !file.comments.top) delete file.comments;
  anchors = [];
  return { file, diagnostics: [] };
}

function pruneComments(item: { comments?: Record<string, Comments> }): void {
  if (!item.comments) return;
  for (const k of Object.keys(item.comments)) {
    const c = item.comments[k]!;
    if (!c.before && !c.after) delete item.comments[k];
  }
  if (!Object.keys(item.comments).length) delete item.comments;
}

/** After a failed match, parse every top-level block on its own to report each broken block. */
function recover(g: ohm.Grammar, path: string, text: string, idx: LineIndex, first: Diagnostic): Diagnostic[] {
  const starts: number[] = [];
  const re = /^(policy|rule|invariant|limits|kind|actions|timezone|schema|test|type|condition|relationships)\b/gm;
  for (let m = re.exec(text); m; m = re.exec(text)) starts.push(m.index);
  const out: Diagnostic[] = [first];
  const seen = new Set([`${first.line}:${first.col}`]);
  for (let i = 0; i < starts.length; i++) {
    const chunk = text.slice(starts[i], i + 1 < starts.length ? starts[i + 1] : text.length);
    const rule = chunk.startsWith('policy') ? 'Header' : 'Item';
    const m = g.match(chunk, rule);
    if (m.failed()) {
      const d = failure(m as ohm.FailedMatchResult, path, idx, starts[i]!, chunk);
      const key = `${d.line}:${d.col}`;
      if (!seen.has(key)) { seen.add(key); out.push(d); }
    }
  }
  return out.sort((a, b) => a.line - b.line || a.col - b.col);
}

/** Parse a condition expression alone (used by tests and the explain command). */
export function parseExpr(text: string, path = '<expr>'): { expr: Expr | null; diagnostics: Diagnostic[] } {
  const g = policyGrammar();
  const idx = new LineIndex(path, text);
  const deep = tooDeep(path, text, idx);
  if (deep) return { expr: null, diagnostics: [deep] };
  const m = g.match(text, 'Expr');
  if (m.failed()) return { expr: null, diagnostics: [failure(m as ohm.FailedMatchResult, path, idx, 0, text)] };
  lines = idx;
  anchors = [];
  const expr = semantics()(m).ast() as Expr;
  anchors = [];
  return { expr, diagnostics: [] };
}
