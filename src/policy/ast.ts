// The abstract syntax tree shared by the file language and the JSON shapes of
// the management API. Every node that came from text carries a location; nodes
// built from JSON carry the pseudo-location of their API source.

import type { ConditionOp } from './types.js';

export interface Loc { file: string; line: number; col: number }

export type Scalar = number | string | boolean;
/** A literal as written: a scalar or a (possibly nested, then invalid) list. */
export type Literal = Scalar | Literal[];

export type Expr =
  | { type: 'cmp'; field: string; op: ConditionOp; value: Literal; loc?: Loc; opText?: string }
  | { type: 'in'; field: string; negated: boolean; values: Literal; loc?: Loc }
  | { type: 'and'; items: Expr[]; loc?: Loc }
  | { type: 'or'; items: Expr[]; loc?: Loc }
  | { type: 'not'; expr: Expr; loc?: Loc };

export type Effect = 'deny' | 'require_approval';

/** Comments kept by `fmt`: leading lines above a line of output, or one trailing comment. */
export interface Comments { before?: string[]; after?: string }

export interface RuleNode {
  kind: 'rule';
  name: string;
  effect: string;            // validated to Effect
  subjects: string[];
  relation: string;
  object: string;
  when?: Expr;
  loc?: Loc;
  /** Locations of the fields, for diagnostics. */
  fieldLocs?: Partial<Record<'effect' | 'subjects' | 'relation' | 'object' | 'when' | 'name', Loc>>;
  /** Fields given more than once or missing, detected by the parser. */
  duplicateFields?: { field: string; loc: Loc }[];
  comments?: Record<string, Comments>;
  /** For API rules: the id shown in `api:rule/<id>`. */
  apiId?: string;
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

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

export interface TestNode {
  kind: 'test';
  name: string;
  agent?: { id: string; mode?: string };
  permissions?: string[];
  capabilities: { name: string; limits?: LimitField[] }[];
  person?: { id: string; permissions: string[] };
  action?: string;
  resource?: string;
  context?: Record<string, JsonValue>;
  approved: boolean;
  expect?: { decision: string; reason?: string };
  loc?: Loc;
  comments?: Record<string, Comments>;
  lineLocs?: Record<string, Loc>;
}

export type Item = RuleNode | LimitsNode | KindNode | TestNode;

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
