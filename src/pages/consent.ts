import { authorizationDetailsHtml } from './authorization-details.js';
import { escapeHtml, hiddenInput, renderPage } from './layout.js';

const SCOPE_TEXT: Record<string, string> = {
  openid: 'Sign you in',
  profile: 'Read your name, picture, language, groups and roles',
  email: 'Read your email address',
  offline_access: 'Stay signed in when you are not using it',
};

export interface ConsentPageInput {
  csrf: string;
  requestId: string;
  applicationName: string;
  userEmail: string;
  scopes: string[];
  /** the host of a client known by its metadata document (its URL), shown beside the name it gives itself */
  clientHost?: string;
  /** RFC 9396: exactly what the person approves, beyond the scopes */
  authorizationDetails?: readonly Record<string, unknown>[];
  typeDescriptions?: ReadonlyMap<string, string>;
  /** an agent the application asks to act for the person */
  delegate?: { agent_id: string; name: string; capabilities: string[] };
}

/** Consent for a third-party application: the scopes, and approve / deny buttons named `decision`. */
export function consentPage(p: ConsentPageInput): string {
  const items = p.scopes
    .map((s) => `<li><code>${escapeHtml(s)}</code>${SCOPE_TEXT[s] ? ` — ${escapeHtml(SCOPE_TEXT[s])}` : ''}</li>`)
    .join('\n');
  return renderPage(
    'Allow access?',
    `<p><strong>${escapeHtml(p.applicationName)}</strong>${p.clientHost ? ` <small>(from <strong>${escapeHtml(p.clientHost)}</strong>, not registered here)</small>` : ''} asks to access your account <strong>${escapeHtml(p.userEmail)}</strong>:</p>
<ul class="scopes">
${items}
</ul>
${p.authorizationDetails?.length ? `<p>and, exactly:</p>\n${authorizationDetailsHtml(p.authorizationDetails, p.typeDescriptions)}` : ''}
${p.delegate ? `<p>It also asks you to let the agent <strong>${escapeHtml(p.delegate.name)}</strong> <span class="muted">(${escapeHtml(p.delegate.agent_id)})</span> act for you, with:</p>
<ul class="delegation">
${p.delegate.capabilities.map((c) => `<li><code>${escapeHtml(c)}</code></li>`).join('\n')}
</ul>
<p class="muted">You can stop it at any time from your account page.</p>` : ''}
<form method="post" action="/consent">
${hiddenInput('csrf', p.csrf)}
${hiddenInput('request', p.requestId)}
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>`,
  );
}
