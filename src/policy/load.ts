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
import { analyzePolicy } from './analyze.js';
import { modelWarnings } from './relations/model.js';
import { apiRuleSource, fileSource, policyVersion } from './version.js';

export const POLICY_EXT = '.policy';
export const TESTS_EXT = '.tests';

export function isTestsFile(path: string): boolean {
  return path.endsWith(TESTS_EXT);
}

export interface ParsedSet { files: PolicyFileNode[]; apiRules: RuleNode[]; diagnostics: Diagnostic[] }

export interface CheckOptions {
  /** Also analyse the set and report rules that can never apply, as warnings (`policy check`). */
  warnings?: boolean;
  /** With `warnings`: report them as errors. */
  strict?: boolean;
}

/** Does a list of diagnostics hold an error (warnings alone do not stop a policy set)? */
export function hasErrors(ds: Diagnostic[]): boolean {
  return ds.some((d) => d.severity !== 'warning');
}

/**
 * Parse and validate without compiling (used by check, fmt, test and diff). The diagnostics
 * are the errors, in file order then position; with `warnings`, the analysis's warnings follow
 * (only when there is no error: a broken set is not analysed).
 */
export function parseAndValidate(input: { files: SourceFile[]; rules?: JsonRule[] }, opts: CheckOptions = {}): ParsedSet {
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
  const order = new Map<string, number>();
  input.files.forEach((f, i) => order.set(f.path, i));
  const rank = (d: Diagnostic) => order.get(d.file) ?? input.files.length;
  diagnostics.sort((a, b) => rank(a) - rank(b) || (rank(a) === input.files.length ? 0 : a.line - b.line || a.col - b.col));
  if (opts.warnings && !diagnostics.length) {
    const policyFiles = files.filter((f) => !isTestsFile(f.path));
    for (const w of [...analyzePolicy(policyFiles, apiRules), ...modelWarnings(policyFiles)]) diagnostics.push(opts.strict ? { ...w, severity: 'error' } : w);
  }
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
    return { policySet: null, diagnostics: [{ file: '<policy>', line: 1, col: 1, message: `internal error: ${e instanceof Error ? e.message : String(e)}`, severity: 'error' }] };
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
