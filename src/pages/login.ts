import { escapeHtml, hiddenInput, notice, renderPage } from './layout.js';

export interface LoginPageInput {
  csrf: string;
  /** the pending authorization request, carried through the form */
  requestId?: string;
  /** a same-site path to return to when no authorization request is pending */
  returnTo?: string;
  email?: string;
  applicationName?: string;
  message?: string;
}

/** The sign-in form of CONTRACT 2: one POST form with `email`, `password` and hidden inputs. */
export function loginPage(p: LoginPageInput): string {
  const intro = p.applicationName ? `<p>to continue to <strong>${escapeHtml(p.applicationName)}</strong></p>` : '';
  return renderPage(
    'Sign in',
    `${intro}
${p.message ? notice(p.message) : ''}
<form method="post" action="/login">
${hiddenInput('csrf', p.csrf)}
${p.requestId ? hiddenInput('request', p.requestId) : ''}
${p.returnTo ? hiddenInput('return_to', p.returnTo) : ''}
<label for="email">Email</label>
<input id="email" type="email" name="email" autocomplete="username" required value="${escapeHtml(p.email ?? '')}"${p.email ? '' : ' autofocus'}>
<label for="password">Password</label>
<input id="password" type="password" name="password" autocomplete="current-password" required${p.email ? ' autofocus' : ''}>
<button type="submit">Sign in</button>
</form>`,
  );
}
