// Shared helpers of the policy tests: arbitraries and a reference interpreter.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';
import fc from 'fast-check';
import type { Expr, Item, LimitField, LimitsNode, Literal, Operand, PathNode, PolicyFileNode, RuleNode, Scalar } from '../../src/policy/ast.js';
import type { Decision, DecisionRequest, JsonLimits, PersonFacts, SubjectFacts } from '../../src/policy/types.js';
import { formatFile } from '../../src/policy/format.js';
import { loadPolicySet } from '../../src/policy/load.js';
import type { PolicySet } from '../../src/policy/compile.js';
import type { UsageLimitNode } from '../../src/policy/usage.js';

/** Remove what the parser adds (locations, comments) so ASTs compare by meaning. */
export function strip<T>(x: T): T {
  return JSON.parse(JSON.stringify(x, (k, v) => (['loc', 'fieldLocs', 'subjectLocs', 'relationLocs', 'memberLocs', 'comments', 'lineLocs', 'duplicateFields'].includes(k) ? undefined : v)));
}

export function setOf(text: string, path = 'p.policy'): PolicySet {
  const r = loadPolicySet({ files: [{ path, text }] });
  if (!r.policySet) throw new Error(r.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`).join('\n') + '\n' + text);
  return r.policySet;
}

// ---- building ASTs by hand -------------------------------------------------------------------

export const P = (text: string): PathNode => {
  const parts = text.split('.');
  return ['context', 'subject', 'person', 'resource', 'time', 'action'].includes(parts[0]!) && (parts.length > 1 || parts[0] === 'action')
    ? { type: 'path', root: parts[0] as PathNode['root'], segs: parts.slice(1) }
    : { type: 'path', root: 'context', segs: parts, bare: true };
};
export const L = (value: Literal): Operand => ({ type: 'lit', value });
export const cmp = (l: string, op: 'gte' | 'gt' | 'lte' | 'lt' | 'eq' | 'ne', r: Operand | string): Expr =>
  ({ type: 'cmp', left: P(l), op, right: typeof r === 'string' ? P(r) : r });

// ---- a small vocabulary for random policies ------------------------------------------------

export const AGENTS = ['spiffe://h/agent/a', 'spiffe://h/agent/b', 'spiffe://g/agent/a', 'spiffe://h/agent/zz', 'lonely'];
export const ACTIONS = ['create:refunds', 'delete:refunds', 'create:deployments'];
export const RESOURCE_FOR: Record<string, string[]> = {
  'create:refunds': ['refund:r1', 'refund:r2'],
  'delete:refunds': ['refund:r1', 'refund:r9'],
  'create:deployments': ['deployment:d1', 'deployment:r1'],
};
export const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York'];

const num = fc.constantFrom(0, 10, 100, 5);
const str = fc.constantFrom('USD', 'EUR');
const email = fc.constantFrom('ada@x.com', 'bob@y.com');
const op = fc.constantFrom('gte', 'gt', 'lte', 'lt', 'eq', 'ne' as const);
const eqOp = fc.constantFrom('eq', 'ne' as const);

/** Atoms over the vocabulary: context fields, attributes, relations between two values, lists, like, time. */
export const ATOM_KINDS: fc.Arbitrary<Expr>[] = [
  fc.tuple(op, num).map(([o, v]) => cmp('amount', o, L(v))),
  fc.tuple(eqOp, str).map(([o, v]) => cmp('currency', o, L(v))),
  fc.tuple(eqOp, fc.boolean()).map(([o, v]) => cmp('flag', o, L(v))),
  fc.tuple(fc.boolean(), fc.uniqueArray(str, { minLength: 1, maxLength: 2 })).map(([n, vs]): Expr => ({ type: 'in', left: P('currency'), negated: n, right: L(vs) })),
  op.map((o) => cmp('context.amount', o, 'subject.max_amount')),
  eqOp.map((o) => cmp('resource.owner', o, 'person.email')),
  fc.tuple(eqOp, email).map(([o, v]) => cmp('resource.owner', o, L(v))),
  fc.constantFrom('vip', 'gold').map((v): Expr => ({ type: 'contains', left: P('resource.tags'), mode: 'one', right: L(v) })),
  fc.constantFrom('any' as const, 'all' as const).map((m): Expr => ({ type: 'contains', left: P('resource.tags'), mode: m, right: L(['vip', 'gold']) })),
  fc.boolean().map((n): Expr => ({ type: 'in', left: L('gold'), negated: n, right: P('resource.tags') })),
  fc.boolean().map((n): Expr => ({ type: 'in', left: P('person.email'), negated: n, right: P('resource.editors') })),
  fc.constantFrom('any' as const, 'all' as const).map((m): Expr => ({ type: 'contains', left: P('person.groups'), mode: m, right: P('resource.groups') })),
  fc.constant<Expr>({ type: 'contains', left: P('subject.roles'), mode: 'one', right: L('vip-support') }),
  fc.tuple(fc.boolean(), fc.constantFrom('*@x.com', 'ada*', 'b*@*')).map(([n, p]): Expr => ({ type: 'like', left: P('context.to'), negated: n, right: L(p) })),
  fc.tuple(fc.constantFrom('lt' as const, 'gte' as const), fc.constantFrom(8, 18)).map(([o, v]) => cmp('time.hour', o, L(v))),
  fc.constant<Expr>({ type: 'in', left: P('time.weekday'), negated: false, right: L(['sat', 'sun']) }),
  // a membership in a built-in list of strings: a number or boolean fails closed, also when the list is empty
  fc.boolean().map((n): Expr => ({ type: 'in', left: P('context.code'), negated: n, right: P('subject.roles') })),
];
export const arbAtom: fc.Arbitrary<Expr> = fc.oneof(...ATOM_KINDS);

export const arbExprOf = (atom: fc.Arbitrary<Expr>): fc.Arbitrary<Expr> => fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    atom,
    fc.record({ type: fc.constant('not' as const), expr: tie('e') }),
    fc.record({ type: fc.constantFrom('and' as const, 'or' as const), items: fc.array(tie('e'), { minLength: 2, maxLength: 3 }) }),
  ) as fc.Arbitrary<Expr>,
})).e.map(normalize);

export const arbExpr: fc.Arbitrary<Expr> = arbExprOf(arbAtom);

/**
 * Two policy files over a few kinds of comparison (a random handful of the vocabulary per
 * pair), so that a diff stays small enough to check request by request.
 */
export const arbPolicyPair: fc.Arbitrary<[PolicyFileNode, PolicyFileNode]> = fc.uniqueArray(fc.nat(ATOM_KINDS.length - 1), { minLength: 1, maxLength: 3 })
  .chain((kinds) => {
    const exprs = arbExprOf(fc.oneof(...kinds.map((k) => ATOM_KINDS[k]!)));
    // one limit over time a side: each is a dimension more for diff to walk
    const file = arbPolicyFileWith({ rules: 3, exprs, limits: 1, usage: 1 });
    return fc.tuple(file, file);
  });

/** A policy file over a few kinds of comparison, and one more comparison of the same kinds. */
export const arbPolicyAndAtom: fc.Arbitrary<[PolicyFileNode, Expr]> = fc.uniqueArray(fc.nat(ATOM_KINDS.length - 1), { minLength: 1, maxLength: 3 })
  .chain((kinds) => {
    const atom = fc.oneof(...kinds.map((k) => ATOM_KINDS[k]!));
    return fc.tuple(arbPolicyFileWith({ rules: 3, exprs: arbExprOf(atom), limits: 1, usage: 1 }), atom);
  });

/** Flatten nested and/or, as the parser does. */
export function normalize(e: Expr): Expr {
  switch (e.type) {
    case 'and': case 'or': {
      const items = e.items.map(normalize).flatMap((i) => (i.type === e.type ? (i as { items: Expr[] }).items : [i]));
      return { type: e.type, items } as Expr;
    }
    case 'not': return { type: 'not', expr: normalize(e.expr) };
    default: return e;
  }
}

export const SUBJECT_PATTERNS = ['agent:*', 'agent:spiffe://h/agent/a', 'agent:spiffe://h/agent/*', 'agent:spiffe://*/agent/a', 'user:u1', 'user:*', 'role:editor', 'role:vip-support', 'group:eng'];

export const arbRule = (i: number, effects: string[] = ['deny', 'require_approval', 'permit'], exprs: fc.Arbitrary<Expr> = arbExpr): fc.Arbitrary<RuleNode> => fc.record({
  effect: fc.constantFrom(...effects),
  subjects: fc.uniqueArray(fc.constantFrom(...SUBJECT_PATTERNS), { minLength: 1, maxLength: 2 }),
  relation: fc.constantFrom('create:refunds', 'create:*', '*:refunds', 'delete:refunds', '*:*'),
  object: fc.constantFrom('refund:*', 'refund:r1', '*:*', '*:r1', 'deployment:*'),
  when: fc.option(exprs, { nil: undefined }),
}).map((r) => {
  const node: RuleNode = { kind: 'rule', name: `rule-${i}`, effect: r.effect, subjects: r.subjects, relation: r.relation, object: r.object };
  if (r.when) node.when = r.when;
  return node;
});

export const arbLimitField: fc.Arbitrary<LimitField> = fc.oneof(
  fc.record({ max: fc.option(fc.constantFrom(10, 100), { nil: undefined }), min: fc.option(fc.constantFrom(0, 5), { nil: undefined }) })
    .map((o) => ({ field: 'amount', ...(o.max !== undefined ? { max: o.max } : {}), ...(o.min !== undefined || o.max === undefined ? { min: o.min ?? 0 } : {}) })),
  fc.record({ op: fc.constantFrom('in' as const, 'not_in' as const), v: fc.uniqueArray(str, { minLength: 1, maxLength: 2 }) }).map((o) => ({ field: 'currency', [o.op]: o.v })),
  fc.boolean().map((b) => ({ field: 'flag', eq: b })),
);

/** Limits over time: counts and sums of `amount`, windows written two ways (1h and 60m are one counter), some per resource. */
export const arbUsageNode: fc.Arbitrary<UsageLimitNode> = fc.oneof(
  fc.record({ max: fc.constantFrom(0, 2, 3), per: fc.constantFrom('1h', '60m'), scope: fc.constantFrom(undefined, 'resource') })
    .map((u): UsageLimitNode => ({ kind: 'count', field: null, max: u.max, per: u.per, ...(u.scope ? { scope: u.scope } : {}) })),
  fc.record({ max: fc.constantFrom(100, 150), per: fc.constantFrom('24h', '1d'), scope: fc.constantFrom(undefined, 'resource') })
    .map((u): UsageLimitNode => ({ kind: 'sum', field: 'amount', max: u.max, per: u.per, ...(u.scope ? { scope: u.scope } : {}) })),
);

/** The counter a limit over time reads, as a request states it. */
export const usageKeyOf = (u: UsageLimitNode): string =>
  `${u.kind === 'sum' ? `${u.field} sum per 1d` : 'count per 1h'}${u.scope ? ` per ${u.scope}` : ''}`;

/** A limits block with up to `usage` limits over time. */
export const arbLimitsWith = (usage: number): fc.Arbitrary<LimitsNode> => fc.record({
  capability: fc.constantFrom('create:refunds', 'delete:refunds', 'create:deployments'),
  forAgent: fc.constantFrom('*', 'spiffe://h/agent/a', 'spiffe://h/agent/*'),
  fields: fc.uniqueArray(arbLimitField, { minLength: 1, maxLength: 3, selector: (f) => f.field }),
  usage: fc.uniqueArray(arbUsageNode, { maxLength: usage, selector: usageKeyOf }),
}).map(({ usage: u, ...l }) => ({ kind: 'limits', ...l, ...(u.length ? { usage: u } : {}) }));

export const arbLimits: fc.Arbitrary<LimitsNode> = arbLimitsWith(2);

/** Prior usage a request may state, on the counters arbUsageNode limits. */
export const arbUsage: fc.Arbitrary<Record<string, number> | undefined> = fc.option(fc.record({
  'count per 1h': fc.constantFrom(0, 1, 2, 2.5, 3, 7, undefined),
  'count per 1h per resource': fc.constantFrom(0, 1, 2, 3, undefined),
  'amount sum per 1d': fc.constantFrom(0, 50, 95, 100, 140, 150, 200, undefined),
  'amount sum per 1d per resource': fc.constantFrom(0, 50, 100, 145, undefined),
}).map((u) => Object.fromEntries(Object.entries(u).filter(([, v]) => v !== undefined)) as Record<string, number>), { nil: undefined, freq: 3 });

export const arbPolicyFileWith = (opts: { rules?: number; effects?: string[]; exprs?: fc.Arbitrary<Expr>; limits?: number; usage?: number } = {}): fc.Arbitrary<PolicyFileNode> => fc.tuple(
  fc.integer({ min: 0, max: opts.rules ?? 4 }).chain((n) => (n === 0 ? fc.constant([] as RuleNode[]) : fc.tuple(...Array.from({ length: n }, (_, i) => arbRule(i, opts.effects, opts.exprs))))),
  fc.array(arbLimitsWith(opts.usage ?? 2), { maxLength: opts.limits ?? 2 }),
  fc.constantFrom(...ZONES),
).map(([rules, limits, zone]) => ({
  path: 'r.policy', header: { name: 'r', version: 1 },
  items: [...(zone === 'UTC' ? [] : [{ kind: 'timezone' as const, name: zone }]), ...rules, ...limits] as Item[],
}));

export const arbPolicyFile = arbPolicyFileWith();

export function setFromAst(file: PolicyFileNode): PolicySet {
  return setOf(formatFile(file), file.path);
}

export const arbContext: fc.Arbitrary<Record<string, unknown>> = fc.record({
  amount: fc.constantFrom(-5, 0, 5, 7, 10, 50, 100, 150, 'x', null, undefined),
  currency: fc.constantFrom('USD', 'EUR', 'GBP', 5, undefined),
  flag: fc.constantFrom(true, false, 'true', undefined),
  to: fc.constantFrom('ada@x.com', 'bob@y.com', 'b@x.com', 'ada', 7, undefined),
  code: fc.constantFrom('editor', 'x', -2, true, undefined),
}).map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)));

const drop = <T extends Record<string, unknown>>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

export const arbResourceAttributes: fc.Arbitrary<Record<string, unknown>> = fc.record({
  owner: fc.constantFrom('ada@x.com', 'bob@y.com', 'carol@z.com', 5, undefined),
  tags: fc.constantFrom(['vip'], ['gold', 'vip'], ['gold'], [], ['x'], 'vip', [1], undefined),
  editors: fc.constantFrom(['ada@x.com'], ['bob@y.com', 'ada@x.com'], [], ['z'], undefined, 'ada@x.com'),
  groups: fc.constantFrom(['eng'], ['ops', 'eng'], [], ['ops'], undefined, [true]),
}).map(drop);

/** Instants around a daylight-saving change (Europe/Berlin, 2026-03-29) and an ordinary week; NaN is no clock. */
export const NOWS = [
  Date.parse('2026-03-29T00:30:00Z'), Date.parse('2026-03-29T01:30:00Z'), Date.parse('2026-03-28T06:59:00Z'),
  Date.parse('2026-03-30T07:00:00Z'), Date.parse('2026-03-30T16:59:00Z'), Date.parse('2026-03-30T17:00:00Z'),
  Date.parse('2026-10-25T00:30:00Z'), Date.parse('2026-10-25T01:30:00Z'), Date.parse('2026-01-10T12:00:00Z'), NaN,
];

export const arbRequest: fc.Arbitrary<DecisionRequest> = fc.record({
  kind: fc.constantFrom('agent', 'agent', 'user' as const),
  agent: fc.constantFrom(...AGENTS),
  mode: fc.constantFrom('delegated' as const, 'autonomous' as const),
  person: fc.option(fc.constantFrom('u1', 'u2', ''), { nil: undefined }),
  personEmail: fc.constantFrom('ada@x.com', 'bob@y.com', undefined),
  roles: fc.subarray(['editor', 'vip-support']),
  personRoles: fc.subarray(['editor', 'vip-support']),
  groups: fc.subarray(['eng', 'ops']),
  maxAmount: fc.constantFrom(5, 50, 'lots', undefined),
  action: fc.constantFrom(...ACTIONS),
  r: fc.nat(1),
  context: arbContext,
  resourceAttributes: arbResourceAttributes,
  permissions: fc.subarray(['create:refunds', 'delete:refunds', 'create:deployments', '*:refunds', 'create:*']),
  personPermissions: fc.subarray(['create:refunds', 'delete:refunds', 'create:deployments', '*:*']),
  caps: fc.subarray(ACTIONS),
  apiLimits: fc.option(fc.constantFrom<JsonLimits>({ amount: { max: 50 } }, { currency: 'USD' }, { currency: { not_in: ['EUR'] } }, { amount: { min: 6, max: 200 } }), { nil: undefined }),
  approved: fc.boolean(),
  now: fc.constantFrom(...NOWS),
  usage: arbUsage,
}).map((g) => {
  const user = g.kind === 'user';
  const subject: SubjectFacts = {
    type: user ? 'user' : 'agent',
    id: user ? (g.person || 'u1') : g.agent,
    roles: g.roles,
    groups: g.groups,
    permissions: g.permissions,
    attributes: g.maxAmount === undefined ? {} : { max_amount: g.maxAmount },
  };
  if (user && g.personEmail) subject.email = g.personEmail;
  if (!user) {
    subject.mode = g.mode;
    subject.capabilities = g.caps.map((name) => ({ name, ...(name === g.action && g.apiLimits ? { limits: g.apiLimits } : {}) }));
  }
  const req: DecisionRequest = {
    subject, action: g.action, resource: RESOURCE_FOR[g.action]![g.r]!, context: g.context, now: g.now,
    resourceAttributes: g.resourceAttributes,
  };
  if (g.person !== undefined && !user) {
    const p: PersonFacts = { id: g.person, roles: g.personRoles, groups: g.groups, permissions: g.personPermissions, attributes: {} };
    if (g.personEmail) p.email = g.personEmail;
    req.person = p;
  }
  if (g.approved) req.approved = true;
  if (g.usage) req.usage = g.usage;
  return req;
});

// ---- the reference interpreter: obviously correct, slow ------------------------------

function globMatch(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  const ps = pattern.split('/'), vs = value.split('/');
  return ps.length === vs.length && ps.every((p, i) => (p === '*' ? vs[i] !== '' : p === vs[i]));
}

function typedMatch(pattern: string, value: string): boolean {
  const pi = pattern.indexOf(':'), vi = value.indexOf(':');
  if (pi < 0 || vi < 0) return false;
  const pt = pattern.slice(0, pi), vt = value.slice(0, vi);
  return (pt === '*' || pt === vt) && globMatch(pattern.slice(pi + 1), value.slice(vi + 1));
}

const ERR = Symbol('cannot be evaluated');
type V = { present: boolean; value?: unknown };

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Steps into nested objects; an object without the name that is a reference `{type, id}` is followed into the entity. */
function walk(v: unknown, segs: string[], entities?: ReadonlyMap<string, unknown>): V {
  let cur = v;
  let hops = 0;
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i]!;
    if (!isObj(cur)) return { present: false };
    if (!Object.prototype.hasOwnProperty.call(cur, s)) {
      const ref = typeof cur.type === 'string' && typeof cur.id === 'string' && cur.type && cur.id && !cur.type.includes(':') ? `${cur.type}:${cur.id}` : null;
      const target = ref && entities ? entities.get(ref) : undefined;
      if (!isObj(target) || ++hops > 8) return { present: false };
      cur = target;
      i--;
      continue;
    }
    cur = cur[s];
  }
  return cur === undefined ? { present: false } : { present: true, value: cur };
}

function personOf(req: DecisionRequest): PersonFacts | SubjectFacts | null {
  if (req.subject.type === 'user') return req.subject;
  if (req.subject.mode === 'delegated' && req.person) return req.person;
  return null;
}

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** time.* computed from scratch: the offset of the zone at that instant, then plain UTC arithmetic. */
export function refTime(now: number, zone: string, field: string): V {
  if (!Number.isFinite(now)) return { present: false };
  if (field === 'epoch') return { present: true, value: Math.floor(now / 1000) };
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-GB', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' })
    .formatToParts(new Date(now)).map((p) => [p.type, p.value]));
  const local = Date.UTC(+parts.year!, +parts.month! - 1, +parts.day!, +parts.hour! % 24, +parts.minute!, +parts.second!);
  const d = new Date(local);
  switch (field) {
    case 'hour': return { present: true, value: d.getUTCHours() };
    case 'minute': return { present: true, value: d.getUTCMinutes() };
    case 'weekday': return { present: true, value: DAYS[d.getUTCDay()] };
    case 'date': return { present: true, value: d.toISOString().slice(0, 10) };
  }
  return { present: false };
}

export function refRead(req: DecisionRequest, p: PathNode, zone: string): V {
  const [first, ...rest] = p.segs;
  switch (p.root) {
    case 'action': {
      const i = req.action.indexOf(':');
      if (p.segs.length === 0) return { present: true, value: req.action };
      if (rest.length || i < 0 || (first !== 'verb' && first !== 'kind')) return { present: false };
      return { present: true, value: first === 'verb' ? req.action.slice(0, i) : req.action.slice(i + 1) };
    }
    case 'context': return walk(req.context, p.segs, req.entities);
    case 'time': return rest.length ? { present: false } : refTime(req.now, zone, first!);
    case 'resource': {
      if (first === 'id' || first === 'type') {
        const i = req.resource.indexOf(':');
        if (rest.length || i < 0) return { present: false };
        return { present: true, value: first === 'id' ? req.resource.slice(i + 1) : req.resource.slice(0, i) };
      }
      return walk(req.resourceAttributes ?? {}, p.segs, req.entities);
    }
    case 'subject': case 'person': {
      const who = p.root === 'subject' ? req.subject : personOf(req);
      if (!who) return { present: false };
      const builtins = p.root === 'subject' ? ['id', 'type', 'name', 'mode', 'email', 'roles', 'groups'] : ['id', 'email', 'roles', 'groups'];
      if (builtins.includes(first!)) {
        if (rest.length) return { present: false };
        const v = (who as unknown as Record<string, unknown>)[first!];
        return v === undefined ? { present: false } : { present: true, value: v };
      }
      return walk(who.attributes, p.segs, req.entities);
    }
    case 'chain': {
      // An independent reading: the request's chain, else a delegated agent with a person is a chain of one.
      const person = personOf(req);
      const agents = req.chain?.agents?.length ? req.chain.agents : req.subject.type === 'agent' && person && person.id ? [req.subject] : [];
      if (first === 'depth' || first === 'agents') {
        if (rest.length) return { present: false };
        return { present: true, value: first === 'depth' ? agents.length : agents.map((a) => a.id) };
      }
      const found = agents.map((a) => walk(a.attributes, p.segs)).filter((v) => v.present).map((v) => (v as { value: unknown }).value);
      return found.length ? { present: true, value: found } : { present: false };
    }
  }
}

function scalarType(v: unknown): string | null {
  if (typeof v === 'number') return Number.isFinite(v) ? 'number' : null;
  return typeof v === 'string' || typeof v === 'boolean' ? typeof v : null;
}

function likeRef(pattern: string, s: string): boolean {
  const re = new RegExp('^' + pattern.split('*').map((x) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*') + '$');
  return re.test(s);
}

/** Types a path has without a schema: the built-in facts. */
const REF_BUILTIN: Record<string, string> = {
  'subject.id': 'string', 'subject.type': 'string', 'subject.name': 'string', 'subject.mode': 'string', 'subject.email': 'string',
  'subject.roles': '[string]', 'subject.groups': '[string]', 'person.id': 'string', 'person.email': 'string', 'person.roles': '[string]',
  'person.groups': '[string]', 'resource.id': 'string', 'resource.type': 'string', 'time.hour': 'number', 'time.minute': 'number',
  'time.weekday': 'string', 'time.date': 'string', 'time.epoch': 'number', 'chain.depth': 'number', 'chain.agents': '[string]',
  'action': 'string', 'action.verb': 'string', 'action.kind': 'string',
};

/** The schema of a file as full path → type (`context.tags` → `[string]`). */
export type RefSchema = Record<string, string>;

export function refSchemaOf(file: PolicyFileNode): RefSchema {
  const out: RefSchema = {};
  for (const i of file.items) if (i.kind === 'schema') for (const e of i.entries) {
    if (e.type.entity === undefined) out[[e.path.root, ...e.path.segs].join('.')] ??= e.type.list ? `[${e.type.base}]` : e.type.base;
  }
  return out;
}

/** The item type a membership test declares: its list's declared type, else its value's (a literal's own type counts). */
function refDeclaredItem(list: Operand, value: Operand, schema: RefSchema): string | null {
  const typeOf = (o: Operand): string | null => {
    if (o.type === 'lit') return Array.isArray(o.value) ? (o.value.length ? `[${scalarType(o.value[0])}]` : null) : scalarType(o.value);
    const k = [o.root, ...o.segs].join('.');
    return REF_BUILTIN[k] ?? schema[k] ?? null;
  };
  const l = typeOf(list), v = typeOf(value);
  if (l !== null && l.startsWith('[')) return l.slice(1, -1);
  return v !== null && !v.startsWith('[') ? v : null;
}

function refAtom(e: Expr, req: DecisionRequest, zone: string, schema: RefSchema): boolean | typeof ERR {
  if (e.type === 'present') return refRead(req, e.left, zone).present;
  const val = (o: Operand): V => (o.type === 'lit' ? { present: true, value: o.value } : refRead(req, o, zone));
  const a = val((e as { left: Operand }).left), b = val((e as { right: Operand }).right);
  if (!a.present || !b.present) return ERR;
  // A value of another type than its path's declared one is compared with nothing.
  const fitsSchema = (o: Operand, v: unknown): boolean => {
    if (o.type !== 'path') return true;
    const t = schema[[o.root, ...o.segs].join('.')];
    if (t === undefined) return true;
    if (!t.startsWith('[')) return scalarType(v) === t;
    return Array.isArray(v) && v.every((i) => scalarType(i) === t.slice(1, -1));
  };
  if (!fitsSchema((e as { left: Operand }).left, a.value) || !fitsSchema((e as { right: Operand }).right, b.value)) return ERR;
  const x = a.value, y = b.value;
  switch (e.type) {
    case 'cmp': {
      if (e.op === 'eq' || e.op === 'ne') {
        if (scalarType(x) === null || scalarType(x) !== scalarType(y)) return ERR;
        return e.op === 'eq' ? x === y : x !== y;
      }
      if (scalarType(x) !== 'number' || scalarType(y) !== 'number') return ERR;
      const [n, m] = [x as number, y as number];
      return { gt: n > m, gte: n >= m, lt: n < m, lte: n <= m }[e.op];
    }
    case 'in': {
      const t = scalarType(x);
      const declared = refDeclaredItem(e.right, e.left, schema);
      if (t === null || (declared !== null && t !== declared) || !Array.isArray(y) || !y.every((i) => scalarType(i) === t)) return ERR;
      return y.includes(x) !== e.negated;
    }
    case 'contains': {
      if (e.mode === 'one') {
        const t = scalarType(y);
        const declared = refDeclaredItem(e.left, e.right, schema);
        if (t === null || (declared !== null && t !== declared) || !Array.isArray(x) || !x.every((i) => scalarType(i) === t)) return ERR;
        return x.includes(y);
      }
      if (!Array.isArray(x) || !Array.isArray(y)) return ERR;
      const declared = refDeclaredItem(e.left, e.left, schema) ?? refDeclaredItem(e.right, e.right, schema);
      const types = new Set([...x, ...y].map(scalarType));
      if (declared !== null) types.add(declared);
      if (types.has(null) || types.size > 1) return ERR;
      return e.mode === 'any' ? y.some((i) => x.includes(i)) : y.every((i) => x.includes(i));
    }
    case 'like':
      if (typeof x !== 'string') return ERR;
      return likeRef(y as string, x) !== e.negated;
    default: throw new Error('not an atom');
  }
}

/** true, false, or ERR when any comparison in it cannot be evaluated. */
export function refCondition(e: Expr, req: DecisionRequest, zone: string, schema: RefSchema = {}): boolean | typeof ERR {
  const atoms: Expr[] = [];
  const collect = (x: Expr) => { if (x.type === 'and' || x.type === 'or') x.items.forEach(collect); else if (x.type === 'not') collect(x.expr); else atoms.push(x); };
  collect(e);
  // Kleene-free: any comparison that cannot be evaluated makes the whole unevaluable, except where a
  // presence test (or its negation) decides its `and` (false) or `or` (true) on its own.
  const ev = (x: Expr): boolean | typeof ERR => {
    if (x.type === 'not') { const v = ev(x.expr); return v === ERR ? ERR : !v; }
    if (x.type === 'and' || x.type === 'or') {
      const vs = x.items.map(ev);
      const decisive = x.type === 'or';
      const guard = (i: Expr) => i.type === 'present' || (i.type === 'not' && i.expr.type === 'present');
      if (x.items.some((i, k) => guard(i) && vs[k] === decisive)) return decisive;
      if (vs.includes(ERR)) return ERR;
      return x.type === 'and' ? vs.every((v) => v === true) : vs.some((v) => v === true);
    }
    return refAtom(x, req, zone, schema);
  };
  return ev(e);
}

function roleMatch(pattern: string, facts: { roles: string[]; groups: string[] }): boolean {
  if (pattern.startsWith('role:')) return facts.roles.includes(pattern.slice(5));
  if (pattern.startsWith('group:')) return facts.groups.includes(pattern.slice(6));
  return false;
}

/** Does a pattern name this agent (as the one acting or granted)? */
function namesAgent(pattern: string, s: SubjectFacts): boolean {
  if (s.type !== 'agent') return false;
  return pattern.startsWith('agent:') ? typedMatch(pattern, 'agent:' + s.id) : roleMatch(pattern, s);
}

/** Does a pattern name this person (or user subject)? */
function namesPerson(pattern: string, p: PersonFacts | SubjectFacts): boolean {
  return pattern.startsWith('user:') ? typedMatch(pattern, 'user:' + p.id) : roleMatch(pattern, p);
}

function limitViolation(f: { field: string; max?: unknown; min?: unknown; in?: unknown; not_in?: unknown; eq?: unknown }, c: Record<string, unknown>): string | null {
  if (!(f.field in c)) return f.max !== undefined || f.min !== undefined || f.in !== undefined || f.eq !== undefined ? 'required' : null;
  const v = c[f.field];
  if (f.max !== undefined && (typeof v !== 'number' || v > (f.max as number))) return 'max';
  if (f.min !== undefined && (typeof v !== 'number' || v < (f.min as number))) return 'min';
  if (f.in !== undefined && !(f.in as unknown[]).includes(v)) return 'in';
  if (f.not_in !== undefined && (f.not_in as unknown[]).includes(v)) return 'not_in';
  if (f.eq !== undefined && v !== f.eq) return 'eq';
  return null;
}

const singularRef = (kinds: string) => (kinds.endsWith('s') ? kinds.slice(0, -1) : kinds);

function covers(p: string, action: string, resource: string): boolean {
  const [pv, pk] = p.split(':') as [string, string];
  const [av, ak] = action.split(':') as [string, string];
  return (pv === '*' || pv === av) && (pk === '*' || pk === ak) && resource.split(':')[0] === singularRef(ak);
}

export function reference(file: PolicyFileNode, req: DecisionRequest): Pick<Decision, 'decision' | 'reason'> {
  const zone = (file.items.find((i) => i.kind === 'timezone') as { name: string } | undefined)?.name ?? 'UTC';
  const schema = refSchemaOf(file);
  const s = req.subject;
  const isAgent = s.type === 'agent';
  const person = personOf(req);
  const cap = isAgent ? (s.capabilities ?? []).find((c) => c.name === req.action) : undefined;
  if (isAgent) {
    const apiFields = Object.entries(cap?.limits ?? {}).map(([field, spec]) =>
      typeof spec === 'object' && spec !== null ? { field, ...(spec as object) } : { field, eq: spec });
    const fileFields = file.items.filter((i): i is LimitsNode => i.kind === 'limits' && i.capability === req.action && globMatch(i.forAgent, s.id)).flatMap((l) => l.fields);
    for (const f of [...apiFields, ...fileFields]) {
      const v = limitViolation(f, req.context);
      if (v) return { decision: 'deny', reason: `constraint_violated: ${f.field} ${v}` };
    }
    // Limits over time: would an allow take the count, or the usage plus this amount, past the maximum?
    const overTime = file.items.filter((i): i is LimitsNode => i.kind === 'limits' && i.capability === req.action && globMatch(i.forAgent, s.id)).flatMap((l) => l.usage ?? []);
    for (const u of overTime) {
      const raw = req.usage?.[usageKeyOf(u)];
      const used = typeof raw === 'number' && raw > 0 ? raw : 0;
      if (u.kind === 'count') {
        if (used + 1 > (u.max as number)) return { decision: 'deny', reason: 'constraint_violated: count' };
        continue;
      }
      if (!(u.field! in req.context)) return { decision: 'deny', reason: `constraint_violated: ${u.field} required` };
      const v = req.context[u.field!];
      if (typeof v !== 'number' || v < 0 || used + v > (u.max as number)) return { decision: 'deny', reason: `constraint_violated: ${u.field} sum` };
    }
  }
  const rules = file.items.filter((i): i is RuleNode => i.kind === 'rule');
  const groups = new Map<string, string[]>();
  for (const i of file.items) if (i.kind === 'actions' && !groups.has(i.name)) groups.set(i.name, i.members);
  const relationsOf = (r: RuleNode) => (r.relations ?? [r.relation]).flatMap((x) => (x.includes(':') ? [x] : groups.get(x) ?? []));
  const targets = (r: RuleNode) => relationsOf(r).some((x) => typedMatch(x, req.action)) && typedMatch(r.object, req.resource);
  const matchesAny = (r: RuleNode) => r.subjects.some((p) => namesAgent(p, s) || (person !== null && namesPerson(p, person)));
  const applies = (r: RuleNode) => !r.when || refCondition(r.when, req, zone, schema) !== false;
  const d = rules.find((r) => r.effect === 'deny' && targets(r) && matchesAny(r) && applies(r));
  if (d) return { decision: 'deny', reason: `rule_denied: ${d.name}` };
  if (isAgent && !cap) return { decision: 'deny', reason: `not_granted: ${req.action} (capability)` };
  const coherent = req.resource.split(':')[0] === singularRef(req.action.split(':')[1]!);
  const permits = (names: (p: string) => boolean) => coherent && rules.some((r) => r.effect === 'permit' && targets(r) && r.subjects.some(names) && (!r.when || refCondition(r.when, req, zone, schema) === true));
  const subjectGranted = s.permissions.some((p) => covers(p, req.action, req.resource))
    || permits((p) => (isAgent ? namesAgent(p, s) : namesPerson(p, s)));
  if (!subjectGranted) return { decision: 'deny', reason: `not_granted: ${req.action}` };
  if (isAgent && s.mode === 'delegated') {
    const p = req.person;
    const ok = !!p && p.id !== '' && (p.permissions.some((x) => covers(x, req.action, req.resource)) || permits((x) => namesPerson(x, p)));
    if (!ok) return { decision: 'deny', reason: `not_granted: ${req.action} (person)` };
  }
  const approvals = rules.filter((r) => r.effect === 'require_approval' && targets(r) && matchesAny(r) && applies(r));
  if (approvals.length && !req.approved) return { decision: 'approval_required', reason: `approval_required: ${approvals[0]!.name}` };
  if (approvals.length) return { decision: 'allow', reason: `allowed: approved ${approvals[0]!.name}` };
  return { decision: 'allow', reason: 'allowed' };
}

export const RUNS = { numRuns: 200 };

/** The refunds example policy, verbatim (test/fixtures/refunds-example.policy). */
export const REFUNDS_EXAMPLE = readFileSync(join(projectRoot, 'test', 'fixtures', 'refunds-example.policy'), 'utf8');

/** The literal of a scalar list, for building ASTs. */
export const scalars = (xs: Scalar[]): Literal => xs;
