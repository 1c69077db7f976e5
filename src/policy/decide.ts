// The decision order, each step with its reason code:
//   2. limits      → deny  constraint_violated: <field> <operator>      (agents: their capability's and the files',
//                    plain ones first, then limits over time against the usage the request states)
//   3. deny rules  → deny  rule_denied: <rule>
//                    (a condition may ask relationship questions of the request's relationships:
//                    `person has viewer on resource`, `resource in "folder:x" through parent`;
//                    one that cannot be answered fails closed as any condition that cannot be
//                    evaluated: a deny or approval rule applies, a permit rule grants nothing)
//   4. grants      → deny  not_granted: <action> [(capability)|(person)]
//                    an agent needs the capability; the subject (and, for a delegated agent, its
//                    person) each need a role permission, a permit rule (an entity subject of
//                    another type is matched by its roles and groups only), or a relation that covers
//                    the action (relation r of type t is the permission r:<plural of t> on t:<id>,
//                    held by <subject type>:<id> through the request's relationships; a
//                    relation that cannot be resolved grants nothing)
//   5. approval    → approval_required: <rule>   (allow when already approved)
//   6. allow       → allowed
// Step 1 (unknown or revoked agent) belongs to the endpoint. Pure; never throws; never reads a clock.

import type { Decision, DecisionCause, DecisionRequest, JsonLimits, PersonFacts, SubjectFacts, TraceStep } from './types.js';
import type { Bucket, CompiledPolicy, CompiledRule, Cond, Ctx, LimitOp, PolicySet, Tri } from './compile.js';
import { candidates, compileCondition, compileRelQuestion, readsOf } from './compile.js';
import { fitsType, schemaTypeOf } from './declared.js';
import { atomsOf, pathText, relQuestionsOf, type Atom, type RelQuestion } from './ast.js';
import type { QuestionAnswer } from './relations/questions.js';
import { fmtExpr } from './format.js';
import { permissionCovers, singularOf } from './patterns.js';
import { relationChecker } from './relations/checker.js';
import { relationshipText } from './relations/tuple.js';
import { renderReason } from './reason.js';
import { compileReader, envOf, MISSING, type Env } from './values.js';
import { apiUsageLimits, checkUsageLimits, isCountEntry, usageViolationField, type UsageLimit } from './usage.js';

const STEPS: TraceStep['step'][] = ['limits', 'deny_rules', 'grants', 'approval_rules', 'allow'];

function skipAfter(trace: TraceStep[], step: TraceStep['step']): void {
  for (let i = STEPS.indexOf(step) + 1; i < STEPS.length; i++) trace.push({ step: STEPS[i]!, check: 'not reached', outcome: 'skip' });
}

const hasOwn = Object.hasOwn;
const API_OPS = ['max', 'min', 'in', 'not_in'];

/** Interprets limits as the management API stores them (checked afresh on every call: a lowered limit applies at once). */
function checkApiLimits(limits: JsonLimits, ctx: Ctx, trace: TraceStep[], source: string): { field: string; op: string } | null {
  for (const field in limits) {
    if (!hasOwn(limits, field)) continue;
    const spec = limits[field];
    // Limits over time are the usage step's.
    if (isCountEntry(field, spec)) continue;
    if (typeof spec === 'object' && spec !== null && hasOwn(spec, 'sum') && Object.keys(spec).length === 1) continue;
    const present = hasOwn(ctx, field) && ctx[field] !== undefined;
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
    const t: TraceStep = { step: 'limits', check, outcome: violated ? 'fail' : 'pass', source };
    if (violated) {
      t.reads = [{ path: 'context.' + field, value: v, present }];
      trace.push(t);
      return { field, op: violated };
    }
    trace.push(t);
  }
  return null;
}

export interface DecideOptions {
  /**
   * For explain: every rule of the action and object is traced, also those whose subjects do
   * not match, each with the values it read and why it applied or not.
   */
  explain?: boolean;
}

export function decide(request: DecisionRequest, policySet: PolicySet): Decision {
  return decideWith(request, policySet, undefined);
}

export function decideWith(request: DecisionRequest, policySet: PolicySet, opts: DecideOptions | undefined): Decision {
  const version = policySet && typeof policySet.version === 'string' ? policySet.version : 'unknown';
  const trace: TraceStep[] = [];
  try {
    return run(request, policySet.compiled, version, trace, opts?.explain === true);
  } catch (e) {
    return answer('deny', { code: 'error', message: e instanceof Error ? e.message : String(e) }, version, trace);
  }
}

