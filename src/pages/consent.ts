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
}

/** Consent for a third-party application: the scopes, and approve / deny buttons named `decision`. */
export function consentPage(p: ConsentPageInput): string {
  const items = p.scopes
    .map((s) => `<li><code>${escapeHtml(s)}</code>${SCOPE_TEXT[s] ? ` — ${escapeHtml(SCOPE_TEXT[s])}` : ''}</li>`)
    .join('\n');
  return renderPage(
    'Allow access?',
    `<p><strong>${escapeHtml(p.applicationName)}</strong> asks to access your account <strong>${escapeHtml(p.userEmail)}</strong>:</p>
<ul class="scopes">
${items}
</ul>
<form method="post" action="/consent">
${hiddenInput('csrf', p.csrf)}
${hiddenInput('request', p.requestId)}
<button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>`,
  );
}
