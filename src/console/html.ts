import type { Response } from 'express';
import { escapeHtml, hiddenInput, htmlDocument, notice, sendPage } from '../pages/layout.js';
import type { Person } from './session.js';

export { escapeHtml, notice };
const e = escapeHtml;

/**
 * The console's pages: server-rendered HTML in which every value passes through escapeHtml,
 * styled and enhanced only by /console/static files. The policy allows scripts and styles from
 * the console's own origin and nothing inline, so injected markup can neither run nor restyle.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * Sends a console page: never cached or framed. The referrer policy is same-origin (not
 * no-referrer as on the sign-in pages): with no-referrer a browser sends `Origin: null` on a
 * form POST, and the console checks that its POSTs come from the issuer's own origin.
 */
export function sendConsolePage(res: Response, status: number, html: string): void {
  sendPage(res, status, html, CONSOLE_CSP, 'same-origin');
}

/** Markup that is already safe: built by these helpers from escaped values. */
export type Html = string;

export const SECTIONS = [
  ['applications', 'Applications'],
  ['people', 'People'],
  ['roles', 'Roles'],
  ['agents', 'Agents'],
  ['rules', 'Rules'],
  ['relationships', 'Relationships'],
  ['policy', 'Policy'],
  ['approvals', 'Approvals'],
  ['audit', 'Audit trail'],
  ['keys', 'Keys'],
  ['trusted-issuers', 'Trusted issuers'],
  ['streams', 'Streams'],
] as const;
export type Section = (typeof SECTIONS)[number][0] | 'home';

export interface PageInput {
  title: string;
  body: Html;
  person?: Person;
  section?: Section;
  flash?: string;
  /** a line under the title */
  lead?: Html;
}

/** The one shell of every console page. */
export function consolePage(p: PageInput): Html {
  const nav = p.person
    ? `<nav class="sections" aria-label="Console sections"><ul>
${SECTIONS.map(([key, label]) => `<li><a href="/console/${key}"${p.section === key ? ' aria-current="page"' : ''}>${e(label)}</a></li>`).join('\n')}
</ul></nav>`
    : '';
  const who = p.person
    ? `<div class="who"><span class="who-email">${e(p.person.user.email)}</span>
<form method="post" action="/console/logout" class="inline">${csrfInput(p.person)}<button type="submit" class="link">Sign out</button></form></div>`
    : '';
  return htmlDocument({
    title: `${p.title} · Gatehouse console`,
    referrer: 'same-origin',
    head: `<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
`,
    body: `<header class="top">
<a class="brand" href="/console">Gatehouse <span>console</span></a>
${who}
${nav}
</header>
<main id="main">
<h1>${e(p.title)}</h1>
${p.lead ? `<p class="lead">${p.lead}</p>` : ''}
${p.flash ? notice(p.flash, 'info') : ''}
${p.body}
</main>`,
  });
}

// ---- components ------------------------------------------------------------------------

export const csrfInput = (person: Person): Html => hiddenInput('csrf', person.csrf);
export const hidden = hiddenInput;

export function errorList(messages: string[]): Html {
  if (!messages.length) return '';
  if (messages.length === 1) return notice(messages[0]!);
  return `<div class="notice error" role="alert"><ul>${messages.map((m) => `<li>${e(m)}</li>`).join('')}</ul></div>`;
}

export function badge(text: string, kind = ''): Html {
  return `<span class="badge${kind ? ` ${e(kind)}` : ''}">${e(text)}</span>`;
}

export const code = (text: unknown): Html => `<code>${e(text)}</code>`;

interface FieldBase {
  name: string;
  label: string;
  /** unique on the page; defaults to the name */
  id?: string;
  errors?: string[];
  hint?: string;
  required?: boolean;
}

function describe(f: FieldBase): { id: string; attrs: string; after: Html } {
  const id = f.id ?? `f-${f.name}`;
  const errs = f.errors ?? [];
  const ids: string[] = [];
  let after = '';
  if (f.hint) {
    ids.push(`${id}-hint`);
    after += `<p class="hint" id="${e(id)}-hint">${e(f.hint)}</p>`;
  }
  if (errs.length) {
    ids.push(`${id}-error`);
    after += `<p class="field-error" id="${e(id)}-error">${errs.map(e).join('<br>')}</p>`;
  }
  const attrs = `${ids.length ? ` aria-describedby="${e(ids.join(' '))}"` : ''}${errs.length ? ' aria-invalid="true"' : ''}${f.required ? ' required' : ''}`;
  return { id, attrs, after };
}

export function input(f: FieldBase & { value?: string; type?: string; placeholder?: string; autocomplete?: string; extra?: string }): Html {
  const d = describe(f);
  return `<div class="field${f.errors?.length ? ' has-error' : ''}">
<label for="${e(d.id)}">${e(f.label)}</label>
<input id="${e(d.id)}" name="${e(f.name)}" type="${e(f.type ?? 'text')}" value="${e(f.value ?? '')}"${f.placeholder ? ` placeholder="${e(f.placeholder)}"` : ''}${f.autocomplete ? ` autocomplete="${e(f.autocomplete)}"` : ''}${d.attrs}${f.extra ?? ''}>
${d.after}</div>`;
}

