// The abstract syntax tree shared by the file language and the JSON shapes of
// the management API. Every node that came from text carries a location; nodes
// built from JSON carry the pseudo-location of their API source.

import type { ConditionOp } from './types.js';
import type { UsageLimitNode } from './usage.js';
import type { ConditionNode, RelAssertion, RelationshipLineNode, RelationshipsNode, TypeNode } from './relations/ast.js';

export type { ConditionNode, RelAssertion, RelationshipLineNode, RelationshipsNode, TypeNode } from './relations/ast.js';

export interface Loc { file: string; line: number; col: number }

export type Scalar = number | string | boolean;
/** A literal as written: a scalar or a (possibly nested, then invalid) list. */
export type Literal = Scalar | Literal[];

/** Where a path starts: the request's context, the acting subject, its person, the object, the clock, the action, the delegation chain. */
export type Root = 'context' | 'subject' | 'person' | 'resource' | 'time' | 'action' | 'chain';
export const ROOTS: readonly Root[] = ['context', 'subject', 'person', 'resource', 'time', 'action', 'chain'];

/**
 * A path into the request: `context.amount` (or bare `amount`), `resource.owner.team`,
 * `time.hour`, `action` (the action itself: no segments) and `action.verb`. `bare` remembers a context field written without `context.`, so that
 * `fmt` prints it back as written.
 */
export interface PathNode { type: 'path'; root: Root; segs: string[]; bare?: boolean; loc?: Loc }
export interface LitNode { type: 'lit'; value: Literal; loc?: Loc }
export type Operand = PathNode | LitNode;

export type Expr =
  /** `a op b`: either side a path or a constant. */
  | { type: 'cmp'; left: Operand; op: ConditionOp; right: Operand; loc?: Loc; opText?: string }
  /** `a in [..]`, `a in path`, and `not in`. */
  | { type: 'in'; left: Operand; negated: boolean; right: Operand; loc?: Loc }
  /** `list contains v`, `list contains any [..]`, `list contains all [..]`. */
  | { type: 'contains'; left: Operand; mode: 'one' | 'any' | 'all'; right: Operand; loc?: Loc }
  /**
   * `resource has fraud`: is the value at `left` (`resource.fraud`) there at all. Never cannot be
   * evaluated, and a guard: a conjunction with a false presence test is false, a disjunction with a
   * true one is true, whatever its other parts (`resource has fraud and resource.fraud == true`).
   * `right` is always the constant true.
   */
  | { type: 'present'; left: PathNode; right: LitNode; loc?: Loc }
  /** `s like "pattern"` and `not like`: `*` matches any text, the rest is literal, case-sensitive. */
  | { type: 'like'; left: Operand; negated: boolean; right: Operand; loc?: Loc }
  | { type: 'and'; items: Expr[]; loc?: Loc }
  | { type: 'or'; items: Expr[]; loc?: Loc }
  | { type: 'not'; expr: Expr; loc?: Loc }
  | RelQuestion;

/** Who a relationship question asks about: the acting agent, the person, the acting subject (agent or person). */
export type RelWho = 'agent' | 'person' | 'subject';

/**
 * The object a relationship question names: the resource itself (`resource`), a path holding an
 * object (`resource.folder`: `"folder:x"` or `{"type", "id"}`), or a constant `"folder:legal"`.
 */
export type RelObject = { type: 'resource'; loc?: Loc } | PathNode | LitNode;

/**
 * A relationship question in a condition:
 *  - `person has viewer on resource`: does the subject hold the relation on the object;
 *  - `resource in "folder:legal" through parent`: is the object that object, or reachable from it
 *    by following `parent` relationships from the object upwards, transitively.
 */
export type RelQuestion =
  | { type: 'has'; who: RelWho; relation: string; object: RelObject; loc?: Loc; relationLoc?: Loc }
  | { type: 'within'; object: RelObject; ancestor: RelObject; relation: string; loc?: Loc; relationLoc?: Loc };

/** The comparisons, that is every expression that is not and, or, not, nor a relationship question. */
export type Atom = Extract<Expr, { left: Operand }>;

export type Effect = 'deny' | 'require_approval' | 'permit';

/** Comments kept by `fmt`: leading lines above a line of output, or one trailing comment. */
export interface Comments { before?: string[]; after?: string }

