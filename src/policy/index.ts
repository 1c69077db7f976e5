// Public API of the Gatehouse policy library (rules and limits language).
// The library knows nothing of HTTP or SQL: the server loads files, passes live
// rules in, and asks `decide` for each action.

export type {
  SourceFile, Diagnostic, ConditionOp, JsonRule, JsonLimits, PolicySetSource,
  DecisionRequest, DecisionValue, TraceStep, Decision,
} from './types.js';
export type { PolicySet } from './compile.js';
export { formatDiagnostic } from './diagnostics.js';
export { validateJsonRule, validateJsonLimits } from './json.js';
export { loadPolicySet, readPolicyDir } from './load.js';
export { decide, usageLimitsFor } from './decide.js';
export { permissionCovers, singularOf } from './patterns.js';
