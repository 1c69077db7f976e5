// The decision order, each step with its reason code:
//   2. limits      → deny  constraint_violated: <field> <operator>
//   3. deny rules  → deny  rule_denied: <rule>
//   4. grants      → deny  not_granted: <action> [(capability)|(person)]
//   5. approval    → approval_required: <rule>   (allow when already approved)
//   6. allow       → allowed
// Step 1 (unknown or revoked agent) belongs to the endpoint. Pure; never throws.

import type { Decision, DecisionRequest, JsonLimits, TraceStep } from './types.js';
import type { Ctx, CompiledPolicy, LimitOp, PolicySet } from './compile.js';
import { candidates } from './compile.js';
import { permissionCovers } from './patterns.js';
import { apiUsageLimits, checkUsageLimits, isCountEntry, usageViolationField, type UsageLimit } from './usage.js';

const STEPS: TraceStep['step'][] = ['limits', 'deny_rules', 'grants', 'approval_rules', 'allow'];
const EMPTY: Ctx = Object.freeze({}) as Ctx;

function skipAfter(trace: TraceStep[], step: TraceStep['step']): void {
  for (let i = STEPS.indexOf(step) + 1; i < STEPS.length; i++) trace.push({ step: STEPS[i]!, check: 'not reached', outcome: 'skip' });
}

const hasOwn = Object.hasOwn;
const API_OPS = ['max', 'min', 'in', 'not_in'];

/** Interprets limits as the management API stores them (checked afresh on every call: a lowered limit applies at once). */
function checkApiLimits(limits: JsonLimits, ctx: Ctx, trace: TraceStep[], source: string): string | null {
  for (const field in limits) {
    if (!hasOwn(limits, field)) continue;
    const spec = limits[field];
    // Limits over time are the usage step's.
    if (isCountEntry(field, spec)) continue;
    if (typeof spec === 'object' && spec !== null && hasOwn(spec, 'sum') && Object.keys(spec).length === 1) continue;
    const present = hasOwn(ctx, field);
    const v = present ? ctx[field] : undefined;
    let violated: LimitOp | string | null = null;
    let check: string;
    if (typeof spec === 'object' && spec !== null && !Array.isArray(spec)) {
      const s = spec as Record<string, unknown>;
      check = field;
      const requiredOps = hasOwn(s, 'max') || hasOwn(s, 'min') || hasOwn(s, 'in');
      if (!present) violated = requiredOps ? 'required' : null;
      // The same order as file limits: max, min, in, not_in; an unknown operator fails closed.
      for (const op of API_OPS) {
        if (!hasOwn(s, op)) continue;
        const lim = s[op];
        check += ` ${op} ${JSON.stringify(lim)}`;
        if (!present || violated) continue;
        switch (op) {
          case 'max': if (!(typeof v === 'number' && typeof lim === 'number' && v <= lim)) violated = 'max'; break;
          case 'min': if (!(typeof v === 'number' && typeof lim === 'number' && v >= lim)) violated = 'min'; break;
          case 'in': if (!(Array.isArray(lim) && lim.includes(v))) violated = 'in'; break;
          case 'not_in': if (!Array.isArray(lim) || lim.includes(v)) violated = 'not_in'; break;
        }
      }
      for (const op in s) {
        if (!hasOwn(s, op) || API_OPS.includes(op) || op === 'sum') continue;
        check += ` ${op} ${JSON.stringify(s[op])}`;
        violated ??= op;
      }
    } else {
      check = `${field} = ${JSON.stringify(spec)}`;
      violated = !present ? 'required' : v !== spec ? 'eq' : null;
    }
    trace.push({ step: 'limits', check, outcome: violated ? 'fail' : 'pass', source });
    if (violated) return `constraint_violated: ${field} ${violated}`;
  }
  return null;
}

export interface DecideOptions {
  /** For `diff`: treat the grants step as passed (grants come from roles, not from policy). */
  assumeGranted?: boolean;
}

export function decide(request: DecisionRequest, policySet: PolicySet): Decision {
  return decideWith(request, policySet, undefined);
}

