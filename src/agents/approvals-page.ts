import type { Request, Response } from 'express';
import { agentCache } from '../authz/agent-cache.js';
import { answerApproval, type Answer } from './approvals.js';
import type { AppContext } from '../context.js';
import { ProtocolError } from '../errors.js';
import { csrfToken, verifyCsrf, CSRF_FIELD } from '../oauth/csrf.js';
import { currentSession } from '../oauth/session.js';
import type { Approval } from '../store/agent-auth.js';
import { escapeHtml, hiddenInput, notice, renderPage, sendPage } from '../pages/layout.js';
import { authorizationDetailsHtml } from '../pages/authorization-details.js';
import { declaredTypes } from '../oauth/authorization-details.js';

const RETURN_TO = '/approvals';
// `/` may stay as is in a query: the sign-in page reads the same value either way.
const LOGIN = '/login?return_to=/approvals';

const MESSAGES: Record<string, [string, 'info' | 'error']> = {
  approved: ['Approved.', 'info'],
  denied: ['Denied.', 'info'],
  gone: ['That request is no longer waiting for an answer.', 'error'],
};

/** GET /approvals: the signed-in person's requests waiting for them, each with approve and deny. */
export async function showApprovals(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const signedIn = await currentSession(ctx, req);
  if (!signedIn) {
    res.redirect(302, LOGIN);
    return;
  }
  const csrf = csrfToken(ctx, req, res);
  const pending = await ctx.store.agentAuth.list({ state: 'pending', user_id: signedIn.user.id });
  const done = typeof req.query.done === 'string' ? MESSAGES[req.query.done] : undefined;
  const items = (await Promise.all(pending.map((a) => approvalItem(ctx, a, csrf)))).join('\n');
  const body = `${done ? notice(done[0], done[1]) : ''}
<p>Signed in as ${escapeHtml(signedIn.user.email)}.</p>
${pending.length ? `<ul class="approvals">\n${items}\n</ul>` : '<p>Nothing is waiting for you.</p>'}`;
  sendPage(res, 200, renderPage('Requests waiting for you', body));
}

async function approvalItem(ctx: AppContext, a: Approval, csrf: string): Promise<string> {
  const descriptions = a.authorization_details?.length
    ? new Map([...(await declaredTypes(ctx))].map(([k, t]) => [k, t.description]))
    : undefined;
  const agentName = (await agentCache(ctx).get(a.agent_id))?.agent.name ?? a.agent_id;
  const what =
    a.kind === 'ciba'
      ? `<p>wants to act for you with: ${escapeHtml(a.scope.join(', ') || '(no capabilities)')}</p>${
          a.authorization_details?.length ? `\n<p>and, exactly:</p>\n${authorizationDetailsHtml(a.authorization_details, descriptions)}` : ''
        }`
      : `<p>wants to <code>${escapeHtml(a.action)}</code> on <code>${escapeHtml(a.resource)}</code></p>
<pre class="context">${escapeHtml(JSON.stringify(a.context ?? {}, null, 2))}</pre>`;
  return `<li class="approval" id="approval-${escapeHtml(a.id)}">
<p><strong>${escapeHtml(agentName)}</strong> <small>(${escapeHtml(a.agent_id)})</small></p>
${a.binding_message ? `<p class="binding-message">${escapeHtml(a.binding_message)}</p>` : ''}
${what}
<form method="post" action="/approvals">
${hiddenInput(CSRF_FIELD, csrf)}
${hiddenInput('id', a.id)}
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</li>`;
}

/** POST /approvals: one answer (`id`, `decision=approve|deny`, CSRF token), then back to the list. */
export async function postApproval(ctx: AppContext, req: Request, res: Response): Promise<void> {
  const signedIn = await currentSession(ctx, req);
  if (!signedIn) {
    res.redirect(303, LOGIN);
    return;
  }
  if (!verifyCsrf(ctx, req)) {
    sendPage(res, 403, renderPage('Requests waiting for you', notice('The form has expired. Go back to the approvals page and try again.')));
    return;
  }
  const body = (req.body ?? {}) as Record<string, unknown>;
  const id = body.id;
  const decision = body.decision;
  if (typeof id !== 'string' || !id || (decision !== 'approve' && decision !== 'deny')) {
    sendPage(res, 400, renderPage('Requests waiting for you', notice('The form needs an id and decision=approve or decision=deny.')));
    return;
  }
  try {
    await answerApproval(ctx, id, decision as Answer, { userId: signedIn.user.id });
  } catch (err) {
    if (err instanceof ProtocolError && (err.status === 404 || err.status === 409)) {
      res.redirect(303, `${RETURN_TO}?done=gone`);
      return;
    }
    throw err;
  }
  res.redirect(303, `${RETURN_TO}?done=${decision === 'approve' ? 'approved' : 'denied'}`);
}
