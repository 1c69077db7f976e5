// The decision interface shared with the policy library: the facts `decide()` is fed (who acts,
// for whom, on what, when) and the structured cause it answers with. Everything in src/authz
// imports these names from here and nowhere else.

export {
  decide,
  renderReason,
  usageLimitsFor,
  type Attributes,
  type Decision,
  type DecisionCause,
  type DecisionRequest,
  type DecisionValue,
  type JsonLimits,
  type PersonFacts,
  type PolicySet,
  type SubjectFacts,
  type TraceStep,
  type ValueRead,
} from '../policy/index.js';

export type { UsageCheck, UsageFacts } from '../policy/usage.js';
export { chainAgents, decideOverChain } from '../policy/chain.js';
