// Loading a policy set: parse every file, validate files and API rules,
// then compile. Any error → no policy set, and every diagnostic.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Diagnostic, JsonRule, SourceFile } from './types.js';
import type { PolicyFileNode, RuleNode } from './ast.js';
import type { PolicySet } from './compile.js';
import { compilePolicy } from './compile.js';
import { jsonRuleToAst, ruleSource } from './json.js';
import { parsePolicy } from './parser.js';
import { validateAcross, validateFile } from './validate.js';
import { apiRuleSource, fileSource, policyVersion } from './version.js';

export const POLICY_EXT = '.policy';
export const TESTS_EXT = '.tests';

export function isTestsFile(path: string): boolean {
  return path.endsWith(TESTS_EXT);
}

export interface ParsedSet { files: PolicyFileNode[]; apiRules: RuleNode[]; diagnostics: Diagnostic[] }

/** Parse and validate without compiling (used by check, fmt, test and diff). */
export function parseAndValidate(input: { files: SourceFile[]; rules?: JsonRule[] }): ParsedSet {
  const diagnostics: Diagnostic[] = [];
  const files: PolicyFileNode[] = [];
  for (const f of input.files) {
    const r = parsePolicy(f.path, f.text);
    diagnostics.push(...r.diagnostics);
    if (r.file) {
      validateFile(r.file, diagnostics, isTestsFile(f.path));
      files.push(r.file);
    }
  }
  const apiRules: RuleNode[] = [];
  for (const rule of input.rules ?? []) {
    const src = ruleSource(rule as { id?: unknown; name?: unknown });
    const r = jsonRuleToAst(rule, src);
    diagnostics.push(...r.diagnostics);
    if (r.rule) apiRules.push(r.rule);
  }
  validateAcross(files, apiRules, diagnostics);
  return { files, apiRules, diagnostics };
}

export function buildPolicySet(files: PolicyFileNode[], apiRules: RuleNode[]): PolicySet {
  const policyFiles = files.filter((f) => !isTestsFile(f.path));
  const sources = [...policyFiles.map(fileSource), ...apiRules.map(apiRuleSource)];
  return { version: policyVersion(sources), sources, compiled: compilePolicy(policyFiles, apiRules) };
}

export function loadPolicySet(input: { files: SourceFile[]; rules?: JsonRule[] }): { policySet: PolicySet | null; diagnostics: Diagnostic[] } {
  try {
    const { files, apiRules, diagnostics } = parseAndValidate(input);
    if (diagnostics.length) return { policySet: null, diagnostics };
    return { policySet: buildPolicySet(files, apiRules), diagnostics: [] };
  } catch (e) {
    return { policySet: null, diagnostics: [{ file: '<policy>', line: 1, col: 1, message: `internal error: ${e instanceof Error ? e.message : String(e)}` }] };
  }
}

async function readDir(dir: string, ext: string[]): Promise<SourceFile[]> {
  const names = (await readdir(dir, { withFileTypes: true }))
    .filter((d) => d.isFile() && ext.some((e) => d.name.endsWith(e)))
    .map((d) => d.name)
    .sort();
  return Promise.all(names.map(async (n) => ({ path: join(dir, n), text: await readFile(join(dir, n), 'utf8') })));
}

/** The `*.policy` files of a directory, sorted by name. */
export async function readPolicyDir(dir: string): Promise<SourceFile[]> {
  return readDir(dir, [POLICY_EXT]);
}

/** The `*.policy` and `*.tests` files of a directory, sorted by name. */
export async function readPolicyAndTests(dir: string): Promise<SourceFile[]> {
  return readDir(dir, [POLICY_EXT, TESTS_EXT]);
}