function answer(decision: Decision['decision'], cause: DecisionCause, version: string, trace: TraceStep[], rule?: string): Decision {
  const d: Decision = { decision, reason: renderReason(cause), cause, policyVersion: version, trace };
  if (rule !== undefined) d.rule = rule;
  return d;
}

function deny(cause: DecisionCause, version: string, trace: TraceStep[], step: TraceStep['step'], rule?: string): Decision {
  skipAfter(trace, step);
  return answer('deny', cause, version, trace, rule);
}

const isArray = Array.isArray;
const NO_PERMISSIONS: string[] = [];

function checkShape(req: DecisionRequest): SubjectFacts {
  const s = req?.subject;
  if (typeof req?.action !== 'string' || typeof req.resource !== 'string' || typeof s !== 'object' || s === null || typeof s.id !== 'string'
    || typeof s.type !== 'string' || s.type === '') {
    throw new Error('request needs subject {type, id}, action and resource strings');
  }
  return s;
}

// ---- explaining a rule ---------------------------------------------------------------------

const atomConds = new WeakMap<CompiledRule, { atom: Atom; cond: Cond }[]>();

function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (isArray(v)) return v.length ? `a list ${JSON.stringify(v).slice(0, 60)}` : 'an empty list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'number' && !Number.isFinite(v)) return 'not a finite number';
  return `a ${typeof v} (${JSON.stringify(v)})`;
}

/** Why a condition cannot be evaluated: the first comparison that reads a missing or mistyped value. */
export function failClosedWhy(r: CompiledRule, env: Env): string {
  if (!r.ast.when) return '';
  let list = atomConds.get(r);
  if (!list) atomConds.set(r, (list = atomsOf(r.ast.when).map((atom) => ({ atom, cond: compileCondition(atom, r.zone, r.declared) }))));
  for (const { atom, cond } of list) {
    if (cond(env) !== 2) continue;
    const parts: string[] = [];
    for (const o of [atom.left, atom.right]) {
      if (o.type !== 'path') continue;
      const v = compileReader(o, r.zone)(env);
      const declared = schemaTypeOf(o, r.declared);
      const mistyped = v !== MISSING && declared !== null && !fitsType(v, declared) ? ` (the schema declares ${declared})` : '';
      parts.push(v === MISSING ? `${pathText(o)} is missing` : `${pathText(o)} is ${describeValue(v)}${mistyped}`);
    }
    return `${fmtExpr(atom)}: ${parts.join(', ')}`;
  }
  for (const { q, answer } of questionsOf(r)) {
    const a = answer(env);
    if (a.value === 2) return `${fmtExpr(q)}: ${a.error}`;
  }
  return 'a value is missing or of the wrong type';
}

const ruleQuestions = new WeakMap<CompiledRule, { q: RelQuestion; answer: (env: Env) => QuestionAnswer }[]>();

/** The relationship questions of a rule's condition, compiled for explaining. */
function questionsOf(r: CompiledRule): { q: RelQuestion; answer: (env: Env) => QuestionAnswer }[] {
  let list = ruleQuestions.get(r);
  if (!list) ruleQuestions.set(r, (list = r.ast.when ? relQuestionsOf(r.ast.when).map((q) => ({ q, answer: compileRelQuestion(q, r.zone) })) : []));
  return list;
}

function ruleStep(step: TraceStep['step'], r: CompiledRule, outcome: TraceStep['outcome'], env: Env, t: Tri | null, detail: boolean, check = r.check): TraceStep {
  const s: TraceStep = { step, check, outcome, source: r.source, rule: r.name };
  if (!detail) return s;
  if (r.paths.length) s.reads = readsOf(r, env);
  // A relationship question is read as its answer (none when it cannot be answered), with the relationships that made it true.
  for (const { q, answer } of questionsOf(r)) {
    const a = answer(env);
    (s.reads ??= []).push(a.value === 2 ? { path: fmtExpr(q), value: undefined, present: false } : { path: fmtExpr(q), value: a.value === 1, present: true });
    if (a.value === 1 && a.path.length) (s.path ??= []).push(...a.path);
  }
  const permit = r.effect === 'permit';
  s.why = t === null ? (permit ? 'no condition: grants' : 'no condition: applies')
    : t === 1 ? (permit ? 'condition holds: grants' : 'condition holds: applies')
      : t === 0 ? (permit ? 'condition does not hold: grants nothing' : 'condition does not hold')
        : (permit ? 'cannot be evaluated, grants nothing: ' : 'fails closed, applies: ') + failClosedWhy(r, env);
  return s;
}

