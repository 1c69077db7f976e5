import type { Session } from '../store/sessions.js';
import type { User } from '../store/users.js';
import type { PasskeyCredential } from '../store/passkeys.js';
import { escapeHtml, hiddenInput, notice, renderPage } from './layout.js';
import { PASSKEY_SCRIPTS } from './static.js';

export interface AccountSession {
  session: Session;
  current: boolean;
  /** the passkey that signed it in, when it still exists */
  passkeyName?: string;
}

export interface AccountConsent {
  client_id: string;
  name: string;
  scopes: string[];
  updated_at: number;
}

/** An agent the person lets act for them. */
export interface AccountDelegation {
  agent_id: string;
  name: string;
  capabilities: string[];
  created_at: number;
}

export interface AccountPageInput {
  csrf: string;
  user: User;
  /** signed in recently enough to add or remove a sign-in method */
  fresh: boolean;
  /** the threshold of `fresh`, in minutes, for the page to state */
  freshMinutes: number;
  passkeys: PasskeyCredential[];
  sessions: AccountSession[];
  consents: AccountConsent[];
  delegations: AccountDelegation[];
  message?: { text: string; kind: 'info' | 'error' };
}

const time = (t: number | null) =>
  t === null ? 'never' : `<time datetime="${new Date(t * 1000).toISOString()}">${new Date(t * 1000).toISOString().slice(0, 16).replace('T', ' ')} UTC</time>`;

const METHOD_TEXT: Record<string, string> = {
  pwd: 'password',
  otp: 'one-time code',
  hwk: 'passkey',
  swk: 'synced passkey',
  user: 'verified with PIN or biometrics',
  saml: 'SAML',
};
/** How a session signed in, in words: its `amr` without `mfa`. */
const signedInWith = (amr: string[]) => amr.filter((m) => m !== 'mfa').map((m) => METHOD_TEXT[m] ?? m).join(', ') || 'unknown';

const form = (action: string, csrf: string, inner: string, cls = '') =>
  `<form method="post" action="${escapeHtml(action)}"${cls ? ` class="${cls}"` : ''}>\n${hiddenInput('csrf', csrf)}\n${inner}\n</form>`;

function profileSection(p: AccountPageInput): string {
  const u = p.user;
  return `<section id="profile" aria-labelledby="profile-h">
<h2 id="profile-h">Profile</h2>
<dl class="profile">
<dt>Name</dt><dd>${escapeHtml(u.name)}</dd>
<dt>Email</dt><dd>${escapeHtml(u.email)}${u.email_verified ? ' <span class="tag">verified</span>' : ''}</dd>
${u.groups.length ? `<dt>Groups</dt><dd>${escapeHtml(u.groups.join(', '))}</dd>` : ''}
${u.roles.length ? `<dt>Roles</dt><dd>${escapeHtml(u.roles.join(', '))}</dd>` : ''}
</dl>
${form('/account/profile', p.csrf, `<label for="profile-name">Display name</label>
<input id="profile-name" type="text" name="name" maxlength="200" required value="${escapeHtml(u.name)}">
<button type="submit">Save name</button>`, 'inline')}
<p class="muted">Your email, groups and roles are managed by your administrator.</p>
</section>`;
}

function reauthNotice(p: AccountPageInput): string {
  return `<p class="notice info" role="status">To add or remove a passkey or change your authenticator app, sign in again first (your last sign-in must be within ${p.freshMinutes} minutes). <a href="/login?return_to=/account">Sign in again</a></p>`;
}

function passkeyItem(p: AccountPageInput, c: PasskeyCredential): string {
  const tags = [
    c.device_type === 'multiDevice' ? '<span class="tag">synced</span>' : '<span class="tag">this device only</span>',
    c.suspended_at !== null ? '<span class="tag warn">suspended: it may have been copied</span>' : '',
  ].join('');
  const rename = form('/account/passkeys/rename', p.csrf, `${hiddenInput('id', c.id)}
<label class="visually-hidden" for="rename-${escapeHtml(c.id)}">New name for ${escapeHtml(c.name)}</label>
<input id="rename-${escapeHtml(c.id)}" type="text" name="name" maxlength="64" required value="${escapeHtml(c.name)}">
<button type="submit">Rename</button>`, 'inline');
  const remove = p.fresh
    ? form('/account/passkeys/remove', p.csrf, `${hiddenInput('id', c.id)}
<label class="check"><input type="checkbox" name="lost" value="1"> It was lost or someone else may have it</label>
<button type="submit">Remove</button>`, 'inline block')
    : '';
  return `<li class="passkey-item" data-id="${escapeHtml(c.id)}">
<strong class="passkey-name">${escapeHtml(c.name)}</strong>${tags}
<div class="muted">Added ${time(c.created_at)} · last used ${time(c.last_used_at)}</div>
${rename}
${remove}
</li>`;
}

