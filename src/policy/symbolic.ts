// The decision of a policy set over cells of the request space, with some cells
// not chosen yet: `diff` walks the space dimension by dimension and stops where
// both sets are already decided for every request below.
//
// The decision of decide() is a function of a few facts: whether a limit is
// broken, whether each rule's subjects match and its condition holds, fails or
// cannot be evaluated, and whether roles grant the action. Each fact is decided
// by the cells of the values it reads (that is how the cells are cut), so it is
// known once those cells are chosen; the facts combine in three-valued logic
// (true, false, not known yet) into allow, deny, approval_required, or "not
// known yet".

import type { DecisionValue } from './types.js';
import type { Atom, Expr, LimitField, Scalar } from './ast.js';
import { atomsOf, isGuard, relQuestionsOf } from './ast.js';
import { fmtExpr } from './format.js';
import type { CompiledRule } from './compile.js';
import { compileAtomWith, compileLimitField } from './compile.js';
import { matchTyped, parseTypedPattern, permissionCovers } from './patterns.js';
import { keyOfPath, relKey, representative, type Cell, type RelDim, type Space, type ValueDim } from './space.js';
import { MISSING, scalarTypeOf, type Env } from './values.js';
import { fitsType, memberItemType, MISTYPED, NO_DECLARED_TYPES, schemaTypeOf, type DeclaredTypes } from './declared.js';
import type { ValueType } from './values.js';

/** 0 false, 1 true, 3 not known yet. */
type B3 = 0 | 1 | 3;
/** A condition: 0 false, 1 true, 2 cannot be evaluated, 3 not known yet. */
type Q = 0 | 1 | 2 | 3;

const or3 = (xs: B3[]): B3 => (xs.includes(1) ? 1 : xs.includes(3) ? 3 : 0);
const and3 = (xs: B3[]): B3 => (xs.includes(0) ? 0 : xs.includes(3) ? 3 : 1);

/** The facts of a partial choice of cells: `point[i]` is the cell of dimension i where `chosen[i]`. */
export type Probe = (point: number[], chosen: Uint8Array) => DecisionValue | null;

const NO_ENV = null as unknown as Env;

export interface SideFacts {
  rules: CompiledRule[];
  limits: LimitField[];
  /** Limits over time: the usage key each reads (a dimension of the space) and its maximum. */
  usage?: { key: string; kind: 'count' | 'sum'; max: number }[];
  singulars: Record<string, string>;
  /** The action of the cell, or null for a cell of actions of any kinds: then the action asked is `actionFor` the object's kind. */
  action: string | null;
  actionFor: (kind: string) => string | null;
  /** The answer of each relationship question (by its text) in the combination compared: 0 false, 1 true, 2 cannot be answered. */
  answers?: ReadonlyMap<string, 0 | 1 | 2>;
}

export interface Who { agent?: string; person?: string }

/** A condition's value on a partial choice of cells: 0 false, 1 true, 2 cannot be evaluated, 3 not known yet. */
export type CondProbe = (point: number[], chosen: Uint8Array) => 0 | 1 | 2 | 3;

