// The declared types of paths, and what a comparison does with a value of another type.
// One definition for the compiled evaluator, explain (which is the evaluator), diff and verify.
//
// A value whose path the schema declares with another type (`amount: "100"` where the schema
// says number) is compared with nothing: every comparison of it cannot be evaluated, so the
// rule fails closed as for a missing value (`has` still sees it there). Undeclared paths are
// compared by their values.
//
// A membership test (`x in list`, `list contains x`, `a contains any b`, `a contains all b`)
// can be evaluated when its value is a number, string or boolean and every item of its
// list(s) has one type with it. Which type that is, in this order:
//   1. declared: the list path's type (`resource.tags: [string]` in a schema, or a built-in
//      list such as `subject.roles`), else the value's (a schema or built-in type of the value
//      path, or the literal's own type: `-2 in context.codes` asks about numbers);
//   2. else the items': the type of the list's items (of both lists, for `contains any/all`);
//   3. else (nothing declared and the lists empty) the value's own type: an empty list that
//      nothing declares holds nothing of any type, so `x in []` is false and `not in` true.
// A value or item of another type makes the test unevaluable, so the rule fails closed: with
// `resource.tags: [string]` declared, `-2 in resource.tags` fails closed whether the tags are
// `["main"]` or `[]`.

import type { Atom, Operand, PathNode, PolicyFileNode, Scalar } from './ast.js';
import { pathKey } from './ast.js';
import { BUILTINS, scalarTypeOf, VALUE_TYPES, type ValueType } from './values.js';

export type ScalarType = 'number' | 'string' | 'boolean';

/** Schema-declared value types by full path (`context.amount` → `number`). */
export type DeclaredTypes = ReadonlyMap<string, ValueType>;

export const NO_DECLARED_TYPES: DeclaredTypes = new Map();

/**
 * The value types the `schema` blocks of these files declare (references, `entity <type>`, hold
 * no value type). A path declared twice with two types does not load, so the first one stands.
 */
export function declaredTypesOf(files: readonly PolicyFileNode[]): DeclaredTypes {
  const out = new Map<string, ValueType>();
  for (const f of files) for (const item of f.items) {
    if (item.kind !== 'schema') continue;
    for (const e of item.entries) {
      if (e.type.entity !== undefined) continue;
      const t = (e.type.list ? `[${e.type.base}]` : e.type.base) as ValueType;
      const k = pathKey(e.path);
      if (VALUE_TYPES.includes(t) && !out.has(k)) out.set(k, t);
    }
  }
  return out;
}

/** A path's type: built in (`subject.roles`, `time.hour`), else as the schema declares it, else null. */
export function declaredTypeOf(p: PathNode, declared: DeclaredTypes): ValueType | null {
  if (p.root === 'action') return p.segs.length <= 1 ? 'string' : null;
  if (p.root !== 'context' && p.segs.length === 1) {
    const t = BUILTINS[p.root][p.segs[0]!];
    if (t) return t;
  }
  return declared.get(pathKey(p)) ?? null;
}

function itemOfList(o: Operand, declared: DeclaredTypes): ScalarType | null {
  if (o.type === 'lit') {
    const v = o.value;
    return Array.isArray(v) && v.length ? scalarTypeOf(v[0]) : null;
  }
  const t = declaredTypeOf(o, declared);
  return t !== null && t.startsWith('[') ? (t.slice(1, -1) as ScalarType) : null;
}

function typeOfValue(o: Operand, declared: DeclaredTypes): ScalarType | null {
  if (o.type === 'lit') return scalarTypeOf(o.value as Scalar);
  const t = declaredTypeOf(o, declared);
  return t !== null && !t.startsWith('[') ? (t as ScalarType) : null;
}

/** The declared item type of a membership test (step 1 above), or null when nothing declares it. */
export function memberItemType(a: Atom, declared: DeclaredTypes): ScalarType | null {
  switch (a.type) {
    case 'in': return itemOfList(a.right, declared) ?? typeOfValue(a.left, declared);
    case 'contains':
      if (a.mode === 'one') return itemOfList(a.left, declared) ?? typeOfValue(a.right, declared);
      return itemOfList(a.left, declared) ?? itemOfList(a.right, declared);
    default: return null;
  }
}

/**
 * A value its path's declared type rules out (`amount: "100"` where the schema says number):
 * there, so `has` holds, but no comparison can use it, so the rule fails closed, as for a
 * missing value. The evaluator reads such a value as this.
 */
export const MISTYPED: unique symbol = Symbol('mistyped');

/** Does a value have a declared type? A list has it when every item has the item type (an empty list has every list type). */
export function fitsType(v: unknown, t: ValueType): boolean {
  if (!t.startsWith('[')) return scalarTypeOf(v) === t;
  if (!Array.isArray(v)) return false;
  const item = t.slice(1, -1);
  for (let i = 0; i < v.length; i++) if (scalarTypeOf(v[i]) !== item) return false;
  return true;
}

/** The schema-declared type of a path as written (built-in paths have theirs by construction), or null. */
export function schemaTypeOf(p: PathNode, declared: DeclaredTypes): ValueType | null {
  return declared.size ? declared.get(pathKey(p)) ?? null : null;
}
