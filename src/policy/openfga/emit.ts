// The policy language's text for an imported model, and for a store's relationships and tests.
// The model prints as `type` blocks (relations in the order OpenFGA declared them) then
// `condition` blocks; a store's tests print as a `.tests` file: its relationships as a
// file-level `relationships { }` block, then one `test` per OpenFGA test. Names the language
// cannot carry are refused by name.

import { refusal, type FgaModel, type Imported, type Refusal, type Rewrite, type TypeRestriction, type Where } from './model.js';
import { CONDITION_KEYWORDS, translateCondition } from './translate.js';
import { englishPlural, singularOf } from '../patterns.js';

/** An identifier of the policy language: a letter or `_`, then letters, digits, `_` and `-`. */
const IDENT = /^[A-Za-z_][A-Za-z0-9_-]*$/;
/** Words a relation's definition gives a meaning to, so no type or relation may be named so. */
const RELATION_KEYWORDS = new Set(['or', 'and', 'but', 'not', 'from', 'with']);

function nameProblem(name: string, keywords: Set<string>): string | undefined {
  if (!IDENT.test(name)) return 'the policy language\'s names are a letter or "_" followed by letters, digits, "_" or "-"';
  if (keywords.has(name)) return 'it is a keyword of the policy language';
  return undefined;
}

export interface PolicyHeader {
  /** The policy's name in its `policy "NAME" version 1` line. */
  name: string;
  /** What it was imported from, for the comment at its top. */
  source: string;
}

/** Emitted text, and for each of its lines the place of the input it came from (when one did). */
export interface Emitted {
  text: string;
  sources: (Where | undefined)[];
}

class Lines {
  readonly out: string[] = [];
  readonly sources: (Where | undefined)[] = [];
  push(text: string, at?: Where): void { this.out.push(text); this.sources.push(at); }
  done(): Emitted { return { text: this.out.join('\n') + '\n', sources: this.sources }; }
}

/** The policy file for a model, or the refusals naming what it cannot carry. */
export function emitPolicy(model: FgaModel, header: PolicyHeader): Imported<Emitted> {
  const refusals: Refusal[] = [];
  const check = (name: string, what: string, at: Where, keywords: Set<string>) => {
    const p = nameProblem(name, keywords);
    if (p) refusals.push(refusal(at, `${what} "${name}" cannot be carried over: ${p}`));
  };
  const out = new Lines();
  out.push(`# Imported from OpenFGA: ${header.source}.`);
  out.push(`policy ${JSON.stringify(header.name)} version 1`);
  for (const t of model.types) {
    check(t.name, 'type name', t.at, RELATION_KEYWORDS);
    out.push('');
    if (!t.relations.length) { out.push(`type ${t.name}`, t.at); continue; }
    out.push(`type ${t.name} {`, t.at);
    for (const r of t.relations) {
      check(r.name, `relation name (of type ${t.name})`, r.at, RELATION_KEYWORDS);
      forEachRestriction(r.rewrite, (tr, at) => {
        check(tr.type, 'type name', at, RELATION_KEYWORDS);
        if (tr.relation) check(tr.relation, 'relation name', at, RELATION_KEYWORDS);
        if (tr.condition) check(tr.condition, 'condition name', at, CONDITION_KEYWORDS);
      });
      out.push(`  relation ${r.name}: ${printRewrite(r.rewrite, 0)}`, r.at);
    }
    out.push('}', t.at);
    // Its relations are permissions `<relation>:<plural>`; a type whose English plural reads
    // back as another name (`bus`: "buses" reads as "buse") is given its plural by name.
    const plural = englishPlural(t.name);
    if (singularOf(plural) !== t.name) {
      out.push('');
      out.push(`kind ${JSON.stringify(plural)} singular ${JSON.stringify(t.name)}`, t.at);
    }
  }
  for (const c of model.conditions) {
    check(c.name, 'condition name', c.at, CONDITION_KEYWORDS);
    const body = translateCondition(c);
    if ('refusal' in body) { refusals.push(body.refusal); continue; }
    out.push('');
    out.push(`condition ${c.name}(${c.params.map((p) => `${p.name}: ${p.type}`).join(', ')}) {`, c.at);
    out.push(`  ${body.text}`, c.expressionAt);
    out.push('}', c.at);
  }
  return refusals.length ? { ok: false, refusals } : { ok: true, value: out.done() };
}

function forEachRestriction(r: Rewrite, f: (t: TypeRestriction, at: Where) => void): void {
  switch (r.kind) {
    case 'direct': r.types.forEach((t) => f(t, r.at)); break;
    case 'union': case 'intersection': r.children.forEach((c) => forEachRestriction(c, f)); break;
    case 'difference': forEachRestriction(r.base, f); forEachRestriction(r.subtract, f); break;
    default:
  }
}

function restriction(t: TypeRestriction): string {
  const base = t.wildcard ? `${t.type}:*` : t.relation ? `${t.type}#${t.relation}` : t.type;
  return t.condition ? `${base} with ${t.condition}` : base;
}

