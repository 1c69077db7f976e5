// The syntax of types, relations, conditions on relationships and relationship fixtures, as
// the parser builds it. Every node that came from text carries its location. The semantics are
// OpenFGA's schema 1.1; `model.ts` turns these nodes into a checked model.

import type { Comments, JsonValue, Loc } from '../ast.js';

/** One direct type restriction: `user`, `user:*`, `group#member`, each optionally `with COND`. */
export interface TypeRefNode {
  type: string;
  /** `group#member`: a userset of that relation. */
  relation?: string;
  /** `user:*`: every entity of the type. */
  wildcard?: boolean;
  condition?: string;
  loc?: Loc;
}

/** A relation's definition. `union` and `intersection` hold two or more items. */
export type RelExpr =
  | { op: 'direct'; refs: TypeRefNode[]; loc?: Loc }
  | { op: 'computed'; relation: string; loc?: Loc }
  /** `relation from tupleset`: `relation` of each object the `tupleset` relation points to. */
  | { op: 'ttu'; relation: string; tupleset: string; loc?: Loc }
  | { op: 'union'; items: RelExpr[]; loc?: Loc }
  | { op: 'intersection'; items: RelExpr[]; loc?: Loc }
  | { op: 'exclusion'; base: RelExpr; subtract: RelExpr; loc?: Loc };

export interface RelationNode {
  name: string;
  expr: RelExpr;
  loc?: Loc;
  /** Problems the parser saw in the expression (operators mixed without parentheses). */
  problems?: { message: string; loc: Loc }[];
}

export interface TypeNode {
  kind: 'type';
  name: string;
  relations: RelationNode[];
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** `int`, `list<string>`, `map<list<int>>`. */
export interface ParamTypeNode { name: string; arg?: ParamTypeNode; loc?: Loc }

export interface CondParamNode { name: string; type: ParamTypeNode; loc?: Loc }

/** The body of a condition: CEL's subset that OpenFGA conditions use, in the language's words. */
export type CExpr =
  | { op: 'or' | 'and'; items: CExpr[]; loc?: Loc }
  | { op: 'not'; expr: CExpr; loc?: Loc }
  /** `any x in l: body` (CEL exists), `all` (all), `one` (exists_one). */
  | { op: 'quant'; quant: 'any' | 'all' | 'one'; name: string; list: CExpr; body: CExpr; loc?: Loc }
  | { op: 'in'; negated: boolean; left: CExpr; right: CExpr; loc?: Loc }
  | { op: 'contains'; left: CExpr; right: CExpr; loc?: Loc }
  /** `cmp` as written: `==`, `!=`, `<`, `<=`, `>`, `>=` (anything else is reported by the validator). */
  | { op: 'cmp'; cmp: string; left: CExpr; right: CExpr; loc?: Loc }
  | { op: 'add' | 'sub'; left: CExpr; right: CExpr; loc?: Loc }
  | { op: 'neg'; expr: CExpr; loc?: Loc }
  | { op: 'index'; target: CExpr; index: CExpr; loc?: Loc }
  | { op: 'list'; items: CExpr[]; loc?: Loc }
  | { op: 'call'; fn: string; args: CExpr[]; loc?: Loc }
  /** `uint` for a number written with the `u` suffix (`0u`). */
  | { op: 'num'; value: number; uint?: boolean; loc?: Loc }
  | { op: 'str'; value: string; loc?: Loc }
  | { op: 'bool'; value: boolean; loc?: Loc }
  | { op: 'null'; loc?: Loc }
  | { op: 'name'; name: string; loc?: Loc };

export interface ConditionNode {
  kind: 'condition';
  name: string;
  params: CondParamNode[];
  body: CExpr;
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** A relationship as written in a fixture: the tuple text, and an optional condition with its context. */
export interface RelationshipLineNode {
  text: string;
  condition?: { name: string; context?: Record<string, JsonValue> };
  loc?: Loc;
}

/** `relationships { ... }`: fixtures for every test of the file. */
export interface RelationshipsNode {
  kind: 'relationships';
  lines: RelationshipLineNode[];
  loc?: Loc;
  comments?: Record<string, Comments>;
}

/** A relationship assertion of a test: `check`, `list objects`, `list subjects`. `expect` is `error` or the answer. */
export type RelAssertion =
  | { kind: 'check'; subject: string; relation: string; object: string; context?: Record<string, JsonValue>; expect: string; loc?: Loc }
  | { kind: 'list_objects'; subject: string; relation: string; type: string; context?: Record<string, JsonValue>; expect: string[] | 'error'; loc?: Loc }
  | { kind: 'list_subjects'; object: string; relation: string; subjectType: string; context?: Record<string, JsonValue>; expect: string[] | 'error'; loc?: Loc };