/** The readers of a space: values of cells, and conditions over them. */
function readersOf(space: Space) {
  const kind = space.principal.kind;
  const index = new Map<string, number>();
  space.dims.forEach((d, i) => index.set(d.key, i));
  const rel = (r: RelDim['rel'], a: string, b: string) => index.get(relKey(r, a, b));

  /** The value a single-path comparison reads, for the cell chosen (null: no request has that cell). */
  const valueOf = (key: string, point: number[], chosen: Uint8Array): { v: unknown } | null | 3 => {
    const i = index.get(key);
    if (i === undefined) {
      const f = space.fixed.get(key);
      return { v: f && f.present ? f.value : MISSING };
    }
    if (!chosen[i]) return 3;
    const r = representative(space, i, point[i]!);
    return r === null ? null : { v: r.present ? r.value : MISSING };
  };
  const cellOf = (key: string, point: number[]): Cell | undefined => {
    const i = index.get(key);
    return i === undefined ? undefined : (space.dims[i] as ValueDim).cells[point[i]!];
  };
  const isNumber = (key: string, point: number[], chosen: Uint8Array): B3 => {
    const i = index.get(key);
    if (i === undefined) { const f = space.fixed.get(key); return f?.present && scalarTypeOf(f.value) === 'number' ? 1 : 0; }
    if (!chosen[i]) return 3;
    return cellOf(key, point)!.t === 'num' ? 1 : 0;
  };

  /** The type of the value a cell (or a fixed fact) holds: a scalar type, `empty`, `list:<type>`, or null (missing, another type). */
  const categoryOf = (key: string, point: number[], chosen: Uint8Array): string | null | 3 => {
    const i = index.get(key);
    if (i === undefined) {
      const f = space.fixed.get(key);
      if (!f?.present) return null;
      if (Array.isArray(f.value)) {
        if (!f.value.length) return 'empty';
        const t = scalarTypeOf(f.value[0]);
        return t !== null && f.value.every((x) => scalarTypeOf(x) === t) ? `list:${t}` : null;
      }
      return scalarTypeOf(f.value);
    }
    if (!chosen[i]) return 3;
    const c = cellOf(key, point)!;
    switch (c.t) {
      case 'num': return 'number';
      case 'str': case 'strOther': return 'string';
      case 'bool': return 'boolean';
      case 'empty': return 'empty';
      case 'list': return `list:${c.item}`;
      default: return null;
    }
  };

  const atomFn = (a: Atom, zone: string, declared: DeclaredTypes): ((point: number[], chosen: Uint8Array) => Q) => {
    const lk = a.left.type === 'path' ? keyOfPath(a.left, zone, kind) : null;
    const rk = a.right.type === 'path' ? keyOfPath(a.right, zone, kind) : null;
    // A membership test's declared item type: a value or an item of another type cannot be evaluated;
    // and a value its path's declared type rules out cannot be compared at all (see declared.ts).
    const item = memberItemType(a, declared);
    const lt = a.left.type === 'path' ? schemaTypeOf(a.left, declared) : null;
    const rt = a.right.type === 'path' ? schemaTypeOf(a.right, declared) : null;
    const fits = (c: string | null, t: ValueType) => (t.startsWith('[') ? c === 'empty' || c === `list:${t.slice(1, -1)}` : c === t);
    if (lk !== null && rk !== null) {
      // Two values: decided by the relation between them (and, to order them, whether they are numbers).
      const relKind: RelDim['rel'] = a.type === 'cmp' ? 'cmp' : a.type === 'in' ? 'member' : a.type === 'contains' ? (a.mode === 'one' ? 'member' : a.mode) : 'cmp';
      const [x, y] = a.type === 'contains' && a.mode === 'one' ? [rk, lk] : [lk, rk];
      const ri = rel(relKind, x, y);
      if (ri === undefined) throw new Error(`diff: no relation dimension for ${relKind} ${x} ${y}`);
      const d = space.dims[ri] as RelDim;
      const swapped = relKind === 'cmp' && d.a !== lk;
      /** Where the values compare, do they have the declared item type? 1 yes, 2 no (cannot be evaluated), 3 not known yet. */
      const typed = item === null && lt === null && rt === null ? null : (point: number[], chosen: Uint8Array): 1 | 2 | 3 => {
        for (const [k, t] of [[lk, lt], [rk, rt]] as const) {
          if (t === null) continue;
          const c = categoryOf(k, point, chosen);
          if (c === 3) return 3;
          if (!fits(c, t)) return 2;
        }
        if (item === null) return 1;
        if (relKind === 'member') {
          const c = categoryOf(x, point, chosen);
          return c === 3 ? 3 : c === item ? 1 : 2;
        }
        for (const k of [x, y]) {
          const c = categoryOf(k, point, chosen);
          if (c === 3) return 3;
          if (c !== 'empty' && c !== `list:${item}`) return 2;
        }
        return 1;
      };
      return (point, chosen) => {
        if (!chosen[ri]) return 3;
        let v = d.values[point[ri]!]!;
        if (v === 'na') return 2;
        if (typed) { const t = typed(point, chosen); if (t !== 1) return t; }
        if (swapped) v = v === 'lt' ? 'gt' : v === 'gt' ? 'lt' : v;
        switch (a.type) {
          case 'cmp': {
            if (a.op === 'eq') return v === 'eq' ? 1 : 0;
            if (a.op === 'ne') return v === 'eq' ? 0 : 1;
            const num = isNumber(lk, point, chosen);
            if (num === 3) return 3;
            if (num === 0) return 2;
            const c = v === 'lt' ? -1 : v === 'gt' ? 1 : 0;
            return (a.op === 'gt' ? c > 0 : a.op === 'gte' ? c >= 0 : a.op === 'lt' ? c < 0 : c <= 0) ? 1 : 0;
          }
          case 'in': return (v === 'yes') !== a.negated ? 1 : 0;
          default: return v === 'yes' ? 1 : 0;
        }
      };
    }
    // One value against constants: decided by its cell, so any value of the cell will do.
    const key = (lk ?? rk)!;
    const pathLeft = lk !== null;
    const declaredType = pathLeft ? lt : rt;
    const memo = new Map<unknown, Q>();
    return (point, chosen) => {
      const got = valueOf(key, point, chosen);
      if (got === 3) return 3;
      if (got === null) return 0; // a cell no request has: any answer
      if (memo.has(got.v)) return memo.get(got.v)!;
      const v = declaredType !== null && got.v !== MISSING && !fitsType(got.v, declaredType) ? MISTYPED : got.v;
      const get = () => v;
      const lit = () => (pathLeft ? (a.right as { value: unknown }).value : (a.left as { value: unknown }).value);
      const q = compileAtomWith(a, pathLeft ? get : lit, pathLeft ? lit : get, item)(NO_ENV) as Q;
      if (memo.size < 64) memo.set(got.v, q);
      return q;
    };
  };

  const condFn = (e: Expr | undefined, zone: string, declared: DeclaredTypes, answers?: ReadonlyMap<string, 0 | 1 | 2>): ((point: number[], chosen: Uint8Array) => Q) => {
    if (!e) return () => 1;
    const atoms = atomsOf(e);
    // A relationship question reads no cell: its answer is fixed by the combination compared.
    const questions = relQuestionsOf(e).map((q) => {
      const v = answers?.get(fmtExpr(q));
      if (v === undefined) throw new Error(`diff: no answer for the relationship question ${fmtExpr(q)}`);
      return { q, v };
    });
    const fns = atoms.map((a) => atomFn(a, zone, declared));
    const tree = (x: Expr): ((r: Map<Expr, Q>) => boolean) => {
      if (x.type === 'and') { const fs = x.items.map(tree); return (r) => fs.every((f) => f(r)); }
      if (x.type === 'or') { const fs = x.items.map(tree); return (r) => fs.some((f) => f(r)); }
      if (x.type === 'not') { const f = tree(x.expr); return (r) => !f(r); }
      return (r) => r.get(x) === 1;
    };
    // With presence tests, the three-valued walk of the evaluator (a guard decides its `and`/`or`).
    const tree3 = (x: Expr): ((r: Map<Expr, Q>) => Q) => {
      if (x.type === 'and' || x.type === 'or') {
        const fs = x.items.map(tree3);
        const decisive: Q = x.type === 'and' ? 0 : 1;
        return (r) => {
          const vs = fs.map((f) => f(r));
          for (let i = 0; i < vs.length; i++) if (vs[i] === decisive && isGuard(x.items[i]!)) return decisive;
          if (vs.includes(3)) return 3;
          if (vs.includes(2)) return 2;
          return vs.includes(decisive) ? decisive : ((1 - decisive) as Q);
        };
      }
      if (x.type === 'not') { const f = tree3(x.expr); return (r) => { const v = f(r); return v === 0 ? 1 : v === 1 ? 0 : v; }; }
      return (r) => r.get(x)!;
    };
    const guarded = atoms.some((a) => a.type === 'present');
    const value = tree(e);
    const value3 = guarded ? tree3(e) : null;
    return (point, chosen) => {
      const r = new Map<Expr, Q>();
      for (const { q, v } of questions) {
        if (v === 2 && !value3) return 2;
        r.set(q, v);
      }
      let unknown = false;
      for (let i = 0; i < atoms.length; i++) {
        const q = fns[i]!(point, chosen);
        if (q === 2 && !value3) return 2;
        if (q === 3) unknown = true;
        r.set(atoms[i]!, q);
      }
      if (value3) return value3(r);
      if (unknown) return 3;
      return value(r) ? 1 : 0;
    };
  };

  return { kind, index, valueOf, condFn };
}

