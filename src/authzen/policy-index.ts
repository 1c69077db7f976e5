// What the compiled policy can tell a search before anything is decided: which rules could
// grant a relation on a kind of object, and which relations the policy names for a kind. Both
// read the policy's index by relation and object kind, never the rules one by one.

import type { PolicySet } from '../policy/index.js';
import { candidates, type CompiledRule } from '../policy/compile.js';
import type { SubjectFacts } from './facts.js';
import { pluralOf } from './names.js';

export interface GrantingRule {
  /** Could the rule's subjects match this subject (its condition aside)? */
  matchesSubject(subject: SubjectFacts): boolean;
}

/** Does a permit rule's subject list name this subject (an agent, a person, or an entity by its roles and groups)? */
function ruleMatches(r: CompiledRule, subject: SubjectFacts): boolean {
  if (subject.type === 'agent') return r.matchesAgent(subject);
  if (subject.type === 'user') return r.matchesPerson(subject);
  return r.matchesEntity(subject);
}

/** The permit rules that grant `relation` on objects of `kind`. */
export function grantingRules(policy: PolicySet, relation: string, kind: string): GrantingRule[] {
  return candidates(policy.compiled, relation, kind).permit.map((r) => ({
    matchesSubject: (subject: SubjectFacts) => ruleMatches(r, subject),
  }));
}

/** The relations the policy's rules name for objects of `kind` (`<action>:<plural of kind>`). */
export function relationsForKind(policy: PolicySet, kind: string): string[] {
  const plural = pluralOf(kind, policy.compiled.singulars);
  const out: string[] = [];
  for (const [relation, byKind] of policy.compiled.index) {
    const i = relation.indexOf(':');
    if (i <= 0 || relation.slice(0, i) === '*') continue;
    const kinds = relation.slice(i + 1);
    if (kinds !== plural && kinds !== '*') continue;
    if (byKind.has(kind) || byKind.has('*')) out.push(`${relation.slice(0, i)}:${plural}`);
  }
  return out;
}

/**
 * Could a wildcard action grant this subject something on objects of `kind`: a permission
 * `*:<plural>` or `*:*`, or a permit rule on such a relation whose subjects include it?
 * Only then can an action search find actions the subject's own grants do not name.
 */
export function wildcardActionGrants(policy: PolicySet, subject: SubjectFacts, kind: string): boolean {
  const plural = pluralOf(kind, policy.compiled.singulars);
  const wild = [`*:${plural}`, '*:*'];
  if (subject.permissions.some((p) => wild.includes(p))) return true;
  for (const relation of wild) {
    const byKind = policy.compiled.index.get(relation);
    if (!byKind) continue;
    for (const rules of [byKind.get(kind), byKind.get('*')]) {
      for (const r of rules ?? []) {
        if (r.effect === 'permit' && ruleMatches(r, subject)) return true;
      }
    }
  }
  return false;
}
