import { hiddenInput, notice, renderPage } from './layout.js';

export interface SecondStepPageInput {
  csrf: string;
  requestId: string;
  message?: string;
}

/** The second step: a six-digit TOTP code (RFC 6238) in an input named `otp`. */
export function secondStepPage(p: SecondStepPageInput): string {
  return renderPage(
    'Enter your code',
    `<p>Enter the 6-digit code from your authenticator app.</p>
${p.message ? notice(p.message) : ''}
<form method="post" action="/login/otp">
${hiddenInput('csrf', p.csrf)}
${hiddenInput('request', p.requestId)}
<label for="otp">Code</label>
<input id="otp" type="text" name="otp" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required autofocus>
<button type="submit">Verify</button>
</form>`,
  );
}
