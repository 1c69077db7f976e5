// The OpenFGA modeling language (schema 1.1, and the modules of schema 1.2's fga.mod) read line by
// line into the importer's model. Order: the header (`model` + `schema 1.1`, or `module NAME`),
// then `type`/`extend type` blocks (`relations`, `define NAME: EXPR`) and `condition` blocks.
// A relation's expression follows OpenFGA's own rules: `or`, `and` and `but not` do not mix at
// one level without parentheses, and `but not` subtracts one operand. Every refusal names its
// line; a file with several problems reports each one it can find.
//
// A file that starts with `type` and has no header is the legacy (schema 1.0-era) spelling of the
// same model, which OpenFGA still loads: `define R as E` for `define R: E`, and `[T, ...] as self`
// for `[T, ...]`. A bare `self` (schema 1.0 without type restrictions) has no types to carry over
// and is refused.

import { refusal, type ConditionDef, type ConditionParam, type Imported, type Refusal, type RelationDef, type Rewrite, type TypeDef, type TypeRestriction, type Where } from './model.js';
import { GENERIC_PARAM_TYPES, MAX_NESTING, PARAM_TYPES } from './model.js';

/** One `.fga` file: a whole model, or one module of a modular model. */
export interface DslModule {
  /** `module NAME`, for a file of a modular model. */
  module?: string;
  /** `schema 1.1` of a whole model. */
  schema?: string;
  /** A model in the legacy form (no header; `define R as E`, `[T] as self`). */
  legacy?: boolean;
  types: TypeDef[];
  /** `extend type NAME` blocks: relations added to a type another module declares. */
  extensions: TypeDef[];
  conditions: ConditionDef[];
  at: Where;
}

interface Line {
  text: string;
  /** The text without a trailing comment, trimmed. */
  code: string;
  indent: number;
  no: number;
}

const RELATION_KEYWORDS = new Set(['or', 'and', 'but', 'not', 'from', 'with']);

/**
 * Parse one `.fga` file. `firstLine` is the line of the file on which `text` starts (a model
 * written inside a store file starts below its `model: |` line).
 */
export function parseDsl(file: string, text: string, firstLine = 1): Imported<DslModule> {
  const lines: Line[] = text.split(/\r?\n/).map((raw, i) => {
    const code = stripComment(raw).trim();
    return { text: raw, code, indent: raw.length - raw.trimStart().length, no: firstLine + i };
  });
  const refusals: Refusal[] = [];
  const at = (line: number): Where => ({ file, line });
  const out: DslModule = { types: [], extensions: [], conditions: [], at: at(firstLine) };
  let i = 0;
  const next = () => { while (i < lines.length && lines[i]!.code === '') i++; return lines[i]; };

  // ---- header ----
  const head = next();
  if (!head) return { ok: false, refusals: [refusal(at(firstLine), 'empty model: expected "model" and "schema 1.1", or "module NAME"')] };
  const moduleMatch = /^module\s+(\S+)$/.exec(head.code);
  if (moduleMatch) {
    out.module = moduleMatch[1]!;
    i++;
  } else if (head.code === 'model') {
    i++;
    const schema = next();
    const m = schema && /^schema\s+(\S+)$/.exec(schema.code);
    if (!schema || !m) return { ok: false, refusals: [refusal(at(schema?.no ?? head.no), 'expected "schema 1.1" after "model"')] };
    i++;
    out.schema = m[1]!;
    if (m[1] !== '1.1') return { ok: false, refusals: [refusal(at(schema.no), `schema ${m[1]} is not supported: the importer reads schema 1.1 (and modular models through fga.mod)`)] };
  } else if (/^type\s/.test(head.code)) {
    out.legacy = true;
  } else {
    return { ok: false, refusals: [refusal(at(head.no), `expected "model" (or "module NAME") at the start, found "${head.code}"`)] };
  }

  // ---- types and conditions ----
  for (let line = next(); line; line = next()) {
    const typeMatch = /^(extend\s+)?type\s+(\S+)(.*)$/.exec(line.code);
    if (typeMatch) {
      i++;
      if (typeMatch[3]!.trim() !== '') { refusals.push(refusal(at(line.no), `unexpected "${typeMatch[3]!.trim()}" after the type name`)); continue; }
      if (typeMatch[1] && !out.module) refusals.push(refusal(at(line.no), '"extend type" belongs in a module of a modular model (fga.mod)'));
      const type: TypeDef = { name: typeMatch[2]!, relations: [], at: at(line.no) };
      (typeMatch[1] ? out.extensions : out.types).push(type);
      i = parseTypeBody(lines, i, line.indent, type, file, refusals, out.legacy === true);
      continue;
    }
    if (/^condition\b/.test(line.code)) {
      const end = parseCondition(lines, i, file, refusals, out.conditions);
      i = end;
      continue;
    }
    refusals.push(refusal(at(line.no), `expected "type", "extend type" or "condition", found "${line.code}"`));
    i++;
  }
  return refusals.length ? { ok: false, refusals } : { ok: true, value: out };
}