/** The value of a condition (in the time zone given) on the cells of a space. */
export function conditionProbe(space: Space, e: Expr | undefined, zone: string, declared: DeclaredTypes = NO_DECLARED_TYPES, answers?: ReadonlyMap<string, 0 | 1 | 2>): CondProbe {
  return readersOf(space).condFn(e, zone, declared, answers);
}

export function decider(space: Space, side: SideFacts, who: Who): Probe {
  const { kind, index, valueOf, condFn } = readersOf(space);
  // Subjects: ids are fixed by the cell of subjects; roles and groups are cells of their own.
  const holds = (key: string, name: string) => (point: number[], chosen: Uint8Array): B3 => {
    const i = index.get(key);
    if (i === undefined) return 0;
    if (!chosen[i]) return 3;
    const c = (space.dims[i] as ValueDim).cells[point[i]!]!;
    return c.t === 'list' && c.has.includes(name as Scalar) ? 1 : 0;
  };
  const personRoot = kind === 'user' ? 'subject' : 'person';
  const matcher = (patterns: string[], forAgent: boolean, forPerson: boolean) => {
    let fixed = false;
    const parts: ((p: number[], c: Uint8Array) => B3)[] = [];
    for (const pat of patterns) {
      const colon = pat.indexOf(':');
      const type = pat.slice(0, colon), name = pat.slice(colon + 1);
      if (type === 'agent') { if (forAgent && who.agent !== undefined && matchTyped(parseTypedPattern(pat)!, 'agent:' + who.agent)) fixed = true; }
      else if (type === 'user') { if (forPerson && who.person !== undefined && matchTyped(parseTypedPattern(pat)!, 'user:' + who.person)) fixed = true; }
      else {
        const list = type === 'role' ? 'roles' : 'groups';
        if (forAgent && kind !== 'user') parts.push(holds(`subject.${list}`, name));
        if (forPerson && kind !== 'auto') parts.push(holds(`${personRoot}.${list}`, name));
      }
    }
    return (point: number[], chosen: Uint8Array): B3 => (fixed ? 1 : or3(parts.map((f) => f(point, chosen))));
  };

  const compiled = side.rules.map((r) => ({
    effect: r.effect,
    cond: condFn(r.ast.when, r.zone, r.declared, side.answers),
    any: matcher(r.ast.subjects, kind !== 'user', kind !== 'auto'),
    agent: matcher(r.ast.subjects, true, false),
    person: matcher(r.ast.subjects, false, true),
  }));
  const limits = kind === 'user' ? [] : side.limits.map((f) => {
    const test = compileLimitField(f, '').test;
    const key = 'context.' + f.field;
    return (point: number[], chosen: Uint8Array): B3 => {
      const got = valueOf(key, point, chosen);
      if (got === 3) return 3;
      if (got === null) return 0;
      return test(got.v === MISSING ? {} : { [f.field]: got.v }) ? 1 : 0;
    };
  });
  // A limit over time is broken when an allow would take the count past its maximum, or the
  // total (usage plus this amount) past it; with no summable amount, every sum is broken.
  const overTime = kind === 'user' ? [] : (side.usage ?? []).map((u) => {
    const i = index.get('usage:' + u.key);
    if (i === undefined) throw new Error(`diff: no usage dimension for ${u.key}`);
    const cells = (space.dims[i] as { cells: Cell[] }).cells;
    const broken = cells.map((c): B3 => {
      if (c.t !== 'num') return 1;
      const v = c.point ? c.lo : c.hi === Infinity ? c.lo + 1 : (c.lo + c.hi) / 2;
      return (u.kind === 'count' ? v + 1 : v) > u.max ? 1 : 0;
    });
    return (point: number[], chosen: Uint8Array): B3 => (chosen[i] ? broken[point[i]!]! : 3);
  });
  const grantDim = (who: 'subject' | 'person') => space.dims.findIndex((d) => d.kind === 'grant' && d.who === who);
  const gs = grantDim('subject'), gp = grantDim('person');
  const role = (gi: number) => (point: number[], chosen: Uint8Array): B3 => {
    if (gi < 0) return 1;
    if (!chosen[gi]) return 3;
    return (space.dims[gi] as { values: boolean[] }).values[point[gi]!] ? 1 : 0;
  };
  const roleS = role(gs), roleP = role(gp);
  // A grant needs the object to be of the action's kind (a permission covers no other).
  const coherent = (point: number[], chosen: Uint8Array): B3 => {
    const got = valueOf('resource.type', point, chosen);
    if (got === 3) return 3;
    const type = got === null || got.v === MISSING ? space.principal.resourceType.witness : String(got.v);
    const action = side.action ?? side.actionFor(type);
    return action !== null && permissionCovers('*:*', action, `${type}:x`, side.singulars) ? 1 : 0;
  };

  const applies = (q: Q): B3 => (q === 0 ? 0 : q === 3 ? 3 : 1);
  const grants = (q: Q): B3 => (q === 1 ? 1 : q === 3 ? 3 : 0);

  return (point, chosen) => {
    const deny: B3[] = limits.map((f) => f(point, chosen));
    for (const f of overTime) deny.push(f(point, chosen));
    const approval: B3[] = [];
    const permitS: B3[] = [], permitP: B3[] = [];
    const coh = coherent(point, chosen);
    for (const r of compiled) {
      if (r.effect === 'permit') {
        const q = grants(r.cond(point, chosen));
        permitS.push(and3([coh, (kind === 'user' ? r.person : r.agent)(point, chosen), q]));
        if (kind === 'deleg') permitP.push(and3([coh, r.person(point, chosen), q]));
        continue;
      }
      const a = and3([r.any(point, chosen), applies(r.cond(point, chosen))]);
      (r.effect === 'deny' ? deny : approval).push(a);
    }
    const denied = or3(deny);
    if (denied === 1) return 'deny';
    const grantS = or3([and3([roleS(point, chosen), coh]), ...permitS]);
    const grantP = kind === 'deleg' ? or3([and3([roleP(point, chosen), coh]), ...permitP]) : 1;
    const granted = and3([grantS, grantP]);
    if (granted === 0) return 'deny';
    if (denied === 3 || granted === 3) return null;
    const appr = or3(approval);
    return appr === 1 ? 'approval_required' : appr === 0 ? 'allow' : null;
  };
}
