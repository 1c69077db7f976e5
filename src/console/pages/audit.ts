import type { Request, Response, Router } from 'express';
import { listAudit, type AuditQuery } from '../../admin/audit.js';
import { parseWith } from '../../admin/route.js';
import { auditQuery } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { refusal, type FormState, type Values } from '../forms.js';
import { badge, button, code, escapeHtml as e, input, link, notice, postForm, seg, select, section, table, when, type Html } from '../html.js';
import { personOf, render } from './common.js';

const KINDS = [
  ['decision', 'agent decisions'],
  ['admin', 'console changes'],
  ['approval', 'approval answers'],
  ['usage', 'usage resets'],
  ['token', 'token issues'],
  ['all', 'everything'],
] as const;
const DECISIONS = [
  ['', 'any'],
  ['allow', 'allow'],
  ['deny', 'deny'],
  ['approval_required', 'approval_required'],
] as const;
const REASON_CODES = ['allowed', 'constraint_violated', 'rule_denied', 'not_granted', 'approval_required', 'invalid_transaction_token', 'invalid_client', 'error'];
const DECISION_KIND: Record<string, string> = { allow: 'ok', deny: 'bad', approval_required: 'warn', approved: 'ok', denied: 'bad' };
const FILTERS = ['agent_id', 'decision', 'reason', 'since', 'until', 'kind'] as const;

/** A `datetime-local` value has no zone: the console's times are UTC. */
const asUtc = (v: string | undefined) => (v && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(v) ? `${v}Z` : v);

function filterValues(req: Request): Values {
  const q = req.query as Record<string, unknown>;
  const v: Values = {};
  for (const k of [...FILTERS, 'before']) if (typeof q[k] === 'string' && q[k] !== '') v[k] = q[k] as string;
  return v;
}

interface Verification {
  checked: number;
  broken: { seq: number; why: string } | null;
}

/** A decision through a delegation chain: the agents above the actor, first to last, and the person they act for. */
function chainNote(r: { chain?: string[] | null; user_id: string | null }): string {
  if (!r.chain || r.chain.length < 2) return '';
  const above = r.chain.slice(0, -1).map((id) => link(`/console/agents/${seg(id)}`, id)).join(' → ');
  return `<br><small class="chain">for ${e(r.user_id ?? 'a person')} through ${above}</small>`;
}

async function auditPage(ctx: AppContext, req: Request, res: Response, verification?: Verification): Promise<void> {
  const v = filterValues(req);
  let query: AuditQuery | undefined;
  let filterState: FormState = { values: v, errors: {}, general: [], status: 200 };
  try {
    query = parseWith(auditQuery, { ...v, since: asUtc(v.since), until: asUtc(v.until), limit: '50' }, 'query');
  } catch (err) {
    filterState = refusal(err, v);
  }
  const page = query ? await listAudit(ctx, query) : { data: [], next_before: null };
  const agents = await ctx.store.agents.list();
  const actors = new Map<string, string>();
  for (const r of page.data) if (r.actor && !actors.has(r.actor)) actors.set(r.actor, (await ctx.store.users.get(r.actor))?.email ?? r.actor);

  const err = (k: string) => filterState.errors[k];
  const filters = `<form method="get" action="/console/audit" class="filters stack" id="audit-filters">
<div class="grid four">
${select({ name: 'kind', label: 'Records', value: v.kind ?? 'decision', options: KINDS, errors: err('kind') })}
${select({ name: 'agent_id', id: 'filter-agent', label: 'Agent', value: v.agent_id ?? '', options: [['', 'any'], ...agents.map((a) => [a.agent_id, a.name] as const)], errors: err('agent_id') })}
${select({ name: 'decision', label: 'Decision', value: v.decision ?? '', options: DECISIONS, errors: err('decision') })}
${input({ name: 'reason', label: 'Reason code', value: v.reason, placeholder: 'constraint_violated', errors: err('reason'), extra: ' list="reason-codes"' })}
</div>
<div class="grid four">
${input({ name: 'since', label: 'From (UTC)', type: 'datetime-local', value: v.since?.replace(/Z$/, ''), errors: err('since') })}
${input({ name: 'until', label: 'Until (UTC)', type: 'datetime-local', value: v.until?.replace(/Z$/, ''), errors: err('until') })}
</div>
<datalist id="reason-codes">${REASON_CODES.map((c) => `<option value="${e(c)}">`).join('')}</datalist>
<div class="actions">${button('Filter', { kind: 'plain', id: 'audit-filter' })} ${link('/console/audit', 'Clear')}</div>
</form>`;

  const rows = page.data.map((r): Html[] => [
    `${when(r.time)}<br><small>#${e(r.id)}</small>`,
    e(r.kind),
    r.actor ? `${e(actors.get(r.actor) ?? r.actor)}` : r.agent_id ? `${link(`/console/agents/${seg(r.agent_id)}`, r.agent_id)}${chainNote(r)}` : '—',
    `${code(r.action ?? '')}${r.resource ? ` on ${code(r.resource)}` : ''}${r.context && typeof r.context === 'object' && Object.keys(r.context).length ? `<br><small class="ctx">${e(JSON.stringify(r.context))}</small>` : ''}`,
    r.decision ? badge(r.decision, DECISION_KIND[r.decision] ?? '') : '',
    e(r.reason ?? ''),
    r.policy_version ? `<small>${e(r.policy_version)}</small>` : '',
  ]);
  const qs = new URLSearchParams(Object.entries(v).filter(([k]) => k !== 'before'));
  const older = page.next_before ? link(`/console/audit?${qs.toString() ? `${qs.toString()}&` : ''}before=${page.next_before}`, 'Older records →') : '';
  const verified = verification
    ? verification.broken
      ? notice(`The chain is broken at record ${verification.broken.seq}: ${verification.broken.why}. ${verification.checked} records checked.`)
      : notice(`The chain holds: ${verification.checked} records, each linked to the one before by its hash.`, 'ok')
    : '';
  render(ctx, req, res, filterState.status, {
    title: 'Audit trail',
    section: 'audit',
    lead: 'Every decision with its reason and policy version, every approval answer, and every change made in this console with the person who made it.',
    body: `${filters}
${filterState.general.length ? notice(filterState.general.join(' ')) : ''}
${table(['Time', 'Kind', 'Who', 'What', 'Decision', 'Reason', 'Policy version'], rows, { empty: 'No records match.', cls: 'audit' })}
<p class="pager">${older}</p>
${section('Verify the chain', `${verified}<p>Walks the whole trail as ${code('gatehouse audit verify')} does: each record’s hash covers its content and the hash before it.</p>
${postForm(`/console/audit/verify${qs.toString() ? `?${qs.toString()}` : ''}`, personOf(res), button('Verify the chain', { kind: 'plain', id: 'audit-verify' }))}`, { id: 'verify' })}`,
  });
}

export function auditPages(router: Router, ctx: AppContext): void {
  router.get('/audit', (req, res) => auditPage(ctx, req, res));
  router.post('/audit/verify', async (req, res) => {
    const result = await ctx.store.audit.verify();
    await auditPage(ctx, req, res, result);
  });
}
