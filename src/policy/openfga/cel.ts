// A parser for the Common Expression Language (CEL) as OpenFGA conditions write it: the whole
// expression grammar (so that what is refused is refused by name, not as a syntax error), every
// literal form, positions on every node. What the policy language can say is decided afterwards,
// in translate.ts.

import { MAX_NESTING } from './model.js';

export interface Pos {
  line: number;
  col: number;
}

export type Cel = { pos: Pos } & (
  | { t: 'ident'; name: string }
  | { t: 'lit'; kind: 'int' | 'uint' | 'double' | 'string' | 'bytes' | 'bool' | 'null'; value: string }
  | { t: 'list'; items: Cel[] }
  | { t: 'map'; entries: [Cel, Cel][] }
  | { t: 'unary'; op: '!' | '-'; e: Cel }
  | { t: 'binary'; op: string; l: Cel; r: Cel }
  | { t: 'cond'; c: Cel; a: Cel; b: Cel }
  | { t: 'select'; e: Cel; field: string }
  | { t: 'index'; e: Cel; i: Cel }
  | { t: 'call'; fn: string; target?: Cel; args: Cel[] }
);

export class CelSyntaxError extends Error {
  constructor(message: string, readonly pos: Pos) { super(message); }
}

interface Tok {
  kind: 'num' | 'str' | 'ident' | 'op' | 'end';
  text: string;
  /** A string literal's value (escapes resolved), a number's kind. */
  value?: string;
  numKind?: 'int' | 'uint' | 'double';
  bytes?: boolean;
  pos: Pos;
}

const OPS = ['&&', '||', '==', '!=', '<=', '>=', '!', '<', '>', '+', '-', '*', '/', '%', '?', ':', '.', ',', '[', ']', '(', ')', '{', '}'];

