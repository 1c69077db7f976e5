// The analysis of `policy check`: rules that can never apply, as warnings.
//  - a condition that no request satisfies (`amount > 1000 and amount < 10`): decided
//    exactly over the cells of the values it reads (see space.ts);
//  - a relation whose kind cannot match the object pattern (`create:refunds` on
//    `deployment:*`): nothing grants such an action, so the rule changes no decision;
//  - limits on a capability that no rule names. Roles live in the database, not in policy
//    files, so a capability that only a role grants is reported too, and the warning says so.

import type { Diagnostic } from './types.js';
import type { Loc, PolicyFileNode, RuleNode } from './ast.js';
import { atomsOf, pathKey, pathText, relQuestionsOf, type PathNode } from './ast.js';
import { fmtExpr } from './format.js';
import { compileCondition, zoneOf } from './compile.js';
import { declaredTypesOf, NO_DECLARED_TYPES, type DeclaredTypes } from './declared.js';
import { buildSpace, construct, dimSize, normalize, SpaceTooLarge, statusOf, type Principal, type PrincipalKind } from './space.js';
import { StringSearchTooLarge } from './strings.js';
import { envOf } from './values.js';
import { matchTyped, parseTypedPattern, permissionCovers, singularOf, splitFirstColon } from './patterns.js';

import { actionGroupsOf, ruleRelations, type ActionGroups } from './action-groups.js';

const POINTS_MAX = 50_000;

function warning(loc: Loc | undefined, code: string, message: string): Diagnostic {
  const l = loc ?? { file: '<policy>', line: 1, col: 1 };
  return { file: l.file, line: l.line, col: l.col, message, severity: 'warning', code };
}

function principalKinds(subjects: string[]): PrincipalKind[] {
  const kinds = new Set<PrincipalKind>();
  for (const s of subjects) {
    if (s.startsWith('agent:')) { kinds.add('auto'); kinds.add('deleg'); }
    else if (s.startsWith('user:')) { kinds.add('deleg'); kinds.add('user'); }
    else { kinds.add('auto'); kinds.add('deleg'); kinds.add('user'); }
  }
  return [...kinds];
}

/** true: some request makes the condition hold; false: none does; null: too many cells to tell. */
/**
 * Actions that stand for every action a rule covers, as its condition reads them: each relation
 * without a wildcard, and for one with a wildcard an action of no constant the condition compares
 * the action with, and each such constant it covers.
 */
function exampleActions(rule: RuleNode, groups: ActionGroups): string[] {
  const consts = new Set<string>();
  if (rule.when) for (const a of atomsOf(rule.when)) {
    const sides = [a.left, a.right];
    const at = sides.findIndex((o) => o.type === 'path' && o.root === 'action');
    const other = at < 0 ? undefined : sides[1 - at]!;
    if (!other || other.type !== 'lit') continue;
    const seg = (sides[at] as { segs: string[] }).segs[0];
    for (const v of Array.isArray(other.value) ? other.value : [other.value]) if (typeof v === 'string') consts.add(seg === undefined ? v : seg === 'verb' ? `${v}:` : `:${v}`);
  }
  const out = new Set<string>();
  for (const rel of ruleRelations(rule, groups)) {
    const [verb, kinds] = splitFirstColon(rel) ?? ['act', 'things'];
    if (verb !== '*' && kinds !== '*') { out.add(rel); continue; }
    const verbs = verb !== '*' ? [verb] : ['act', ...[...consts].flatMap((c) => (c.endsWith(':') ? [c.slice(0, -1)] : c.includes(':') && !c.startsWith(':') ? [c.slice(0, c.indexOf(':'))] : []))];
    const kindsList = kinds !== '*' ? [kinds] : ['things', ...[...consts].flatMap((c) => (c.startsWith(':') ? [c.slice(1)] : c.includes(':') && !c.endsWith(':') ? [c.slice(c.indexOf(':') + 1)] : []))];
    for (const v of verbs) for (const k of kindsList) out.add(`${v}:${k}`);
  }
  return [...out];
}

