// Random relation models (as policy text: every one valid), relationships and requests, for the
// property tests of the relations engine. Small worlds, so that random requests meet the
// relationships: types t0..t2 beside `user`, each with the relations parent, r0, r1, r2.

import fc from 'fast-check';
import type { Relationship } from '../../../src/policy/relations/tuple.js';

export const TYPES = ['t0', 't1', 't2'];
export const RELATIONS = ['r0', 'r1', 'r2'];
export const USERS = ['user:u0', 'user:u1', 'user:u2'];
export const OBJECTS = TYPES.flatMap((t) => [0, 1, 2].map((i) => `${t}:o${i}`));

const arbRef = fc.oneof(
  { weight: 3, arbitrary: fc.constant('user') },
  { weight: 1, arbitrary: fc.constant('user:*') },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...TYPES), fc.constantFrom(...RELATIONS)).map(([t, r]) => `${t}#${r}`) },
).chain((ref) => fc.oneof({ weight: 3, arbitrary: fc.constant(ref) }, { weight: 1, arbitrary: fc.constant(`${ref} with c`) }));

const arbDirect = fc.uniqueArray(arbRef, { minLength: 1, maxLength: 3 }).map((refs) => `[${refs.join(', ')}]`);

/** A relation expression of `rel` (no direct types when `direct` is false: one `[...]` per definition). */
function arbExpr(rel: string, direct: boolean, depth: number): fc.Arbitrary<string> {
  const others = RELATIONS.filter((r) => r !== rel);
  const leaf = fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...others) },
    { weight: 2, arbitrary: fc.constantFrom(...RELATIONS).map((r) => `${r} from parent`) },
  );
  const base = direct ? fc.oneof({ weight: 3, arbitrary: arbDirect }, { weight: 2, arbitrary: leaf }) : leaf;
  if (depth === 0) return base;
  return fc.oneof(
    { weight: 2, arbitrary: base },
    {
      weight: 2,
      arbitrary: fc.tuple(fc.constantFrom('or', 'and', 'but not'), fc.boolean()).chain(([op, directFirst]) => {
        const a = arbExpr(rel, direct && directFirst, depth - 1), b = arbExpr(rel, direct && !directFirst, depth - 1);
        return fc.tuple(a, b).map(([x, y]) => `(${x}) ${op} (${y})`);
      }),
    },
  );
}

/** A whole model as policy text. */
export const arbModelText: fc.Arbitrary<string> = fc.tuple(
  ...TYPES.map(() => fc.tuple(
    fc.uniqueArray(fc.constantFrom(...TYPES), { minLength: 1, maxLength: 2 }),
    ...RELATIONS.map((r) => arbExpr(r, true, 2)),
  )),
).map((types) => {
  const out = ['type user', ''];
  types.forEach(([parents, ...defs], i) => {
    out.push(`type ${TYPES[i]} {`, `  relation parent: [${parents.join(', ')}]`);
    defs.forEach((d, j) => out.push(`  relation ${RELATIONS[j]}: ${d}`));
    out.push('}', '');
  });
  out.push('condition c(x: int, limit: int) {', '  x < limit', '}', '');
  return out.join('\n');
});

const arbSubject = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...USERS) },
  { weight: 1, arbitrary: fc.constant('user:*') },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...OBJECTS), fc.constantFrom(...RELATIONS)).map(([o, r]) => `${o}#${r}`) },
  { weight: 1, arbitrary: fc.constantFrom(...OBJECTS) },
);

export const arbRelationship: fc.Arbitrary<Relationship> = fc.tuple(
  fc.constantFrom(...OBJECTS),
  fc.constantFrom('parent', 'parent', ...RELATIONS),
  arbSubject,
  fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined }) }),
).map(([object, relation, subject0, cond]) => {
  // A parent points to an object (a plain entity).
  const subject = relation === 'parent' ? subject0.replace(/#.*$/, '').replace(/^user:.*$/, 't0:o0') : subject0;
  const r: Relationship = { object, relation, subject };
  if (cond !== null) r.condition = cond === undefined ? { name: 'c' } : { name: 'c', context: { limit: cond } };
  return r;
});

export const arbRelationships = fc.array(arbRelationship, { maxLength: 30 });

export const arbContext = fc.oneof(fc.constant({}), fc.record({ x: fc.integer({ min: 0, max: 10 }) }), fc.record({ x: fc.integer({ min: 0, max: 10 }), limit: fc.integer({ min: 0, max: 10 }) }));

export const arbRequest = fc.record({
  object: fc.oneof(fc.constantFrom(...OBJECTS), fc.constant('t1:unknown')),
  relation: fc.constantFrom('parent', ...RELATIONS),
  subject: fc.oneof(arbSubject, fc.constant('user:stranger')),
  context: arbContext,
});
