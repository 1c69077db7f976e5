// The canonical layout (`gatehouse policy fmt`). Prints any AST; comments
// kept by the parser are printed where they were attached.

import type {
  InvariantNode, Comments, Expr, Item, JsonValue, LimitField, LimitsNode, Literal, Operand, PolicyFileNode, RelObject, RuleNode, SchemaNode, SchemaType,
  TestFacts, TestNode,
} from './ast.js';
import { pathText, writtenRelations } from './ast.js';
import { FIELD_NAME, RESERVED } from './names.js';
import { formatUsageNode } from './usage.js';
import type { ConditionNode, RelationshipsNode, TypeNode } from './relations/ast.js';
import { fmtAssertion, fmtCExpr, fmtConditionHead, fmtRelExpr, fmtRelationshipLine } from './relations/format.js';

const OP_TEXT = { gte: '>=', gt: '>', lte: '<=', lt: '<', eq: '==', ne: '!=' } as const;

export function fmtString(s: string): string {
  return JSON.stringify(s);
}

export function fmtLiteral(v: Literal): string {
  if (Array.isArray(v)) return '[' + v.map(fmtLiteral).join(', ') + ']';
  if (typeof v === 'string') return fmtString(v);
  if (typeof v === 'number') return Object.is(v, -0) ? '0' : String(v);
  return String(v);
}

function prec(e: Expr): number {
  switch (e.type) {
    case 'or': return 0;
    case 'and': return 1;
    case 'not': return 2;
    default: return 3;
  }
}

export function fmtOperand(o: Operand): string {
  return o.type === 'path' ? pathText(o) : fmtLiteral(o.value);
}

export const CMP_TEXT = OP_TEXT;

export function fmtExpr(e: Expr): string {
  const sub = (c: Expr, min: number) => (prec(c) < min ? `(${fmtExpr(c)})` : fmtExpr(c));
  switch (e.type) {
    case 'or': return e.items.map((i) => sub(i, 1)).join(' or ');
    case 'and': return e.items.map((i) => sub(i, 2)).join(' and ');
    // `not (a == 1)`: the parentheses say what `not` covers.
    case 'not': return `not (${fmtExpr(e.expr)})`;
    case 'cmp': return `${fmtOperand(e.left)} ${e.opText ?? OP_TEXT[e.op]} ${fmtOperand(e.right)}`;
    case 'in': return `${fmtOperand(e.left)} ${e.negated ? 'not in' : 'in'} ${fmtOperand(e.right)}`;
    case 'contains': return `${fmtOperand(e.left)} contains${e.mode === 'one' ? '' : ' ' + e.mode} ${fmtOperand(e.right)}`;
    case 'like': return `${fmtOperand(e.left)} ${e.negated ? 'not like' : 'like'} ${fmtOperand(e.right)}`;
    case 'present': {
      const p = e.left;
      const base = p.bare ? p.segs.slice(0, -1).join('.') : [p.root, ...p.segs.slice(0, -1)].join('.');
      return `${base} has ${p.segs[p.segs.length - 1]}`;
    }
    case 'has': return `${e.who} has ${e.relation} on ${fmtRelObject(e.object)}`;
    case 'within': return `${fmtRelObject(e.object)} in ${fmtRelObject(e.ancestor)} through ${e.relation}`;
  }
}

export function fmtRelObject(o: RelObject): string {
  return o.type === 'resource' ? 'resource' : fmtOperand(o);
}

export function fmtSchemaType(t: SchemaType): string {
  if (t.entity !== undefined) return `entity ${t.entity}`;
  return t.list ? `[${t.base}]` : t.base;
}

export function fmtLimitField(f: LimitField): string {
  const ops: string[] = [];
  const only = f.max === undefined && f.min === undefined && f.in === undefined && f.not_in === undefined;
  if (f.eq !== undefined && only) return `${f.field} = ${fmtLiteral(f.eq)}`;
  for (const k of ['max', 'min', 'in', 'not_in', 'eq'] as const) if (f[k] !== undefined) ops.push(`${k} ${fmtLiteral(f[k]!)}`);
  return `${f.field} ${ops.join(' ')}`;
}

function fmtKey(k: string): string {
  return FIELD_NAME.test(k) && !RESERVED.has(k) ? k : fmtString(k);
}

export function fmtJsonValue(v: JsonValue): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return '[' + v.map(fmtJsonValue).join(', ') + ']';
  if (typeof v === 'object') {
    const entries = Object.entries(v);
    if (!entries.length) return '{}';
    return '{ ' + entries.map(([k, x]) => `${fmtKey(k)}: ${fmtJsonValue(x)}`).join(', ') + ' }';
  }
  return fmtLiteral(v);
}

class Out {
  lines: string[] = [];
  line(indent: number, text: string, c?: Comments): void {
    const pad = '  '.repeat(indent);
    for (const b of c?.before ?? []) this.lines.push(pad + b);
    this.lines.push(pad + text + (c?.after ? ' ' + c.after : ''));
  }
}

