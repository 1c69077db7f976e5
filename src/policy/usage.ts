// Limits over time: how many allowed actions (`count`), or how much of one context field
// (`<field> sum`), an agent may use in a sliding window. This module is the language side:
// windows, the limit shapes (file and JSON), and the check of one request against usage
// stated to it. Reading and consuming the counters belongs to the server, which owns the
// database and the clock; a decision only ever sees usage as a fact of its request.

import type { Diagnostic } from './types.js';
import type { Loc } from './ast.js';
import { isJsonObject } from './own.js';

export type UsageKind = 'count' | 'sum';
/** Whose counter: the agent's (for the capability), or the agent's on one object, or for one person. */
export type UsageScope = 'agent' | 'resource' | 'person';
export const USAGE_SCOPES: readonly UsageScope[] = ['agent', 'resource', 'person'];

/** The longest window: usage older than this is never needed. */
export const MAX_WINDOW_SECONDS = 31 * 24 * 60 * 60;

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const UNIT_ORDER = ['d', 'h', 'm', 's'] as const;

/** `<n>s`, `<n>m`, `<n>h` or `<n>d` → seconds, or why the text is not a window. */
export function parseWindow(text: string): { seconds: number } | { error: string } {
  const m = /^(\d+)([A-Za-z_]*)$/.exec(text);
  if (!m) return { error: `"${text}" is not a window (write <n>s, <n>m, <n>h or <n>d, as in 24h)` };
  const [, digits, unit] = m as unknown as [string, string, string];
  if (unit === '') return { error: `window "${text}" needs a unit: s, m, h or d (as in ${digits}h)` };
  const size = UNITS[unit];
  if (size === undefined) return { error: `unknown window unit "${unit}" in "${text}" (use s, m, h or d)` };
  const seconds = Number(digits) * size;
  if (seconds < 1) return { error: `window "${text}" is empty: it must be at least 1s` };
  if (seconds > MAX_WINDOW_SECONDS) return { error: `window "${text}" is longer than 31 days` };
  return { seconds };
}

/** Seconds → the shortest way to write them (`86400` → `1d`, `5400` → `90m`). */
export function formatWindow(seconds: number): string {
  for (const u of UNIT_ORDER) {
    const size = UNITS[u]!;
    if (seconds % size === 0) return `${seconds / size}${u}`;
  }
  return `${seconds}s`;
}

/** One limit over time, as written in a file or in the management API's limits JSON. */
export interface UsageLimit {
  kind: UsageKind;
  /** the context field summed; null for a count */
  field: string | null;
  max: number;
  /** the window as written (`24h`) */
  per: string;
  seconds: number;
  scope: UsageScope;
  /** where it was declared: `file:line` or `api:capability/<name>` */
  source: string;
}

/**
 * What a limit counts within one request's agent and capability, as a name: `count per 1h`,
 * `amount sum per 24h`, `count per 10m per resource`. Limits with the same name (a file's and
 * the management API's, or `per 60m` and `per 1h`) count the same thing: one counter.
 */
export function usageKey(l: Pick<UsageLimit, 'kind' | 'field' | 'seconds' | 'scope'>): string {
  // A compiled limit is asked on every decision: its key is kept with it.
  const known = keyOfLimit.get(l);
  if (known !== undefined) return known;
  const key = keyText(l);
  keyOfLimit.set(l, key);
  return key;
}

const keyOfLimit = new WeakMap<object, string>();

function keyText(l: Pick<UsageLimit, 'kind' | 'field' | 'seconds' | 'scope'>): string {
  const what = l.kind === 'sum' ? `${l.field} sum` : 'count';
  return `${what} per ${formatWindow(l.seconds)}${l.scope === 'agent' ? '' : ` per ${l.scope}`}`;
}

/**
 * A usage key as a person may write it (`count per 60m`, `amount sum per 1d per resource`)
 * → its canonical form, or an error.
 */