/**
 * A definition as the language writes it. `depth` > 0 inside an operator: a nested operator is
 * parenthesized there, as one level holds one kind of operator.
 */
export function printRewrite(r: Rewrite, depth: number): string {
  const wrap = (s: string) => (depth > 0 ? `(${s})` : s);
  switch (r.kind) {
    case 'direct': return `[${r.types.map(restriction).join(', ')}]`;
    case 'computed': return r.relation;
    case 'from': return `${r.relation} from ${r.tupleset}`;
    case 'union': return wrap(chain(r).map((c) => printRewrite(c, 1)).join(' or '));
    case 'intersection': return wrap(chain(r).map((c) => printRewrite(c, 1)).join(' and '));
    case 'difference': return wrap(`${printRewrite(r.base, 1)} but not ${printRewrite(r.subtract, 1)}`);
  }
}

/** The operands of a union (or intersection), with nested ones of the same kind inlined: one chain, as `fmt` prints it. */
export function chain(r: Rewrite & { kind: 'union' | 'intersection' }): Rewrite[] {
  return r.children.flatMap((c) => (c.kind === r.kind ? chain(c) : [c]));
}

// ---- relationships and tests ----

export interface Tuple {
  object: string;
  relation: string;
  subject: string;
  condition?: { name: string; context?: Record<string, unknown> };
  at: Where;
}

export type TestLine =
  | { k: 'check'; subject: string; relation: string; object: string; context?: Record<string, unknown>; expect: boolean; at: Where }
  | { k: 'objects'; subject: string; relation: string; type: string; context?: Record<string, unknown>; expect: string[]; at: Where }
  | { k: 'subjects'; object: string; relation: string; subjectType: string; context?: Record<string, unknown>; expect: string[]; at: Where };

export interface StoreTest {
  name: string;
  relationships: Tuple[];
  lines: TestLine[];
  at: Where;
}

/** The relationships in their JSON form, as the management API and the project file take them. */
export function relationshipJson(t: Tuple): Record<string, unknown> {
  const r: Record<string, unknown> = { object: t.object, relation: t.relation, subject: t.subject };
  if (t.condition) r.condition = t.condition.context ? { name: t.condition.name, context: t.condition.context } : { name: t.condition.name };
  return r;
}

/** `"document:1#viewer@user:anne"`, then ` with NAME { ... }` for a condition. */
function relationshipText(t: Tuple): string {
  const s = JSON.stringify(`${t.object}#${t.relation}@${t.subject}`);
  if (!t.condition) return s;
  return t.condition.context ? `${s} with ${t.condition.name} ${contextText(t.condition.context)}` : `${s} with ${t.condition.name}`;
}

const KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** A context as the language's object literal: `{ hour: 10, "odd key": "x" }`. */
export function contextText(v: Record<string, unknown>): string {
  const entries = Object.entries(v);
  if (!entries.length) return '{}';
  return `{ ${entries.map(([k, x]) => `${KEY.test(k) && !CONDITION_KEYWORDS.has(k) ? k : JSON.stringify(k)}: ${valueText(x)}`).join(', ')} }`;
}

function valueText(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(valueText).join(', ')}]`;
  if (v !== null && typeof v === 'object') return contextText(v as Record<string, unknown>);
  return JSON.stringify(v);
}

function withContext(context: Record<string, unknown> | undefined): string {
  return context ? ` context ${contextText(context)}` : '';
}

function lineText(l: TestLine): string {
  const q = JSON.stringify;
  switch (l.k) {
    case 'check': return `check ${q(l.subject)} ${q(l.relation)} ${q(l.object)}${withContext(l.context)} expect ${l.expect}`;
    case 'objects': return `list objects ${q(l.subject)} ${q(l.relation)} ${q(l.type)}${withContext(l.context)} expect [${l.expect.map((x) => q(x)).join(', ')}]`;
    case 'subjects': return `list subjects ${q(l.object)} ${q(l.relation)} ${q(l.subjectType)}${withContext(l.context)} expect [${l.expect.map((x) => q(x)).join(', ')}]`;
  }
}

/** A `.tests` file: the store's relationships for every test, then each test. */
export function emitTests(source: string, relationships: Tuple[], tests: StoreTest[]): Emitted {
  const out = new Lines();
  out.push(`# The tests of the OpenFGA store ${source}, imported.`);
  if (relationships.length) {
    out.push('');
    out.push('relationships {');
    for (const r of relationships) out.push(`  ${relationshipText(r)}`, r.at);
    out.push('}');
  }
  for (const t of tests) {
    out.push('');
    // OpenFGA runs a test without assertions and finds nothing to fail; here it would be an error.
    if (!t.lines.length) { out.push(`# test ${JSON.stringify(t.name)} asserts nothing: left out.`, t.at); continue; }
    out.push(`test ${JSON.stringify(t.name)} {`, t.at);
    for (const r of t.relationships) out.push(`  relationship ${relationshipText(r)}`, r.at);
    for (const l of t.lines) out.push(`  ${lineText(l)}`, l.at);
    out.push('}', t.at);
  }
  return out.done();
}
