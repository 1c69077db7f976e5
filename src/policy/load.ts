import type { Diagnostic, JsonRule, SourceFile } from './types.js';
import type { PolicySet } from './compile.js';
export function loadPolicySet(_input: { files: SourceFile[]; rules?: JsonRule[] }): { policySet: PolicySet | null; diagnostics: Diagnostic[] } {
  return { policySet: { version: 'stub', sources: [], compiled: null }, diagnostics: [] };
}
export async function readPolicyDir(_dir: string): Promise<SourceFile[]> { return []; }