function unmatched(step: TraceStep['step'], r: CompiledRule, trace: TraceStep[]): void {
  trace.push({ step, check: r.check, outcome: 'skip', source: r.source, rule: r.name, why: 'subjects do not match' });
}

// ---- the decision ----------------------------------------------------------------------------

/** Is this principal granted by a permit rule? Traces the rules it tried. */
function permitted(
  bucket: Bucket, resource: string, env: Env, trace: TraceStep[], explain: boolean,
  matches: (r: CompiledRule) => boolean, who: string,
): boolean {
  for (const r of bucket.permit) {
    if (!r.object(resource)) continue;
    if (!matches(r)) { if (explain) unmatched('grants', r, trace); continue; }
    const t = r.cond === null ? 1 : r.cond(env);
    const granted = t === 1;
    trace.push(ruleStep('grants', r, granted ? 'pass' : 'fail', env, r.cond === null ? null : t, explain || granted, explain ? `${r.check} (for ${who})` : r.check));
    if (granted) return true;
  }
  return false;
}

/**
 * Does `entity` (`user:<id>` or `agent:<id>`) hold the relation the action names on the
 * resource? Traced with the path that granted it, or why not.
 */
function relationGrants(req: DecisionRequest, p: CompiledPolicy, entity: string, trace: TraceStep[], explain: boolean): boolean {
  const model = p.relations;
  if (!model || !model.types.size) return false;
  const { action, resource } = req;
  const ci = action.indexOf(':'), ri = resource.indexOf(':');
  if (ci <= 0 || ri <= 0) return false;
  const relation = action.slice(0, ci), kinds = action.slice(ci + 1), type = resource.slice(0, ri);
  const singular = hasOwn(p.singulars, kinds) ? p.singulars[kinds]! : singularOf(kinds);
  if (singular !== type || !model.types.get(type)?.relations.has(relation)) return false;
  const check = `${entity} holds relation ${relation} on ${resource}`;
  const index = req.relationships;
  if (!index) {
    if (explain) trace.push({ step: 'grants', check, outcome: 'fail', why: 'no relationships were given to the decision' });
    return false;
  }
  const r = relationChecker(model, index).check(resource, relation, entity, { context: req.context, path: true });
  if ('error' in r) {
    trace.push({ step: 'grants', check, outcome: 'fail', why: `fails closed, grants nothing: ${r.error.message}` });
    return false;
  }
  if (r.allowed) {
    trace.push({ step: 'grants', check, outcome: 'pass', why: 'granted through relationships', path: r.path.map(relationshipText) });
    return true;
  }
  const why = explain ? relationChecker(model, index).whyNot(resource, relation, entity, { context: req.context }) : `no relationship grants ${entity} ${relation} on ${resource}`;
  trace.push({ step: 'grants', check, outcome: 'fail', why });
  return false;
}

function covers(perms: unknown, action: string, resource: string, singulars: Record<string, string>): boolean {
  const list = isArray(perms) ? (perms as unknown[]) : NO_PERMISSIONS;
  for (let i = 0; i < list.length; i++) {
    const p = list[i];
    if (typeof p === 'string' && permissionCovers(p, action, resource, singulars)) return true;
  }
  return false;
}

