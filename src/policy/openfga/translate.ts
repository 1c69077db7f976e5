// OpenFGA conditions (CEL) into the policy language's condition syntax. What is carried over:
// comparisons, `&&` `||` `!`, `in` (list element, map key), indexing and field selection on maps,
// `size`, the string methods `startsWith` `endsWith` `contains` `matches`, the `exists` `all`
// `exists_one` macros (as `any` `all` `one` quantifiers), `timestamp()` `duration()`
// `ipaddress()` of literals, `+` and `-`, `in_cidr`, every literal form but bytes. Anything
// else is refused by name, with its line.
//
// The translation builds the target expression as a tree and prints it with the parentheses its
// precedence needs, as `fmt` prints them: `or` < `and` < `not` < a comparison or a predicate
// call; a quantifier's body is the rest of the expression, so a quantifier inside `and`, `or` or
// `not` is parenthesized and its own body is not.

import { CelSyntaxError, parseCel, type Cel, type Pos } from './cel.js';
import { refusal, type ConditionDef, type Refusal } from './model.js';

/** Words of the policy language's conditions that a parameter or variable name cannot be. */
export const CONDITION_KEYWORDS = new Set(['and', 'or', 'not', 'in', 'like', 'contains', 'true', 'false', 'null', 'any', 'all', 'one']);

type Bool =
  | { k: 'or' | 'and'; items: Bool[] }
  | { k: 'not'; e: Bool }
  | { k: 'rel'; op: string; l: Val; r: Val }
  | { k: 'fn'; name: string; args: Val[] }
  | { k: 'quant'; q: 'any' | 'all' | 'one'; v: string; list: Val; body: Bool };

type Val =
  | { k: 'name'; n: string }
  | { k: 'lit'; text: string }
  | { k: 'list'; items: Val[] }
  | { k: 'index'; e: Val; i: Val }
  | { k: 'call'; fn: string; args: Val[] }
  | { k: 'arith'; op: '+' | '-'; l: Val; r: Val };

class Refused {
  constructor(readonly message: string, readonly pos: Pos) {}
}

const PREDICATE_METHODS: Record<string, string> = { startsWith: 'starts_with', endsWith: 'ends_with', matches: 'matches', in_cidr: 'in_cidr' };
const MACROS: Record<string, 'any' | 'all' | 'one'> = { exists: 'any', all: 'all', exists_one: 'one' };
const CONSTRUCTORS = new Set(['timestamp', 'duration', 'ipaddress']);
const CMP = new Set(['==', '!=', '<', '<=', '>', '>=']);

/** A condition's body in the policy language, or the refusal naming what it cannot carry and where. */
export function translateCondition(c: ConditionDef): { text: string } | { refusal: Refusal } {
  const lineOf = (pos: Pos) => ({ file: c.expressionAt.file, line: c.flatLines ? c.expressionAt.line : c.expressionAt.line + pos.line - 1 });
  let ast: Cel;
  try {
    ast = parseCel(c.expression);
  } catch (e) {
    if (e instanceof CelSyntaxError) {
      const what = /^(message literal|a name qualified)/.test(e.message) ? `${e.message} is not supported` : `CEL syntax error: ${e.message}`;
      return { refusal: refusal(lineOf(e.pos), `condition ${c.name}: ${what}`) };
    }
    throw e;
  }
  for (const p of c.params) {
    if (CONDITION_KEYWORDS.has(p.name)) return { refusal: refusal(c.at, `condition ${c.name}: parameter name "${p.name}" is a keyword of the policy language's conditions`) };
  }
  const scope = new Set(c.params.map((p) => p.name));
  try {
    return { text: printBool(toBool(ast, scope), 0) };
  } catch (e) {
    if (e instanceof Refused) return { refusal: refusal(lineOf(e.pos), `condition ${c.name}: ${e.message}`) };
    throw e;
  }
}

