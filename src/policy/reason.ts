// The reason string of a decision, rendered from its cause (never parsed back).

import type { DecisionCause } from './types.js';

export function renderReason(cause: DecisionCause): string {
  switch (cause.code) {
    case 'allowed': return cause.approvedBy !== undefined ? `allowed: approved ${cause.approvedBy}` : 'allowed';
    case 'constraint_violated':
      // An operator-less constraint (the token's authorization details) is named by its field alone.
      return cause.field === null ? 'constraint_violated: count' : `constraint_violated: ${cause.field}${cause.operator ? ` ${cause.operator}` : ''}`;
    case 'rule_denied': return `rule_denied: ${cause.rule}`;
    case 'approval_required': return `approval_required: ${cause.rule}`;
    case 'not_granted':
      return `not_granted: ${cause.action}${cause.missing === 'capability' ? ' (capability)' : cause.missing === 'person' ? ' (person)' : ''}`;
    case 'error': return `error: ${cause.message}`;
  }
}
