// Entity references: an attribute or context value `{"type": "customer", "id": "c-1"}` names a
// stored entity, and a rule's path steps through it (`resource.customer.fraud`). The evaluator
// is pure, so the entities a decision's paths lead to are loaded here first: for every path the
// policy's rules read that goes deeper than one name, walk the request's values along it and,
// at each reference the next name is not found on, load the entity and go on (at most
// REFERENCE_HOPS references a path). A reference to no stored entity is recorded as none, and
// the evaluator reads it as missing (fail closed).

import type { AppContext } from '../context.js';
import type { PolicySet } from '../policy/compile.js';
import type { PathNode } from '../policy/ast.js';
import type { Attributes, DecisionRequest } from '../policy/types.js';
import { BUILTINS, REFERENCE_HOPS, referenceOf } from '../policy/values.js';
import { storedEntity } from './facts.js';

const deepPathsOf = new WeakMap<PolicySet, PathNode[]>();

/** The paths of the policy's rules that could step through a reference (two names or more below a root). */
function deepPaths(policy: PolicySet): PathNode[] {
  let paths = deepPathsOf.get(policy);
  if (!paths) {
    const seen = new Set<string>();
    paths = [];
    for (const r of policy.compiled.rules) for (const p of r.paths) {
      if (p.segs.length < 2 || p.root === 'time' || p.root === 'action') continue;
      if (p.root !== 'context' && Object.hasOwn(BUILTINS[p.root], p.segs[0]!)) continue;
      const k = p.root + '.' + p.segs.join('.');
      if (!seen.has(k)) { seen.add(k); paths.push(p); }
    }
    deepPathsOf.set(policy, paths);
  }
  return paths;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Load the entities the policy's paths lead to through references, into `request.entities`. */
export async function loadReferences(ctx: AppContext, policy: PolicySet | null, request: DecisionRequest): Promise<void> {
  if (!policy) return;
  const paths = deepPaths(policy);
  if (!paths.length) return;
  const entities = new Map<string, Attributes | null>(request.entities ?? []);
  for (const p of paths) {
    let cur: unknown = p.root === 'context' ? request.context
      : p.root === 'subject' ? request.subject.attributes
        : p.root === 'person' ? request.person?.attributes
          : request.resourceAttributes;
    let hops = 0;
    const declared = policy.compiled.referenceTypes;
    for (let i = 0; i < p.segs.length - 1; i++) {
      if (typeof cur === 'string' && declared.size) {
        // The schema declares this path a reference: the string is the id.
        const type = declared.get(`${p.root}.${p.segs.slice(0, i).join('.')}`);
        if (type === undefined || ++hops > REFERENCE_HOPS) break;
        const ref = `${type}:${cur}`;
        if (!entities.has(ref)) entities.set(ref, await storedEntity(ctx, ref));
        cur = entities.get(ref);
      }
      if (!isRecord(cur)) break;
      const seg = p.segs[i]!;
      if (!Object.hasOwn(cur, seg)) {
        const ref = referenceOf(cur);
        if (ref === null || ++hops > REFERENCE_HOPS) break;
        if (!entities.has(ref)) entities.set(ref, await storedEntity(ctx, ref));
        cur = entities.get(ref);
        i--;
        continue;
      }
      cur = cur[seg];
    }
    // The last step may land on a reference whose entity holds the last name.
    const last = p.segs[p.segs.length - 1]!;
    if (typeof cur === 'string' && declared.size) {
      const type = declared.get(`${p.root}.${p.segs.slice(0, -1).join('.')}`);
      if (type !== undefined && !entities.has(`${type}:${cur}`)) entities.set(`${type}:${cur}`, await storedEntity(ctx, `${type}:${cur}`));
    }
    if (isRecord(cur) && !Object.hasOwn(cur, last)) {
      const ref = referenceOf(cur);
      if (ref !== null && !entities.has(ref)) entities.set(ref, await storedEntity(ctx, ref));
    }
  }
  if (entities.size) request.entities = entities;
}
