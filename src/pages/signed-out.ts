import { renderPage } from './layout.js';

export function signedOutPage(): string {
  return renderPage('You are signed out', '<p class="notice info" role="status">You have been signed out. You may close this window.</p>');
}
