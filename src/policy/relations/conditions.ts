// Conditions on relationships: typed parameters and a body in the language's expression syntax
// (the subset of CEL that OpenFGA conditions use). `checkCondition` finds unknown names and
// ill-typed expressions at load; `compileCondition` gives a function of the merged context
// (stored values win over the request's) that answers true, false, or an error naming what
// is missing or wrong.

import type { Loc } from '../ast.js';
import type { CExpr, ConditionNode, ParamTypeNode } from './ast.js';

// ---- values ----------------------------------------------------------------------------------

export class Duration { constructor(readonly ns: number) {} }
export class Timestamp { constructor(readonly ms: number) {} }
/** An IP address as its bytes (4 or 16). */
export class IpAddress { constructor(readonly bytes: number[], readonly text: string) {} }

/** A parameter type: `int`, `list<string>`, `map<int>`, `any`. */
export type ParamType = { base: string; arg?: ParamType };

export const SCALAR_TYPES = ['bool', 'string', 'int', 'uint', 'double', 'duration', 'timestamp', 'ipaddress', 'any'];
export const GENERIC_TYPES = ['list', 'map'];

export function paramTypeText(t: ParamType): string {
  return t.arg ? `${t.base}<${paramTypeText(t.arg)}>` : t.base;
}

export function paramTypeOf(n: ParamTypeNode): ParamType {
  return n.arg ? { base: n.name, arg: paramTypeOf(n.arg) } : { base: n.name };
}

const DURATION_UNITS: Record<string, number> = { h: 3600e9, m: 60e9, s: 1e9, ms: 1e6, us: 1e3, 'µs': 1e3, ns: 1 };

/** Go's duration syntax, as CEL reads it: `1h30m`, `10s`, `1.5h`, `-300ms`. */
export function parseDuration(s: string): Duration | null {
  const m = /^([-+]?)((?:\d+(?:\.\d*)?|\.\d+)(?:h|ms|m|s|us|µs|ns))+$/.exec(s);
  if (!m && s !== '0') return null;
  if (s === '0') return new Duration(0);
  let ns = 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)/g;
  for (let p = re.exec(s); p; p = re.exec(s)) ns += Number(p[1]) * DURATION_UNITS[p[2]!]!;
  return new Duration(s.startsWith('-') ? -ns : ns);
}

// As Go's time.RFC3339 reads it (OpenFGA's): `T` and `Z` upper case, every field in its range.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

export function parseTimestamp(s: string): Timestamp | null {
  const m = RFC3339.exec(s);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  // Day 0 of the next month is the last of this one (in UTC, for any year).
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !leapYear(year) ? 1 : 0);
  if (month < 1 || month > 12 || day < 1 || day > days || hour > 23 || minute > 59 || second > 59) return null;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return null;
  const t = Date.parse(s);
  return Number.isFinite(t) ? new Timestamp(t) : null;
}

function leapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