export function satisfiable(rule: RuleNode, zone: string, groups: ActionGroups = new Map(), declared: DeclaredTypes = NO_DECLARED_TYPES): boolean | null {
  if (!rule.when) return true;
  // A relationship question depends on the relationships, which the request space does not hold.
  if (relQuestionsOf(rule.when).length) return null;
  const cond = compileCondition(rule.when, zone, declared);
  const atoms = atomsOf(rule.when).map((atom) => ({ atom, zone }));
  const actions = exampleActions(rule, groups);
  const [objType, objId] = splitFirstColon(rule.object) ?? ['*', '*'];
  let unknown = false;
  for (const relation of actions) for (const kind of principalKinds(rule.subjects)) {
    const principal: Principal = {
      kind,
      subjectId: { witness: 'example-subject', cons: [] },
      ...(kind === 'deleg' ? { personId: { witness: 'example-person', cons: [] } } : {}),
      resourceType: { witness: objType === '*' ? 'thing' : objType, cons: objType === '*' ? [] : [{ kind: 'exact', pattern: objType, positive: true }] },
      resourceId: { witness: 'example', cons: [{ kind: 'seg', pattern: objId, positive: true }] },
      objectExceptions: [],
      actionFor: () => relation,
      check: () => true,
    };
    try {
      const space = buildSpace({ atoms, limits: [], roleNames: [], groupNames: [], declared: [declared] }, principal, { subject: false, person: false });
      const sizes = space.dims.map(dimSize);
      const total = sizes.reduce((n, s) => n * s, 1);
      if (total > POINTS_MAX) { unknown = true; continue; }
      const idx = new Array<number>(sizes.length).fill(0);
      for (let n = 0; n < total; n++) {
        const built = construct(space, idx);
        if (built && cond(envOf(built.request)) === 1) return true;
        for (let i = sizes.length - 1; i >= 0; i--) { if (++idx[i]! < sizes[i]!) break; idx[i] = 0; }
      }
    } catch (e) {
      if (e instanceof SpaceTooLarge || e instanceof StringSearchTooLarge) { unknown = true; continue; }
      throw e;
    }
  }
  return unknown ? null : false;
}

/**
 * Traps a condition can fall into without an error:
 *  - `x != null`: the language has no null, so `null` is a context field of that name, which is
 *    missing, and the comparison fails closed;
 *  - a bare word (`action`-like typos, `amout`) read once in a file and declared by no schema: a
 *    context field nobody sends fails closed too;
 *  - a path no request a rule applies to can carry (`person.*` for agents acting alone and people
 *    only... `subject.mode` for people): always missing.
 */
function trapWarnings(files: PolicyFileNode[]): Diagnostic[] {
  const out: Diagnostic[] = [];
  const declared = new Set<string>();
  for (const f of files) for (const i of f.items) if (i.kind === 'schema') for (const e of i.entries) declared.add(pathKey(e.path));
  for (const f of files) {
    const bare = new Map<string, { count: number; path: PathNode; loc?: Loc }>();
    for (const item of f.items) {
      if (item.kind !== 'rule' || !item.when) continue;
      const kinds = principalKinds(item.subjects);
      const warnedHere = new Set<string>();
      for (const a of atomsOf(item.when)) for (const o of [a.left, a.right]) {
        if (o.type !== 'path') continue;
        const loc = o.loc ?? a.loc ?? item.fieldLocs?.when ?? item.loc;
        const key = pathKey(o);
        if (o.bare && o.segs.length === 1 && o.segs[0] === 'null') {
          out.push(warning(loc, 'null_compared', `${fmtExpr(a)}: the language has no null; "null" here is a context field of that name, always missing, so the comparison fails closed. To ask whether a value is there, write "<path> has <field>" (or "not (... has ...)")`));
          continue;
        }
        if (o.bare) {
          const b = bare.get(key);
          if (b) b.count++; else bare.set(key, { count: 1, path: o, ...(loc ? { loc } : {}) });
        }
        if (warnedHere.has(key) || o.root === 'context' || o.root === 'action' || o.root === 'time') continue;
        const never = kinds.every((k) => neverCarried(o, k));
        if (never) {
          warnedHere.add(key);
          out.push(warning(loc, 'never_present', `rule "${item.name}": no request it applies to carries ${pathText(o)} (${whyNever(o, kinds)}), so every comparison of it fails closed`));
        }
      }
    }
    // A field the file's limits name is meant: limits read it too.
    for (const item of f.items) if (item.kind === 'limits') {
      for (const lf of item.fields) bare.get('context.' + lf.field) && (bare.get('context.' + lf.field)!.count += 1);
      for (const u of item.usage ?? []) if (u.field) bare.get('context.' + u.field) && (bare.get('context.' + u.field)!.count += 1);
    }
    for (const [key, b] of bare) {
      if (b.count !== 1 || declared.has(key) || b.path.segs[0] === 'null') continue;
      out.push(warning(b.loc, 'undeclared_field', `${pathText(b.path)} is read only here and no schema declares it: it is the context field ${key}, which a request must send (declare it in a schema, or write ${key}, to say that is meant)`));
    }
  }
  return out;
}

