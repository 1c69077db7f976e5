// Public API of the Gatehouse policy library (rules and limits language).
// The library knows nothing of HTTP or SQL: the server loads files, passes live
// rules in, and asks `decide` for each action.

export type {
  SourceFile, Diagnostic, ConditionOp, JsonRule, JsonFieldCondition, JsonExprCondition, JsonLimits, PolicySetSource,
  Attributes, SubjectFacts, PersonFacts, DecisionRequest, DelegationChain, DecisionValue, DecisionCause, ValueRead, TraceStep, Decision,
} from './types.js';
export type { PolicySet } from './compile.js';
export { formatDiagnostic } from './diagnostics.js';
export { validateJsonRule, validateJsonLimits, ruleToJson } from './json.js';
export { loadPolicySet, readPolicyDir, parseAndValidate, hasErrors, type CheckOptions } from './load.js';
export { decide, usageLimitsFor } from './decide.js';
export { renderReason } from './reason.js';
export { explainDecision, completeRequest } from './explain.js';
export { englishPlural, permissionCovers, singularOf } from './patterns.js';

// Relations (OpenFGA schema 1.1): the model of a policy set is `policySet.compiled.relations`.
export type { Relationship, SubjectRef } from './relations/tuple.js';
export { parseRelationshipJson, parseRelationshipText, relationshipText, parseObject, parseSubject } from './relations/tuple.js';
export type { RelationshipIndex, StoredCondition } from './relations/index.js';
export { MemoryIndex, OverlayIndex } from './relations/index.js';
export type { RelationModel, RelationDef, TypeDef } from './relations/model.js';
export { disallowed, relationOf, hasRelations } from './relations/model.js';
export type { CheckResult, ListResult, RelationError, RelationErrorCode, RelationOptions } from './relations/checker.js';
export { RelationChecker, relationChecker, MAX_DEPTH } from './relations/checker.js';
