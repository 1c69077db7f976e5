// An OpenFGA authorization model (schema 1.1) as the importer reads it, from either of its forms
// (the DSL or its JSON), each part with the file and line it came from so that a refusal names
// them. Both readers produce this shape; the emitter reads only this shape.

/** Where a part of the input was written: a file and a 1-based line. */
export interface Where {
  file: string;
  line: number;
}

/** What the importer cannot carry over, and where: printed as `file:line: message`. */
export interface Refusal extends Where {
  message: string;
}

export function refusal(at: Where, message: string): Refusal {
  return { file: at.file, line: at.line, message };
}

export function renderRefusal(r: Refusal): string {
  return `${r.file}:${r.line}: ${r.message}`;
}

/** One entry of a relation's direct type restrictions: `user`, `user:*`, `group#member`, each `with` a condition. */
export interface TypeRestriction {
  type: string;
  /** `group#member`: a userset of that relation. */
  relation?: string;
  /** `user:*`. */
  wildcard?: boolean;
  condition?: string;
}

/** A relation's definition, as OpenFGA's usersets rewrite it. */
export type Rewrite =
  | { kind: 'direct'; types: TypeRestriction[]; at: Where }
  | { kind: 'computed'; relation: string; at: Where }
  | { kind: 'from'; relation: string; tupleset: string; at: Where }
  | { kind: 'union' | 'intersection'; children: Rewrite[]; at: Where }
  | { kind: 'difference'; base: Rewrite; subtract: Rewrite; at: Where };

export interface RelationDef {
  name: string;
  rewrite: Rewrite;
  at: Where;
}

export interface TypeDef {
  name: string;
  relations: RelationDef[];
  at: Where;
}

export interface ConditionParam {
  name: string;
  /** OpenFGA's parameter type as the policy language writes it: `int`, `list<string>`, `map<any>`. */
  type: string;
}

export interface ConditionDef {
  name: string;
  params: ConditionParam[];
  /** The CEL expression as written. */
  expression: string;
  /** The line the expression starts on (the expression's own line 1). */
  expressionAt: Where;
  /** The expression's own lines are not the file's (a JSON string): every refusal in it names expressionAt. */
  flatLines?: true;
  at: Where;
}

export interface FgaModel {
  types: TypeDef[];
  conditions: ConditionDef[];
}

/** A result that either holds a value or the refusals that stopped it. */
export type Imported<T> = { ok: true; value: T } | { ok: false; refusals: Refusal[] };

/** The parameter types OpenFGA conditions declare, by their DSL name. */
export const PARAM_TYPES = ['bool', 'string', 'int', 'uint', 'double', 'duration', 'timestamp', 'ipaddress', 'any'] as const;
export const GENERIC_PARAM_TYPES = ['list', 'map'] as const;

/**
 * How deep a relation's definition or a condition's expression may nest. Both are parsed by
 * recursion; far past any model written by hand it would exhaust the stack.
 */
export const MAX_NESTING = 100;