export function decideWith(request: DecisionRequest, policySet: PolicySet, opts: DecideOptions | undefined): Decision {
  const version = policySet && typeof policySet.version === 'string' ? policySet.version : 'unknown';
  const trace: TraceStep[] = [];
  try {
    return run(request, policySet.compiled, version, trace, opts);
  } catch (e) {
    return {
      decision: 'deny',
      reason: `error: ${e instanceof Error ? e.message : String(e)}`,
      policyVersion: version,
      trace,
    };
  }
}

function deny(reason: string, version: string, trace: TraceStep[], step: TraceStep['step'], rule?: string): Decision {
  skipAfter(trace, step);
  const d: Decision = { decision: 'deny', reason, policyVersion: version, trace };
  if (rule !== undefined) d.rule = rule;
  return d;
}

function run(req: DecisionRequest, p: CompiledPolicy, version: string, trace: TraceStep[], opts: DecideOptions | undefined): Decision {
  const { agent, action, resource } = req;
  if (typeof action !== 'string' || typeof resource !== 'string' || typeof agent?.id !== 'string') {
    throw new Error('request needs agent.id, action and resource strings');
  }
  const rawCtx = req.context;
  const ctx: Ctx = typeof rawCtx === 'object' && rawCtx !== null && !Array.isArray(rawCtx) ? rawCtx : EMPTY;
  const caps = agent.capabilities;

  // 2. limits: the capability's API limits, then every file block for this agent.
  let capability: DecisionRequest['agent']['capabilities'][number] | undefined;
  for (let i = 0; i < caps.length; i++) if (caps[i]!.name === action) { capability = caps[i]; break; }
  let limitChecks = 0;
  if (capability && capability.limits) {
    const before = trace.length;
    const r = checkApiLimits(capability.limits, ctx, trace, `api:capability/${action}`);
    limitChecks += trace.length - before;
    if (r) return deny(r, version, trace, 'limits');
  }
  const blocks = p.limits.get(action);
  if (blocks) {
    for (const b of blocks) {
      if (!b.agent(agent.id)) continue;
      for (const f of b.fields) {
        limitChecks++;
        const v = f.test(ctx);
        trace.push({ step: 'limits', check: f.check, outcome: v ? 'fail' : 'pass', source: f.source });
        if (v) return deny(`constraint_violated: ${f.field} ${v}`, version, trace, 'limits');
      }
    }
  }
  // Limits over time, after the plain ones, against the usage the request states.
  const overTime = usageLimitsOf(capability, action, blocks, agent.id);
  let usage: Decision['usage'];
  if (overTime.length) {
    limitChecks += overTime.length;
    const r = checkUsageLimits(overTime, ctx, req.usage, trace);
    usage = r.checks;
    if (r.violated) {
      const { field, operator } = usageViolationField(r.violated);
      const d = deny(`constraint_violated: ${field === null ? operator : `${field} ${operator}`}`, version, trace, 'limits');
      d.usage = usage;
      return d;
    }
  }
  if (limitChecks === 0) trace.push({ step: 'limits', check: `no limits on ${action}`, outcome: 'pass' });
  const decided = after(req, p, version, trace, opts, ctx, capability);
  if (usage) decided.usage = usage;
  return decided;
}

/**
 * The limits over time a request is judged by, in the order decide() checks them: what the
 * server must read (and, on an allow, consume) around the decision.
 */
export function usageLimitsFor(request: DecisionRequest, policySet: PolicySet): UsageLimit[] {
  const { agent, action } = request;
  const capability = agent.capabilities.find((c) => c.name === action);
  return usageLimitsOf(capability, action, policySet.compiled.limits.get(action), agent.id);
}

/** The limits over time of a request: its capability's (management API), then every file block's for the agent. */
function usageLimitsOf(
  capability: DecisionRequest['agent']['capabilities'][number] | undefined,
  action: string,
  blocks: CompiledPolicy['limits'] extends Map<string, infer B> ? B | undefined : never,
  agentId: string,
): UsageLimit[] {
  const out: UsageLimit[] = capability && capability.limits ? [...apiUsageLimits(capability.limits, action)] : [];
  if (blocks) for (const b of blocks) if (b.usage && b.usage.length && b.agent(agentId)) out.push(...b.usage);
  return out;
}