export function normalizeUsageKey(text: string): { key: string } | { error: string } {
  const words = text.trim().split(/\s+/);
  let i = 0;
  let kind: UsageKind;
  let field: string | null = null;
  if (words[0] === 'count' && words[1] === 'per') { kind = 'count'; i = 1; }
  else if (words.length >= 2 && words[1] === 'sum') { kind = 'sum'; field = words[0]!; i = 2; }
  else return { error: `"${text}" names no counter (write "count per 1h" or "<field> sum per 24h")` };
  if (words[i] !== 'per' || words[i + 1] === undefined) return { error: `"${text}" needs a window ("per 1h")` };
  const w = parseWindow(words[i + 1]!);
  if ('error' in w) return w;
  i += 2;
  let scope: UsageScope = 'agent';
  if (i < words.length) {
    if (words[i] !== 'per' || !USAGE_SCOPES.includes(words[i + 1] as UsageScope) || i + 2 !== words.length) {
      return { error: `"${text}": after the window only "per resource" or "per person" may follow` };
    }
    scope = words[i + 1] as UsageScope;
  }
  return { key: usageKey({ kind, field, seconds: w.seconds, scope }) };
}

/** How a limit over time reads in the file language (`amount sum max 2000 per 24h per resource`). */
export function formatUsageLimit(l: Pick<UsageLimit, 'kind' | 'field' | 'max' | 'per' | 'scope'>): string {
  const what = l.kind === 'sum' ? `${l.field} sum` : 'count';
  return `${what} max ${l.max} per ${l.per}${l.scope === 'agent' ? '' : ` per ${l.scope}`}`;
}

// ---- the check -------------------------------------------------------------

/** The operator a request violates: `sum` or `count` (over the window), `required` (no value to sum). */
export type UsageViolation = 'sum' | 'count' | 'required';

/** One limit over time checked against one request: what it read and what an allow would add. */
export interface UsageCheck {
  key: string;
  limit: UsageLimit;
  /** the usage stated to the decision (0 when none was) */
  used: number;
  /** what this action adds when it is allowed (1 for a count; the field's value for a sum) */
  amount: number;
  violated: UsageViolation | null;
}

/**
 * Sums kept to fifteen significant digits, so that decimal amounts add up as written
 * (0.1 + 0.2 is 0.3) instead of drifting by the last binary digit.
 */
export const addAmounts = (a: number, b: number): number => Number((a + b).toPrecision(15));

/**
 * Would allowing this request pass the limit? A sum needs the field as a non-negative number:
 * a missing one is `required`, any other value (a string, a negative number, which would give
 * back budget) violates the sum (fail closed).
 */
export function checkUsageLimit(limit: UsageLimit, key: string, ctx: Record<string, unknown>, used: number): UsageCheck {
  if (limit.kind === 'count') {
    return { key, limit, used, amount: 1, violated: addAmounts(used, 1) > limit.max ? 'count' : null };
  }
  const field = limit.field!;
  if (!Object.hasOwn(ctx, field)) return { key, limit, used, amount: 0, violated: 'required' };
  const v = ctx[field];
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return { key, limit, used, amount: 0, violated: 'sum' };
  return { key, limit, used, amount: v, violated: addAmounts(used, v) > limit.max ? 'sum' : null };
}

/** The reason's `<field> <operator>` part for a violated limit over time (`count` alone for a count). */
export function usageViolationField(c: UsageCheck): { field: string | null; operator: string } {
  if (c.limit.kind === 'count') return { field: null, operator: 'count' };
  return { field: c.limit.field, operator: c.violated ?? 'sum' };
}

/** The trace line of a check: the limit, then what it read. */
export function usageCheckText(c: UsageCheck): string {
  const adds = c.limit.kind === 'count' ? '1' : c.violated === 'required' ? `no ${c.limit.field}` : String(c.amount);
  return `${formatUsageLimit(c.limit)} (used ${c.used}, this adds ${adds})`;
}

/** Usage as a request states it: usage key → amount used in the window. Keys are normalized on reading. */
export type UsageFacts = Record<string, number>;

