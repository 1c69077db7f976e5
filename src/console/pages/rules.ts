import { randomUUID } from 'node:crypto';
import type { Request, Response, Router } from 'express';
import type { Recorder } from '../../admin/audit.js';
import { parseWith } from '../../admin/route.js';
import { createRule, deleteRule, disableRule, enableRule, ruleContentHash, ruleJson, updateRule, validateAndRecord, validateRule } from '../../admin/rules.js';
import { replayDraft } from '../../admin/policy.js';
import type { ReplayResult } from '../../authz/replay.js';
import type { JsonRule } from '../../policy/index.js';
import { CONDITION_OPS, ruleCreate, type RuleCreate } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { toJsonRule } from '../../policy-service.js';
import { formatRule } from '../../policy/format.js';
import { jsonRuleToAst } from '../../policy/json.js';
import type { Rule } from '../../store/rules.js';
import { audited, type Change } from '../audit.js';
import { emptyForm, FieldProblem, formValues, list, refusal, type FieldErrors, type FormState, type Values } from '../forms.js';
import {
  badge,
  button,
  code,
  dangerForm,
  errorList,
  escapeHtml as e,
  hidden,
  input,
  link,
  notice,
  postForm,
  pre,
  section,
  seg,
  select,
  table,
  when,
  type Html,
} from '../html.js';
import { asOneList, done, formPost, pathParam, personOf, render } from './common.js';
import { nowSeconds } from '../../clock.js';
import { seal, unseal, type Person } from '../session.js';

/** The console's names of the effects: require_approval is "Require step-up". */
const EFFECTS = [
  ['deny', 'Deny the action'],
  ['require_approval', 'Require step-up (a person approves)'],
  ['permit', 'Permit (grant the action)'],
] as const;
const OPS: readonly (readonly [string, string])[] = [
  ['', '(no condition)'],
  ...CONDITION_OPS.map((op) => [op, { gte: '≥ at least', gt: '> more than', lte: '≤ at most', lt: '< less than', eq: '= equals', ne: '≠ differs from' }[op]] as const),
];
const VALUE_TYPES = [
  ['auto', 'guess'],
  ['number', 'number'],
  ['string', 'text'],
  ['boolean', 'true or false'],
] as const;
const OP_TEXT: Record<string, string> = { gte: '>=', gt: '>', lte: '<=', lt: '<', eq: '==', ne: '!=' };

const effectLabel = (effect: string) => (effect === 'require_approval' ? 'Require step-up' : effect === 'permit' ? 'Permit' : 'Deny');
const EFFECT_KIND: Record<string, string> = { deny: 'bad', require_approval: 'warn', permit: 'ok' };
const effectBadge = (effect: string): Html => badge(effectLabel(effect), EFFECT_KIND[effect] ?? '');
const STATE_KIND: Record<string, string> = { draft: '', live: 'ok', disabled: 'muted' };

/** The form's fields as the management API's rule (JSON shape); a value that cannot be typed is named at its field. */
function ruleInput(v: Values): unknown {
  const field = (v.cond_field ?? '').trim();
  const op = v.cond_op ?? '';
  const raw = v.cond_value ?? '';
  let condition: unknown = null;
  const expr = (v.cond_expr ?? '').trim();
  if (expr) {
    if (field || op || raw.trim()) throw new FieldProblem('cond_expr', 'give either an expression or a field, an operator and a value');
    condition = { expr };
  } else if (field || op || raw.trim()) {
    if (!op) throw new FieldProblem('cond_op', 'choose an operator (or empty the condition)');
    condition = { field, op, value: typedValue(raw.trim(), v.cond_type ?? 'auto') };
  }
  return {
    name: (v.name ?? '').trim(),
    effect: v.effect,
    subjects: list(v.subjects),
    relation: (v.relation ?? '').trim(),
    object: (v.object ?? '').trim(),
    condition,
  };
}