function lex(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  let line = 1;
  let lineStart = 0;
  const pos = (at = i): Pos => ({ line, col: at - lineStart + 1 });
  while (i < src.length) {
    const c = src[i]!;
    if (c === '\n') { i++; line++; lineStart = i; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (src.startsWith('//', i)) { while (i < src.length && src[i] !== '\n') i++; continue; }
    const start = pos();
    const num = /^(?:0[xX][0-9a-fA-F]+[uU]?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)/.exec(src.slice(i));
    if (num && (/\d/.test(c) || (c === '.' && /\d/.test(src[i + 1] ?? '')))) {
      const text = num[0];
      const kind = /[uU]$/.test(text) ? 'uint' : /^0[xX]/.test(text) || /^\d+$/.test(text) ? 'int' : 'double';
      toks.push({ kind: 'num', text, numKind: kind, pos: start });
      i += text.length;
      continue;
    }
    const strPrefix = /^([rRbB]{0,2})("""|'''|"|')/.exec(src.slice(i));
    if (strPrefix && (strPrefix[1] === '' || /^[rRbB]+$/.test(strPrefix[1]!))) {
      const raw = /r/i.test(strPrefix[1]!);
      const bytes = /b/i.test(strPrefix[1]!);
      const quote = strPrefix[2]!;
      let j = i + strPrefix[0].length;
      let value = '';
      for (;;) {
        if (j >= src.length) throw new CelSyntaxError('unterminated string literal', start);
        if (src.startsWith(quote, j)) { j += quote.length; break; }
        const ch = src[j]!;
        if (ch === '\n') {
          if (quote.length === 1) throw new CelSyntaxError('unterminated string literal', start);
          line++; lineStart = j + 1;
        }
        if (ch === '\\' && !raw) {
          const e = unescape(src, j);
          if (!e) throw new CelSyntaxError(`invalid escape "${src.slice(j, j + 2)}" in a string literal`, pos(j));
          value += e.value;
          j = e.end;
          continue;
        }
        value += ch;
        j++;
      }
      toks.push({ kind: 'str', text: src.slice(i, j), value, bytes, pos: start });
      i = j;
      continue;
    }
    const id = /^[_a-zA-Z][_a-zA-Z0-9]*/.exec(src.slice(i));
    if (id) {
      toks.push({ kind: 'ident', text: id[0], pos: start });
      i += id[0].length;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (!op) throw new CelSyntaxError(`unexpected character "${c}"`, start);
    toks.push({ kind: 'op', text: op, pos: start });
    i += op.length;
  }
  toks.push({ kind: 'end', text: 'the end of the expression', pos: pos() });
  return toks;
}

function unescape(src: string, j: number): { value: string; end: number } | undefined {
  const n = src[j + 1];
  const simple: Record<string, string> = { '\\': '\\', '"': '"', '\'': '\'', '`': '`', '?': '?', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };
  if (n !== undefined && n in simple) return { value: simple[n]!, end: j + 2 };
  const hex = (len: number, at: number) => {
    const h = src.slice(at, at + len);
    return new RegExp(`^[0-9a-fA-F]{${len}}$`).test(h) ? String.fromCodePoint(parseInt(h, 16)) : undefined;
  };
  if (n === 'x' || n === 'X') { const v = hex(2, j + 2); return v === undefined ? undefined : { value: v, end: j + 4 }; }
  if (n === 'u') { const v = hex(4, j + 2); return v === undefined ? undefined : { value: v, end: j + 6 }; }
  if (n === 'U') { const v = hex(8, j + 2); return v === undefined ? undefined : { value: v, end: j + 10 }; }
  const oct = /^[0-3][0-7]{2}/.exec(src.slice(j + 1));
  if (oct) return { value: String.fromCodePoint(parseInt(oct[0], 8)), end: j + 4 };
  return undefined;
}

/** `a.b.c` as written, when a node is only names and field selections. */
function qualifiedName(e: Cel): string | undefined {
  if (e.t === 'ident') return e.name;
  if (e.t === 'select') { const base = qualifiedName(e.e); return base && `${base}.${e.field}`; }
  return undefined;
}

const RELOPS = new Set(['==', '!=', '<', '<=', '>', '>=', 'in']);

/** Parse a CEL expression. Throws CelSyntaxError with the position of the problem. */
export function parseCel(src: string): Cel {
  const toks = lex(src);
  let k = 0;
  const peek = () => toks[k]!;
  const isOp = (text: string) => { const t = peek(); return (t.kind === 'op' || (t.kind === 'ident' && text === 'in')) && t.text === text; };
  const expectOp = (text: string) => {
    if (!isOp(text)) throw new CelSyntaxError(`expected "${text}", found "${peek().text}"`, peek().pos);
    k++;
  };

  // Each parenthesis, bracket and `!` is a level of the recursion.
  let depth = 0;
  const deeper = <T>(f: () => T): T => {
    if (++depth > MAX_NESTING) throw new CelSyntaxError(`nested more than ${MAX_NESTING} deep`, peek().pos);
    try { return f(); } finally { depth--; }
  };

  const expr = (): Cel => deeper(() => {
    const c = or();
    if (isOp('?')) {
      k++;
      const a = or();
      expectOp(':');
      const b = expr();
      return { t: 'cond', c, a, b, pos: c.pos };
    }
    return c;
  });
  const binaryLevel = (ops: string[], next: () => Cel) => (): Cel => {
    let l = next();
    for (;;) {
      const t = peek();
      const op = ops.find((o) => isOp(o));
      if (!op) return l;
      k++;
      l = { t: 'binary', op, l, r: next(), pos: t.pos };
    }
  };
  const mul = binaryLevel(['*', '/', '%'], () => unary());
  const add = binaryLevel(['+', '-'], mul);
  const rel = binaryLevel([...RELOPS], add);
  const and = binaryLevel(['&&'], rel);
  const or = binaryLevel(['||'], and);

  function unary(): Cel {
    const t = peek();
    if (isOp('!') || isOp('-')) {
      k++;
      return { t: 'unary', op: t.text as '!' | '-', e: deeper(unary), pos: t.pos };
    }
    return member();
  }

  function args(close: string): Cel[] {
    const out: Cel[] = [];
    if (isOp(close)) { k++; return out; }
    for (;;) {
      out.push(expr());
      if (isOp(',')) { k++; if (isOp(close)) { k++; return out; } continue; }
      expectOp(close);
      return out;
    }
  }

  function member(): Cel {
    let e = primary();
    for (;;) {
      const t = peek();
      if (isOp('.')) {
        k++;
        const name = peek();
        if (name.kind !== 'ident') throw new CelSyntaxError(`expected a field or method name after ".", found "${name.text}"`, name.pos);
        k++;
        if (isOp('(')) { k++; e = { t: 'call', fn: name.text, target: e, args: args(')'), pos: name.pos }; }
        else e = { t: 'select', e, field: name.text, pos: name.pos };
        continue;
      }
      if (isOp('[')) {
        k++;
        const i = expr();
        expectOp(']');
        e = { t: 'index', e, i, pos: t.pos };
        continue;
      }
      const qualified = qualifiedName(e);
      if (isOp('{') && qualified) {
        // `google.protobuf.Duration{seconds: 1}`: a protobuf message literal.
        throw new CelSyntaxError(`message literal ${qualified}{...}`, t.pos);
      }
      return e;
    }
  }

  function primary(): Cel {
    const t = peek();
    if (t.kind === 'num') {
      k++;
      return { t: 'lit', kind: t.numKind!, value: t.text, pos: t.pos };
    }
    if (t.kind === 'str') {
      k++;
      return { t: 'lit', kind: t.bytes ? 'bytes' : 'string', value: t.value!, pos: t.pos };
    }
    if (t.kind === 'ident') {
      if (t.text === 'in') throw new CelSyntaxError('unexpected "in"', t.pos);
      k++;
      if (t.text === 'true' || t.text === 'false') return { t: 'lit', kind: 'bool', value: t.text, pos: t.pos };
      if (t.text === 'null') return { t: 'lit', kind: 'null', value: 'null', pos: t.pos };
      if (isOp('(')) { k++; return { t: 'call', fn: t.text, args: args(')'), pos: t.pos }; }
      return { t: 'ident', name: t.text, pos: t.pos };
    }
    if (isOp('(')) {
      k++;
      const e = expr();
      expectOp(')');
      return e;
    }
    if (isOp('[')) {
      k++;
      return { t: 'list', items: args(']'), pos: t.pos };
    }
    if (isOp('{')) {
      k++;
      const entries: [Cel, Cel][] = [];
      if (isOp('}')) { k++; return { t: 'map', entries, pos: t.pos }; }
      for (;;) {
        const key = expr();
        expectOp(':');
        entries.push([key, expr()]);
        if (isOp(',')) { k++; if (isOp('}')) { k++; break; } continue; }
        expectOp('}');
        break;
      }
      return { t: 'map', entries, pos: t.pos };
    }
    if (isOp('.')) throw new CelSyntaxError('a name qualified from the root (".name")', t.pos);
    throw new CelSyntaxError(`unexpected "${t.text}"`, t.pos);
  }

  const e = expr();
  if (peek().kind !== 'end') throw new CelSyntaxError(`unexpected "${peek().text}"`, peek().pos);
  return e;
}
