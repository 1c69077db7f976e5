import { renderReason, type DecisionCause } from './policy-interface.js';

/**
 * Why the pipeline answered as it did: the causes of the decision order itself, plus those the
 * pipeline adds around it. The reason string is rendered from the cause, never the other way.
 */
export type PipelineCause =
  | DecisionCause
  /** the transaction token is missing, not ours, expired, or bound to something else */
  | { code: 'invalid_transaction_token'; why: string }
  /** no policy has ever compiled in this process: everything is denied */
  | { code: 'policy_unavailable' }
  /** a person answered the approval this action waited for with no */
  | { code: 'approval_denied'; rule: string }
  /** the agent was revoked (or removed) while its request was on the way */
  | { code: 'agent_revoked' }
  /** the MCP gateway could not map a tool call to an action (a missing resource argument) */
  | { code: 'invalid_request'; message: string }
  /** the MCP gateway knows no tool of that name */
  | { code: 'unknown_tool'; tool: string }
  /** a delegation chain no longer holds: an agent of it revoked, a consent withdrawn, a sub-agent dropped, the session ended */
  | { code: 'delegation_revoked'; why: string }
  /** an AuthZEN subject that is no stored person or agent (or a revoked agent) */
  | { code: 'unknown_subject'; type: string; id: string };

export type CauseCode = PipelineCause['code'];

export function renderCause(cause: PipelineCause): string {
  switch (cause.code) {
    case 'invalid_transaction_token':
      return `invalid_transaction_token: ${cause.why}`;
    case 'policy_unavailable':
      return 'policy_unavailable';
    case 'approval_denied':
      // The stable code stays rule_denied: the rule applied, and a person said no.
      return `rule_denied: ${cause.rule} (a person denied the approval)`;
    case 'agent_revoked':
      return 'invalid_client: the agent is unknown or revoked';
    case 'invalid_request':
      return `invalid_request: ${cause.message}`;
    case 'unknown_tool':
      return `not_found: no tool named ${cause.tool}`;
    case 'delegation_revoked':
      return `delegation_revoked: ${cause.why}`;
    case 'unknown_subject':
      return `unknown_subject: ${cause.type} ${cause.id}`;
    default:
      return renderReason(cause);
  }
}