export function textarea(f: FieldBase & { value?: string; rows?: number; placeholder?: string; mono?: boolean }): Html {
  const d = describe(f);
  return `<div class="field${f.errors?.length ? ' has-error' : ''}">
<label for="${e(d.id)}">${e(f.label)}</label>
<textarea id="${e(d.id)}" name="${e(f.name)}" rows="${f.rows ?? 3}"${f.mono ? ' class="mono"' : ''}${f.placeholder ? ` placeholder="${e(f.placeholder)}"` : ''} spellcheck="false"${d.attrs}>${e(f.value ?? '')}</textarea>
${d.after}</div>`;
}

export function select(f: FieldBase & { value?: string; options: readonly (readonly [string, string])[]; autosubmit?: boolean }): Html {
  const d = describe(f);
  const opts = f.options.map(([v, l]) => `<option value="${e(v)}"${v === (f.value ?? '') ? ' selected' : ''}>${e(l)}</option>`).join('');
  return `<div class="field${f.errors?.length ? ' has-error' : ''}">
<label for="${e(d.id)}">${e(f.label)}</label>
<select id="${e(d.id)}" name="${e(f.name)}"${f.autosubmit ? ' data-autosubmit' : ''}${d.attrs}>${opts}</select>
${d.after}</div>`;
}

export function checkbox(f: FieldBase & { checked?: boolean; value?: string }): Html {
  const d = describe(f);
  return `<div class="field check${f.errors?.length ? ' has-error' : ''}">
<input id="${e(d.id)}" name="${e(f.name)}" type="checkbox" value="${e(f.value ?? 'on')}"${f.checked ? ' checked' : ''}${d.attrs}>
<label for="${e(d.id)}">${e(f.label)}</label>
${d.after}</div>`;
}

export function button(label: string, o: { name?: string; value?: string; kind?: 'primary' | 'danger' | 'plain'; id?: string; disabled?: boolean } = {}): Html {
  return `<button type="submit"${o.id ? ` id="${e(o.id)}"` : ''}${o.name ? ` name="${e(o.name)}" value="${e(o.value ?? '')}"` : ''} class="btn ${o.kind ?? 'primary'}"${o.disabled ? ' disabled' : ''}>${e(label)}</button>`;
}

/** A POST form carrying the CSRF token. `confirm` asks before sending (with JavaScript; without it the form needs its checkbox). */
export function postForm(action: string, person: Person, inner: Html, o: { cls?: string; multipart?: boolean; confirm?: string; id?: string } = {}): Html {
  return `<form method="post" action="${e(action)}"${o.id ? ` id="${e(o.id)}"` : ''}${o.cls ? ` class="${e(o.cls)}"` : ''}${o.multipart ? ' enctype="multipart/form-data"' : ''}${o.confirm ? ` data-confirm="${e(o.confirm)}"` : ''}>
${csrfInput(person)}
${inner}
</form>`;
}

/**
 * A destructive action: a form whose button only works once its "I am sure" box is ticked
 * (the browser enforces `required`, the server checks `confirm=yes` again).
 */
export function dangerForm(action: string, person: Person, label: string, sure: string, idPrefix: string, extra: Html = ''): Html {
  return postForm(
    action,
    person,
    `${extra}<div class="field check"><input id="${e(idPrefix)}-confirm" name="confirm" type="checkbox" value="yes" required>
<label for="${e(idPrefix)}-confirm">${e(sure)}</label></div>
${button(label, { kind: 'danger' })}`,
    { cls: 'danger-zone', confirm: sure },
  );
}

/** A table that turns into labelled cards on a narrow screen (each cell carries its column name). */
export function table(headers: string[], rows: Html[][], o: { empty?: string; cls?: string } = {}): Html {
  if (!rows.length) return `<p class="empty">${e(o.empty ?? 'Nothing here yet.')}</p>`;
  const head = headers.map((h) => `<th scope="col">${e(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c, i) => `<td data-label="${e(headers[i] ?? '')}">${c}</td>`).join('')}</tr>`).join('\n');
  return `<div class="table-wrap"><table class="list${o.cls ? ` ${e(o.cls)}` : ''}"><thead><tr>${head}</tr></thead><tbody>
${body}
</tbody></table></div>`;
}

export function section(title: string, inner: Html, o: { id?: string; cls?: string } = {}): Html {
  return `<section class="panel${o.cls ? ` ${e(o.cls)}` : ''}"${o.id ? ` id="${e(o.id)}"` : ''}><h2>${e(title)}</h2>
${inner}
</section>`;
}

/** A collapsible panel (open when it holds errors), for forms that need not fill the page. */
export function details(summary: string, inner: Html, open = false, id?: string): Html {
  return `<details class="panel"${open ? ' open' : ''}${id ? ` id="${e(id)}"` : ''}><summary>${e(summary)}</summary>
${inner}
</details>`;
}

export const pre = (text: string, cls = ''): Html => `<pre${cls ? ` class="${e(cls)}"` : ''}>${e(text)}</pre>`;

export const when = (t: string | null | undefined): Html => (t ? `<time datetime="${e(t)}">${e(t.replace('T', ' ').replace(/\.\d+Z$|Z$/, ' UTC'))}</time>` : '');

export const link = (href: string, text: string): Html => `<a href="${e(href)}">${e(text)}</a>`;

/** A path segment for an id that may hold `/` or `:` (agent SPIFFE IDs). */
export const seg = (id: string): string => encodeURIComponent(id);