export interface RuleNode {
  kind: 'rule';
  name: string;
  effect: string;            // validated to Effect
  subjects: string[];
  /** The first relation as written (the only one of a management API rule). */
  relation: string;
  /**
   * Every relation as written, in order, when the file names more than one
   * (`relation "push:repos", "merge:repos"`) or an action group (`relation "write"`).
   * Read through `writtenRelations`.
   */
  relations?: string[];
  /** The location of each relation as written, in order. */
  relationLocs?: Loc[];
  object: string;
  when?: Expr;
  loc?: Loc;
  /** Locations of the fields, for diagnostics. */
  fieldLocs?: Partial<Record<'effect' | 'subjects' | 'relation' | 'object' | 'when' | 'name', Loc>>;
  /** The location of each subject pattern, in order, so that an error points at the one at fault. */
  subjectLocs?: Loc[];
  /** Fields given more than once or missing, detected by the parser. */
  duplicateFields?: { field: string; loc: Loc }[];
  comments?: Record<string, Comments>;
  /** For API rules: the id shown in `api:rule/<id>`. */
  apiId?: string;
  /** The IANA time zone of `time.*` in this rule: the file's `timezone`, UTC when absent. Set by the loader. */
  timezone?: string;
}

/** The decisions an invariant may rule out: `never allow`, `never deny`, `never approval_required`. */
export const INVARIANT_DECISIONS = ['allow', 'deny', 'approval_required'] as const;

/**
 * `invariant "name" { never allow "create:refunds" on "refund:*" when amount > 100000 }`: no
 * request whose action one of the relations (or action groups) covers, whose object the pattern
 * matches and on which the condition holds ever gets that decision. `policy verify` proves it.
 */
export interface InvariantNode {
  kind: 'invariant';
  name: string;
  /** The decision ruled out, as written (validated to one of INVARIANT_DECISIONS). */
  never: string;
  relations: string[];
  relationLocs?: Loc[];
  object: string;
  when?: Expr;
  loc?: Loc;
  fieldLocs?: Partial<Record<'name' | 'never' | 'relation' | 'object' | 'when', Loc>>;
  comments?: Record<string, Comments>;
}

/** One context field's constraints. Operators are stored by name so the order written does not matter. */
export interface LimitField {
  field: string;
  max?: Literal;
  min?: Literal;
  in?: Literal;
  not_in?: Literal;
  eq?: Literal;
  loc?: Loc;
  /** Problems the parser saw: unknown operator words, repeated operators. */
  bad?: { message: string; loc: Loc }[];
}