function typedValue(raw: string, type: string): number | string | boolean {
  const asNumber = raw !== '' && Number.isFinite(Number(raw)) ? Number(raw) : undefined;
  if (type === 'number') {
    if (asNumber === undefined) throw new FieldProblem('cond_value', 'is not a number');
    return asNumber;
  }
  if (type === 'boolean') {
    if (raw !== 'true' && raw !== 'false') throw new FieldProblem('cond_value', 'must be true or false');
    return raw === 'true';
  }
  if (type === 'string') return raw;
  if (asNumber !== undefined && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(raw)) return asNumber;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  return raw;
}

function valuesOf(r: Pick<Rule, 'name' | 'effect' | 'subjects' | 'relation' | 'object' | 'condition'>): Values {
  const c = r.condition;
  return {
    name: r.name,
    effect: r.effect,
    subjects: r.subjects.join(', '),
    relation: r.relation,
    object: r.object,
    cond_expr: c && 'expr' in c ? c.expr : '',
    cond_field: c && 'field' in c ? c.field : '',
    cond_op: c && 'op' in c ? c.op : '',
    cond_value: c && 'value' in c ? String(c.value) : '',
    cond_type: c && 'value' in c ? typeof c.value : 'auto',
  };
}

/** Where a management API issue (`condition.value`, `subjects.0`) belongs on the form. */
function ruleField(path: string): string {
  if (path.startsWith('condition.')) return `cond_${path.slice('condition.'.length).split('.')[0]}`;
  if (path === 'condition') return 'condition';
  return path.split('.')[0]!;
}

/**
 * Validation messages (`source:line:col: message`) placed next to the field they are about.
 * The location of an API rule is its own, so it is dropped, except inside an expression, where
 * the column says where in the expression; messages about files keep theirs. Messages about the
 * condition go to the expression when the rule has one, else to the condition's fields.
 */
function placeValidation(messages: string[], id: string, v: Values): { errors: FieldErrors; general: string[] } {
  const errs: FieldErrors = {};
  const general: string[] = [];
  const own = new RegExp(`^api:rule/${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(\\d+):(\\d+): `);
  const hasExpr = (v.cond_expr ?? '').trim() !== '';
  for (const full of messages) {
    const at = (f: string, m: string) => (errs[f] ??= []).push(m);
    const loc = own.exec(full);
    const m = loc ? full.slice(loc[0].length) : full;
    if (loc && m.startsWith('condition.expr: ')) at('cond_expr', `at column ${loc[2]}: ${m.slice('condition.expr: '.length)}`);
    else if (/^subjects?\b/.test(m) || /: subjects\b/.test(m)) at('subjects', m);
    else if (/^relation\b/.test(m)) at('relation', m);
    else if (/^object\b/.test(m)) at('object', m);
    else if (/^(condition|field|cannot compare|operator|unknown operator)\b/.test(m)) at(hasExpr ? 'cond_expr' : 'condition', m);
    else if (/duplicate rule name|non-empty name/.test(m)) at('name', m);
    else if (/\beffect\b/.test(m)) at('effect', m);
    else general.push(m);
  }
  return { errors: errs, general };
}

/** The rule in the policy language, as a reviewer reads it. */
function asPolicyText(r: Rule): string | undefined {
  const { rule } = jsonRuleToAst(toJsonRule(r));
  return rule ? formatRule(rule) : undefined;
}

interface EditorState extends FormState {
  /** after Validate or Impact: the form's content fits the policy in force */
  valid?: boolean;
  /** after Impact: what the form's content would have done, and the sealed proof Save carries */
  impact?: { html: Html; carry?: string };
}

/**
 * The rule form, its buttons in the order of the flow: Validate, Impact (once the content
 * validated: on this page, or as the saved rule's content), Save. The button of the next step is
 * the primary one. After Impact the form carries the sealed proof of the content whose impact was
 * shown, so that Save of that same content lets Enable follow.
 */
