import { escapeHtml } from './layout.js';

/** One field's value, readable: text as is, lists joined, objects as nested lists of their fields. */
function valueHtml(v: unknown, depth = 0): string {
  if (v === null || v === undefined) return '<em>none</em>';
  if (typeof v === 'string') return escapeHtml(v);
  if (typeof v === 'number' || typeof v === 'boolean') return escapeHtml(String(v));
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object' || x === null)) return v.map((x) => valueHtml(x, depth + 1)).join(', ');
  if (depth > 6) return `<code>${escapeHtml(JSON.stringify(v))}</code>`;
  if (Array.isArray(v)) return `<ol>${v.map((x) => `<li>${valueHtml(x, depth + 1)}</li>`).join('')}</ol>`;
  return fieldsHtml(v as Record<string, unknown>, depth + 1);
}

function fieldsHtml(fields: Record<string, unknown>, depth: number): string {
  const rows = Object.entries(fields).map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${valueHtml(v, depth)}</dd>`);
  return `<dl>${rows.join('')}</dl>`;
}

/**
 * What a person is asked to approve (RFC 9396 authorization details), escaped: each detail's
 * type (with the type's description when it has one) and its fields.
 */
export function authorizationDetailsHtml(details: readonly Record<string, unknown>[], descriptions: ReadonlyMap<string, string> = new Map()): string {
  const items = details.map((d) => {
    const { type, ...fields } = d;
    const name = typeof type === 'string' ? type : '';
    const description = descriptions.get(name);
    return `<li class="authorization-detail"><p><strong>${escapeHtml(name)}</strong>${description ? ` — ${escapeHtml(description)}` : ''}</p>
${fieldsHtml(fields, 0)}</li>`;
  });
  return `<ul class="authorization-details">\n${items.join('\n')}\n</ul>`;
}
