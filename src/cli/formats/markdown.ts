// `policy diff --format markdown`: the diff as a pull-request comment. A summary line, the
// regions as one table (who, what, on what, when, decision before → after), then each region's
// example request in a collapsed <details> block, ready for `policy explain --request`.

import type { Change, DiffResult } from '../../policy/diff.js';
import { fieldDescText } from '../../policy/diff.js';

/** A table cell: pipes escaped, line breaks flattened, code spans kept whole. */
function cell(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function code(s: string): string {
  // A code span holding backticks needs a longer fence than any run inside it.
  const longest = Math.max(0, ...[...s.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${longest ? ' ' : ''}${s}${longest ? ' ' : ''}${fence}`;
}

function html(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function who(c: Change): string {
  const ex = c.except ?? {};
  const kind = c.subjects[0]!.startsWith('user:') ? ' (acting directly)' : c.no_person ? ' (no person)' : '';
  return c.subjects.map(code).join(', ') + kind + (ex.subjects?.length ? ` except ${ex.subjects.map(code).join(', ')}` : '');
}

function withExcept(main: string, except: string[] | undefined): string {
  return code(main) + (except?.length ? ` except ${except.map(code).join(', ')}` : '');
}

function when(c: Change): string {
  const parts = Object.entries(c.region).map(([f, d]) => code(fieldDescText(f, d)));
  return (parts.join(' and ') || 'any request') + (c.timezone ? ` (time in ${c.timezone})` : '');
}

/** `before`/`after`: what the two sides are called in the summary (a git revision, a directory). */
export function diffMarkdown(r: DiffResult, names: { before: string; after: string }): string {
  const out: string[] = [];
  const between = `${code(names.before)} → ${code(names.after)}`;
  if (!r.changes.length) {
    out.push(`**Policy diff** ${between}: no decision changes.`);
  } else {
    const flows = new Map<string, number>();
    for (const c of r.changes) flows.set(`${c.before} → ${c.after}`, (flows.get(`${c.before} → ${c.after}`) ?? 0) + 1);
    const counts = [...flows].map(([f, n]) => `${n} ${f}`).join(', ');
    out.push(`**Policy diff** ${between}: ${r.changes.length} region${r.changes.length === 1 ? '' : 's'} change decision (${counts}).`);
    out.push('');
    out.push('| # | Who | Action | On | When | Before | After |');
    out.push('|---|-----|--------|----|------|--------|-------|');
    r.changes.forEach((c, i) => {
      const row = [String(i + 1), who(c), withExcept(c.relation, c.except?.relation), withExcept(c.object, c.except?.object), when(c), `**${c.before}**`, `**${c.after}**`];
      out.push(`| ${row.map(cell).join(' | ')} |`);
    });
    r.changes.forEach((c, i) => {
      out.push('');
      out.push('<details>');
      out.push(`<summary>Example ${i + 1}: ${html(c.relation)} on ${html(c.example.resource)}, ${c.before} → ${c.after}</summary>`);
      out.push('');
      out.push('```json');
      out.push(JSON.stringify(c.example, null, 2));
      out.push('```');
      out.push('');
      out.push('`gatehouse policy explain --request \'<this JSON>\'` shows every check behind the decision.');
      out.push('');
      out.push('</details>');
    });
  }
  for (const n of r.notes) { out.push(''); out.push(`> **Note:** ${n}`); }
  return out.join('\n') + '\n';
}
