// Printing diagnostics: the one-line form (`file:line:col: message`, for logs and API answers)
// and the form with the source line and a caret under the column (for people at a terminal).

import type { Diagnostic } from './types.js';

/** What every diagnostic may carry; older producers leave `severity` out, meaning an error. */
type AnyDiagnostic = Diagnostic & { severity?: 'error' | 'warning'; code?: string };

export type Severity = 'error' | 'warning';

export function severityOf(d: Diagnostic): Severity {
  return (d as AnyDiagnostic).severity === 'warning' ? 'warning' : 'error';
}

export function isError(d: Diagnostic): boolean {
  return severityOf(d) === 'error';
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.col}: ${severityOf(d) === 'warning' ? 'warning: ' : ''}${d.message}`;
}

/**
 * A stable machine-readable code: the producer's own when it gives one, else the stage that
 * found it (a file that does not parse, or a policy that parses but is invalid), else a warning.
 */
export function diagnosticCode(d: Diagnostic, parseErrors: ReadonlySet<Diagnostic>): string {
  const own = (d as AnyDiagnostic).code;
  if (typeof own === 'string' && own) return own;
  if (severityOf(d) === 'warning') return 'policy_warning';
  return parseErrors.has(d) ? 'parse_error' : 'invalid_policy';
}

/**
 * The diagnostic, then its source line and a caret under the column, as rustc and cedar print
 * them. The caret runs under the whole token at the column (a word, a quoted string or an
 * operator), so `effect allow` underlines `allow`. Tabs in the line are kept in the caret line
 * so the caret stays aligned in any terminal.
 */
export function renderDiagnostic(d: Diagnostic, source: string | undefined): string {
  const head = formatDiagnostic(d);
  const line = source === undefined ? undefined : sourceLine(source, d.line);
  if (line === undefined) return head + '\n';
  const gutter = String(d.line);
  const pad = ' '.repeat(gutter.length);
  const col = Math.max(1, Math.min(d.col, line.length + 1));
  const before = line.slice(0, col - 1).replace(/[^\t]/g, ' ');
  const width = Math.max(1, tokenLength(line, col - 1));
  return `${head}\n ${pad} |\n ${gutter} | ${line}\n ${pad} | ${before}${'^'.repeat(width)}\n`;
}

/** The 1-based line of a text, without its line ending; undefined past the end. */
function sourceLine(text: string, n: number): string | undefined {
  let start = 0;
  for (let i = 1; i < n; i++) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) return undefined;
    start = nl + 1;
  }
  const end = text.indexOf('\n', start);
  return text.slice(start, end < 0 ? text.length : end).replace(/\r$/, '');
}

const WORD = /[A-Za-z0-9_:*./@-]/;
const OPERATOR = /[=!<>]/;

function tokenLength(line: string, i: number): number {
  const c = line[i];
  if (c === undefined) return 1;
  if (c === '"') {
    for (let j = i + 1; j < line.length; j++) {
      if (line[j] === '\\') { j++; continue; }
      if (line[j] === '"') return j - i + 1;
    }
    return line.length - i;
  }
  for (const re of [WORD, OPERATOR]) {
    if (!re.test(c)) continue;
    let j = i;
    while (j < line.length && re.test(line[j]!)) j++;
    return j - i;
  }
  return 1;
}