function editor(res: Response, action: string, f: EditorState, o: { savedValid?: boolean } = {}): Html {
  const v = f.values;
  const err = (k: string) => f.errors[k];
  const shown = f.impact?.carry !== undefined;
  const canImpact = f.valid === true || (f.valid === undefined && o.savedValid === true);
  const result = shown
    ? notice(f.impact!.html
      ? 'Valid, and its impact on the last 7 days of recorded decisions is shown below. Save it to keep it: Enable follows on its page.'
      : 'Valid, and its impact on the last 7 days of recorded decisions was shown for this content. Save it to keep it: Enable follows on its page.', 'ok')
    : f.valid === true
      ? notice(f.impact ? 'Valid. Its impact could not be computed (below).' : 'Valid: the rule fits the policy files and the other live rules. Next, see its Impact on the last 7 days of recorded decisions.', 'ok')
      : f.valid === false && !f.general.length
        ? notice('Not valid yet: see the fields marked below.')
        : '';
  return postForm(
    action,
    personOf(res),
    `${result}${errorList(f.general)}
<div class="grid">
${input({ name: 'name', label: 'Name', value: v.name, required: true, errors: err('name') })}
${select({ name: 'effect', label: 'Effect', value: v.effect ?? 'deny', options: EFFECTS, errors: err('effect') })}
</div>
<fieldset><legend>Applies to</legend>
${input({ name: 'subjects', label: 'Subjects', hint: 'Comma-separated patterns: agent:* is every agent, user:* every person.', value: v.subjects ?? 'agent:*', required: true, errors: err('subjects') })}
<div class="grid">
${input({ name: 'relation', label: 'Relation (action)', hint: 'A permission key such as create:refunds.', value: v.relation, required: true, errors: err('relation') })}
${input({ name: 'object', label: 'Object', hint: 'A pattern such as refund:*', value: v.object, required: true, errors: err('object') })}
</div>
</fieldset>
<fieldset${err('condition') ? ' class="has-error"' : ''}><legend>When (optional)</legend>
${err('condition') ? `<p class="field-error" id="condition-error">${err('condition')!.map(e).join('<br>')}</p>` : ''}
<div class="grid four">
${input({ name: 'cond_field', label: 'Context field', value: v.cond_field, placeholder: 'amount', errors: err('cond_field') })}
${select({ name: 'cond_op', label: 'Operator', value: v.cond_op ?? '', options: OPS, errors: err('cond_op') })}
${input({ name: 'cond_value', label: 'Value', value: v.cond_value, placeholder: '10000', errors: err('cond_value') })}
${select({ name: 'cond_type', label: 'Value type', value: v.cond_type ?? 'auto', options: VALUE_TYPES })}
</div>
${input({ name: 'cond_expr', label: 'Or an expression', hint: 'In the policy file syntax, such as resource.owner == person.email', value: v.cond_expr, errors: err('cond_expr') })}
</fieldset>
${f.impact?.html ? `<div class="rule-form-impact">${f.impact.html}</div>` : ''}
${f.impact?.carry ? hidden(IMPACT_FIELD, f.impact.carry) : ''}
<div class="actions">
${button('Validate', { name: 'step', value: 'validate', kind: canImpact ? 'plain' : 'primary', id: 'rule-validate' })}
${button('Impact', { name: 'step', value: 'impact', kind: canImpact && !shown ? 'primary' : 'plain', id: 'rule-impact-form', disabled: !canImpact })}
${button('Save', { name: 'step', value: 'save', kind: shown ? 'primary' : 'plain', id: 'rule-save' })}
</div>`,
    { id: 'rule-editor' },
  );
}

function describeRule(r: ReturnType<typeof ruleJson>): Html {
  const c = r.condition;
  const when = !c ? '' : 'expr' in c ? c.expr : `${c.field} ${OP_TEXT[c.op]} ${JSON.stringify(c.value)}`;
  return `${e(r.subjects.join(', '))} → ${code(r.relation)} on ${code(r.object)}${when ? ` when ${code(when)}` : ''}`;
}

