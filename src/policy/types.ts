// Public types of the policy library. Kept in one module so that every stage
// (parser, validator, compiler, evaluator, CLI) and the other parts of Gatehouse
// share exactly one definition.

import type { UsageCheck, UsageFacts } from './usage.js';
import type { RelationshipIndex } from './relations/index.js';

export interface SourceFile { path: string; text: string }

/**
 * One parse or validation problem; printed as `file:line:col: message`. Errors stop a policy
 * set from loading; warnings (rules that can never apply, and the like) come only from the
 * analysis of `policy check` and never stop a load.
 */
export interface Diagnostic {
  file: string;
  line: number;
  col: number;
  message: string;
  severity: 'error' | 'warning';
  /** A stable name of the kind of problem, for warnings: `unsatisfiable`, `kind_mismatch`, `unreachable_limits`. */
  code?: string;
}

export type ConditionOp = 'gte' | 'gt' | 'lte' | 'lt' | 'eq' | 'ne';

/** The old one-comparison condition of the management API: a context field against a constant. */
export interface JsonFieldCondition { field: string; op: ConditionOp; value: unknown }
/** A condition in the file syntax: `{"expr": "resource.owner == person.email"}`. */
export interface JsonExprCondition { expr: string }

/** The rule shape of the management API: subjects, relation, object, an optional condition. */
export interface JsonRule {
  id?: string;
  name: string;
  effect: 'deny' | 'require_approval' | 'permit';
  subjects: string[];
  relation: string;
  object: string;
  condition?: JsonFieldCondition | JsonExprCondition | null;
}

/** `{ field: bareValue | { max?, min?, in?, not_in? } }` */
export type JsonLimits = Record<string, unknown>;

export interface PolicySetSource { path: string; policy?: string; version?: number; hash: string }

/** JSON: nested objects and lists allowed. */
export type Attributes = Record<string, unknown>;

/**
 * Who acts: an agent (agents' endpoints, MCP, AuthZEN subject type "agent"), a person (AuthZEN
 * type "user"), or an entity of another type the relation model declares (an AuthZEN subject
 * such as `identity` or `team`: no capabilities, no person, its roles and attributes its own).
 */
export interface SubjectFacts {
  type: 'agent' | 'user' | (string & {});
  /** The agent ID, or the person's id (sub). */
  id: string;
  name?: string;
  /** Agents only. */
  mode?: 'delegated' | 'autonomous';
  /** People only. */
  email?: string;
  roles: string[];
  /** A delegated agent has the groups of the person it acts for (for `group:<name>` subjects). */
  groups: string[];
  /** From its roles, `<action>:<kinds>`. */
  permissions: string[];
  /** Custom attributes (the management API's `attributes`). */
  attributes: Attributes;
  /**
   * Agents: the capabilities they hold (an action needs one, and it carries limits).
   * undefined for people and services: no capability gating, no capability limits.
   */
  capabilities?: { name: string; limits?: JsonLimits | null }[];
}

/** The person a delegated agent acts for. For an AuthZEN user subject the person is `subject` itself. */
export interface PersonFacts {
  /** '' when a delegated agent acts for nobody: such a person grants nothing. */
  id: string;
  email?: string;
  roles: string[];
  groups: string[];
  permissions: string[];
  attributes: Attributes;
}

export interface DecisionRequest {
  subject: SubjectFacts;
  person?: PersonFacts | null;
  /** The relation, `<action>:<kinds>`. */
  action: string;
  /** The object, `<kind>:<id>`. */
  resource: string;
  /** The stored entity's attributes merged with (AuthZEN) request properties; {} when none. */
  resourceAttributes?: Attributes;
  context: Record<string, unknown>;
  /** The clock: milliseconds since the Unix epoch. Never read inside decide(). */
  now: number;
  approved?: boolean;
  /** What the agent has used of its limits over time, by usage key (`count per 1h`); none stated is none used. */
  usage?: UsageFacts;
  /**
   * The relationships the grant step consults: a relation `r` of type `t` grants `r:<plural of t>`
   * on `t:<id>` to `user:<id>` and `agent:<id>` subjects that hold it. None: relations grant nothing.
   */
  relationships?: RelationshipIndex;
  /**
   * Stored entities a path may step into through a reference (`{"type": "customer", "id": "c-1"}`),
   * by `<type>:<id>`: their attributes, or null when there is no such entity (fail closed). A
   * reference not in the map is not followed (the caller did not load it: missing).
   */
  entities?: ReadonlyMap<string, Attributes | null>;
  /**
   * A delegation chain of more than one agent: the agents acting for `person`, first (the one
   * the person let act for them) to last (the subject, acting now). Every one of them must be
   * granted the action (the pipeline decides once per agent); rules read it as `chain.*`.
   */
  chain?: DelegationChain;
}

/** The agents of a delegation chain, first to current, each with its facts. */
export interface DelegationChain {
  agents: SubjectFacts[];
}

export type DecisionValue = 'allow' | 'deny' | 'approval_required';

/** Why a decision came out as it did; the reason string is rendered from it, never parsed. */
export type DecisionCause =
  | { code: 'allowed'; approvedBy?: string }
  | { code: 'constraint_violated'; field: string | null; operator: string }
  | { code: 'rule_denied'; rule: string; ruleId?: string }
  | { code: 'not_granted'; action: string; missing: 'capability' | 'subject' | 'person' }
  | { code: 'approval_required'; rule: string; ruleId?: string }
  | { code: 'error'; message: string };

/** What a check read: the path as written in the rule, the value found, and whether it was there at all. */
export interface ValueRead { path: string; value: unknown; present: boolean }

export interface TraceStep {
  step: 'limits' | 'deny_rules' | 'grants' | 'approval_rules' | 'allow';
  check: string;
  outcome: 'pass' | 'fail' | 'skip';
  source?: string;
  /** The rule this step evaluated. */
  rule?: string;
  /** The values the check read: a rule's (the one that decided, and every rule under explain), a limit's, a limit over time's usage. */
  reads?: ValueRead[];
  /** Why the rule applied or did not, in words: `condition holds`, `fails closed: context.amount is missing`, ... */
  why?: string;
  /** A grant through relations: the relationships that granted it, in text form, in order. */
  path?: string[];
}

export interface Decision {
  decision: DecisionValue;
  /** renderReason(cause). */
  reason: string;
  cause: DecisionCause;
  policyVersion: string;
  rule?: string;
  trace: TraceStep[];
  /** The limits over time checked, with the usage read and what an allow adds (the server consumes it). */
  usage?: UsageCheck[];
}