function run(req: DecisionRequest, p: CompiledPolicy, version: string, trace: TraceStep[], explain: boolean): Decision {
  const subject = checkShape(req);
  const { action, resource } = req;
  const env = envOf(req);
  env.model = p.relations;
  if (p.referenceTypes.size) env.referenceTypes = p.referenceTypes;
  const ctx = env.ctx;
  const isAgent = subject.type === 'agent';

  // 2. limits: the capability's API limits, then every file block for this agent. People have neither.
  let capability: { name: string; limits?: JsonLimits | null } | undefined;
  let usage: Decision['usage'];
  if (isAgent) {
    const caps = isArray(subject.capabilities) ? subject.capabilities : [];
    for (let i = 0; i < caps.length; i++) if (caps[i]?.name === action) { capability = caps[i]; break; }
    let limitChecks = 0;
    if (capability && capability.limits) {
      const before = trace.length;
      const v = checkApiLimits(capability.limits, ctx, trace, `api:capability/${action}`);
      limitChecks += trace.length - before;
      if (v) return deny({ code: 'constraint_violated', field: v.field, operator: v.op }, version, trace, 'limits');
    }
    const blocks = p.limits.get(action);
    if (blocks) {
      for (const b of blocks) {
        if (!b.agent(subject.id)) continue;
        for (const f of b.fields) {
          limitChecks++;
          const v = f.test(ctx);
          const t: TraceStep = { step: 'limits', check: f.check, outcome: v ? 'fail' : 'pass', source: f.source };
          if (v || explain) t.reads = [{ path: 'context.' + f.field, value: ctx[f.field], present: hasOwn(ctx, f.field) && ctx[f.field] !== undefined }];
          trace.push(t);
          if (v) return deny({ code: 'constraint_violated', field: f.field, operator: v }, version, trace, 'limits');
        }
      }
    }
    // Limits over time, after the plain ones, against the usage the request states.
    const overTime = usageLimitsOf(capability, action, blocks, subject.id);
    if (overTime.length) {
      limitChecks += overTime.length;
      const r = checkUsageLimits(overTime, ctx, req.usage, trace);
      usage = r.checks;
      if (r.violated) {
        const { field, operator } = usageViolationField(r.violated);
        const d = deny({ code: 'constraint_violated', field, operator }, version, trace, 'limits');
        d.usage = usage;
        return d;
      }
    }
    if (limitChecks === 0) trace.push({ step: 'limits', check: `no limits on ${action}`, outcome: 'pass' });
  } else {
    trace.push({ step: 'limits', check: 'a person acting directly has no capability limits', outcome: 'pass' });
  }
  const decided = rulesAndGrants(req, p, version, trace, explain, env, subject, isAgent, capability);
  if (usage) decided.usage = usage;
  return decided;
}

/**
 * The limits over time a request is judged by, in the order decide() checks them: what the
 * server must read (and, on an allow, consume) around the decision. People have none.
 */
export function usageLimitsFor(request: DecisionRequest, policySet: PolicySet): UsageLimit[] {
  const { subject, action } = request;
  if (subject.type !== 'agent') return [];
  const capability = (subject.capabilities ?? []).find((c) => c.name === action);
  return usageLimitsOf(capability, action, policySet.compiled.limits.get(action), subject.id);
}

/** The limits over time of a request: its capability's (management API), then every file block's for the agent. */
function usageLimitsOf(
  capability: { name: string; limits?: JsonLimits | null } | undefined,
  action: string,
  blocks: CompiledPolicy['limits'] extends Map<string, infer B> ? B | undefined : never,
  agentId: string,
): UsageLimit[] {
  const out: UsageLimit[] = capability && capability.limits ? [...apiUsageLimits(capability.limits, action)] : [];
  if (blocks) for (const b of blocks) if (b.usage && b.usage.length && b.agent(agentId)) out.push(...b.usage);
  return out;
}