/** A CEL expression where a truth value is wanted. */
function toBool(e: Cel, scope: Set<string>): Bool {
  switch (e.t) {
    case 'binary':
      if (e.op === '||' || e.op === '&&') {
        const k = e.op === '||' ? 'or' : 'and';
        const items = [e.l, e.r].map((x) => toBool(x, scope)).flatMap((b) => (b.k === k ? b.items : [b]));
        return { k, items };
      }
      if (CMP.has(e.op)) {
        // `P == true`, `P != false`, `P == false` of a predicate P: the predicate itself, or its negation.
        const lit = (x: Cel) => (x.t === 'lit' && x.kind === 'bool' ? x.value === 'true' : undefined);
        const side = lit(e.r) !== undefined ? { p: e.l, b: lit(e.r)! } : lit(e.l) !== undefined ? { p: e.r, b: lit(e.l)! } : undefined;
        if (side && (e.op === '==' || e.op === '!=') && isPredicate(side.p)) {
          const p = toBool(side.p, scope);
          return (e.op === '==') === side.b ? p : { k: 'not', e: p };
        }
        return { k: 'rel', op: e.op, l: toVal(e.l, scope), r: toVal(e.r, scope) };
      }
      if (e.op === 'in') return { k: 'rel', op: 'in', l: toVal(e.l, scope), r: toVal(e.r, scope) };
      break;
    case 'unary':
      if (e.op === '!') return { k: 'not', e: toBool(e.e, scope) };
      break;
    case 'call': {
      if (e.target && e.fn in MACROS) {
        const v = e.args[0];
        if (e.args.length !== 2 || v?.t !== 'ident') throw new Refused(`${e.fn}() takes a variable name and an expression`, e.pos);
        if (CONDITION_KEYWORDS.has(v.name)) throw new Refused(`the variable name "${v.name}" of ${e.fn}() is a keyword of the policy language's conditions`, v.pos);
        if (scope.has(v.name)) throw new Refused(`the variable "${v.name}" of ${e.fn}() hides a name already in use`, v.pos);
        const list = toVal(e.target, scope);
        const inner = new Set(scope).add(v.name);
        return { k: 'quant', q: MACROS[e.fn]!, v: v.name, list, body: toBool(e.args[1]!, inner) };
      }
      if (e.target && e.fn === 'contains') {
        arity(e, 1);
        return { k: 'rel', op: 'contains', l: toVal(e.target, scope), r: toVal(e.args[0]!, scope) };
      }
      if (e.target && e.fn in PREDICATE_METHODS) {
        arity(e, 1);
        return { k: 'fn', name: PREDICATE_METHODS[e.fn]!, args: [toVal(e.target, scope), toVal(e.args[0]!, scope)] };
      }
      if (!e.target && e.fn === 'matches') {
        arity(e, 2);
        return { k: 'fn', name: 'matches', args: e.args.map((a) => toVal(a, scope)) };
      }
      break;
    }
    case 'cond':
      throw new Refused('the conditional operator "? :" is not supported', e.pos);
  }
  // A value where a truth value is wanted: a bool parameter, a map's bool entry.
  return { k: 'rel', op: '==', l: toVal(e, scope), r: { k: 'lit', text: 'true' } };
}

/** Whether a node is a truth value of its own (a comparison, a predicate, a connective). */
function isPredicate(e: Cel): boolean {
  if (e.t === 'binary') return ['||', '&&', 'in', ...CMP].includes(e.op);
  if (e.t === 'unary') return e.op === '!';
  if (e.t === 'call') return (e.target !== undefined && (e.fn in MACROS || e.fn in PREDICATE_METHODS || e.fn === 'contains')) || (!e.target && e.fn === 'matches');
  return false;
}

function arity(e: Cel & { t: 'call' }, n: number): void {
  if (e.args.length !== n) throw new Refused(`${e.fn}() takes ${n} argument${n === 1 ? '' : 's'}, got ${e.args.length}`, e.pos);
}