async function listPage(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const rules = (await ctx.store.rules.list()).map(ruleJson);
  const rows = rules.map((r) => [
    link(`/console/rules/${seg(r.id!)}`, r.name),
    effectBadge(r.effect),
    describeRule(r),
    badge(r.state, STATE_KIND[r.state] ?? ''),
    r.validated ? 'yes' : 'no',
  ]);
  render(ctx, req, res, 200, {
    title: 'Rules',
    section: 'rules',
    lead: 'Project-wide rules beside the policy files: write one, Validate it, see its Impact on the last 7 days of decisions, Save it, then Enable it to put it in force.',
    body: `<p><a class="btn primary" href="/console/rules/new">New rule</a></p>
${table(['Name', 'Effect', 'Applies to', 'State', 'Validated'], rows, { empty: 'No rules yet.' })}`,
  });
}

function newPage(ctx: AppContext, req: Request, res: Response, f: EditorState = emptyForm()): void {
  render(ctx, req, res, f.status, {
    title: 'New rule',
    section: 'rules',
    lead: 'Write the rule, Validate it against the policy in force, see its Impact on the last 7 days of recorded decisions, Save it as a draft, then Enable it.',
    body: editor(res, '/console/rules/new', f),
  });
}

/**
 * The Impact step, before Save and Enable: the decisions of the last 7 days decided again with the
 * rule live (a saved rule by its id, or the form's unsaved content in place of the stored
 * version), as counts of recorded decision -> decision with the rule, with examples. `computed`
 * says whether the replay answered (only then has the impact of this content been seen).
 */
async function impactOf(ctx: AppContext, rule: { id: string } | { candidate: JsonRule & { id: string } }): Promise<{ html: Html; computed: boolean }> {
  let r: ReplayResult;
  try {
    r = 'candidate' in rule ? await replayDraft(ctx, { since: '7d' }, rule.candidate) : await replayDraft(ctx, { since: '7d', enable: [rule.id] });
  } catch (err) {
    return { html: `<h3>Impact on the last 7 days</h3><p id="rule-impact">Not known: ${e(err instanceof Error ? err.message : String(err))}</p>`, computed: false };
  }
  const rows = r.changes.map((c) => `<tr><td>${code(c.before)} → ${code(c.after)}</td><td>${c.count}</td><td>${c.examples.map((x) => `${code(String(x.audit_id))} ${e(x.agent_id ?? '(a person)')} ${e(x.resource ?? '')}`).join('<br>')}</td></tr>`).join('');
  return {
    html: `<h3>Impact on the last 7 days</h3>
<p id="rule-impact">${r.decisions} recorded decisions replayed with this rule live: ${r.changed} would change.</p>
${rows ? `<div class="table-wrap"><table><thead><tr><th>Decision</th><th>Requests</th><th>Examples (audit id, agent, object)</th></tr></thead><tbody>${rows}</tbody></table></div>` : ''}
${r.notes.map((n) => `<p class="hint">${e(n)}</p>`).join('')}`,
    computed: true,
  };
}

/** Has the console shown the impact of the rule's current content (Enable needs it)? */
const impactSeen = (r: Rule): boolean => r.impact_hash === ruleContentHash(r);

/**
 * Impact on the form carried to Save: a hidden field holding, sealed with the service's secret
 * box (authenticated encryption: the browser can neither read nor forge it), the content hash
 * whose impact was shown, the rule it was shown for (`new` on the new-rule form) and the console
 * session that saw it. Save sets the rule's impact hash only when all of these match what is
 * saved, within an hour of the Impact; anything else (a garbled, foreign or stale field, or
 * content edited since) saves the rule without it, and Enable then asks for Impact.
 */
const IMPACT_FIELD = 'impact_seen';
const IMPACT_PURPOSE = 'console-rule-impact';
const IMPACT_CARRY_SECONDS = 60 * 60;
interface ImpactCarry {
  sub: string;
  sid: string;
  rule: string;
  hash: string;
}

function sealImpact(ctx: AppContext, person: Person, rule: string, hash: string): string {
  const carry: ImpactCarry = { sub: person.user.id, sid: person.sid, rule, hash };
  return seal(ctx, IMPACT_PURPOSE, carry, nowSeconds(ctx.clock) + IMPACT_CARRY_SECONDS);
}

