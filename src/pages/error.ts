import { escapeHtml, renderPage } from './layout.js';

/** An error shown on the issuer (no redirect): the OAuth error code and a sentence. */
export function errorPage(error: string, description: string): string {
  return renderPage(
    'Something went wrong',
    `<p class="notice error" role="alert">${escapeHtml(description)}</p>
<p>Error code: <code id="error">${escapeHtml(error)}</code></p>
<p>Go back to the application and try again.</p>`,
  );
}
