// A decision over a delegation chain: the decision order once per agent, the current actor
// (the subject, last of the chain) first and then each agent above it, each with its own usage.
//   - any agent's deny is the answer (its reason names the agent when it is not the current one);
//   - else an approval any of them needs;
//   - else the current actor's allow.
// The trace holds every agent's steps (those of an agent above the actor prefixed with its ID),
// and the limits over time of every agent, so that an allow consumes on all their counters.
// Pure; the server and `policy explain` both decide chains through it.

import type { DecisionRequest, SubjectFacts, TraceStep } from './types.js';
import type { UsageCheck, UsageFacts } from './usage.js';

interface Decided {
  decision: 'allow' | 'deny' | 'approval_required';
  reason: string;
  trace: TraceStep[];
  usage?: UsageCheck[];
}

/** The agents of a request's chain, when it has more than one (else the request is decided as always). */
export function chainAgents(request: DecisionRequest): SubjectFacts[] | null {
  const agents = request.chain?.agents;
  return Array.isArray(agents) && agents.length > 1 ? agents : null;
}

export function decideOverChain<D extends Decided>(
  request: DecisionRequest,
  decideOne: (request: DecisionRequest) => D,
  usageOf?: (agentId: string) => UsageFacts,
): D {
  const agents = chainAgents(request);
  if (!agents) return decideOne(request);
  const last = agents.length - 1;
  const trace: TraceStep[] = [];
  const usage: UsageCheck[] = [];
  let current: D | undefined;
  let approval: D | undefined;
  for (let i = last; i >= 0; i--) {
    const agent = agents[i]!;
    const d = decideOne({ ...request, subject: agent, ...(usageOf ? { usage: usageOf(agent.id) } : {}) });
    for (const t of d.trace) trace.push(i === last ? t : { ...t, check: `${agent.id} (chain): ${t.check}` });
    if (d.usage) usage.push(...d.usage);
    if (d.decision === 'deny') {
      const reason = i === last ? d.reason : `${d.reason} (agent ${agent.id} in the chain)`;
      return { ...d, reason, trace, ...(usage.length ? { usage } : {}) };
    }
    if (i === last) current = d;
    if (d.decision === 'approval_required') approval ??= d;
  }
  return { ...(approval ?? current!), trace, ...(usage.length ? { usage } : {}) };
}