function passkeysSection(p: AccountPageInput): string {
  const list = p.passkeys.length
    ? `<ul class="items" id="passkey-list">\n${p.passkeys.map((c) => passkeyItem(p, c)).join('\n')}\n</ul>`
    : '<p id="passkey-list">You have no passkeys yet.</p>';
  const add = p.fresh
    ? `<form method="post" action="/account/passkeys" id="add-passkey-form" data-options="/account/passkeys/options">
${hiddenInput('csrf', p.csrf)}
${hiddenInput('credential', '')}
<label for="passkey-name">Name of the new passkey</label>
<input id="passkey-name" type="text" name="name" maxlength="64" placeholder="for example: work laptop">
<button type="submit" id="add-passkey-button">Add a passkey</button>
<p id="passkey-status" class="muted" role="status" aria-live="polite"></p>
<noscript><p class="notice error">Adding a passkey needs JavaScript in your browser.</p></noscript>
</form>`
    : '';
  return `<section id="passkeys" aria-labelledby="passkeys-h">
<h2 id="passkeys-h">Passkeys</h2>
<p class="muted">Sign in with your fingerprint, face, screen lock or security key instead of a password.</p>
${list}
${add}
</section>`;
}

function totpSection(p: AccountPageInput): string {
  const on = p.user.has_totp;
  const status = on
    ? '<p id="totp-status">An authenticator app is set up: sign-ins that need a second step ask for its 6-digit code.</p>'
    : '<p id="totp-status">No authenticator app is set up.</p>';
  const actions = p.fresh
    ? `${form('/account/totp/setup', p.csrf, `<button type="submit">${on ? 'Replace the authenticator app' : 'Set up an authenticator app'}</button>`, 'inline')}
${on ? form('/account/totp/remove', p.csrf, `<label class="check"><input type="checkbox" name="lost" value="1"> It was lost or someone else may have it</label>
<button type="submit">Turn off one-time codes</button>`, 'inline block') : ''}`
    : '';
  return `<section id="totp" aria-labelledby="totp-h">
<h2 id="totp-h">Authenticator app (one-time codes)</h2>
${status}
${actions}
</section>`;
}

function sessionsSection(p: AccountPageInput): string {
  const items = p.sessions.map(({ session: s, current, passkeyName }) => `<li class="session-item">
<strong>Signed in ${time(s.auth_time)}</strong>${current ? '<span class="tag">this browser</span>' : ''}
<div class="muted">with ${escapeHtml(signedInWith(s.amr))}${passkeyName ? ` (${escapeHtml(passkeyName)})` : ''} · started ${time(s.created_at)} · ends ${time(s.expires_at)}</div>
${form('/account/sessions/end', p.csrf, `${hiddenInput('sid', s.sid)}<button type="submit">${current ? 'Sign out here' : 'End this session'}</button>`, 'inline')}
</li>`).join('\n');
  return `<section id="sessions" aria-labelledby="sessions-h">
<h2 id="sessions-h">Sessions</h2>
<ul class="items">
${items}
</ul>
${form('/account/sessions/end-all', p.csrf, `${hiddenInput('keep_current', '1')}<button type="submit">End all other sessions</button>`, 'inline')}
${form('/account/sessions/end-all', p.csrf, '<button type="submit">Sign out everywhere</button>', 'inline')}
</section>`;
}