/** Steps 3 to 6: deny rules, grants, approval rules, allow. */
function rulesAndGrants(
  req: DecisionRequest, p: CompiledPolicy, version: string, trace: TraceStep[], explain: boolean,
  env: Env, subject: SubjectFacts, isAgent: boolean, capability: { name: string; limits?: JsonLimits | null } | undefined,
): Decision {
  const { action, resource } = req;

  // 3. deny rules
  const ri = resource.indexOf(':');
  const kind = ri < 0 ? '' : resource.slice(0, ri);
  const bucket = candidates(p, action, kind);
  let ruleChecks = 0;
  for (const r of bucket.deny) {
    if (!r.object(resource)) continue;
    if (!r.matchesAny(env)) { if (explain) unmatched('deny_rules', r, trace); continue; }
    ruleChecks++;
    const t = r.cond === null ? 1 : r.cond(env);
    const applies = t !== 0;
    trace.push(ruleStep('deny_rules', r, applies ? 'fail' : 'pass', env, r.cond === null ? null : t, explain || applies));
    if (applies) {
      const cause: DecisionCause = { code: 'rule_denied', rule: r.name };
      if (r.apiId !== undefined) cause.ruleId = r.apiId;
      return deny(cause, version, trace, 'deny_rules', r.name);
    }
  }
  if (ruleChecks === 0) trace.push({ step: 'deny_rules', check: 'no deny rule matches', outcome: 'pass' });

  // 4. grants: the capability; the subject's roles or a permit rule; for a delegated agent, the person's too.
  if (isAgent) {
    const capOk = capability !== undefined;
    trace.push({ step: 'grants', check: `agent holds capability ${action}`, outcome: capOk ? 'pass' : 'fail' });
    if (!capOk) return deny({ code: 'not_granted', action, missing: 'capability' }, version, trace, 'grants');
  }
  const isEntity = !isAgent && subject.type !== 'user';
  const who = isAgent ? 'agent' : `${subject.type} ${subject.id}`;
  let subjectOk = covers(subject.permissions, action, resource, p.singulars);
  trace.push({ step: 'grants', check: `${who} permission covers ${action} on ${resource}`, outcome: subjectOk ? 'pass' : 'fail' });
  // A permit rule grants only what a permission could: the object must be of the action's kind.
  const coherent = bucket.permit.length > 0 && bucket.coherent;
  if (!subjectOk && coherent) {
    subjectOk = isAgent
      ? permitted(bucket, resource, env, trace, explain, (r) => r.matchesAgent(subject), who)
      : isEntity
        ? permitted(bucket, resource, env, trace, explain, (r) => r.matchesEntity(subject), who)
        : permitted(bucket, resource, env, trace, explain, (r) => r.matchesPerson(subject), who);
  }
  if (!subjectOk) subjectOk = relationGrants(req, p, `${subject.type}:${subject.id}`, trace, explain);
  if (!subjectOk) return deny({ code: 'not_granted', action, missing: 'subject' }, version, trace, 'grants');
  if (isAgent && subject.mode === 'delegated') {
    const person = env.person as PersonFacts | null;
    const pid = person && typeof person.id === 'string' ? person.id : '';
    let personOk = pid !== '' && covers(person!.permissions, action, resource, p.singulars);
    trace.push({ step: 'grants', check: pid ? `person ${pid} permission covers ${action} on ${resource}` : 'the agent acts for a person', outcome: personOk ? 'pass' : 'fail' });
    if (!personOk && pid !== '' && coherent) {
      personOk = permitted(bucket, resource, env, trace, explain, (r) => r.matchesPerson(person!), `person ${pid}`);
    }
    if (!personOk && pid !== '') personOk = relationGrants(req, p, `user:${pid}`, trace, explain);
    if (!personOk) return deny({ code: 'not_granted', action, missing: 'person' }, version, trace, 'grants');
  }

  // 5. approval rules
  let approvedBy: string | undefined;
  let approvalChecks = 0;
  for (const r of bucket.approval) {
    if (!r.object(resource)) continue;
    if (!r.matchesAny(env)) { if (explain) unmatched('approval_rules', r, trace); continue; }
    approvalChecks++;
    const t = r.cond === null ? 1 : r.cond(env);
    const applies = t !== 0;
    const tv = r.cond === null ? null : t;
    if (applies && req.approved === true) {
      trace.push(ruleStep('approval_rules', r, 'skip', env, tv, true, r.check + ' (approved)'));
      approvedBy ??= r.name;
      continue;
    }
    trace.push(ruleStep('approval_rules', r, applies ? 'fail' : 'pass', env, tv, explain || applies));
    if (applies) {
      trace.push({ step: 'allow', check: 'not reached', outcome: 'skip' });
      const cause: DecisionCause = { code: 'approval_required', rule: r.name };
      if (r.apiId !== undefined) cause.ruleId = r.apiId;
      return answer('approval_required', cause, version, trace, r.name);
    }
  }
  if (approvalChecks === 0) trace.push({ step: 'approval_rules', check: 'no approval rule matches', outcome: 'pass' });

  // 6. allow
  trace.push({ step: 'allow', check: 'every check passed', outcome: 'pass' });
  if (approvedBy !== undefined) return answer('allow', { code: 'allowed', approvedBy }, version, trace, approvedBy);
  return answer('allow', { code: 'allowed' }, version, trace);
}

