// Checks of relationship fixtures (`relationships { }`, `relationship` lines) and of the
// relationship assertions of tests (`check`, `list objects`, `list subjects`) against the
// model of the set: each names types and relations that exist, and each fixture is one the
// model allows.

import type { Diagnostic } from '../types.js';
import type { Loc, PolicyFileNode, TestNode } from '../ast.js';
import type { RelAssertion, RelationshipLineNode } from './ast.js';
import { buildModel, disallowed, type RelationModel } from './model.js';
import { parseObject, parseRelationshipText, parseSubject, type Relationship } from './tuple.js';

function diag(loc: Loc | undefined, fallback: Loc, message: string): Diagnostic {
  const l = loc ?? fallback;
  return { file: l.file, line: l.line, col: l.col, message, severity: 'error' };
}

/** A fixture line as a relationship, or an error message. */
export function fixtureRelationship(l: RelationshipLineNode): Relationship | string {
  const r = parseRelationshipText(l.text);
  if (typeof r === 'string') return r;
  if (l.condition) r.condition = l.condition.context !== undefined ? { name: l.condition.name, context: l.condition.context as Record<string, unknown> } : { name: l.condition.name };
  return r;
}

function checkLine(m: RelationModel, l: RelationshipLineNode, at: Loc, out: Diagnostic[]): void {
  const r = fixtureRelationship(l);
  if (typeof r === 'string') { out.push(diag(l.loc, at, `relationship ${JSON.stringify(l.text)}: ${r}`)); return; }
  const why = disallowed(m, r);
  if (why) out.push(diag(l.loc, at, `relationship ${JSON.stringify(l.text)}: ${why}`));
}

function checkRelation(m: RelationModel, type: string, relation: string): string | null {
  const t = m.types.get(type);
  if (!t) return `unknown type ${type}`;
  if (!t.relations.has(relation)) return `type ${type} has no relation ${relation}`;
  return null;
}

function checkAssertion(m: RelationModel, a: RelAssertion, at: Loc, out: Diagnostic[]): void {
  const l = a.loc ?? at;
  const bad = (msg: string): void => { out.push(diag(l, at, `${a.kind.replace('_', ' ')}: ${msg}`)); };
  if (a.kind === 'check') {
    const o = parseObject(a.object);
    if (typeof o === 'string') return bad(o);
    const s = parseSubject(a.subject);
    if (typeof s === 'string') return bad(s);
    const e = checkRelation(m, o.type, a.relation);
    if (e) return bad(e);
    if (!m.types.has(s.type)) return bad(`unknown type ${s.type}`);
    if (s.relation !== undefined && !m.types.get(s.type)!.relations.has(s.relation)) return bad(`subject ${a.subject}: type ${s.type} has no relation ${s.relation}`);
    if (!['true', 'false', 'error'].includes(a.expect)) bad(`expect true, false or error, not ${a.expect}`);
  } else if (a.kind === 'list_objects') {
    const s = parseSubject(a.subject);
    if (typeof s === 'string') return bad(s);
    const e = checkRelation(m, a.type, a.relation);
    if (e) return bad(e);
    if (!m.types.has(s.type)) return bad(`unknown type ${s.type}`);
    if (s.relation !== undefined && !m.types.get(s.type)!.relations.has(s.relation)) return bad(`subject ${a.subject}: type ${s.type} has no relation ${s.relation}`);
  } else {
    const o = parseObject(a.object);
    if (typeof o === 'string') return bad(o);
    const e = checkRelation(m, o.type, a.relation);
    if (e) return bad(e);
    const h = a.subjectType.indexOf('#');
    const t = h < 0 ? a.subjectType : a.subjectType.slice(0, h);
    const fe = h < 0 ? (m.types.has(t) ? null : `unknown type ${t}`) : checkRelation(m, t, a.subjectType.slice(h + 1));
    if (fe) bad(fe);
  }
}

export function validateRelationshipFixtures(files: PolicyFileNode[], out: Diagnostic[]): void {
  const m = buildModel(files);
  for (const f of files) for (const item of f.items) {
    const at = item.loc ?? { file: f.path, line: 1, col: 1 };
    if (item.kind === 'relationships') for (const l of item.lines) checkLine(m, l, at, out);
    if (item.kind === 'test') {
      const t = item as TestNode;
      for (const l of t.relationships ?? []) checkLine(m, l, at, out);
      for (const a of t.assertions ?? []) checkAssertion(m, a, at, out);
    }
  }
}