/** The content hash the posted form proves the impact of, for this person, session and rule. */
function carriedImpact(ctx: AppContext, person: Person, rule: string, v: Values): string | undefined {
  const posted = v[IMPACT_FIELD];
  const c = posted && posted.length <= 4096 ? unseal<Partial<ImpactCarry>>(ctx, IMPACT_PURPOSE, posted) : undefined;
  if (!c || c.sub !== person.user.id || c.sid !== person.sid || c.rule !== rule || typeof c.hash !== 'string') return undefined;
  return c.hash;
}

async function rulePage(ctx: AppContext, req: Request, res: Response, id: string, f?: EditorState, danger?: FormState, impact?: Html): Promise<void> {
  const found = await ctx.store.rules.get(id);
  if (!found) throw errors.notFound(`no rule ${id}`);
  const r = ruleJson(found);
  const person = personOf(res);
  const base = `/console/rules/${seg(found.id)}`;
  const state = f ?? emptyForm(valuesOf(found));
  const text = asPolicyText(found);
  let lifecycle: Html;
  if (r.state === 'live') {
    lifecycle = `<p>This rule is ${badge('live', 'ok')}: it holds for every agent it names, including agents registered later.</p>
${postForm(`${base}/disable`, person, button('Disable', { kind: 'plain', id: 'rule-disable' }))}`;
  } else if (r.validated) {
    const seen = impactSeen(found);
    lifecycle = `${impact ?? ''}
<p id="rule-impact-step">${seen
    ? 'The saved rule passed Validate and its impact on the last 7 days of decisions has been shown. Enable puts it in force; Impact shows it again on the traffic recorded since.'
    : 'The saved rule passed Validate, but the impact of this content on the last 7 days of recorded decisions has not been shown. See its Impact (here, or in the form below): Enable is possible once it has been shown for this content.'}</p>
${postForm(`${base}/impact`, person, button('Impact', { kind: seen ? 'plain' : 'primary', id: 'rule-impact-run' }))}
${postForm(`${base}/enable`, person, button('Enable', { id: 'rule-enable', disabled: !seen }))}`;
  } else {
    lifecycle = '<p>Validate the rule, see its Impact and Save it before it can be enabled.</p>';
  }
  const d = danger ?? emptyForm();
  render(ctx, req, res, danger?.status ?? state.status, {
    title: r.name,
    section: 'rules',
    lead: `${effectBadge(r.effect)} ${badge(r.state, STATE_KIND[r.state] ?? '')} ${r.validated ? badge('validated', 'ok') : badge('not validated')}`,
    body: `${section('State', `<dl class="facts"><dt>ID</dt><dd>${code(found.id)}</dd><dt>Created</dt><dd>${when(r.created_at)}</dd><dt>Updated</dt><dd>${when(r.updated_at)}</dd></dl>
${lifecycle}`)}
${section('Rule', editor(res, base, state, { savedValid: r.validated }))}
${text ? section('In the policy language', pre(text, 'policy-text')) : ''}
${section('Delete', `${errorList(d.general)}${dangerForm(`${base}/delete`, person, 'Delete rule', 'Yes, delete this rule', 'delete-rule')}`, { cls: 'danger' })}`,
  });
}

/** Validate: the form's content, checked as the management API's validate does, without saving it. */
async function dryRun(ctx: AppContext, v: Values, id: string, existing?: Rule): Promise<EditorState & { candidate?: Rule }> {
  let input: RuleCreate;
  try {
    input = parseWith(ruleCreate, ruleInput(v));
  } catch (err) {
    return { ...refusal(err, v, ruleField), valid: false };
  }
  const t = nowSeconds(ctx.clock);
  const candidate: Rule = {
    id,
    ...input,
    condition: input.condition ?? null,
    state: existing?.state ?? 'draft',
    validated_hash: null,
    impact_hash: null,
    created_at: existing?.created_at ?? t,
    updated_at: t,
  };
  const problems = await validateRule(ctx, candidate);
  const placed = placeValidation(problems, id, v);
  return { values: v, ...placed, status: problems.length ? 400 : 200, valid: problems.length === 0, candidate };
}

