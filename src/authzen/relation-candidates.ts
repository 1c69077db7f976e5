// Search candidates from the relationships: when the action names a relation of the resource's
// type, the objects a subject holds it on (list-objects) and the subjects that hold it on an
// object (list-subjects) come from the engine's reverse expansion over the process's graph, not
// from trying every stored entity. One expansion serves every page of a search: the sorted list
// is kept under (question, policy version, graph stamp), so a next page reuses it while nothing
// changed, and a change to the policy or the relationships expands afresh.

import type { AppContext } from '../context.js';
import { canonicalJson } from '../authz/canonical.js';
import { relationshipGraph } from '../authz/relationships.js';
import { relationChecker } from '../policy/relations/checker.js';
import type { PolicySet } from '../authz/policy-interface.js';
import { sortedIds } from './paging.js';

/** The relation an action name asks on a resource type, when the policy's model declares it there. */
export function modelRelation(policy: PolicySet, type: string, action: string): string | undefined {
  return policy.compiled.relations?.types.get(type)?.relations.has(action) ? action : undefined;
}

/** Does the policy's model declare this subject type (so that relationships can name it)? */
export const declaresType = (policy: PolicySet, type: string): boolean => policy.compiled.relations?.types.has(type) ?? false;

/** Expanded lists kept per process; bounded, the oldest dropped first. */
const KEPT = 256;
const kept = new WeakMap<AppContext, Map<string, string[]>>();

async function expandOnce(ctx: AppContext, policy: PolicySet, question: unknown[], expand: (checker: ReturnType<typeof relationChecker>) => string[]): Promise<string[]> {
  const graph = relationshipGraph(ctx);
  const index = await graph.current();
  const key = canonicalJson([policy.version, graph.stamp, ...question]);
  let byKey = kept.get(ctx);
  if (!byKey) kept.set(ctx, (byKey = new Map()));
  const hit = byKey.get(key);
  if (hit) return hit;
  const ids = expand(relationChecker(policy.compiled.relations!, index));
  if (byKey.size >= KEPT) byKey.delete(byKey.keys().next().value!);
  byKey.set(key, ids);
  return ids;
}

/**
 * The ids of the objects of `type` on which `<subjectType>:<subjectId>` holds `relation`,
 * sorted. An object whose check errs (too many hops, a condition the context cannot evaluate)
 * is left out, as its evaluation denies; the others are still listed.
 */
export function objectsHolding(ctx: AppContext, policy: PolicySet, subject: { type: string; id: string }, relation: string, type: string, context: Record<string, unknown>): Promise<string[]> {
  return expandOnce(ctx, policy, ['objects', subject.type, subject.id, relation, type, context], (checker) => {
    const r = checker.listObjects(`${subject.type}:${subject.id}`, relation, type, { context, omitErrors: true });
    if (r.error) return [];
    return sortedIds(r.objects.map((o) => o.slice(type.length + 1)));
  });
}

/**
 * The ids of the subjects of `subjectType` that hold `relation` on `<type>:<id>`, sorted, with
 * `*` when a wildcard (`user:*`) grants it to every one of them; one whose check errs is left
 * out, as its evaluation denies.
 */
export function subjectsHolding(ctx: AppContext, policy: PolicySet, object: { type: string; id: string }, relation: string, subjectType: string, context: Record<string, unknown>): Promise<string[]> {
  return expandOnce(ctx, policy, ['subjects', object.type, object.id, relation, subjectType, context], (checker) => {
    const r = checker.listSubjects(`${object.type}:${object.id}`, relation, subjectType, { context, omitErrors: true });
    if (r.error) return [];
    return sortedIds(r.subjects.map((s) => s.slice(subjectType.length + 1)));
  });
}

/** Two sorted id lists as one, sorted, each id once. */
export function mergeSorted(a: string[], b: string[]): string[] {
  if (!a.length) return b;
  if (!b.length) return a;
  return sortedIds([...a, ...b]);
}