/** `# comment` at the start of a line or after a space (`group#member` is not a comment). */
function stripComment(raw: string): string {
  const m = /(^|\s)#/.exec(raw);
  return m ? raw.slice(0, m.index) : raw;
}

/** The `relations` / `define` lines under a type (more indented than it); returns the next line. */
function parseTypeBody(lines: Line[], i: number, typeIndent: number, type: TypeDef, file: string, refusals: Refusal[], legacy: boolean): number {
  let sawRelations = false;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.code === '') { i++; continue; }
    if (line.indent <= typeIndent) break;
    if (line.code === 'relations') {
      if (sawRelations) refusals.push(refusal({ file, line: line.no }, 'a second "relations" in one type'));
      sawRelations = true;
      i++;
      continue;
    }
    const define = /^define\s+([^\s:]+)\s*:(.*)$/.exec(line.code) ?? (legacy ? /^define\s+([^\s:]+)\s+as\b(.*)$/.exec(line.code) : null);
    if (!define) {
      refusals.push(refusal({ file, line: line.no }, `expected "define NAME: ..."${legacy ? ' (or "define NAME as ...")' : ''} in type ${type.name}, found "${line.code}"`));
      i++;
      continue;
    }
    if (!sawRelations) refusals.push(refusal({ file, line: line.no }, `"define" before "relations" in type ${type.name}`));
    // A definition continues on the next lines while a bracket or parenthesis is open.
    const parts: { text: string; no: number }[] = [{ text: define[2]!, no: line.no }];
    let depth = bracketDepth(define[2]!);
    i++;
    // It never runs into the next type or condition (a line no more indented than its type).
    while (depth > 0 && i < lines.length && (lines[i]!.code === '' || lines[i]!.indent > typeIndent)) {
      const cont = lines[i]!;
      i++;
      if (cont.code === '') continue;
      parts.push({ text: cont.code, no: cont.no });
      depth += bracketDepth(cont.code);
    }
    const name = define[1]!;
    const parsed = parseRewrite(parts, file, `${type.name}#${name}`, legacy);
    if ('refusal' in parsed) { refusals.push(parsed.refusal); continue; }
    const rel: RelationDef = { name, rewrite: parsed.rewrite, at: { file, line: line.no } };
    type.relations.push(rel);
  }
  return i;
}

function bracketDepth(s: string): number {
  let d = 0;
  for (const c of s) if (c === '(' || c === '[') d++; else if (c === ')' || c === ']') d--;
  return d;
}

interface Token {
  text: string;
  line: number;
}

/**
 * Parse a relation's definition: OpenFGA's grammar, one operator kind per level. In the legacy
 * form, `[...] as self` is `[...]`.
 */