/** Steps 3 to 6. */
function after(
  req: DecisionRequest,
  p: CompiledPolicy,
  version: string,
  trace: TraceStep[],
  opts: DecideOptions | undefined,
  ctx: Ctx,
  capability: DecisionRequest['agent']['capabilities'][number] | undefined,
): Decision {
  const { agent, action, resource } = req;

  // 3. deny rules
  const ri = resource.indexOf(':');
  const kind = ri < 0 ? '' : resource.slice(0, ri);
  const bucket = candidates(p, action, kind);
  const agentSubject = 'agent:' + agent.id;
  const person = req.person && typeof req.person === 'object' ? req.person : null;
  const userSubject = person ? 'user:' + person.id : null;
  let ruleChecks = 0;
  for (const r of bucket.deny) {
    if (!r.subjects(agentSubject, userSubject) || !r.object(resource)) continue;
    ruleChecks++;
    const applies = r.applies === null || r.applies(ctx);
    trace.push({ step: 'deny_rules', check: r.check, outcome: applies ? 'fail' : 'pass', source: r.source });
    if (applies) return deny(`rule_denied: ${r.name}`, version, trace, 'deny_rules', r.name);
  }
  if (ruleChecks === 0) trace.push({ step: 'deny_rules', check: 'no deny rule matches', outcome: 'pass' });

  // 4. grants: the capability, the agent's permissions, and for a delegated agent the person's.
  if (opts?.assumeGranted) {
    trace.push({ step: 'grants', check: 'assumed granted', outcome: 'skip' });
  } else {
    const capOk = capability !== undefined;
    trace.push({ step: 'grants', check: `agent holds capability ${action}`, outcome: capOk ? 'pass' : 'fail' });
    if (!capOk) return deny(`not_granted: ${action} (capability)`, version, trace, 'grants');
    const perms = agent.permissions;
    let agentOk = false;
    for (let i = 0; i < perms.length; i++) if (permissionCovers(perms[i]!, action, resource, p.singulars)) { agentOk = true; break; }
    trace.push({ step: 'grants', check: `agent permission covers ${action} on ${resource}`, outcome: agentOk ? 'pass' : 'fail' });
    if (!agentOk) return deny(`not_granted: ${action}`, version, trace, 'grants');
    if (agent.mode === 'delegated' && person) {
      const pp = person.permissions;
      let personOk = false;
      for (let i = 0; i < pp.length; i++) if (permissionCovers(pp[i]!, action, resource, p.singulars)) { personOk = true; break; }
      trace.push({ step: 'grants', check: `person ${person.id} permission covers ${action} on ${resource}`, outcome: personOk ? 'pass' : 'fail' });
      if (!personOk) return deny(`not_granted: ${action} (person)`, version, trace, 'grants');
    }
  }

  // 5. approval rules
  let approvedBy: string | undefined;
  let approvalChecks = 0;
  for (const r of bucket.approval) {
    if (!r.subjects(agentSubject, userSubject) || !r.object(resource)) continue;
    approvalChecks++;
    const applies = r.applies === null || r.applies(ctx);
    if (applies && req.approved === true) {
      trace.push({ step: 'approval_rules', check: r.check + ' (approved)', outcome: 'skip', source: r.source });
      approvedBy ??= r.name;
      continue;
    }
    trace.push({ step: 'approval_rules', check: r.check, outcome: applies ? 'fail' : 'pass', source: r.source });
    if (applies) {
      trace.push({ step: 'allow', check: 'not reached', outcome: 'skip' });
      return { decision: 'approval_required', reason: `approval_required: ${r.name}`, policyVersion: version, rule: r.name, trace };
    }
  }
  if (approvalChecks === 0) trace.push({ step: 'approval_rules', check: 'no approval rule matches', outcome: 'pass' });

  // 6. allow
  trace.push({ step: 'allow', check: 'every check passed', outcome: 'pass' });
  if (approvedBy !== undefined) return { decision: 'allow', reason: `allowed: approved ${approvedBy}`, policyVersion: version, rule: approvedBy, trace };
  return { decision: 'allow', reason: 'allowed', policyVersion: version, trace };
}
