import type { Request, Response, Router } from 'express';
import { answerApproval, approvalView, type Answer } from '../../agents/approvals.js';
import type { AppContext } from '../../context.js';
import { ProtocolError } from '../../errors.js';
import { audited } from '../audit.js';
import { formValues } from '../forms.js';
import { badge, button, code, escapeHtml as e, hidden, link, postForm, pre, seg, select, table, when, type Html } from '../html.js';
import { done, personOf, render } from './common.js';

const STATES = [
  ['pending', 'waiting'],
  ['approved', 'approved'],
  ['denied', 'denied'],
  ['consumed', 'used'],
  ['expired', 'expired'],
] as const;
const STATE_KIND: Record<string, string> = { pending: 'warn', approved: 'ok', denied: 'bad', consumed: 'muted', expired: 'muted' };

async function approvalsPage(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const person = personOf(res);
  const q = req.query as Record<string, unknown>;
  const state = STATES.some(([s]) => s === q.state) ? (q.state as string) : 'pending';
  const list = (await ctx.store.agentAuth.list({ state, limit: 200 })).map((a) => approvalView(ctx, a));
  const users = new Map<string, string>();
  for (const a of list) {
    if (a.user_id && !users.has(a.user_id)) users.set(a.user_id, (await ctx.store.users.get(a.user_id))?.email ?? a.user_id);
  }
  const rows = list.map((a): Html[] => [
    `${link(`/console/agents/${seg(a.agent_id)}`, a.agent_id)}${a.binding_message ? `<br><q>${e(a.binding_message)}</q>` : ''}`,
    a.kind === 'ciba'
      ? `sign in for a person with ${e(a.scope.join(', ') || '(no capabilities)')}${a.authorization_details?.length ? pre(JSON.stringify(a.authorization_details), 'inline-json') : ''}`
      : `${code(a.action)} on ${code(a.resource)}${a.context && Object.keys(a.context).length ? pre(JSON.stringify(a.context), 'inline-json') : ''}`,
    a.user_id ? e(users.get(a.user_id) ?? a.user_id) : '—',
    `${badge(STATES.find(([s]) => s === a.state)?.[1] ?? a.state, STATE_KIND[a.state] ?? '')}<br>${when(a.created_at)}`,
    a.state === 'pending'
      ? postForm(
          '/console/approvals/answer',
          person,
          `${hidden('id', a.id)}${button('Approve', { name: 'decision', value: 'approve' })} ${button('Deny', { name: 'decision', value: 'deny', kind: 'danger' })}`,
          { cls: 'inline answer' },
        )
      : a.decided_at
        ? when(a.decided_at)
        : '',
  ]);
  const filter = `<form method="get" action="/console/approvals" class="row filters">
${select({ name: 'state', label: 'Show', value: state, options: STATES, autosubmit: true })}
${button('Show', { kind: 'plain' })}
</form>`;
  render(ctx, req, res, 200, {
    title: 'Approvals',
    section: 'approvals',
    lead: 'Agents’ requests waiting for a person: CIBA sign-ins and actions a rule sent for step-up. An approved action is allowed once within 10 minutes.',
    body: `${filter}${table(['Agent', 'Asks to', 'For', 'State', ''], rows, { empty: state === 'pending' ? 'Nothing is waiting.' : 'None.' })}`,
  });
}

export function approvalPages(router: Router, ctx: AppContext): void {
  router.get('/approvals', (req, res) => approvalsPage(ctx, req, res));

  router.post('/approvals/answer', async (req, res) => {
    const v = formValues(req);
    const answer = v.decision === 'approve' || v.decision === 'deny' ? (v.decision as Answer) : undefined;
    if (!answer || !v.id) return done(ctx, res, 'The form needs an approval and decision=approve or decision=deny.', '/console/approvals');
    try {
      await answerApproval(
        ctx,
        v.id,
        answer,
        { admin: true },
        audited(ctx, personOf(res), (a) => ({
          action: `approvals.${answer}`,
          target: `approval:${a.id}`,
          details: { action: a.action, resource: a.resource },
          about: { agent_id: a.agent_id, ...(a.user_id ? { user_id: a.user_id } : {}) },
        })),
      );
      done(ctx, res, answer === 'approve' ? 'Approved.' : 'Denied.', '/console/approvals');
    } catch (err) {
      if (err instanceof ProtocolError && (err.status === 404 || err.status === 409)) return done(ctx, res, 'That request is no longer waiting for an answer.', '/console/approvals');
      throw err;
    }
  });
}
