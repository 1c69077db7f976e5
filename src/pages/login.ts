import { escapeHtml, hiddenInput, notice, renderPage } from './layout.js';
import { PASSKEY_SCRIPTS } from './static.js';

export interface LoginPageInput {
  csrf: string;
  /** the pending authorization request, carried through the form */
  requestId?: string;
  /** a same-site path to return to when no authorization request is pending */
  returnTo?: string;
  email?: string;
  applicationName?: string;
  message?: string;
  /** the request accepts only passkey sign-ins: say so above the form */
  passkeyRequired?: boolean;
}

/**
 * The passkey part of a page: hidden until the script finds WebAuthn in the browser. The
 * script reads the form's hidden `csrf`, `request` and `return_to`, asks `data-options` for a
 * challenge and posts the browser's answer to `data-submit` as a form (field `credential`).
 */
function passkeyArea(p: { mode: 'sign-in' | 'step'; buttonText: string; lead?: string }): string {
  return `<div class="passkey" id="passkey-area" data-mode="${p.mode}" data-options="/login/passkey/options" data-submit="/login/passkey" hidden>
${p.lead ? `<p>${escapeHtml(p.lead)}</p>` : ''}<button type="button" id="passkey-button">${escapeHtml(p.buttonText)}</button>
<p id="passkey-status" class="muted" role="status" aria-live="polite"></p>
</div>`;
}

/**
 * The sign-in form: one POST form with `email`, `password` and hidden inputs.
 * Beside it (outside the form) a passkey button; the email field also offers passkeys in the
 * browser's autofill (`autocomplete="username webauthn"`). A typed email narrows the passkey
 * prompt to that account's passkeys.
 */
export function loginPage(p: LoginPageInput): string {
  const intro = p.applicationName ? `<p>to continue to <strong>${escapeHtml(p.applicationName)}</strong></p>` : '';
  const required = p.passkeyRequired ? notice(`${p.applicationName ?? 'This application'} asks you to sign in with a passkey.`, 'info') : '';
  return renderPage(
    'Sign in',
    `${intro}
${required}
${p.message ? notice(p.message) : ''}
<form method="post" action="/login" id="login-form">
${hiddenInput('csrf', p.csrf)}
${p.requestId ? hiddenInput('request', p.requestId) : ''}
${p.returnTo ? hiddenInput('return_to', p.returnTo) : ''}
<label for="email">Email</label>
<input id="email" type="email" name="email" autocomplete="username webauthn" required value="${escapeHtml(p.email ?? '')}"${p.email ? '' : ' autofocus'}>
<label for="password">Password</label>
<input id="password" type="password" name="password" autocomplete="current-password" required${p.email ? ' autofocus' : ''}>
<button type="submit">Sign in</button>
</form>
${passkeyArea({ mode: 'sign-in', buttonText: 'Sign in with a passkey' })}`,
    { scripts: PASSKEY_SCRIPTS },
  );
}

export interface PasskeyStepPageInput {
  csrf: string;
  requestId: string;
  email: string;
  applicationName?: string;
  message?: string;
}

/**
 * The passkey step of a request that needs one, for a person already known (by their password
 * or their session): the prompt lists only their passkeys.
 */
export function passkeyStepPage(p: PasskeyStepPageInput): string {
  return renderPage(
    'Use your passkey',
    `<p>${p.applicationName ? `<strong>${escapeHtml(p.applicationName)}</strong> asks` : 'This sign-in needs'} a passkey for <strong>${escapeHtml(p.email)}</strong>.</p>
${p.message ? notice(p.message) : ''}
<div id="passkey-step" hidden>${hiddenInput('csrf', p.csrf)}${hiddenInput('request', p.requestId)}</div>
${passkeyArea({ mode: 'step', buttonText: 'Use my passkey' })}
<noscript><p class="notice error">Passkeys need JavaScript in your browser. Turn it on, or go back to the application.</p></noscript>`,
    { scripts: PASSKEY_SCRIPTS },
  );
}
