// `explain`: a decision and every check that led to it, as text.

import type { Decision, DecisionRequest } from './types.js';

export function explainText(req: DecisionRequest, d: Decision): string {
  const out: string[] = [];
  out.push(`request: ${req.agent.id} ${req.action} ${req.resource} ${JSON.stringify(req.context ?? {})}`);
  out.push(`decision: ${d.decision}`);
  out.push(`reason: ${d.reason}`);
  out.push(`policy version: ${d.policyVersion}`);
  out.push('checks:');
  const w = Math.max(...d.trace.map((t) => t.step.length));
  d.trace.forEach((t, i) => {
    out.push(`  ${String(i + 1).padStart(2)}. ${t.step.padEnd(w)}  ${t.outcome.padEnd(4)}  ${t.check}${t.source ? `  (${t.source})` : ''}`);
  });
  return out.join('\n') + '\n';
}

/**
 * Fill what a hand-written explain request leaves out: autonomous, holding the action's
 * capability, and granted (grants come from roles in the database, which the CLI does not
 * see). This is the assumption `diff` makes too, so every diff example explains to the
 * decision the diff reported for it.
 */
export function completeRequest(raw: unknown): { request: DecisionRequest; assumed: string[] } {
  const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, any>;
  // a diff example names the person as `person_id`
  if (r.person === undefined && typeof r.person_id === 'string') r.person = r.person_id;
  const assumed: string[] = [];
  const action = typeof r.action === 'string' ? r.action : '';
  const agent = typeof r.agent === 'object' && r.agent !== null ? r.agent : { id: typeof r.agent === 'string' ? r.agent : r.agent_id };
  if (agent.mode === undefined) { agent.mode = r.person ? 'delegated' : 'autonomous'; assumed.push(`mode ${agent.mode}`); }
  if (!Array.isArray(agent.permissions)) { agent.permissions = ['*:*']; assumed.push(`agent granted ${action} (no permissions given)`); }
  if (!Array.isArray(agent.capabilities)) { agent.capabilities = [{ name: action }]; assumed.push(`capability ${action}`); }
  else agent.capabilities = agent.capabilities.map((c: unknown) => (typeof c === 'string' ? { name: c } : c));
  const request: DecisionRequest = { agent, action, resource: r.resource, context: r.context ?? {} };
  if (r.person) {
    const p = typeof r.person === 'string' ? { id: r.person } : r.person;
    if (!Array.isArray(p.permissions)) { p.permissions = ['*:*']; assumed.push(`person granted ${action} (no permissions given)`); }
    request.person = p;
  }
  if (r.approved === true) request.approved = true;
  return { request, assumed };
}