/** The stated usage of one key: 0 when none was stated, and never less. */
export function usedOf(usage: UsageFacts | undefined, key: string): number {
  if (!usage || !Object.hasOwn(usage, key)) return 0;
  const v = usage[key];
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

// ---- the JSON shape of the management API ------------------------------------

/**
 * The limits-over-time part of a JSON limits object. `<field>: {sum: {max, per, scope?}}`
 * (or a list of them) sums the field; the top-level `count: [{max, per, scope?}]` (or one such
 * object) counts. A `count` that is neither (a bare value, or an object without `per`) is a
 * limit on a context field named `count` and is left to the plain limits.
 */
export function isCountEntry(key: string, value: unknown): boolean {
  return key === 'count' && (Array.isArray(value) || (isJsonObject(value) && Object.hasOwn(value, 'per')));
}

export function jsonUsageLimits(limits: unknown, source = 'api:limits'): { limits: UsageLimit[]; diagnostics: Diagnostic[] } {
  const loc: Loc = { file: source, line: 1, col: 1 };
  const out: UsageLimit[] = [];
  const diagnostics: Diagnostic[] = [];
  if (!isJsonObject(limits)) return { limits: out, diagnostics };
  const err = (message: string) => diagnostics.push({ ...loc, message, severity: 'error' });
  for (const [key, value] of Object.entries(limits)) {
    if (isCountEntry(key, value)) {
      const entries = Array.isArray(value) ? value : [value];
      if (entries.length === 0) err('count: the list is empty (give at least one {max, per})');
      entries.forEach((e, i) => {
        const l = jsonUsageEntry('count', null, e, `count[${i}]`, source, err);
        if (l) out.push(l);
      });
      continue;
    }
    if (!isJsonObject(value) || !Object.hasOwn(value, 'sum')) continue;
    const sum = value.sum;
    const entries = Array.isArray(sum) ? sum : [sum];
    if (entries.length === 0) err(`${key}.sum: the list is empty (give at least one {max, per})`);
    const notNumber = nonNumberConstraint(value);
    if (notNumber) err(`${key}.sum: ${key} is ${notNumber}, and a sum needs a number`);
    entries.forEach((e, i) => {
      const l = jsonUsageEntry('sum', key, e, Array.isArray(sum) ? `${key}.sum[${i}]` : `${key}.sum`, source, err);
      if (l) out.push(l);
    });
  }
  return { limits: out, diagnostics };
}

/** A field's other limits that make it something other than a number, described; null when none do. */
function nonNumberConstraint(spec: Record<string, unknown>): string | null {
  for (const op of ['in', 'not_in'] as const) {
    const v = spec[op];
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x !== 'number')) return `compared with ${describe(v[0])}s (${op})`;
  }
  for (const op of ['max', 'min'] as const) {
    const v = spec[op];
    if (v !== undefined && typeof v !== 'number') return `limited by ${op} ${JSON.stringify(v)}`;
  }
  return null;
}

const describe = (v: unknown): string => (typeof v === 'string' ? 'string' : typeof v === 'boolean' ? 'boolean' : 'value');

function jsonUsageEntry(
  kind: UsageKind,
  field: string | null,
  e: unknown,
  where: string,
  source: string,
  err: (m: string) => void,
): UsageLimit | null {
  if (!isJsonObject(e)) {
    err(`${where}: must be an object {max, per, scope}`);
    return null;
  }
  let ok = true;
  for (const k of Object.keys(e)) {
    if (k !== 'max' && k !== 'per' && k !== 'scope') { err(`${where}.${k}: unknown member (use max, per and scope)`); ok = false; }
  }
  const max = checkMax(kind, e.max, `${where}.max`, err);
  let seconds = 0;
  if (typeof e.per !== 'string') { err(`${where}.per: the window is required, as a string such as "24h"`); ok = false; }
  else {
    const w = parseWindow(e.per);
    if ('error' in w) { err(`${where}.per: ${w.error}`); ok = false; } else seconds = w.seconds;
  }
  let scope: UsageScope = 'agent';
  if (e.scope !== undefined) {
    if (typeof e.scope !== 'string' || !USAGE_SCOPES.includes(e.scope as UsageScope)) {
      err(`${where}.scope: must be "agent", "resource" or "person"`);
      ok = false;
    } else scope = e.scope as UsageScope;
  }
  if (!ok || max === null) return null;
  return { kind, field, max, per: e.per as string, seconds, scope, source };
}

