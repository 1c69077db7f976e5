import { escapeHtml, hiddenInput, notice, renderPage } from './layout.js';

/** `notRegistered`: an application asked to be returned to an address it never registered. */
export function signedOutPage(notRegistered = false): string {
  return renderPage(
    'You are signed out',
    `<p class="notice info" role="status">You have been signed out. You may close this window.</p>${
      notRegistered ? `\n${notice('The application asked to send you to an address it has not registered, so you were not sent back to it.')}` : ''
    }`,
  );
}

export interface SignOutConfirmation {
  csrf: string;
  /** the person signed in here */
  email: string;
  /** the application that asked, when it is known */
  applicationName?: string;
  /** the logout request's own parameters, carried through the confirmation */
  carried: Record<string, string>;
}

/** A sign-out another site asked for without proving who it is for: the person confirms it here. */
export function confirmSignOutPage(p: SignOutConfirmation): string {
  const who = p.applicationName ? `<strong>${escapeHtml(p.applicationName)}</strong> asks` : 'A site asks';
  const carried = Object.entries(p.carried).map(([k, v]) => hiddenInput(k, v)).join('\n');
  return renderPage(
    'Sign out?',
    `<p>${who} to sign you (<strong>${escapeHtml(p.email)}</strong>) out of Gatehouse.</p>
<form method="post" action="/oauth/logout">
${hiddenInput('csrf', p.csrf)}
${hiddenInput('confirm', 'yes')}
${carried}
<button type="submit">Sign out</button>
</form>
<p class="muted">If you did not mean to sign out, close this page: you stay signed in.</p>`,
  );
}
