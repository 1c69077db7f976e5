import { randomUUID } from 'node:crypto';
import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import { toJsonRule } from '../policy-service.js';
import { formatDiagnostic, validateJsonRule } from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { Rule, RuleFields } from '../store/rules.js';
import type { Recorder } from './audit.js';
import { onDuplicate } from './conflict.js';
import { adminRoute, param, parseWith } from './route.js';
import { listOf, ruleCreate, rulePatch, ruleValidation, ruleView, type RuleCreate, type RulePatch } from './schemas.js';
import { iso } from '../clock.js';

/** The hash of what a rule says: enable needs the last successful validate to be of this content. */
export function ruleContentHash(r: RuleFields): string {
  return sha256(JSON.stringify([r.name, r.effect, r.subjects, r.relation, r.object, r.condition ?? null]));
}

export function ruleJson(r: Rule) {
  return {
    ...toJsonRule(r),
    state: r.state,
    validated: r.validated_hash === ruleContentHash(r),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

async function mustGet(store: Store, id: string): Promise<Rule> {
  const r = await store.rules.get(id);
  if (!r) throw errors.notFound(`no rule ${id}`);
  return r;
}

const fields = (r: RuleCreate): RuleFields => ({
  name: r.name,
  effect: r.effect,
  subjects: r.subjects,
  relation: r.relation,
  object: r.object,
  condition: r.condition ?? null,
});

export function createRule(ctx: AppContext, input: RuleCreate, id: string = randomUUID(), record?: Recorder<Rule>): Promise<Rule> {
  const f = fields(input);
  return onDuplicate(`a rule named ${f.name} exists`, () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.rules.getByName(f.name)) throw errors.conflict(`a rule named ${f.name} exists`);
      if (await tx.rules.get(id)) throw errors.conflict(`a rule with id ${id} exists`);
      const rule = await tx.rules.create(id, f);
      await record?.(tx, rule);
      return rule;
    }),
  );
}

/** Changes the content; a live rule whose content changed goes back to draft (it needs a new validate). */
export function updateRule(ctx: AppContext, id: string, patch: RulePatch, record?: Recorder<Rule>): Promise<Rule> {
  return onDuplicate(`a rule named ${patch.name ?? ''} exists`, () =>
    ctx.store.transaction(async (tx) => {
      const cur = await mustGet(tx, id);
      const next: RuleFields = {
        name: patch.name ?? cur.name,
        effect: patch.effect ?? cur.effect,
        subjects: patch.subjects ?? cur.subjects,
        relation: patch.relation ?? cur.relation,
        object: patch.object ?? cur.object,
        condition: patch.condition !== undefined ? patch.condition : cur.condition,
      };
      if (ruleContentHash(next) === ruleContentHash(cur)) {
        await record?.(tx, cur);
        return cur;
      }
      const other = await tx.rules.getByName(next.name);
      if (other && other.id !== id) throw errors.conflict(`a rule named ${next.name} exists`);
      await tx.rules.update(id, next);
      if (cur.state === 'live') {
        await tx.rules.setState(id, 'draft');
        await ctx.policy.invalidate(tx);
      }
      const saved = (await tx.rules.get(id))!;
      await record?.(tx, saved);
      return saved;
    }),
  );
}

/**
 * The rule on its own (patterns, field names, operators), then the policy as it would be
 * with this rule live beside the files and the other live rules.
 */
export async function validateRule(ctx: AppContext, rule: Rule, store: Store = ctx.store): Promise<string[]> {
  const own = validateJsonRule(toJsonRule(rule));
  if (own.length) return own.map(formatDiagnostic);
  const others = (await store.rules.live()).filter((r) => r.id !== rule.id);
  return (await ctx.policy.check([...others, rule].map(toJsonRule), store)).map(formatDiagnostic);
}

/** Validates and, when valid, remembers the validated content (in `store`'s transaction when it is one). */
export function validateAndRecord(ctx: AppContext, id: string, store: Store = ctx.store): Promise<{ valid: boolean; errors: string[] }> {
  return store.transaction(async (tx) => {
    const rule = await mustGet(tx, id);
    const problems = await validateRule(ctx, rule, tx);
    await tx.rules.setValidatedHash(id, problems.length ? null : ruleContentHash(rule));
    return { valid: problems.length === 0, errors: problems };
  });
}