/**
 * Impact of the form: its content validated as Validate does and, when valid, the recorded
 * decisions of the last 7 days decided again with it live (in place of the stored rule, or added
 * for a new one). Nothing is written, except that an existing rule whose stored content is the
 * form's now counts as having had its impact shown (as the lifecycle's Impact does).
 */
async function formImpact(ctx: AppContext, res: Response, v: Values, id: string, existing?: Rule): Promise<EditorState> {
  const { candidate, ...checked } = await dryRun(ctx, v, id, existing);
  if (!checked.valid || !candidate) return checked;
  const impact = await impactOf(ctx, { candidate: { ...toJsonRule(candidate), id } });
  if (!impact.computed) return { ...checked, impact: { html: impact.html } };
  const hash = ruleContentHash(candidate);
  if (existing && ruleContentHash(existing) === hash) await ctx.store.rules.setImpactHash(id, hash);
  return { ...checked, impact: { html: impact.html, carry: sealImpact(ctx, personOf(res), existing ? id : 'new', hash) } };
}

/** Validate keeps the proof of an Impact of the same content (pressing Validate again loses nothing). */
function keepCarry(ctx: AppContext, res: Response, checked: EditorState & { candidate?: Rule }, rule: string): EditorState {
  const { candidate, ...f } = checked;
  const posted = f.values[IMPACT_FIELD];
  if (!candidate || !f.valid || !posted || carriedImpact(ctx, personOf(res), rule, f.values) !== ruleContentHash(candidate)) return f;
  return { ...f, impact: { html: '', carry: posted } };
}

type Validation = Awaited<ReturnType<typeof validateAndRecord>> & { impactShown: boolean };

/** What Save says next: Enable when the impact of this content was shown, else Impact first. */
function savedMessage(what: string, check: Validation): string {
  if (!check.valid) return `${what}; it does not validate yet.`;
  return check.impactShown ? `${what}. Its impact was shown: Enable it to put it in force.` : `${what}. See its Impact on the last 7 days of recorded decisions, then Enable it.`;
}

const named = (r: Rule, action: string): Change => ({ action, target: `rule:${r.id}`, details: { name: r.name } });

/**
 * Save of the rule form: the rule is written, validated (its validated content remembered),
 * given the impact the form carried when it is of this content, and recorded with the outcome,
 * all in the write's one transaction.
 */
async function validatedSave(ctx: AppContext, res: Response, action: string, impactShown: string | undefined, save: (record: Recorder<Rule>) => Promise<Rule>): Promise<[Rule, Validation]> {
  let check: Validation = { valid: false, errors: [], impactShown: false };
  const record = audited<Rule>(ctx, personOf(res), (r) => ({ action, target: `rule:${r.id}`, details: { ...ruleJson(r), valid: check.valid } }));
  const rule = await save(async (tx, r) => {
    // The content saved is the content whose impact the form showed: Enable may follow.
    const shown = impactShown === ruleContentHash(r);
    if (shown) await tx.rules.setImpactHash(r.id, impactShown);
    check = { ...(await validateAndRecord(ctx, r.id, tx)), impactShown: shown || r.impact_hash === ruleContentHash(r) };
    await record(tx, r);
  });
  return [rule, check];
}