export function parseIp(s: string): IpAddress | null {
  // No leading zeros in an IPv4 field (Go's netip, which OpenFGA uses, refuses them as ambiguous).
  const v4 = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/.exec(s);
  if (v4) {
    const b = v4.slice(1).map(Number);
    return b.every((x) => x <= 255) ? new IpAddress(b, s) : null;
  }
  if (!s.includes(':') || !/^[0-9A-Fa-f:.]+$/.test(s)) return null;
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const groups = (h: string): number[] | null => {
    if (h === '') return [];
    const out: number[] = [];
    const parts = h.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      if (i === parts.length - 1 && p.includes('.')) {
        const ip4 = parseIp(p);
        if (!ip4 || ip4.bytes.length !== 4) return null;
        out.push((ip4.bytes[0]! << 8) | ip4.bytes[1]!, (ip4.bytes[2]! << 8) | ip4.bytes[3]!);
      } else {
        if (!/^[0-9A-Fa-f]{1,4}$/.test(p)) return null;
        out.push(parseInt(p, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!), tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return null;
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return null;
  const all = [...head, ...new Array(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return new IpAddress(all.flatMap((g) => [g >> 8, g & 255]), s);
}

export function inCidr(ip: IpAddress, cidr: string): boolean | null {
  const slash = cidr.indexOf('/');
  if (slash < 0) return null;
  const net = parseIp(cidr.slice(0, slash));
  const bits = Number(cidr.slice(slash + 1));
  if (!net || !Number.isInteger(bits) || bits < 0 || bits > net.bytes.length * 8) return null;
  if (net.bytes.length !== ip.bytes.length) return false;
  for (let i = 0; i < bits; i++) {
    const byte = i >> 3, mask = 0x80 >> (i & 7);
    if ((ip.bytes[byte]! & mask) !== (net.bytes[byte]! & mask)) return false;
  }
  return true;
}

class EvalError extends Error {}
const fail = (m: string): never => { throw new EvalError(m); };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Duration) && !(v instanceof Timestamp) && !(v instanceof IpAddress);
}

/** A decimal number written as a string (`"10"`, `"-2.5"`, `"1e3"`), as OpenFGA reads one for a numeric parameter. */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A context value for a numeric parameter: a JSON number, or a decimal string (OpenFGA converts both). */
function numeric(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  return typeof v === 'string' && DECIMAL.test(v) ? Number(v) : undefined;
}

/** A context value converted to a parameter's type, or an error message. */
export function convertValue(v: unknown, t: ParamType, what: string): unknown {
  switch (t.base) {
    case 'any': return v;
    case 'bool': return typeof v === 'boolean' ? v : fail(`${what} must be a bool`);
    case 'string': return typeof v === 'string' ? v : fail(`${what} must be a string`);
    case 'int': {
      const n = numeric(v);
      return n !== undefined && Number.isInteger(n) ? n : fail(`${what} must be an int`);
    }
    case 'uint': {
      const n = numeric(v);
      return n !== undefined && Number.isInteger(n) && n >= 0 ? n : fail(`${what} must be a uint`);
    }
    case 'double': {
      const n = numeric(v);
      return n !== undefined && Number.isFinite(n) ? n : fail(`${what} must be a double`);
    }
    case 'duration': {
      if (v instanceof Duration) return v;
      const d = typeof v === 'string' ? parseDuration(v) : null;
      return d ?? fail(`${what} must be a duration such as "10s" or "1h30m"`);
    }
    case 'timestamp': {
      if (v instanceof Timestamp) return v;
      const d = typeof v === 'string' ? parseTimestamp(v) : null;
      return d ?? fail(`${what} must be an RFC 3339 timestamp such as "2023-01-01T00:00:00Z"`);
    }
    case 'ipaddress': {
      if (v instanceof IpAddress) return v;
      const d = typeof v === 'string' ? parseIp(v) : null;
      return d ?? fail(`${what} must be an IP address`);
    }
    case 'list': return Array.isArray(v) ? v.map((x, i) => convertValue(x, t.arg!, `${what}[${i}]`)) : fail(`${what} must be a list`);
    case 'map': {
      if (!isRecord(v)) return fail(`${what} must be a map (an object)`);
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v)) out[k] = convertValue(v[k], t.arg!, `${what}.${k}`);
      return out;
    }
  }
  return fail(`${what}: unknown type ${t.base}`);
}

// ---- static types --------------------------------------------------------------------------

/** A static type: a parameter type, or `null`/`num` (an int, uint or double literal of unknown kind). */
type SType = ParamType;
const ANY: SType = { base: 'any' };
const BOOL: SType = { base: 'bool' };
const STRING: SType = { base: 'string' };
const DURATION: SType = { base: 'duration' };
const TIMESTAMP: SType = { base: 'timestamp' };
const IPADDRESS: SType = { base: 'ipaddress' };
const INT: SType = { base: 'int' };
const NULL: SType = { base: 'null' };

const NUMERIC = new Set(['int', 'uint', 'double']);
const isAny = (t: SType) => t.base === 'any';
const isNum = (t: SType) => NUMERIC.has(t.base);

function same(a: SType, b: SType): boolean {
  if (isAny(a) || isAny(b)) return true;
  if (isNum(a) && isNum(b)) return true;
  if (a.base !== b.base) return false;
  return a.arg && b.arg ? same(a.arg, b.arg) : true;
}

function ordered(t: SType): boolean {
  return isAny(t) || isNum(t) || ['string', 'duration', 'timestamp'].includes(t.base);
}

const FUNCTIONS: Record<string, { args: SType[]; result: SType }> = {
  duration: { args: [STRING], result: DURATION },
  timestamp: { args: [STRING], result: TIMESTAMP },
  ipaddress: { args: [STRING], result: IPADDRESS },
  in_cidr: { args: [IPADDRESS, STRING], result: BOOL },
  starts_with: { args: [STRING, STRING], result: BOOL },
  ends_with: { args: [STRING, STRING], result: BOOL },
  matches: { args: [STRING, STRING], result: BOOL },
  size: { args: [ANY], result: INT },
};

export interface TypeProblem { message: string; loc?: Loc }

/** The problems of a condition: unknown parameter types, unknown names, ill-typed expressions. */
export function checkCondition(c: ConditionNode): TypeProblem[] {
  const out: TypeProblem[] = [];
  const scope = new Map<string, SType>();
  const seen = new Set<string>();
  for (const p of c.params) {
    if (seen.has(p.name)) out.push({ message: `condition ${c.name}: parameter ${p.name} is declared twice`, loc: p.loc });
    seen.add(p.name);
    const problem = checkParamType(p.type);
    if (problem) out.push({ message: `condition ${c.name}, parameter ${p.name}: ${problem}`, loc: p.type.loc ?? p.loc });
    scope.set(p.name, paramTypeOf(p.type));
  }
  const t = typeOf(c.body, scope, out, c.name);
  if (!same(t, BOOL)) out.push({ message: `condition ${c.name}: the body must be a bool, not ${paramTypeText(t)}`, loc: c.body.loc });
  return out;
}

function checkParamType(t: ParamTypeNode): string | null {
  if (GENERIC_TYPES.includes(t.name)) return t.arg ? checkParamType(t.arg) : `${t.name} needs an item type, such as ${t.name}<string>`;
  if (!SCALAR_TYPES.includes(t.name)) return `unknown type "${t.name}" (use ${[...SCALAR_TYPES, 'list<T>', 'map<T>'].join(', ')})`;
  if (t.arg) return `${t.name} takes no item type`;
  return null;
}

function typeOf(e: CExpr, scope: Map<string, SType>, out: TypeProblem[], cond: string): SType {
  const err = (message: string, loc = e.loc): SType => { out.push({ message: `condition ${cond}: ${message}`, loc }); return ANY; };
  const need = (x: CExpr, t: SType, what: string) => {
    const xt = typeOf(x, scope, out, cond);
    if (!same(xt, t)) err(`${what} must be ${paramTypeText(t)}, not ${paramTypeText(xt)}`, x.loc);
    return xt;
  };
  switch (e.op) {
    case 'or': case 'and': for (const i of e.items) need(i, BOOL, `each side of "${e.op}"`); return BOOL;
    case 'not': need(e.expr, BOOL, '"not"'); return BOOL;
    case 'quant': {
      const lt = typeOf(e.list, scope, out, cond);
      if (!isAny(lt) && lt.base !== 'list' && lt.base !== 'map') return err(`"${e.quant} ${e.name} in ..." needs a list or a map, not ${paramTypeText(lt)}`, e.list.loc);
      const inner = new Map(scope);
      inner.set(e.name, lt.base === 'list' ? lt.arg! : lt.base === 'map' ? STRING : ANY);
      const bt = typeOf(e.body, inner, out, cond);
      if (!same(bt, BOOL)) err(`the body of "${e.quant}" must be a bool, not ${paramTypeText(bt)}`, e.body.loc);
      return BOOL;
    }
    case 'in': {
      const l = typeOf(e.left, scope, out, cond), r = typeOf(e.right, scope, out, cond);
      if (r.base === 'list') { if (!same(l, r.arg!)) err(`"in" compares ${paramTypeText(l)} with the items of a ${paramTypeText(r)}`); }
      else if (r.base === 'map') { if (!same(l, STRING)) err(`"in" a map needs a string key, not ${paramTypeText(l)}`); }
      else if (!isAny(r)) err(`"in" needs a list or a map on its right, not ${paramTypeText(r)}`, e.right.loc);
      return BOOL;
    }
    case 'contains': {
      const l = typeOf(e.left, scope, out, cond), r = typeOf(e.right, scope, out, cond);
      if (l.base === 'string') { if (!same(r, STRING)) err(`a string contains a string, not ${paramTypeText(r)}`, e.right.loc); }
      else if (l.base === 'list') { if (!same(r, l.arg!)) err(`a ${paramTypeText(l)} contains ${paramTypeText(l.arg!)} items, not ${paramTypeText(r)}`, e.right.loc); }
      else if (!isAny(l)) err(`"contains" needs a string or a list on its left, not ${paramTypeText(l)}`, e.left.loc);
      return BOOL;
    }
    case 'cmp': {
      const l = typeOf(e.left, scope, out, cond), r = typeOf(e.right, scope, out, cond);
      if (!['==', '!=', '<', '<=', '>', '>='].includes(e.cmp)) return err(`unknown operator "${e.cmp}" (use ==, !=, <, <=, > or >=)`);
      if (l.base === 'null' || r.base === 'null') {
        if (e.cmp !== '==' && e.cmp !== '!=') err('null is compared only with == and !=');
        return BOOL;
      }
      if (!same(l, r)) return err(`"${e.cmp}" compares ${paramTypeText(l)} with ${paramTypeText(r)}`);
      if (e.cmp !== '==' && e.cmp !== '!=' && !(ordered(l) && ordered(r))) err(`"${e.cmp}" does not order ${paramTypeText(l)} values`);
      return BOOL;
    }
    case 'add': case 'sub': {
      const l = typeOf(e.left, scope, out, cond), r = typeOf(e.right, scope, out, cond);
      if (isAny(l) || isAny(r)) return isAny(l) ? r : l;
      if (isNum(l) && isNum(r)) return l.base === 'double' || r.base === 'double' ? { base: 'double' } : l;
      if (l.base === 'timestamp' && r.base === 'duration') return TIMESTAMP;
      if (e.op === 'add' && l.base === 'duration' && r.base === 'timestamp') return TIMESTAMP;
      if (l.base === 'duration' && r.base === 'duration') return DURATION;
      if (e.op === 'sub' && l.base === 'timestamp' && r.base === 'timestamp') return DURATION;
      if (e.op === 'add' && l.base === 'string' && r.base === 'string') return STRING;
      if (e.op === 'add' && l.base === 'list' && r.base === 'list' && same(l, r)) return l;
      return err(`"${e.op === 'add' ? '+' : '-'}" does not apply to ${paramTypeText(l)} and ${paramTypeText(r)}`);
    }
    case 'neg': {
      const t = typeOf(e.expr, scope, out, cond);
      if (!isAny(t) && !isNum(t) && t.base !== 'duration') return err(`"-" does not apply to ${paramTypeText(t)}`);
      return t;
    }
    case 'index': {
      const t = typeOf(e.target, scope, out, cond), i = typeOf(e.index, scope, out, cond);
      if (t.base === 'list') { if (!same(i, INT)) err(`a list is indexed by an int, not ${paramTypeText(i)}`, e.index.loc); return t.arg!; }
      if (t.base === 'map') { if (!same(i, STRING)) err(`a map is indexed by a string, not ${paramTypeText(i)}`, e.index.loc); return t.arg!; }
      if (!isAny(t)) return err(`only lists and maps are indexed, not ${paramTypeText(t)}`, e.target.loc);
      return ANY;
    }
    case 'list': {
      let item: SType | null = null;
      for (const i of e.items) {
        const it = typeOf(i, scope, out, cond);
        if (item === null) item = it;
        else if (!same(item, it)) err(`a list mixes ${paramTypeText(item)} and ${paramTypeText(it)}`, i.loc);
      }
      return { base: 'list', arg: item ?? ANY };
    }
    case 'call': {
      const f = FUNCTIONS[e.fn];
      if (!f) return err(`unknown function ${e.fn} (use ${Object.keys(FUNCTIONS).join(', ')})`);
      if (e.args.length !== f.args.length) return err(`${e.fn} takes ${f.args.length} argument${f.args.length === 1 ? '' : 's'}, not ${e.args.length}`);
      e.args.forEach((a, i) => need(a, f.args[i]!, `argument ${i + 1} of ${e.fn}`));
      if (e.fn === 'size') {
        const t = typeOf(e.args[0]!, scope, [], cond);
        if (!isAny(t) && !['string', 'list', 'map'].includes(t.base)) err(`size needs a string, a list or a map, not ${paramTypeText(t)}`);
      }
      // Literal arguments are checked now, so that a bad one is an error at load, not at every check.
      const lit = e.args[0]?.op === 'str' ? e.args[0].value : undefined;
      if (lit !== undefined) {
        if (e.fn === 'duration' && !parseDuration(lit)) err(`duration("${lit}") is not a duration such as "1h30m"`);
        if (e.fn === 'timestamp' && !parseTimestamp(lit)) err(`timestamp("${lit}") is not an RFC 3339 timestamp`);
        if (e.fn === 'ipaddress' && !parseIp(lit)) err(`ipaddress("${lit}") is not an IP address`);
      }
      const pattern = e.args[1]?.op === 'str' ? e.args[1].value : undefined;
      if (pattern !== undefined && e.fn === 'matches' && regexOf(pattern) === null) err(`matches: "${pattern}" is not a valid regular expression`);
      if (pattern !== undefined && e.fn === 'in_cidr' && inCidr(new IpAddress([0, 0, 0, 0], ''), pattern) === null && inCidr(parseIp('::')!, pattern) === null) err(`in_cidr: "${pattern}" is not a CIDR such as "10.0.0.0/8"`);
      return f.result;
    }
    case 'num': return e.uint ? { base: 'uint' } : Number.isInteger(e.value) ? INT : { base: 'double' };
    case 'str': return STRING;
    case 'bool': return BOOL;
    case 'null': return NULL;
    case 'name': {
      const t = scope.get(e.name);
      return t ?? err(`unknown name ${e.name} (the parameters are ${[...scope.keys()].join(', ') || 'none'})`);
    }
  }
}

const regexCache = new Map<string, RegExp | null>();

/** RE2-like: JavaScript's syntax without lookaround or backreferences. */
function regexOf(p: string): RegExp | null {
  if (regexCache.has(p)) return regexCache.get(p)!;
  let r: RegExp | null = null;
  if (!/\(\?[=!<]|\\[1-9]/.test(p)) {
    try { r = new RegExp(p, 'u'); } catch { r = null; }
  }
  regexCache.set(p, r);
  return r;
}

// ---- evaluation ---------------------------------------------------------------------------------

/** `missing`: the parameter neither the stored context nor the request's gives (the request's to supply). */
export type ConditionResult = { ok: true; value: boolean } | { ok: false; error: string; missing?: string };

export interface CompiledCondition {
  name: string;
  params: { name: string; type: ParamType }[];
  /** Evaluate against the stored context and the request's (the stored values win). */
  evaluate(stored: Record<string, unknown>, request: Record<string, unknown>): ConditionResult;
}

const hasOwn = Object.hasOwn;

export function compileCondition(c: ConditionNode): CompiledCondition {
  const params = c.params.map((p) => ({ name: p.name, type: paramTypeOf(p.type) }));
  const body = c.body;
  return {
    name: c.name,
    params,
    evaluate(stored, request) {
      try {
        const vars = new Map<string, unknown>();
        for (const p of params) {
          const v = hasOwn(stored, p.name) ? stored[p.name] : hasOwn(request, p.name) ? request[p.name] : undefined;
          if (v === undefined) return { ok: false, error: `condition ${c.name}: parameter ${p.name} is missing from the context`, missing: p.name };
          vars.set(p.name, convertValue(v, p.type, `condition ${c.name}: parameter ${p.name}`));
        }
        const v = evalExpr(body, vars);
        if (typeof v !== 'boolean') return { ok: false, error: `condition ${c.name} did not give a bool` };
        return { ok: true, value: v };
      } catch (e) {
        if (e instanceof EvalError) return { ok: false, error: e.message.startsWith('condition ') ? e.message : `condition ${c.name}: ${e.message}` };
        throw e;
      }
    },
  };
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return a === b;
  if (a instanceof Duration && b instanceof Duration) return a.ns === b.ns;
  if (a instanceof Timestamp && b instanceof Timestamp) return a.ms === b.ms;
  if (a instanceof IpAddress && b instanceof IpAddress) return a.bytes.length === b.bytes.length && a.bytes.every((x, i) => x === b.bytes[i]);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isRecord(a) && isRecord(b)) {
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (v instanceof Duration) return 'duration';
  if (v instanceof Timestamp) return 'timestamp';
  if (v instanceof IpAddress) return 'ipaddress';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'object') return 'map';
  return typeof v;
}

function ordKey(v: unknown): number | string {
  if (typeof v === 'number' || typeof v === 'string') return v;
  if (v instanceof Duration) return v.ns;
  if (v instanceof Timestamp) return v.ms;
  return fail(`${kindOf(v)} values are not ordered`);
}

function truth(v: unknown, what: string): boolean {
  return typeof v === 'boolean' ? v : fail(`${what} needs a bool, got ${kindOf(v)}`);
}

function evalExpr(e: CExpr, vars: Map<string, unknown>): unknown {
  switch (e.op) {
    case 'or': case 'and': {
      // CEL's commutative logic: a decisive value wins over an error on the other side.
      const decisive = e.op === 'or';
      let error: unknown = null;
      for (const i of e.items) {
        try {
          if (truth(evalExpr(i, vars), `"${e.op}"`) === decisive) return decisive;
        } catch (x) { if (!(x instanceof EvalError)) throw x; error ??= x; }
      }
      if (error) throw error;
      return !decisive;
    }
    case 'not': return !truth(evalExpr(e.expr, vars), '"not"');
    case 'quant': {
      const l = evalExpr(e.list, vars);
      const items = Array.isArray(l) ? l : isRecord(l) ? Object.keys(l) : fail(`"${e.quant}" needs a list or a map, got ${kindOf(l)}`);
      const inner = new Map(vars);
      let n = 0;
      for (const it of items) {
        inner.set(e.name, it);
        const v = truth(evalExpr(e.body, inner), `"${e.quant}"`);
        if (e.quant === 'any' && v) return true;
        if (e.quant === 'all' && !v) return false;
        if (v) n++;
      }
      return e.quant === 'any' ? false : e.quant === 'all' ? true : n === 1;
    }
    case 'in': {
      const l = evalExpr(e.left, vars), r = evalExpr(e.right, vars);
      let found: boolean;
      if (Array.isArray(r)) found = r.some((x) => equal(l, x));
      else if (isRecord(r)) found = typeof l === 'string' ? hasOwn(r, l) : fail('a map key is a string');
      else return fail(`"in" needs a list or a map, got ${kindOf(r)}`);
      return e.negated ? !found : found;
    }
    case 'contains': {
      const l = evalExpr(e.left, vars), r = evalExpr(e.right, vars);
      if (typeof l === 'string') return typeof r === 'string' ? l.includes(r) : fail('a string contains a string');
      if (Array.isArray(l)) return l.some((x) => equal(x, r));
      return fail(`"contains" needs a string or a list, got ${kindOf(l)}`);
    }
    case 'cmp': {
      const l = evalExpr(e.left, vars), r = evalExpr(e.right, vars);
      if (e.cmp === '==') return equal(l, r);
      if (e.cmp === '!=') return !equal(l, r);
      if (kindOf(l) !== kindOf(r)) return fail(`"${e.cmp}" compares ${kindOf(l)} with ${kindOf(r)}`);
      const a = ordKey(l), b = ordKey(r);
      switch (e.cmp) {
        case '<': return a < b;
        case '<=': return a <= b;
        case '>': return a > b;
        case '>=': return a >= b;
      }
      return fail(`unknown operator ${e.cmp}`);
    }
    case 'add': case 'sub': {
      const l = evalExpr(e.left, vars), r = evalExpr(e.right, vars);
      const add = e.op === 'add';
      if (typeof l === 'number' && typeof r === 'number') return add ? l + r : l - r;
      if (l instanceof Timestamp && r instanceof Duration) return new Timestamp(add ? l.ms + r.ns / 1e6 : l.ms - r.ns / 1e6);
      if (add && l instanceof Duration && r instanceof Timestamp) return new Timestamp(r.ms + l.ns / 1e6);
      if (l instanceof Duration && r instanceof Duration) return new Duration(add ? l.ns + r.ns : l.ns - r.ns);
      if (!add && l instanceof Timestamp && r instanceof Timestamp) return new Duration((l.ms - r.ms) * 1e6);
      if (add && typeof l === 'string' && typeof r === 'string') return l + r;
      if (add && Array.isArray(l) && Array.isArray(r)) return [...l, ...r];
      return fail(`"${add ? '+' : '-'}" does not apply to ${kindOf(l)} and ${kindOf(r)}`);
    }
    case 'neg': {
      const v = evalExpr(e.expr, vars);
      if (typeof v === 'number') return -v;
      if (v instanceof Duration) return new Duration(-v.ns);
      return fail(`"-" does not apply to ${kindOf(v)}`);
    }
    case 'index': {
      const t = evalExpr(e.target, vars), i = evalExpr(e.index, vars);
      if (Array.isArray(t)) {
        if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= t.length) return fail(`index ${String(i)} is out of range`);
        return t[i];
      }
      if (isRecord(t)) {
        if (typeof i !== 'string') return fail('a map is indexed by a string');
        return hasOwn(t, i) ? t[i] : fail(`no such key "${i}"`);
      }
      return fail(`only lists and maps are indexed, not ${kindOf(t)}`);
    }
    case 'list': return e.items.map((i) => evalExpr(i, vars));
    case 'call': {
      const a = e.args.map((x) => evalExpr(x, vars));
      const str = (v: unknown) => (typeof v === 'string' ? v : fail(`${e.fn} needs a string, got ${kindOf(v)}`));
      switch (e.fn) {
        case 'duration': return parseDuration(str(a[0])) ?? fail(`duration("${String(a[0])}") is not a duration`);
        case 'timestamp': return parseTimestamp(str(a[0])) ?? fail(`timestamp("${String(a[0])}") is not a timestamp`);
        case 'ipaddress': return parseIp(str(a[0])) ?? fail(`ipaddress("${String(a[0])}") is not an IP address`);
        case 'in_cidr': {
          const ip = a[0] instanceof IpAddress ? a[0] : fail('in_cidr needs an ipaddress');
          return inCidr(ip, str(a[1])) ?? fail(`"${String(a[1])}" is not a CIDR`);
        }
        case 'starts_with': return str(a[0]).startsWith(str(a[1]));
        case 'ends_with': return str(a[0]).endsWith(str(a[1]));
        case 'matches': {
          const re = regexOf(str(a[1]));
          return re ? re.test(str(a[0])) : fail(`"${String(a[1])}" is not a valid regular expression`);
        }
        case 'size': {
          const v = a[0];
          if (typeof v === 'string') return [...v].length;
          if (Array.isArray(v)) return v.length;
          if (isRecord(v)) return Object.keys(v).length;
          return fail(`size needs a string, a list or a map, got ${kindOf(v)}`);
        }
      }
      return fail(`unknown function ${e.fn}`);
    }
    case 'num': return e.value;
    case 'str': return e.value;
    case 'bool': return e.value;
    case 'null': return null;
    case 'name': {
      if (!vars.has(e.name)) return fail(`unknown name ${e.name}`);
      return vars.get(e.name);
    }
  }
}