/** A CEL expression where a value is wanted. */
function toVal(e: Cel, scope: Set<string>): Val {
  switch (e.t) {
    case 'ident':
      if (!scope.has(e.name)) throw new Refused(`unknown name "${e.name}" (not a parameter of the condition)`, e.pos);
      return { k: 'name', n: e.name };
    case 'lit':
      return { k: 'lit', text: literal(e) };
    case 'list':
      return { k: 'list', items: e.items.map((x) => toVal(x, scope)) };
    case 'map':
      throw new Refused('map literals ({...}) are not supported', e.pos);
    case 'select':
      return { k: 'index', e: toVal(e.e, scope), i: { k: 'lit', text: JSON.stringify(e.field) } };
    case 'index':
      return { k: 'index', e: toVal(e.e, scope), i: toVal(e.i, scope) };
    case 'unary':
      if (e.op === '-' && e.e.t === 'lit' && (e.e.kind === 'int' || e.e.kind === 'double')) return { k: 'lit', text: '-' + literal(e.e) };
      if (e.op === '-') throw new Refused('negation ("-") of anything but a number literal is not supported', e.pos);
      throw new Refused('"!" where a value is wanted', e.pos);
    case 'binary':
      if (e.op === '+' || e.op === '-') return { k: 'arith', op: e.op, l: toVal(e.l, scope), r: toVal(e.r, scope) };
      if (e.op === '*' || e.op === '/' || e.op === '%') throw new Refused(`the operator "${e.op}" is not supported (only "+" and "-")`, e.pos);
      throw new Refused(`a truth value ("${e.op}") used as a value is not supported`, e.pos);
    case 'cond':
      throw new Refused('the conditional operator "? :" is not supported', e.pos);
    case 'call': {
      if (e.fn === 'size' && ((e.target && e.args.length === 0) || (!e.target && e.args.length === 1))) {
        return { k: 'call', fn: 'size', args: [toVal(e.target ?? e.args[0]!, scope)] };
      }
      if (!e.target && CONSTRUCTORS.has(e.fn)) {
        arity(e, 1);
        const a = e.args[0]!;
        if (a.t !== 'lit' || a.kind !== 'string') throw new Refused(`${e.fn}() of anything but a string literal is not supported`, e.pos);
        return { k: 'call', fn: e.fn, args: [toVal(a, scope)] };
      }
      if (isPredicate(e)) throw new Refused(`a truth value (${e.fn}()) used as a value is not supported`, e.pos);
      throw new Refused(`the CEL function "${e.fn}" is not supported`, e.pos);
    }
  }
}

function literal(e: Cel & { t: 'lit' }): string {
  switch (e.kind) {
    case 'int':
      return BigInt(e.value).toString();
    case 'uint':
      return BigInt(e.value.slice(0, -1)).toString() + 'u';
    case 'double':
      // As the language prints a number (`0.0` is `0`, `1e3` is `1000`): the import reads as `fmt` writes it.
      return String(Number(e.value));
    case 'string':
      return JSON.stringify(e.value);
    case 'bytes':
      throw new Refused('bytes literals are not supported', e.pos);
    default:
      return e.value;
  }
}

// ---- printing ----

function precedence(b: Bool): number {
  return b.k === 'quant' ? 0 : b.k === 'or' ? 1 : b.k === 'and' ? 2 : b.k === 'not' ? 3 : 4;
}

/** Print `b`, parenthesized when it binds less tightly than `min` requires. */
function printBool(b: Bool, min: number): string {
  const s = rawBool(b);
  return precedence(b) < min ? `(${s})` : s;
}

function rawBool(b: Bool): string {
  switch (b.k) {
    case 'or':
      return b.items.map((x) => printBool(x, 1)).join(' or ');
    case 'and':
      return b.items.map((x) => printBool(x, 2)).join(' and ');
    case 'not':
      return `not ${printBool(b.e, 3)}`;
    case 'rel':
      return `${printVal(b.l)} ${b.op} ${printVal(b.r)}`;
    case 'fn':
      return `${b.name}(${b.args.map(printVal).join(', ')})`;
    case 'quant':
      return `${b.q} ${b.v} in ${printVal(b.list)}: ${printBool(b.body, 0)}`;
  }
}

function printVal(v: Val): string {
  switch (v.k) {
    case 'name':
    case 'lit':
      return v.k === 'name' ? v.n : v.text;
    case 'list':
      return `[${v.items.map(printVal).join(', ')}]`;
    case 'index':
      return `${v.e.k === 'arith' ? `(${printVal(v.e)})` : printVal(v.e)}[${printVal(v.i)}]`;
    case 'call':
      return `${v.fn}(${v.args.map(printVal).join(', ')})`;
    case 'arith':
      return `${printVal(v.l)} ${v.op} ${v.r.k === 'arith' ? `(${printVal(v.r)})` : printVal(v.r)}`;
  }
}
