import type { Diagnostic } from './types.js';

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.col}: ${d.message}`;
}