export function parseRewrite(parts: { text: string; no: number }[], file: string, what: string, legacy = false): { rewrite: Rewrite } | { refusal: Refusal } {
  const tokens: Token[] = [];
  for (const p of parts) {
    for (const m of p.text.matchAll(/[\[\](),#:*]|[^\s\[\](),#:*]+/g)) tokens.push({ text: m[0], line: p.no });
  }
  let k = 0;
  const lastLine = parts[parts.length - 1]!.no;
  const peek = () => tokens[k];
  const where = (t?: Token): Where => ({ file, line: t?.line ?? lastLine });
  class Stop { constructor(readonly r: Refusal) {} }
  const fail = (t: Token | undefined, message: string): never => { throw new Stop(refusal(where(t), `${what}: ${message}`)); };
  const expect = (text: string) => {
    const t = peek();
    if (t?.text !== text) fail(t, `expected "${text}", found ${t ? `"${t.text}"` : 'the end of the definition'}`);
    k++;
  };
  const name = (role: string): Token => {
    const t = peek();
    if (!t || /^[\[\](),#:*]$/.test(t.text) || RELATION_KEYWORDS.has(t.text)) fail(t, `expected ${role}, found ${t ? `"${t.text}"` : 'the end of the definition'}`);
    k++;
    return t!;
  };
  let directs = 0;
  let depth = 0;

  const unit = (): Rewrite => {
    const t = peek();
    if (t?.text === '[') {
      k++;
      if (++directs > 1) fail(t, 'more than one [...] of direct types in one definition');
      const types: TypeRestriction[] = [];
      for (;;) {
        const typeTok = name('a type');
        const r: TypeRestriction = { type: typeTok.text };
        if (peek()?.text === ':') { k++; expect('*'); r.wildcard = true; }
        else if (peek()?.text === '#') { k++; r.relation = name('a relation').text; }
        if (peek()?.text === 'with') { k++; r.condition = name('a condition name').text; }
        types.push(r);
        if (peek()?.text === ',') { k++; continue; }
        expect(']');
        break;
      }
      if (legacy && peek()?.text === 'as' && tokens[k + 1]?.text === 'self') k += 2;
      return { kind: 'direct', types, at: where(t) };
    }
    if (t?.text === '(') {
      k++;
      if (++depth > MAX_NESTING) fail(t, `parentheses nested more than ${MAX_NESTING} deep`);
      const inner = expr();
      expect(')');
      depth--;
      return inner;
    }
    if (legacy && t?.text === 'self') fail(t, '"self" without type restrictions (schema 1.0) cannot be imported: write the types it takes, as in "[user] as self"');
    const rel = name('a relation, "[" or "("');
    if (peek()?.text === 'from') {
      k++;
      const tupleset = name('the relation after "from"');
      return { kind: 'from', relation: rel.text, tupleset: tupleset.text, at: where(rel) };
    }
    return { kind: 'computed', relation: rel.text, at: where(rel) };
  };

  const expr = (): Rewrite => {
    const first = unit();
    const op = peek();
    if (!op || op.text === ')') return first;
    if (op.text === 'but') {
      k++;
      expect('not');
      const subtract = unit();
      const after = peek();
      if (after && after.text !== ')') fail(after, `"but not" subtracts one operand: add parentheses before "${after.text}"`);
      return { kind: 'difference', base: first, subtract, at: where(op) };
    }
    if (op.text !== 'or' && op.text !== 'and') fail(op, `expected "or", "and" or "but not", found "${op.text}"`);
    const children = [first];
    while (peek()?.text === op.text) { k++; children.push(unit()); }
    const after = peek();
    if (after && after.text !== ')') {
      const other = after.text === 'but' ? 'but not' : after.text;
      fail(after, `"${op.text}" and "${other}" mixed at one level: add parentheses`);
    }
    return { kind: op.text === 'or' ? 'union' : 'intersection', children, at: where(op) };
  };

  try {
    if (tokens.length === 0) fail(undefined, 'empty definition');
    const rewrite = expr();
    if (k < tokens.length) fail(tokens[k], `unexpected "${tokens[k]!.text}"`);
    return { rewrite };
  } catch (e) {
    if (e instanceof Stop) return { refusal: e.r };
    throw e;
  }
}

/**
 * A `condition NAME(p: T, ...) { CEL }` block from line i, the body ending at the `}` that closes
 * its `{` (braces inside string literals do not count). Returns the line after it.
 */
function parseCondition(lines: Line[], i: number, file: string, refusals: Refusal[], into: ConditionDef[]): number {
  const start = lines[i]!;
  // The raw text from the `condition` keyword to the closing brace, with the line of each character.
  let text = '';
  const lineOf: number[] = [];
  let depth = 0;
  let opened = false;
  let quote: string | undefined;
  let j = i;
  scan: for (; j < lines.length; j++) {
    const raw = lines[j]!.text;
    // Whole-line comments inside the block are dropped; CEL has no `#`.
    const lineText = /^\s*#/.test(raw) ? '' : raw;
    for (let c = 0; c < lineText.length; c++) {
      const ch = lineText[c]!;
      text += ch;
      lineOf.push(lines[j]!.no);
      if (quote) {
        if (ch === '\\') { c++; text += lineText[c] ?? ''; lineOf.push(lines[j]!.no); }
        else if (ch === quote) quote = undefined;
        continue;
      }
      if (ch === '"' || ch === '\'') quote = ch;
      else if (ch === '{') { depth++; opened = true; }
      else if (ch === '}') {
        depth--;
        if (opened && depth === 0) {
          const rest = lineText.slice(c + 1);
          if (stripComment(rest).trim() !== '') refusals.push(refusal({ file, line: lines[j]!.no }, `unexpected "${rest.trim()}" after the condition's closing brace`));
          j++;
          break scan;
        }
      }
    }
    text += '\n';
    lineOf.push(lines[j]!.no);
    quote = undefined;
  }
  if (!opened || depth !== 0) {
    refusals.push(refusal({ file, line: start.no }, 'condition without a closing "}"'));
    return lines.length;
  }
  const brace = text.indexOf('{');
  const head = text.slice(0, brace).replace(/\s+/g, ' ').trim();
  const m = /^condition\s+([^\s(]+)\s*\((.*)\)$/.exec(head);
  if (!m) {
    refusals.push(refusal({ file, line: start.no }, `expected "condition NAME(param: type, ...) {", found "${head}"`));
    return j;
  }
  const params: ConditionParam[] = [];
  let ok = true;
  for (const p of m[2]!.split(',').map((s) => s.trim()).filter(Boolean)) {
    const pm = /^([^\s:]+)\s*:\s*(.+)$/.exec(p);
    const type = pm ? paramType(pm[2]!.replace(/\s+/g, '')) : undefined;
    if (!pm || !type) {
      refusals.push(refusal({ file, line: start.no }, `condition ${m[1]}: parameter "${p}" is not "name: type" with a type of ${[...PARAM_TYPES, 'list<T>', 'map<T>'].join(', ')}`));
      ok = false;
      continue;
    }
    params.push({ name: pm[1]!, type });
  }
  if (ok) {
    into.push({
      name: m[1]!,
      params,
      expression: text.slice(brace + 1, text.lastIndexOf('}')),
      expressionAt: { file, line: lineOf[brace]! },
      at: { file, line: start.no },
    });
  }
  return j;
}

/** `int`, `list<string>`, `map<list<int>>` as written, or undefined when OpenFGA has no such type. */
export function paramType(t: string): string | undefined {
  if ((PARAM_TYPES as readonly string[]).includes(t)) return t;
  const g = /^(\w+)<(.+)>$/.exec(t);
  if (g && (GENERIC_PARAM_TYPES as readonly string[]).includes(g[1]!)) {
    const inner = paramType(g[2]!);
    return inner && `${g[1]}<${inner}>`;
  }
  return undefined;
}