function fmtStrings(list: string[]): string {
  return list.map(fmtString).join(', ');
}

function fmtRule(o: Out, r: RuleNode): void {
  const c = r.comments ?? {};
  o.line(0, `rule ${fmtString(r.name)} {`, c.item);
  if (r.effect) o.line(1, `effect ${r.effect}`, c.effect);
  if (r.subjects.length) o.line(1, `subjects ${fmtStrings(r.subjects)}`, c.subjects);
  if (r.relation) o.line(1, `relation ${fmtStrings(writtenRelations(r))}`, c.relation);
  if (r.object) o.line(1, `object ${fmtString(r.object)}`, c.object);
  if (r.when) o.line(1, `when ${fmtExpr(r.when)}`, c.when);
  o.line(0, '}', c.end);
}

function fmtInvariant(o: Out, v: InvariantNode): void {
  const c = v.comments ?? {};
  o.line(0, `invariant ${fmtString(v.name)} {`, c.item);
  o.line(1, `never ${v.never} ${fmtStrings(v.relations)} on ${fmtString(v.object)}${v.when ? ` when ${fmtExpr(v.when)}` : ''}`, c.never);
  o.line(0, '}', c.end);
}

function fmtLimits(o: Out, l: LimitsNode): void {
  const c = l.comments ?? {};
  o.line(0, `limits ${fmtString(l.capability)} for ${fmtString(l.forAgent)} {`, c.item);
  l.fields.forEach((f, i) => o.line(1, fmtLimitField(f), c['field:' + i]));
  (l.usage ?? []).forEach((u, i) => o.line(1, formatUsageNode(u), c['usage:' + i]));
  o.line(0, '}', c.end);
}

function fmtSchema(o: Out, s: SchemaNode): void {
  const c = s.comments ?? {};
  o.line(0, 'schema {', c.item);
  s.entries.forEach((e, i) => o.line(1, `${pathText(e.path)}: ${fmtSchemaType(e.type)}`, c['entry:' + i]));
  o.line(0, '}', c.end);
}

/** `prefix`: where the comments of these lines are kept (`person:` for the lines of a person block). */
function fmtFacts(o: Out, indent: number, f: TestFacts | undefined, c: Record<string, Comments>, prefix = ''): void {
  if (!f) return;
  const list = (k: string, v: string[]) => (v.length ? `${k} ${fmtStrings(v)}` : k);
  if (f.roles) o.line(indent, list('roles', f.roles), c[prefix + 'roles']);
  if (f.groups) o.line(indent, list('groups', f.groups), c[prefix + 'groups']);
  if (f.email !== undefined) o.line(indent, `email ${fmtString(f.email)}`, c[prefix + 'email']);
  if (f.attributes) o.line(indent, `attributes ${fmtJsonValue(f.attributes)}`, c[prefix + 'attributes']);
}

function fmtType(o: Out, t: TypeNode): void {
  const c = t.comments ?? {};
  if (!t.relations.length) { o.line(0, `type ${t.name}`, c.item); return; }
  o.line(0, `type ${t.name} {`, c.item);
  t.relations.forEach((r, i) => o.line(1, `relation ${r.name}: ${fmtRelExpr(r.expr)}`, c['relation:' + i]));
  o.line(0, '}', c.end);
}

function fmtCondition(o: Out, n: ConditionNode): void {
  const c = n.comments ?? {};
  o.line(0, fmtConditionHead(n), c.item);
  o.line(1, fmtCExpr(n.body), c.body);
  o.line(0, '}', c.end);
}

function fmtRelationships(o: Out, n: RelationshipsNode): void {
  const c = n.comments ?? {};
  o.line(0, 'relationships {', c.item);
  n.lines.forEach((l, i) => o.line(1, fmtRelationshipLine(l, fmtJsonValue), c['line:' + i]));
  o.line(0, '}', c.end);
}

