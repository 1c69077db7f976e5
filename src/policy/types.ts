// Public types of the policy library. Kept in one module so that every stage
// (parser, validator, compiler, evaluator, CLI) and the other parts of Gatehouse
// share exactly one definition.

export interface SourceFile { path: string; text: string }

/** One parse or validation error; printed as `file:line:col: message`. */
export interface Diagnostic { file: string; line: number; col: number; message: string }

export type ConditionOp = 'gte' | 'gt' | 'lte' | 'lt' | 'eq' | 'ne';

/** The rule shape of the management API: subjects, relation, object, an optional condition. */
export interface JsonRule {
  id?: string;
  name: string;
  effect: 'deny' | 'require_approval';
  subjects: string[];
  relation: string;
  object: string;
  condition?: { field: string; op: ConditionOp; value: unknown } | null;
}

/** `{ field: bareValue | { max?, min?, in?, not_in? } }` */
export type JsonLimits = Record<string, unknown>;

import type { UsageCheck, UsageFacts } from './usage.js';

export interface PolicySetSource { path: string; policy?: string; version?: number; hash: string }

export interface DecisionRequest {
  agent: {
    id: string;
    mode: 'delegated' | 'autonomous';
    permissions: string[];
    capabilities: { name: string; limits?: JsonLimits | null }[];
  };
  person?: { id: string; permissions: string[] } | null;
  action: string;
  resource: string;
  context: Record<string, unknown>;
  approved?: boolean;
  /** What the agent has used of its limits over time, by usage key (`count per 1h`); none stated is none used. */
  usage?: UsageFacts;
}

export type DecisionValue = 'allow' | 'deny' | 'approval_required';

export interface TraceStep {
  step: 'limits' | 'deny_rules' | 'grants' | 'approval_rules' | 'allow';
  check: string;
  outcome: 'pass' | 'fail' | 'skip';
  source?: string;
  /** what the check read (a limit over time: the usage, and the field it sums) */
  reads?: { path: string; value: unknown; present: boolean }[];
}

export interface Decision {
  decision: DecisionValue;
  reason: string;
  policyVersion: string;
  rule?: string;
  trace: TraceStep[];
  /** The limits over time checked, with the usage read and what an allow adds (the server consumes it). */
  usage?: UsageCheck[];
}