export function rulePages(router: Router, ctx: AppContext): void {
  router.get('/rules', (req, res) => listPage(ctx, req, res));
  router.get('/rules/new', (req, res) => newPage(ctx, req, res));

  router.post('/rules/new', async (req, res) => {
    const v = formValues(req);
    const id = randomUUID();
    if (v.step === 'validate') return newPage(ctx, req, res, keepCarry(ctx, res, await dryRun(ctx, v, id), 'new'));
    if (v.step === 'impact') return newPage(ctx, req, res, await formImpact(ctx, res, v, id));
    let rule: Rule;
    let check: Validation;
    const shown = carriedImpact(ctx, personOf(res), 'new', v);
    try {
      [rule, check] = await validatedSave(ctx, res, 'rules.create', shown, (record) => createRule(ctx, parseWith(ruleCreate, ruleInput(v)), id, record));
    } catch (err) {
      return newPage(ctx, req, res, { ...refusal(err, v, ruleField), valid: false });
    }
    done(ctx, res, savedMessage(`Rule ${rule.name} saved as a draft`, check), `/console/rules/${seg(rule.id)}`);
  });

  router.get('/rules/:id', (req, res) => rulePage(ctx, req, res, pathParam(req, 'id')));

  router.post('/rules/:id', async (req, res) => {
    const id = pathParam(req, 'id');
    const existing = await ctx.store.rules.get(id);
    if (!existing) throw errors.notFound(`no rule ${id}`);
    const v = formValues(req);
    if (v.step === 'validate') return rulePage(ctx, req, res, id, keepCarry(ctx, res, await dryRun(ctx, v, id, existing), id));
    if (v.step === 'impact') return rulePage(ctx, req, res, id, await formImpact(ctx, res, v, id, existing));
    let rule: Rule;
    let check: Validation;
    const shown = carriedImpact(ctx, personOf(res), id, v);
    try {
      [rule, check] = await validatedSave(ctx, res, 'rules.update', shown, (record) => updateRule(ctx, id, parseWith(ruleCreate, ruleInput(v)), record));
    } catch (err) {
      return rulePage(ctx, req, res, id, { ...refusal(err, v, ruleField), valid: false });
    }
    if (!check.valid) {
      return rulePage(ctx, req, res, id, { values: v, ...placeValidation(check.errors, id, v), status: 400, valid: false });
    }
    const left = existing.state === 'live' && rule.state !== 'live';
    done(ctx, res, left ? savedMessage('Saved. The rule changed, so it left the policy', check) : rule.state === 'live' ? 'Saved.' : savedMessage('Saved', check), `/console/rules/${seg(id)}`);
  });

  // Impact: the recorded decisions of the last 7 days decided again with this content live; once
  // it has answered, this content may be enabled.
  router.post('/rules/:id/impact', async (req, res) => {
    const id = pathParam(req, 'id');
    const found = await ctx.store.rules.get(id);
    if (!found) throw errors.notFound(`no rule ${id}`);
    const impact = await impactOf(ctx, { id });
    // The hash of the content read before the replay: a rule changed meanwhile needs its own Impact.
    if (impact.computed) await ctx.store.rules.setImpactHash(id, ruleContentHash(found));
    return rulePage(ctx, req, res, id, undefined, undefined, impact.html);
  });

  router.post('/rules/:id/enable', async (req, res) => {
    const id = pathParam(req, 'id');
    let rule: Rule;
    try {
      const current = await ctx.store.rules.get(id);
      if (current && current.state !== 'live' && !impactSeen(current)) {
        throw errors.conflict('see the Impact of this rule on the last 7 days of recorded decisions before enabling it (its content changed since, or it was never shown)', { state: current.state });
      }
      rule = await enableRule(ctx, id, audited(ctx, personOf(res), (r) => named(r, 'rules.enable')));
    } catch (err) {
      const found = await ctx.store.rules.get(id);
      const st = refusal(err, found ? valuesOf(found) : {});
      return rulePage(ctx, req, res, id, { ...st, ...placeValidation(st.general, id, st.values), valid: false });
    }
    done(ctx, res, `Rule ${rule.name} is live.`, `/console/rules/${seg(id)}`);
  });

  router.post('/rules/:id/disable', async (req, res) => {
    const id = pathParam(req, 'id');
    const rule = await disableRule(ctx, id, audited(ctx, personOf(res), (r) => named(r, 'rules.disable')));
    done(ctx, res, `Rule ${rule.name} is disabled.`, `/console/rules/${seg(id)}`);
  });

  formPost(
    router, ctx, '/rules/:id/delete',
    async (req, res) => {
      const id = pathParam(req, 'id');
      let name = id;
      await deleteRule(ctx, id, audited(ctx, personOf(res), (r) => {
        name = r.name;
        return named(r, 'rules.delete');
      }));
      return { message: `Rule ${name} deleted.`, to: '/console/rules' };
    },
    (req, res, refused) => rulePage(ctx, req, res, pathParam(req, 'id'), undefined, asOneList(refused)),
    { confirm: true },
  );
}