/** No request of this kind of subject carries the path: fixed absent, or an agent's email, or a person's mode. */
function neverCarried(p: PathNode, k: PrincipalKind): boolean {
  const st = statusOf(normalize(p, k), k);
  if (st.status === 'fixed' && !st.fixed!.present) return true;
  return p.root === 'subject' && p.segs.length === 1 && p.segs[0] === 'email' && k !== 'user';
}

function whyNever(p: PathNode, kinds: PrincipalKind[]): string {
  if (p.root === 'person' && kinds.every((k) => k === 'auto')) return 'an agent acting alone has no person';
  if (p.root === 'subject' && p.segs[0] === 'mode') return 'people have no mode';
  if (p.root === 'subject' && p.segs[0] === 'email') return 'agents have no email; a delegated agent\'s person does: person.email';
  return `${p.root}.${p.segs[0]} has no parts`;
}

export function analyzePolicy(files: PolicyFileNode[], apiRules: RuleNode[]): Diagnostic[] {
  const out: Diagnostic[] = trapWarnings(files);
  const singulars: Record<string, string> = Object.create(null);
  for (const f of files) for (const i of f.items) if (i.kind === 'kind') singulars[i.plural] = i.singular;
  const rules: { rule: RuleNode; zone: string }[] = [
    ...files.flatMap((f) => f.items.filter((i): i is RuleNode => i.kind === 'rule').map((rule) => ({ rule, zone: zoneOf(f) }))),
    ...apiRules.map((rule) => ({ rule, zone: 'UTC' })),
  ];
  const groups = actionGroupsOf(files);
  const declared = declaredTypesOf(files);
  for (const { rule, zone } of rules) {
    const objKind = splitFirstColon(rule.object)?.[0] ?? '*';
    const relations = ruleRelations(rule, groups);
    const mismatch = (relation: string) => {
      const [verb, kinds] = splitFirstColon(relation) ?? ['', ''];
      return verb !== '' && kinds !== '*' && objKind !== '*' && !permissionCovers('*:*', relation.replace(/^\*:/, 'any:'), `${objKind}:x`, singulars);
    };
    // Only when no relation of the rule can meet its object is the whole rule dead.
    if (relations.length && relations.every(mismatch)) {
      const kinds = splitFirstColon(relations[0]!)?.[1] ?? '';
      const sing = (Object.hasOwn(singulars, kinds) ? singulars[kinds] : undefined) ?? singularOf(kinds);
      const what = relations.length === 1 ? `relation "${relations[0]}" covers ${sing} objects` : `none of its relations (${relations.map((r) => `"${r}"`).join(', ')}) covers ${objKind} objects`;
      out.push(warning(rule.fieldLocs?.object ?? rule.loc, 'kind_mismatch',
        `rule "${rule.name}" can never apply: ${what}, and object "${rule.object}" is never one (nothing grants the action on it)`));
    }
    if (rule.when && satisfiable(rule, zone, groups, declared) === false) {
      const tail = rule.effect === 'permit'
        ? 'it never grants'
        : 'it applies only when a value it reads is missing or of the wrong type';
      out.push(warning(rule.fieldLocs?.when ?? rule.loc, 'unsatisfiable', `rule "${rule.name}": the condition can never hold, so ${tail}`));
    }
  }
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'limits') continue;
    const named = rules.some(({ rule }) => ruleRelations(rule, groups).some((r) => { const p = parseTypedPattern(r); return p !== null && matchTyped(p, item.capability); }));
    if (!named) {
      out.push(warning(item.loc, 'unreachable_limits',
        `limits on "${item.capability}": no rule in the policy names this capability (roles are not in policy files: if a role grants it, the limits apply)`));
    }
  }
  return out;
}
