// The analysis of `policy check`: rules that can never apply, as warnings.
//  - a condition that no request satisfies (`amount > 1000 and amount < 10`): decided
//    exactly over the cells of the values it reads (see space.ts);
//  - a relation whose kind cannot match the object pattern (`create:refunds` on
//    `deployment:*`): nothing grants such an action, so the rule changes no decision;
//  - limits on a capability that no rule names. Roles live in the database, not in policy
//    files, so a capability that only a role grants is reported too, and the warning says so.

import type { Diagnostic } from './types.js';
import type { Loc, PolicyFileNode, RuleNode } from './ast.js';
import { atomsOf, relQuestionsOf } from './ast.js';
import { compileCondition, zoneOf } from './compile.js';
import { buildSpace, construct, dimSize, SpaceTooLarge, type Principal, type PrincipalKind } from './space.js';
import { StringSearchTooLarge } from './strings.js';
import { envOf } from './values.js';
import { matchTyped, parseTypedPattern, permissionCovers, singularOf, splitFirstColon } from './patterns.js';

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
export function satisfiable(rule: RuleNode, zone: string): boolean | null {
  if (!rule.when) return true;
  // A relationship question depends on the relationships, which the request space does not hold.
  if (relQuestionsOf(rule.when).length) return null;
  const cond = compileCondition(rule.when, zone);
  const atoms = atomsOf(rule.when).map((atom) => ({ atom, zone }));
  const relation = rule.relation.includes('*') ? 'act:things' : rule.relation;
  const [objType, objId] = splitFirstColon(rule.object) ?? ['*', '*'];
  let unknown = false;
  for (const kind of principalKinds(rule.subjects)) {
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
      const space = buildSpace({ atoms, limits: [], roleNames: [], groupNames: [] }, principal, { subject: false, person: false });
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

export function analyzePolicy(files: PolicyFileNode[], apiRules: RuleNode[]): Diagnostic[] {
  const out: Diagnostic[] = [];
  const singulars: Record<string, string> = Object.create(null);
  for (const f of files) for (const i of f.items) if (i.kind === 'kind') singulars[i.plural] = i.singular;
  const rules: { rule: RuleNode; zone: string }[] = [
    ...files.flatMap((f) => f.items.filter((i): i is RuleNode => i.kind === 'rule').map((rule) => ({ rule, zone: zoneOf(f) }))),
    ...apiRules.map((rule) => ({ rule, zone: 'UTC' })),
  ];
  for (const { rule, zone } of rules) {
    const [verb, kinds] = splitFirstColon(rule.relation) ?? ['', ''];
    const objKind = splitFirstColon(rule.object)?.[0] ?? '*';
    if (verb && kinds !== '*' && objKind !== '*' && !permissionCovers('*:*', rule.relation.replace(/^\*:/, 'any:'), `${objKind}:x`, singulars)) {
      const sing = (Object.hasOwn(singulars, kinds) ? singulars[kinds] : undefined) ?? singularOf(kinds);
      out.push(warning(rule.fieldLocs?.object ?? rule.loc, 'kind_mismatch',
        `rule "${rule.name}" can never apply: relation "${rule.relation}" covers ${sing} objects, and object "${rule.object}" is never one (nothing grants the action on it)`));
    }
    if (rule.when && satisfiable(rule, zone) === false) {
      const tail = rule.effect === 'permit'
        ? 'it never grants'
        : 'it applies only when a value it reads is missing or of the wrong type';
      out.push(warning(rule.fieldLocs?.when ?? rule.loc, 'unsatisfiable', `rule "${rule.name}": the condition can never hold, so ${tail}`));
    }
  }
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'limits') continue;
    const named = rules.some(({ rule }) => { const p = parseTypedPattern(rule.relation); return p !== null && matchTyped(p, item.capability); });
    if (!named) {
      out.push(warning(item.loc, 'unreachable_limits',
        `limits on "${item.capability}": no rule in the policy names this capability (roles are not in policy files: if a role grants it, the limits apply)`));
    }
  }
  return out;
}