export interface LimitsNode {
  kind: 'limits';
  capability: string;
  forAgent: string;
  fields: LimitField[];
  /** Limits over time (`amount sum max 2000 per 24h`, `count max 20 per 1h`), in the order written. */
  usage?: UsageLimitNode[];
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** `actions "write" = ["push:repos", "merge:repos"]`: a name for several relations, usable wherever a relation is. */
export interface ActionGroupNode {
  kind: 'actions';
  name: string;
  members: string[];
  memberLocs?: Loc[];
  loc?: Loc;
  comments?: Record<string, Comments>;
}

export interface KindNode {
  kind: 'kind';
  plural: string;
  singular: string;
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** `timezone "Europe/Berlin"`: the zone of `time.*` for the rules of its file. */
export interface TimezoneNode {
  kind: 'timezone';
  name: string;
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** A declared type: `number`, `string`, `boolean`, or a list of one of them (`[string]`). */
export interface SchemaType { base: string; list: boolean; loc?: Loc; /** `entity customer`: a reference to a stored entity of this type. */ entity?: string }

export interface SchemaEntry { path: PathNode; type: SchemaType; loc?: Loc }

/** `schema { context.amount: number  resource.tags: [string] }`: the types of attributes and context fields. */
export interface SchemaNode {
  kind: 'schema';
  entries: SchemaEntry[];
  loc?: Loc;
  comments?: Record<string, Comments>;
}

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

/** Facts of a test's subject or person beyond its id. */
export interface TestFacts {
  roles?: string[];
  groups?: string[];
  email?: string;
  attributes?: Record<string, JsonValue>;
}

export interface TestNode {
  kind: 'test';
  name: string;
  agent?: { id: string; mode?: string };
  /** A person acting directly (an AuthZEN subject of type user), instead of an agent. */
  user?: { id: string };
  /** Roles, groups, email and attributes of the agent or user under test. */
  facts?: TestFacts;
  permissions?: string[];
  capabilities: { name: string; limits?: LimitField[]; usage?: UsageLimitNode[] }[];
  /** Prior usage the test states: `used count 19 in 1h`, `used amount 1500 in 24h per resource`. */
  used?: UsedLine[];
  person?: { id: string; permissions: string[] } & TestFacts;
  action?: string;
  resource?: string;
  resourceAttributes?: Record<string, JsonValue>;
  context?: Record<string, JsonValue>;
  /** The clock of the test, as written (an ISO 8601 instant). */
  now?: string;
  approved: boolean;
  expect?: { decision: string; reason?: string };
  loc?: Loc;
  comments?: Record<string, Comments>;
  lineLocs?: Record<string, Loc>;
  /** Lines given more than once (all but `capability` and `used`), detected by the parser. */
  duplicateLines?: { line: string; loc: Loc }[];
  /** `relationship "..."` lines: relationships this test adds to its file's fixtures. */
  relationships?: RelationshipLineNode[];
  /** `check`, `list objects`, `list subjects` lines, in order. */
  assertions?: RelAssertion[];
}

/** A line `used <count | field> <amount> in <window> [per <scope>]`. */
export interface UsedLine { what: string; amount: Literal; per: string; scope?: string; loc?: Loc }

export type Item = RuleNode | InvariantNode | LimitsNode | KindNode | ActionGroupNode | TestNode | TimezoneNode | SchemaNode | TypeNode | ConditionNode | RelationshipsNode;

export interface PolicyFileNode {
  path: string;
  header?: { name: string; version: number; loc?: Loc };
  items: Item[];
  /** Comments above the header (or the first item) and at the end of the file. */
  comments?: { top?: string[]; header?: Comments; end?: string[] };
}

export function locString(loc: Loc | undefined): string | undefined {
  return loc ? `${loc.file}:${loc.line}` : undefined;
}

/** A rule's relations as written (action group names unexpanded). */
export function writtenRelations(r: RuleNode): string[] {
  return r.relations ?? (r.relation ? [r.relation] : []);
}

/** The path as written: `context.amount`, or `amount` when written bare. */
export function pathText(p: PathNode): string {
  return p.bare ? p.segs.join('.') : [p.root, ...p.segs].join('.');
}

/** The path in full: `context.amount` also when written bare. */
export function pathKey(p: PathNode): string {
  return [p.root, ...p.segs].join('.');
}

/** Is this item of an `and` or `or` a presence test, or its negation (a guard)? */
export function isGuard(e: Expr): boolean {
  return e.type === 'present' || (e.type === 'not' && e.expr.type === 'present');
}

/**
 * The value of `and`/`or` over its items' values (0 false, 1 true, 2 cannot be evaluated): a false
 * guard decides an `and`, a true guard an `or`; otherwise any part that cannot be evaluated makes the
 * whole unevaluable (fail closed), else the plain truth.
 */
export function combine(isAnd: boolean, items: Expr[], values: (0 | 1 | 2)[]): 0 | 1 | 2 {
  const decisive = isAnd ? 0 : 1;
  for (let i = 0; i < items.length; i++) if (values[i] === decisive && isGuard(items[i]!)) return decisive;
  if (values.includes(2)) return 2;
  return values.includes(decisive) ? decisive : ((1 - decisive) as 0 | 1);
}

/** Every comparison of an expression, left to right (relationship questions are not comparisons). */
export function atomsOf(e: Expr, out: Atom[] = []): Atom[] {
  switch (e.type) {
    case 'and': case 'or': for (const i of e.items) atomsOf(i, out); break;
    case 'not': atomsOf(e.expr, out); break;
    case 'has': case 'within': break;
    default: out.push(e);
  }
  return out;
}

/** Every relationship question of an expression, left to right. */
export function relQuestionsOf(e: Expr, out: RelQuestion[] = []): RelQuestion[] {
  switch (e.type) {
    case 'and': case 'or': for (const i of e.items) relQuestionsOf(i, out); break;
    case 'not': relQuestionsOf(e.expr, out); break;
    case 'has': case 'within': out.push(e); break;
    default: break;
  }
  return out;
}

/** The paths of a relationship question's objects (`resource.folder`), left to right. */
export function relQuestionPaths(q: RelQuestion): PathNode[] {
  const objs = q.type === 'has' ? [q.object] : [q.object, q.ancestor];
  return objs.filter((o): o is PathNode => o.type === 'path');
}

/** Every path an expression reads, left to right (with repeats). */
export function pathsOf(e: Expr): PathNode[] {
  const out: PathNode[] = [];
  for (const a of atomsOf(e)) {
    if (a.left.type === 'path') out.push(a.left);
    if (a.right.type === 'path') out.push(a.right);
  }
  for (const q of relQuestionsOf(e)) out.push(...relQuestionPaths(q));
  return out;
}