/** A limit's maximum: a number, not negative; a whole number for a count. Null (and a diagnostic) otherwise. */
export function checkMax(kind: UsageKind, v: unknown, where: string, err: (m: string) => void): number | null {
  if (typeof v !== 'number' || !Number.isFinite(v)) { err(`${where}: must be a number`); return null; }
  if (v < 0) { err(`${where}: must not be negative`); return null; }
  if (kind === 'count' && !Number.isInteger(v)) { err(`${where}: a count's maximum must be a whole number`); return null; }
  return v;
}

const apiLimitsCache = new WeakMap<object, UsageLimit[]>();

/**
 * A capability's limits over time from its management API limits (read once per limits
 * object: a changed limit is a new object). Invalid entries are left out; the API refuses
 * them before they are stored.
 */
export function apiUsageLimits(limits: object, capability: string): readonly UsageLimit[] {
  let hit = apiLimitsCache.get(limits);
  if (!hit) {
    hit = jsonUsageLimits(limits, `api:capability/${capability}`).limits;
    apiLimitsCache.set(limits, hit);
  }
  return hit;
}

/** Limits over time → their JSON form, merged into a plain limits object (for explain and the API). */
export function usageLimitsToJson(limits: UsageLimit[], into: Record<string, unknown> = {}): Record<string, unknown> {
  const entry = (l: UsageLimit) => ({ max: l.max, per: l.per, ...(l.scope !== 'agent' ? { scope: l.scope } : {}) });
  const counts = limits.filter((l) => l.kind === 'count').map(entry);
  for (const l of limits) {
    if (l.kind !== 'sum') continue;
    const cur = into[l.field!];
    const spec: Record<string, unknown> = isJsonObject(cur) ? cur : cur === undefined ? {} : { eq: cur };
    const prev = spec.sum;
    spec.sum = prev === undefined ? entry(l) : [...(Array.isArray(prev) ? prev : [prev]), entry(l)];
    into[l.field!] = spec;
  }
  if (counts.length) into.count = counts;
  return into;
}

// ---- the file language -------------------------------------------------------------

/**
 * A limit over time as a limits block writes it: `amount sum max 2000 per 24h`,
 * `count max 3 per 10m per resource`. Kept as written; `validateUsageNodes` checks it.
 */
export interface UsageLimitNode {
  kind: UsageKind;
  /** the summed field; null for a count */
  field: string | null;
  max: unknown;
  per: string;
  /** as written after the window (`per resource`); absent for the agent's own counter */
  scope?: string;
  loc?: Loc;
  comments?: { before?: string[]; after?: string };
}

/** What a block's plain limits say a field is (for "sum over a non-number field"). */
export interface PlainFieldFacts { field: string; max?: unknown; min?: unknown; in?: unknown; not_in?: unknown; eq?: unknown }

function plainNonNumber(f: PlainFieldFacts): string | null {
  for (const op of ['in', 'not_in'] as const) {
    const v = f[op];
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x !== 'number')) return `compared with ${describe(v[0])}s (${op})`;
  }
  if (f.eq !== undefined && typeof f.eq !== 'number') return `required to equal ${JSON.stringify(f.eq)}`;
  return null;
}

/**
 * Checks a block's limits over time, collecting every problem: the window (unit, at most 31
 * days), the maximum (a number, not negative, whole for a count), the scope, a sum over a
 * field the block (or the schema, through `fieldType`) makes something other than a number,
 * and the same thing counted twice in one block.
 */
export function validateUsageNodes(
  nodes: readonly UsageLimitNode[],
  plain: readonly PlainFieldFacts[],
  at: Loc,
  out: Diagnostic[],
  fieldType?: (field: string) => string | undefined,
): void {
  const seen = new Set<string>();
  for (const n of nodes) {
    const loc = n.loc ?? at;
    const err = (message: string) => out.push({ file: loc.file, line: loc.line, col: loc.col, message, severity: 'error' });
    const what = n.kind === 'sum' ? `${n.field} sum` : 'count';
    checkMax(n.kind, n.max, `${what} max`, err);
    const w = parseWindow(n.per);
    if ('error' in w) err(`${what}: ${w.error}`);
    if (n.scope !== undefined && !USAGE_SCOPES.includes(n.scope as UsageScope)) {
      err(`${what}: unknown scope "per ${n.scope}" (use per resource or per person)`);
    }
    if (n.kind === 'sum') {
      const facts = plain.find((p) => p.field === n.field);
      const why = (facts && plainNonNumber(facts)) ?? (facts && nonNumberConstraint(facts as unknown as Record<string, unknown>));
      const declared = fieldType?.(n.field!);
      if (why) err(`${n.field} sum: ${n.field} is ${why} in this block, and a sum needs a number`);
      else if (declared !== undefined && declared !== 'number') err(`${n.field} sum: ${n.field} is declared ${declared}, and a sum needs a number`);
    }
    if ('seconds' in w && (n.scope === undefined || USAGE_SCOPES.includes(n.scope as UsageScope))) {
      const key = usageKey({ kind: n.kind, field: n.field, seconds: w.seconds, scope: (n.scope as UsageScope | undefined) ?? 'agent' });
      if (seen.has(key)) err(`${key} is limited twice in one block`);
      seen.add(key);
    }
  }
}

