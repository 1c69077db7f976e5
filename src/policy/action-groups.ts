// Named groups of actions: `actions "write" = ["push:repos", "merge:repos"]`.
//
// A group is declared once in a policy set (in any file) and can be named
// wherever a rule names a relation: `relation "write"` or `relation "write",
// "admin:repos"`. A name without a colon is a group; a name with one is a
// relation (`<action>:<kinds>`, wildcards allowed). A group holds relations
// only, not other groups, so that what a rule covers is read off one line.

import type { Diagnostic } from './types.js';
import type { Loc, PolicyFileNode, RuleNode } from './ast.js';
import { writtenRelations } from './ast.js';
import { checkPermissionKey } from './patterns.js';

export interface ActionGroup { name: string; members: string[]; loc?: Loc }
export type ActionGroups = Map<string, ActionGroup>;

const GROUP_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,99}$/;

/** Is this relation as written a group name (no colon)? */
export function isGroupName(relation: string): boolean {
  return !relation.includes(':');
}

/** The groups the files declare (the first declaration of a name wins; repeats are reported by `validateActionGroups`). */
export function actionGroupsOf(files: PolicyFileNode[]): ActionGroups {
  const groups: ActionGroups = new Map();
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'actions' || groups.has(item.name)) continue;
    groups.set(item.name, { name: item.name, members: item.members, ...(item.loc ? { loc: item.loc } : {}) });
  }
  return groups;
}

/**
 * The relations a rule covers, groups expanded, each once, in the order written. A group that is
 * not declared expands to nothing (the validator reports it; an unloaded set never decides).
 */
export function ruleRelations(rule: RuleNode, groups: ActionGroups): string[] {
  const out: string[] = [];
  for (const r of writtenRelations(rule)) {
    const members = isGroupName(r) ? (groups.get(r)?.members ?? []) : [r];
    for (const m of members) if (!out.includes(m)) out.push(m);
  }
  return out;
}

/** Problems of the declarations: names, members, repeats. */
export function validateActionGroups(files: PolicyFileNode[], out: Diagnostic[]): void {
  const seen = new Map<string, Loc | undefined>();
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'actions') continue;
    const at = item.loc ?? { file: f.path, line: 1, col: 1 };
    const d = (loc: Loc | undefined, message: string) => out.push({ file: (loc ?? at).file, line: (loc ?? at).line, col: (loc ?? at).col, message, severity: 'error' });
    if (!GROUP_NAME.test(item.name)) d(at, `action group "${item.name}": a group name is letters, digits and _ . - (no colon: a name with a colon is a relation)`);
    if (seen.has(item.name)) {
      const prev = seen.get(item.name);
      d(at, `action group "${item.name}" is also declared${prev ? ` at ${prev.file}:${prev.line}` : ''}`);
    } else seen.set(item.name, item.loc);
    if (!item.members.length) d(at, `action group "${item.name}" names no relation`);
    item.members.forEach((m, i) => {
      const loc = item.memberLocs?.[i];
      if (isGroupName(m)) d(loc, `action group "${item.name}": "${m}" is not a relation <action>:<kinds> (a group holds relations, not other groups)`);
      else {
        const e = checkPermissionKey(m, 'relation', true);
        if (e) d(loc, `action group "${item.name}": ${e}`);
      }
    });
  }
}

/** Problems of a rule's relations against the declared groups: each is a relation or a declared group. */
export function validateRuleRelations(rule: RuleNode, groups: ActionGroups, out: Diagnostic[], fallback: Loc): void {
  const written = writtenRelations(rule);
  written.forEach((r, i) => {
    const loc = rule.relationLocs?.[i] ?? rule.fieldLocs?.relation ?? rule.loc ?? fallback;
    const push = (message: string) => out.push({ file: loc.file, line: loc.line, col: loc.col, message, severity: 'error' });
    if (written.indexOf(r) !== i) push(`rule "${rule.name}": relation "${r}" is named twice`);
    else if (!isGroupName(r)) {
      const e = checkPermissionKey(r, 'relation', true);
      if (e) push(e);
    } else if (!groups.has(r)) {
      const names = [...groups.keys()];
      const near = nearest(r, names);
      push(`relation "${r}" is not a permission key <action>:<resource_kind> nor a declared action group${near ? ` (did you mean "${near}"?)` : names.length ? '' : ` (declare one: actions "${r}" = ["<action>:<kinds>", ...])`}`);
    }
  });
}

/** The closest name by edit distance, when it is close enough to be a likely typo. */
export function nearest(word: string, names: Iterable<string>): string | null {
  let best: string | null = null, bestD = Infinity;
  for (const n of names) {
    const dist = editDistance(word.toLowerCase(), n.toLowerCase());
    if (dist < bestD) { best = n; bestD = dist; }
  }
  return best !== null && bestD <= Math.max(1, Math.floor(word.length / 3)) ? best : null;
}

function editDistance(a: string, b: string): number {
  const prev = new Array<number>(b.length + 1);
  for (let j = 0; j <= b.length; j++) prev[j] = j;
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length]!;
}
