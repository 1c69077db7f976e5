// The Access Evaluation and Access Evaluations endpoints without their transport: a body and a
// caller in, the response body out (or a thrown 400).

import type { AppContext } from '../context.js';
import type { Caller } from './caller.js';
import { decideAndRecord, type Answer, type Question } from './decide.js';
import { FactsMemo } from './facts.js';
import { objectOf, relationOf } from './names.js';
import { readEvaluationRequest, readEvaluationsRequest, type Evaluation, type Semantic } from './request.js';

/** An AuthZEN decision: `true` or `false`, with why (and the approval to wait for) in `context`. */
export interface WireDecision {
  decision: boolean;
  context?: Record<string, unknown>;
}

/**
 * An evaluation in Gatehouse's terms. The action's `properties` join the context (the
 * request's `context` wins a name clash): policies read both as context fields.
 */
export function toQuestion(singulars: Record<string, string>, e: Evaluation): Question {
  const actionProps = e.action.properties;
  return {
    subject: e.subject,
    relation: relationOf(e.action.name, e.resource.type, singulars),
    object: objectOf(e.resource.type, e.resource.id),
    resourceProperties: e.resource.properties,
    context: actionProps ? { ...actionProps, ...e.context } : e.context,
  };
}

/**
 * The answer on the wire. A decision that could not be made is still a 200 deny (fail closed,
 * and one item's failure does not fail its batch), with the specification's per-evaluation
 * error object beside the reason.
 */
export function toWire(a: Answer): WireDecision {
  if (a.decision === 'allow') return { decision: true };
  const context: Record<string, unknown> = { reason: a.reason };
  if (a.approvalId) context.approval_id = a.approvalId;
  if (a.failed) context.error = { status: 500, message: a.reason };
  return { decision: false, context };
}

/** The kind declarations of the policy in force (none while no policy is available: every answer is then a deny). */
async function singularsOf(ctx: AppContext): Promise<Record<string, string>> {
  return (await ctx.policy.state()).set?.compiled.singulars ?? {};
}

async function evaluateOne(ctx: AppContext, caller: Caller, memo: FactsMemo, singulars: Record<string, string>, e: Evaluation): Promise<WireDecision> {
  return toWire(await decideAndRecord(ctx, caller, memo, toQuestion(singulars, e)));
}

/** POST /access/v1/evaluation */
export async function evaluationAnswer(ctx: AppContext, caller: Caller, body: unknown): Promise<WireDecision> {
  const evaluation = readEvaluationRequest(body);
  return evaluateOne(ctx, caller, new FactsMemo(ctx), await singularsOf(ctx), evaluation);
}

const itemError = (message: string): WireDecision => ({ decision: false, context: { error: { status: 400, message } } });

/**
 * POST /access/v1/evaluations. `execute_all` asks every question at once (their audit records
 * share one commit) and answers in request order. The short-circuit semantics ask in order and
 * stop after the first deny (`deny_on_first_deny`) or the first permit
 * (`permit_on_first_permit`); the questions after it are not asked, so the answer is shorter
 * than the request. An item that cannot be asked is a deny carrying the reason as an error.
 */
export async function evaluationsAnswer(
  ctx: AppContext,
  caller: Caller,
  body: unknown,
): Promise<WireDecision | { evaluations: WireDecision[] }> {
  const req = readEvaluationsRequest(body);
  const singulars = await singularsOf(ctx);
  const memo = new FactsMemo(ctx);
  if (req.kind === 'single') return evaluateOne(ctx, caller, memo, singulars, req.evaluation);
  const ask = (i: number): Promise<WireDecision> => {
    const item = req.items[i]!;
    return item.ok ? evaluateOne(ctx, caller, memo, singulars, item.evaluation) : Promise.resolve(itemError(item.error));
  };
  if (req.semantic === 'execute_all') return { evaluations: await Promise.all(req.items.map((_, i) => ask(i))) };
  const out: WireDecision[] = [];
  for (let i = 0; i < req.items.length; i++) {
    const d = await ask(i);
    out.push(d);
    if (stops(req.semantic, d.decision)) break;
  }
  return { evaluations: out };
}

const stops = (semantic: Semantic, decision: boolean): boolean =>
  semantic === 'deny_on_first_deny' ? !decision : semantic === 'permit_on_first_permit' ? decision : false;