/** A validated node → the limit it states, with its source (`file:line`). */
export function usageLimitOf(n: UsageLimitNode, source: string): UsageLimit {
  const w = parseWindow(n.per);
  return {
    kind: n.kind,
    field: n.field,
    max: n.max as number,
    per: n.per,
    seconds: 'seconds' in w ? w.seconds : MAX_WINDOW_SECONDS,
    scope: (n.scope as UsageScope | undefined) ?? 'agent',
    source,
  };
}

/** How `fmt` writes a node: as the file language reads it, the number as written. */
export function formatUsageNode(n: UsageLimitNode): string {
  const what = n.kind === 'sum' ? `${n.field} sum` : 'count';
  return `${what} max ${typeof n.max === 'number' ? String(n.max) : JSON.stringify(n.max)} per ${n.per}${n.scope !== undefined ? ` per ${n.scope}` : ''}`;
}

// ---- the step of the decision ---------------------------------------------------------

/** A trace step of the limits, as decide() writes them. */
export interface UsageTraceStep {
  step: 'limits';
  check: string;
  outcome: 'pass' | 'fail';
  source?: string;
  reads?: { path: string; value: unknown; present: boolean }[];
}

/**
 * The limits over time of one request, in order, against the usage it states. Every check
 * made is returned (the server consumes on each when the decision allows); the first
 * violated one ends the step.
 */
export function checkUsageLimits(
  limits: readonly UsageLimit[],
  ctx: Record<string, unknown>,
  usage: UsageFacts | undefined,
  trace: { push(step: UsageTraceStep): unknown },
): { checks: UsageCheck[]; violated: UsageCheck | null } {
  const checks: UsageCheck[] = [];
  for (const l of limits) {
    const key = usageKey(l);
    const c = checkUsageLimit(l, key, ctx, usedOf(usage, key));
    checks.push(c);
    const reads: { path: string; value: unknown; present: boolean }[] = [{ path: `usage.${key}`, value: c.used, present: usage !== undefined && Object.hasOwn(usage, key) }];
    if (l.kind === 'sum') reads.push({ path: `context.${l.field}`, value: ctx[l.field!], present: Object.hasOwn(ctx, l.field!) });
    trace.push({ step: 'limits', check: usageCheckText(c), outcome: c.violated ? 'fail' : 'pass', source: l.source, reads });
    if (c.violated) return { checks, violated: c };
  }
  return { checks, violated: null };
}

/**
 * Usage as a person states it (a policy test's `used count 19 in 1h`, an explain request's
 * `"usage": {"count per 1h": 19}`): keys normalized, values numbers not below zero.
 */
export function readUsageFacts(raw: unknown): { usage: UsageFacts; errors: string[] } {
  const usage: UsageFacts = {};
  const errors: string[] = [];
  if (raw === undefined || raw === null) return { usage, errors };
  if (!isJsonObject(raw)) return { usage, errors: ['usage must be an object {"count per 1h": 19, "amount sum per 24h": 1500}'] };
  for (const [k, v] of Object.entries(raw)) {
    const n = normalizeUsageKey(k);
    if ('error' in n) { errors.push(`usage: ${n.error}`); continue; }
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) { errors.push(`usage "${k}": must be a number, not negative`); continue; }
    usage[n.key] = addAmounts(usage[n.key] ?? 0, v);
  }
  return { usage, errors };
}
