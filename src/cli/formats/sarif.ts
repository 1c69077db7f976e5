// `policy check --format sarif`: the diagnostics as a SARIF 2.1.0 log, the format code-scanning
// services read (GitHub code scanning annotates the pull request's lines with it). One run, the
// tool `gatehouse`; a rule per diagnostic code met; a result per diagnostic at its file, line
// and column, level error or warning.

export interface SarifDiagnostic { file: string; line: number; col: number; severity: 'error' | 'warning'; code: string; message: string }

import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';

const SCHEMA = 'https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json';

/** What each code means, for the rule's description; a code not listed is described by its name. */
const RULE_TEXT: Record<string, string> = {
  parse_error: 'The policy file does not parse.',
  invalid_policy: 'The policy parses but is not valid (an unknown name, a type mismatch, a duplicate).',
  policy_warning: 'The policy is valid but likely not what was meant.',
};

function ruleText(code: string): string {
  return RULE_TEXT[code] ?? code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase()) + '.';
}

/** A relative path as a relative URI reference (resolved against the repository root by code scanning) (forward slashes, each segment percent-encoded). */
export function uriOf(path: string): string {
  return path.split(/[\\/]/).map(encodeURIComponent).join('/');
}

export function sarifLog(diagnostics: SarifDiagnostic[], version: string) {
  const codes = [...new Set(diagnostics.map((d) => d.code))].sort();
  const index = new Map(codes.map((c, i) => [c, i]));
  return {
    $schema: SCHEMA,
    version: '2.1.0' as const,
    runs: [{
      tool: {
        driver: {
          name: 'gatehouse',
          version,
          rules: codes.map((code) => ({
            id: code,
            name: code.replace(/(^|_)(.)/g, (_, __, c: string) => c.toUpperCase()),
            shortDescription: { text: ruleText(code) },
            defaultConfiguration: { level: code === 'policy_warning' ? 'warning' : 'error' },
          })),
        },
      },
      results: diagnostics.map((d) => ({
        ruleId: d.code,
        ruleIndex: index.get(d.code)!,
        level: d.severity,
        message: { text: d.message },
        locations: [{
          physicalLocation: {
            artifactLocation: { uri: isAbsolute(d.file) ? pathToFileURL(d.file).href : uriOf(d.file) },
            region: { startLine: Math.max(1, d.line), startColumn: Math.max(1, d.col) },
          },
        }],
      })),
      columnKind: 'utf16CodeUnits' as const,
    }],
  };
}