function fmtTest(o: Out, t: TestNode): void {
  const c = t.comments ?? {};
  o.line(0, `test ${fmtString(t.name)} {`, c.item);
  (t.relationships ?? []).forEach((l, i) => o.line(1, `relationship ${fmtRelationshipLine(l, fmtJsonValue)}`, c['relationship:' + i]));
  if (t.agent) o.line(1, `agent ${fmtString(t.agent.id)}${t.agent.mode !== undefined ? ' ' + t.agent.mode : ''}`, c.agent);
  if (t.user) o.line(1, `user ${fmtString(t.user.id)}`, c.user);
  fmtFacts(o, 1, t.facts, c);
  if (t.permissions) o.line(1, t.permissions.length ? `permissions ${fmtStrings(t.permissions)}` : 'permissions', c.permissions);
  t.capabilities.forEach((cap, i) => {
    const cc = c['capability:' + i];
    if (!cap.limits && !cap.usage) { o.line(1, `capability ${fmtString(cap.name)}`, cc); return; }
    o.line(1, `capability ${fmtString(cap.name)} {`, cc);
    (cap.limits ?? []).forEach((f, j) => o.line(2, fmtLimitField(f), c[`capability:${i}:field:${j}`]));
    (cap.usage ?? []).forEach((u, j) => o.line(2, formatUsageNode(u), c[`capability:${i}:usage:${j}`]));
    o.line(1, '}', c[`capability:${i}:end`]);
  });
  if (t.person) {
    const p = t.person;
    const perms = p.permissions.length ? ' permissions ' + fmtStrings(p.permissions) : '';
    if (p.roles === undefined && p.groups === undefined && p.email === undefined && p.attributes === undefined) {
      o.line(1, `person ${fmtString(p.id)}${perms}`, c.person);
    } else {
      o.line(1, `person ${fmtString(p.id)} {`, c.person);
      if (p.permissions.length) o.line(2, `permissions ${fmtStrings(p.permissions)}`, c['person:permissions']);
      fmtFacts(o, 2, p, c, 'person:');
      o.line(1, '}', c['person:end']);
    }
  }
  if (t.action !== undefined) o.line(1, `action ${fmtString(t.action)}`, c.action);
  if (t.resource !== undefined) o.line(1, `resource ${fmtString(t.resource)}${t.resourceAttributes ? ' ' + fmtJsonValue(t.resourceAttributes) : ''}`, c.resource);
  if (t.context !== undefined) o.line(1, `context ${fmtJsonValue(t.context)}`, c.context);
  if (t.now !== undefined) o.line(1, `now ${fmtString(t.now)}`, c.now);
  (t.used ?? []).forEach((u, i) => o.line(1, `used ${u.what} ${fmtLiteral(u.amount)} in ${u.per}${u.scope !== undefined ? ` per ${u.scope}` : ''}`, c['used:' + i]));
  if (t.approved) o.line(1, 'approved', c.approved);
  if (t.expect) o.line(1, `expect ${t.expect.decision}${t.expect.reason !== undefined ? ' ' + fmtString(t.expect.reason) : ''}`, c.expect);
  (t.assertions ?? []).forEach((a, i) => o.line(1, fmtAssertion(a, fmtJsonValue), c['assert:' + i]));
  o.line(0, '}', c.end);
}

export function fmtItem(o: Out, item: Item): void {
  switch (item.kind) {
    case 'rule': fmtRule(o, item); break;
    case 'invariant': fmtInvariant(o, item); break;
    case 'limits': fmtLimits(o, item); break;
    case 'kind': o.line(0, `kind ${fmtString(item.plural)} singular ${fmtString(item.singular)}`, item.comments?.item); break;
    case 'actions': o.line(0, `actions ${fmtString(item.name)} = [${fmtStrings(item.members)}]`, item.comments?.item); break;
    case 'test': fmtTest(o, item); break;
    case 'timezone': o.line(0, `timezone ${fmtString(item.name)}`, item.comments?.item); break;
    case 'schema': fmtSchema(o, item); break;
    case 'type': fmtType(o, item); break;
    case 'condition': fmtCondition(o, item); break;
    case 'relationships': fmtRelationships(o, item); break;
  }
}

/** The canonical text of a file. `withComments: false` gives the text the content hash is taken of. */
export function formatFile(file: PolicyFileNode, opts: { withComments?: boolean } = {}): string {
  const f = opts.withComments === false ? stripComments(file) : file;
  const o = new Out();
  for (const t of f.comments?.top ?? []) o.lines.push(t);
  if (f.comments?.top?.length && f.header) o.lines.push('');
  if (f.header) {
    o.line(0, `policy ${fmtString(f.header.name)} version ${fmtLiteral(f.header.version)}`, f.comments?.header);
  }
  f.items.forEach((item, i) => {
    if (i > 0 || f.header || f.comments?.top?.length) o.lines.push('');
    fmtItem(o, item);
  });
  if (f.comments?.end?.length) {
    if (o.lines.length) o.lines.push('');
    o.lines.push(...f.comments.end);
  }
  return o.lines.length ? o.lines.join('\n') + '\n' : '';
}

export function formatRule(rule: RuleNode): string {
  const o = new Out();
  fmtRule(o, { ...rule, comments: {} });
  return o.lines.join('\n') + '\n';
}

export function formatItem(item: Item): string {
  const o = new Out();
  fmtItem(o, { ...item, comments: {} } as Item);
  return o.lines.join('\n') + '\n';
}

function stripComments(file: PolicyFileNode): PolicyFileNode {
  const { comments: _c, ...rest } = file;
  return { ...rest, items: file.items.map((i) => ({ ...i, comments: {} }) as Item) };
}