/** draft | disabled → live, only when the current content passed validate (checked again against today's policy). */
export async function enableRule(ctx: AppContext, id: string, record?: Recorder<Rule>): Promise<Rule> {
  let stale: string[] | undefined;
  const enabled = await ctx.store.transaction(async (tx) => {
    const rule = await mustGet(tx, id);
    if (rule.state === 'live') {
      await record?.(tx, rule);
      return rule;
    }
    if (rule.validated_hash !== ruleContentHash(rule)) {
      throw errors.conflict('the rule must pass POST /rules/{id}/validate (of its current content) before it is enabled', { state: rule.state });
    }
    const problems = await validateRule(ctx, rule, tx);
    if (problems.length) {
      // Remembered (committed) before the 409 is thrown.
      await tx.rules.setValidatedHash(id, null);
      stale = problems;
      return rule;
    }
    await tx.rules.setState(id, 'live');
    await ctx.policy.invalidate(tx);
    const live = (await tx.rules.get(id))!;
    await record?.(tx, live);
    return live;
  });
  if (stale) throw errors.conflict('the rule no longer validates against the policy in force', { state: enabled.state, errors: stale });
  return enabled;
}

export function disableRule(ctx: AppContext, id: string, record?: Recorder<Rule>): Promise<Rule> {
  return ctx.store.transaction(async (tx) => {
    const rule = await mustGet(tx, id);
    if (rule.state !== 'disabled') {
      await tx.rules.setState(id, 'disabled');
      if (rule.state === 'live') await ctx.policy.invalidate(tx);
    }
    const disabled = (await tx.rules.get(id))!;
    await record?.(tx, disabled);
    return disabled;
  });
}

/** Deletes the rule; the recorder is given the rule as it was. */
export async function deleteRule(ctx: AppContext, id: string, record?: Recorder<Rule>): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const rule = await mustGet(tx, id);
    await tx.rules.delete(id);
    if (rule.state === 'live') await ctx.policy.invalidate(tx);
    await record?.(tx, rule);
  });
}

export function ruleRoutes(router: Router, ctx: AppContext): void {
  const tags = ['rules'];

  adminRoute(
    router,
    {
      method: 'post', path: '/rules', tags, summary: 'Create a rule (as a draft)',
      request: ruleCreate,
      responses: { 201: { description: 'the rule, state draft', schema: ruleView }, 409: 'the name is taken' },
    },
    async (req, res) => void res.status(201).json(ruleJson(await createRule(ctx, parseWith(ruleCreate, req.body)))),
  );

  adminRoute(
    router,
    { method: 'get', path: '/rules', tags, summary: 'List the rules', responses: { 200: { description: 'the rules', schema: listOf(ruleView) } } },
    async (_req, res) => void res.json({ data: (await ctx.store.rules.list()).map(ruleJson) }),
  );

  adminRoute(
    router,
    { method: 'get', path: '/rules/{id}', tags, summary: 'Read a rule', responses: { 200: { description: 'the rule', schema: ruleView } } },
    async (req, res) => void res.json(ruleJson(await mustGet(ctx.store, param(req, 'id')))),
  );

  adminRoute(
    router,
    {
      method: 'patch', path: '/rules/{id}', tags, summary: 'Change a rule; a live rule whose content changes goes back to draft',
      request: rulePatch,
      responses: { 200: { description: 'the rule', schema: ruleView }, 409: 'the name is taken' },
    },
    async (req, res) => {
      const patch = parseWith(rulePatch, req.body);
      res.json(ruleJson(await updateRule(ctx, param(req, 'id'), patch)));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/rules/{id}', tags, summary: 'Delete a rule', responses: { 204: 'deleted' } },
    async (req, res) => {
      await deleteRule(ctx, param(req, 'id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/rules/{id}/validate', tags, summary: 'Validate a rule against the policy in force',
      responses: { 200: { description: '`valid`, and the errors as `source:line:col: message`', schema: ruleValidation } },
    },
    async (req, res) => void res.json(await validateAndRecord(ctx, param(req, 'id'))),
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/rules/{id}/enable', tags, summary: 'Make a validated rule live',
      responses: { 200: { description: 'the rule, state live', schema: ruleView }, 409: 'not validated (or no longer valid)' },
    },
    async (req, res) => void res.json(ruleJson(await enableRule(ctx, param(req, 'id')))),
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/rules/{id}/disable', tags, summary: 'Take a rule out of force',
      responses: { 200: { description: 'the rule, state disabled', schema: ruleView } },
    },
    async (req, res) => void res.json(ruleJson(await disableRule(ctx, param(req, 'id')))),
  );
}