function consentsSection(p: AccountPageInput): string {
  const body = p.consents.length
    ? `<ul class="items">
${p.consents.map((c) => `<li class="consent-item">
<strong>${escapeHtml(c.name)}</strong> <span class="muted">(${escapeHtml(c.client_id)})</span>
<div class="muted">may: ${escapeHtml(c.scopes.join(', '))} · allowed ${time(c.updated_at)}</div>
${form('/account/consents/withdraw', p.csrf, `${hiddenInput('client_id', c.client_id)}<button type="submit">Withdraw access</button>`, 'inline')}
</li>`).join('\n')}
</ul>`
    : '<p>You have not allowed any application to access your account.</p>';
  return `<section id="applications" aria-labelledby="applications-h">
<h2 id="applications-h">Applications you allowed</h2>
${body}
</section>`;
}

function delegationsSection(p: AccountPageInput): string {
  const body = p.delegations.length
    ? `<ul class="items">
${p.delegations.map((d) => `<li class="delegation-item">
<strong>${escapeHtml(d.name)}</strong> <span class="muted">(${escapeHtml(d.agent_id)})</span>
<div class="muted">may: ${escapeHtml(d.capabilities.join(', ') || 'nothing')} · since ${time(d.created_at)}</div>
${form('/account/agents/withdraw', p.csrf, `${hiddenInput('agent_id', d.agent_id)}<button type="submit">Stop this agent acting for you</button>`, 'inline')}
</li>`).join('\n')}
</ul>`
    : '<p>No agent acts for you.</p>';
  const grant = p.fresh
    ? form('/account/agents/allow', p.csrf, `<label>Agent ID <input name="agent_id" required maxlength="512"></label>
<label>Capabilities (separated by spaces; none: all the agent holds) <input name="capabilities" maxlength="4000"></label>
<button type="submit">Let this agent act for me</button>`)
    : '<p class="muted">Sign in again to let another agent act for you.</p>';
  return `<section id="agents" aria-labelledby="agents-h">
<h2 id="agents-h">Agents acting for you</h2>
<p class="muted">An agent you allow here may obtain tokens acting for you (and hand work to the sub-agents it lists), with at most the capabilities you name. Stopping it stops every token it and its sub-agents hold at their next use.</p>
${body}
${grant}
</section>`;
}

/**
 * The person's own page: profile, passkeys, authenticator app, sessions and the applications
 * they allowed. Every change is a POST form with the CSRF value; only adding a passkey needs
 * JavaScript (the WebAuthn ceremony).
 */
export function accountPage(p: AccountPageInput): string {
  return renderPage(
    'Your account',
    `${p.message ? notice(p.message.text, p.message.kind) : ''}
<p>Signed in as <strong>${escapeHtml(p.user.email)}</strong>. <a href="/oauth/logout">Sign out</a></p>
${p.fresh ? '' : reauthNotice(p)}
${profileSection(p)}
${passkeysSection(p)}
${totpSection(p)}
${sessionsSection(p)}
${consentsSection(p)}
${delegationsSection(p)}`,
    { wide: true, scripts: PASSKEY_SCRIPTS },
  );
}

export interface TotpSetupPageInput {
  csrf: string;
  email: string;
  qrDataUri: string;
  secretGrouped: string;
  otpauthUri: string;
  replacing: boolean;
  message?: string;
}

/** Setting up an authenticator app: the QR code, the secret as text, and the code that confirms it. */
export function totpSetupPage(p: TotpSetupPageInput): string {
  return renderPage(
    'Set up your authenticator app',
    `${p.message ? notice(p.message) : ''}
<p>Scan this code with your authenticator app, or type the key in by hand.${p.replacing ? ' Your current app stops working once you confirm the new one.' : ''}</p>
<img class="qr" src="${escapeHtml(p.qrDataUri)}" alt="QR code holding the key for ${escapeHtml(p.email)}" width="192" height="192">
<p>Key: <code class="secret" id="totp-secret">${escapeHtml(p.secretGrouped)}</code></p>
<p class="muted">Time-based, 6 digits, every 30 seconds. <a href="${escapeHtml(p.otpauthUri)}">Open in an authenticator app on this device</a></p>
<form method="post" action="/account/totp/confirm">
${hiddenInput('csrf', p.csrf)}
<label for="otp">Enter the 6-digit code the app shows</label>
<input id="otp" type="text" name="otp" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required autofocus>
<button type="submit">Confirm</button>
</form>
<p><a href="/account#totp">Cancel</a></p>`,
  );
}
