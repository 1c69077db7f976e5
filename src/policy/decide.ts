import type { Decision, DecisionRequest } from './types.js';
import type { PolicySet } from './compile.js';
export function decide(_request: DecisionRequest, policySet: PolicySet): Decision {
  return { decision: 'deny', reason: 'error: not implemented', policyVersion: policySet.version, trace: [] };
}
