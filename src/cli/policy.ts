// `gatehouse policy check|fmt|test|diff|verify|explain`. Every error is printed with its source line and
// a caret; `--format json` gives the same facts to machines. Exit codes: 0 success, 1 a policy
// error (or a failing test, a file fmt would change under --check), 2 a usage or input error;
// diff: 1 when something changes, 2 also for two sets too large to compare exactly (one line
// saying what was too large: a diff's work is bounded); verify: 1 when an invariant does not hold,
// 2 when one cannot be proven; explain: 0 allow, 3 deny, 4 approval_required.

import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import type { Diagnostic, DecisionRequest, DecisionValue, SourceFile } from '../policy/types.js';
import { diagnosticCode, formatDiagnostic, isError, renderDiagnostic, severityOf } from '../policy/diagnostics.js';
import { buildPolicySet, isTestsFile, parseAndValidate, POLICY_EXT, TESTS_EXT, type ParsedSet } from '../policy/load.js';
import { parsePolicy } from '../policy/parser.js';
import { formatFile } from '../policy/format.js';
import { collectTests, fixturesOf, runTests } from '../policy/test-runner.js';
import { MemoryIndex } from '../policy/relations/index.js';
import { parseRelationshipJson, parseRelationshipText, type Relationship } from '../policy/relations/tuple.js';
import { DiffRefused, DiffTooLarge, diffPolicySets, diffText } from '../policy/diff.js';
import { diffRelations, relationDiffText, unmodelled } from '../policy/relations/diff.js';
import { completeRequest, explainDecision } from '../policy/explain.js';
import { UsageError, type CliIO, type ParsedArgs } from './args.js';
import { explainText } from './explain-text.js';
import { runCli, version } from './main.js';
import { junitXml, type JunitCase } from './formats/junit.js';
import { sarifLog } from './formats/sarif.js';
import { diffMarkdown } from './formats/markdown.js';
import { filesAtRevision, GitError } from './git.js';
import { combineCoverage, coverageLcov, coverageText, measureCoverage, type Coverage } from '../policy/coverage.js';
import { unifiedDiff } from './udiff.js';
import { counterexampleText, invariantDiagnostics, verifyInvariants } from '../policy/verify.js';

/** `gatehouse policy ...` as one call (tests run it in process). */
export async function runPolicyCommand(args: string[], io: CliIO): Promise<number> {
  return (await runCli(['policy', ...args], io)) ?? 0;
}

export const EXPLAIN_EXIT: Record<DecisionValue, number> = { allow: 0, deny: 3, approval_required: 4 };

function defaultDir(): string {
  return process.env.GATEHOUSE_POLICY_DIR || 'policies';
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function wantsJson(a: ParsedArgs): boolean {
  return a.options.has('--json') || a.options.get('--format') === 'json';
}

function json(io: CliIO, value: unknown): void {
  io.stdout(JSON.stringify(value, null, 2) + '\n');
}

/** A file or directory the user named that cannot be read: an input error, exit 2. */
class InputError extends Error {}

function abs(io: CliIO, p: string): string {
  return isAbsolute(p) ? p : resolve(io.cwd, p);
}

async function isDirectory(io: CliIO, target: string): Promise<boolean> {
  try {
    return (await stat(abs(io, target))).isDirectory();
  } catch (e) {
    throw new InputError(ioMessage(e, target));
  }
}

function ioMessage(e: unknown, path: string): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return `no such file or directory: ${path}`;
  if (code === 'EACCES') return `permission denied: ${path}`;
  if (code === 'EISDIR') return `is a directory: ${path}`;
  return `cannot read ${path}: ${(e as Error).message}`;
}

async function readSource(io: CliIO, path: string): Promise<SourceFile> {
  try {
    return { path, text: await readFile(abs(io, path), 'utf8') };
  } catch (e) {
    throw new InputError(ioMessage(e, path));
  }
}

/** The files of a directory with the given endings, sorted by name, paths as the user wrote them. */
async function readDirFiles(io: CliIO, dir: string, exts: string[]): Promise<SourceFile[]> {
  let names: string[];
  try {
    names = (await readdir(abs(io, dir), { withFileTypes: true }))
      .filter((d) => d.isFile() && exts.some((e) => d.name.endsWith(e)))
      .map((d) => d.name)
      .sort();
  } catch (e) {
    throw new InputError(ioMessage(e, dir));
  }
  return Promise.all(names.map((n) => readSource(io, join(dir, n))));
}

/** A target: a file as itself, a directory as its policy and tests files. */
async function readTarget(io: CliIO, target: string, exts = [POLICY_EXT, TESTS_EXT]): Promise<SourceFile[]> {
  return (await isDirectory(io, target)) ? readDirFiles(io, target, exts) : [await readSource(io, join(target))];
}

/** Source texts by path, for the caret under each diagnostic. */
type Sources = Map<string, string>;

function sourcesOf(files: SourceFile[], into: Sources = new Map()): Sources {
  for (const f of files) into.set(f.path, f.text);
  return into;
}

/** By file (in the order read), then line and column: every file's diagnostics together. */
function sortDiagnostics(ds: Diagnostic[], sources: Sources): Diagnostic[] {
  const order = new Map([...sources.keys()].map((p, i) => [p, i]));
  const rank = (d: Diagnostic) => order.get(d.file) ?? order.size;
  return [...ds].sort((a, b) => rank(a) - rank(b) || a.line - b.line || a.col - b.col);
}

function printDiagnostics(io: CliIO, ds: Diagnostic[], sources: Sources): void {
  for (const d of sortDiagnostics(ds, sources)) io.stderr(renderDiagnostic(d, sources.get(d.file)) + '\n');
}

function summary(errors: number, warnings: number): string {
  return [errors ? plural(errors, 'error') : '', warnings ? plural(warnings, 'warning') : ''].filter(Boolean).join(', ');
}

/** Diagnostics as JSON: the parse errors are told apart by comparing with a parse-only pass. */
function diagnosticsJson(ds: Diagnostic[], files: SourceFile[], sources: Sources) {
  const parseErrors = new Set<Diagnostic>();
  const parsedKeys = new Set<string>();
  for (const f of files) for (const d of parsePolicy(f.path, f.text).diagnostics) parsedKeys.add(`${d.file}:${d.line}:${d.col}:${d.message}`);
  for (const d of ds) if (parsedKeys.has(`${d.file}:${d.line}:${d.col}:${d.message}`)) parseErrors.add(d);
  return sortDiagnostics(ds, sources).map((d) => ({
    file: d.file, line: d.line, col: d.col, severity: severityOf(d), code: diagnosticCode(d, parseErrors), message: d.message,
  }));
}

/** Runs a command body; a missing file or directory becomes one line and exit 2. */
async function guarded(io: CliIO, name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof InputError) {
      io.stderr(`gatehouse policy ${name}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}

// ---- check ------------------------------------------------------------------------------

export function check(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'check', async () => {
    const targets = a.positionals.length ? a.positionals : [defaultDir()];
    const strict = a.options.has('--strict');
    const asSarif = a.options.get('--format') === 'sarif';
    const asJson = wantsJson(a) || asSarif;
    const diagnostics: ReturnType<typeof diagnosticsJson> = [];
    const results = [];
    let errors = 0;
    let warnings = 0;
    for (const target of targets) {
      const files = await readTarget(io, target);
      const sources = sourcesOf(files);
      const parsed = parseAndValidate({ files }, { warnings: true });
      const errs = parsed.diagnostics.filter(isError);
      const warns = parsed.diagnostics.filter((d) => !isError(d));
      errors += errs.length;
      warnings += warns.length;
      const ok = !errs.length && !(strict && warns.length);
      // Invariants are checked once the set is valid: one that does not hold (or cannot be proven) is an error.
      if (!errs.length) {
        const broken = invariantDiagnostics(buildPolicySet(parsed.files, []));
        parsed.diagnostics.push(...broken);
        errs.push(...broken);
        errors += broken.length;
      }
      const facts = errs.length ? null : described(parsed);
      if (asJson) {
        diagnostics.push(...diagnosticsJson(parsed.diagnostics, files, sources));
        results.push({ target, ok, files: files.map((f) => f.path), rules: facts?.rules ?? null, tests: facts?.tests ?? null, policy_version: facts?.version ?? null });
        continue;
      }
      printDiagnostics(io, parsed.diagnostics, sources);
      if (facts && ok) io.stdout(`ok: ${plural(files.length, 'file')}, ${plural(facts.rules, 'rule')}, ${plural(facts.tests, 'test')}; policy version ${facts.version}\n`);
    }
    const failed = errors > 0 || (strict && warnings > 0);
    if (asSarif) json(io, sarifLog(diagnostics, version()));
    else if (asJson) json(io, { ok: !failed, errors, warnings, strict, diagnostics, targets: results });
    else if (errors || warnings) io.stderr(`${summary(errors, warnings)}${strict && warnings ? ' (warnings fail under --strict)' : ''}\n`);
    return failed ? 1 : 0;
  });
}

function described(parsed: ParsedSet) {
  const set = buildPolicySet(parsed.files, []);
  return { rules: set.compiled.rules.length, tests: collectTests(parsed.files).length, version: set.version };
}

// ---- fmt --------------------------------------------------------------------------------

export function fmt(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'fmt', async () => {
    const write = a.options.has('--write');
    const checkOnly = a.options.has('--check');
    const showDiff = a.options.has('--diff');
    if (write && checkOnly) throw new UsageError('--check never writes: use --check or --write, not both');
    const targets = a.positionals.length ? a.positionals : [defaultDir()];
    const files: SourceFile[] = [];
    for (const t of targets) files.push(...(await readTarget(io, t)));
    const headers = files.length > 1;
    let unparsable = false;
    let changed = 0;
    for (const f of files) {
      const r = parsePolicy(f.path, f.text);
      if (!r.file) {
        printDiagnostics(io, r.diagnostics.filter(isError), sourcesOf([f]));
        unparsable = true;
        continue;
      }
      const out = formatFile(r.file);
      const differs = out !== f.text;
      if (differs) changed++;
      if (showDiff) io.stdout(unifiedDiff(f.text, out, f.path, f.path));
      if (write && differs) {
        await writeFile(abs(io, f.path), out);
        if (!showDiff) io.stdout(`formatted ${f.path}\n`);
      } else if (checkOnly && differs && !showDiff) {
        io.stdout(`would reformat ${f.path}\n`);
      } else if (!write && !checkOnly && !showDiff) {
        io.stdout(headers ? `==> ${f.path} <==\n${out}` : out);
      }
    }
    if (unparsable) return 1;
    return checkOnly && changed ? 1 : 0;
  });
}

// ---- test -------------------------------------------------------------------------------

/**
 * The policies a test runs against are those of a directory: a directory target's own files, a
 * file target's directory. A file's tests run alone; the directory's other tests files do not.
 */
interface TestGroup { dir: string; files: Map<string, SourceFile>; testsFrom: Set<string> | null }

async function testGroups(io: CliIO, targets: string[]): Promise<TestGroup[]> {
  const groups = new Map<string, TestGroup>();
  const group = async (dir: string) => {
    let g = groups.get(dir);
    if (!g) {
      const files = new Map((await readDirFiles(io, dir, [POLICY_EXT])).map((f) => [f.path, f]));
      g = { dir, files, testsFrom: new Set() };
      groups.set(dir, g);
    }
    return g;
  };
  for (const target of targets) {
    if (await isDirectory(io, target)) {
      const g = await group(join(target));
      for (const f of await readDirFiles(io, target, [POLICY_EXT, TESTS_EXT])) g.files.set(f.path, f);
      g.testsFrom = null; // every file's tests
    } else {
      const path = join(dirname(target), basename(target));
      const g = await group(dirname(path));
      if (!g.files.has(path)) g.files.set(path, await readSource(io, path));
      g.testsFrom?.add(path);
    }
  }
  return [...groups.values()];
}

export function test(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'test', async () => {
    const format = a.options.get('--format');
    const minCoverage = minCoverageOf(a);
    // --coverage prints the coverage; --min-coverage alone measures it for its threshold only.
    const printCoverage = a.options.has('--coverage');
    const coverage = printCoverage || minCoverage !== undefined;
    if (format === 'lcov' && !printCoverage) throw new UsageError('--format lcov is coverage: add --coverage');
    if (format === 'junit' && printCoverage) throw new UsageError('--coverage prints text, json or lcov, not junit');
    // Coverage as JSON or LCOV replaces the results on stdout; failing tests still fail the run.
    const coverageOnly = printCoverage && (wantsJson(a) || format === 'lcov');
    const shown: CliIO = coverageOnly ? { ...io, stdout: () => {} } : io;
    const coverages: Coverage[] = [];
    const asJunit = format === 'junit';
    const asJson = (wantsJson(a) || asJunit) && !coverageOnly;
    const junitCases: JunitCase[] = [];
    const junitBroken: { name: string; message: string }[] = [];
    const groups = await testGroups(io, a.positionals.length ? a.positionals : [defaultDir()]);
    const diagnostics: ReturnType<typeof diagnosticsJson> = [];
    const results = [];
    let broken = false;
    let passed = 0;
    let failed = 0;
    for (const g of groups) {
      const files = [...g.files.values()];
      const sources = sourcesOf(files);
      const parsed = parseAndValidate({ files });
      const errs = parsed.diagnostics.filter(isError);
      if (errs.length) {
        broken = true;
        if (asJunit) junitBroken.push({ name: g.dir, message: errs.map(formatDiagnostic).join('\n') });
        if (asJson) diagnostics.push(...diagnosticsJson(errs, files, sources));
        else { printDiagnostics(io, errs, sources); io.stderr(`${summary(errs.length, 0)}\n`); }
        continue;
      }
      const set = buildPolicySet(parsed.files, []);
      const tests = collectTests(parsed.files.filter((f) => g.testsFrom === null || g.testsFrom.has(f.path)));
      const run = runTests(tests, set, parsed.files);
      if (coverage) coverages.push(measureCoverage(set, tests, parsed.files));
      const groupFailed = run.filter((r) => !r.passed).length;
      passed += run.length - groupFailed;
      failed += groupFailed;
      if (asJunit) {
        for (const [i, r] of run.entries()) {
          const t = tests[i]!;
          junitCases.push({
            name: r.name, file: t.loc?.file ?? null, line: t.loc?.line ?? null, passed: r.passed, expected: r.expected, failures: r.failures,
            ...(r.decision ? { actual: `${r.decision.decision} "${r.decision.reason}"` } : {}),
          });
        }
        continue;
      }
      if (asJson) {
        for (const [i, r] of run.entries()) {
          const t = tests[i]!;
          results.push({
            name: r.name, file: t.loc?.file ?? null, line: t.loc?.line ?? null,
            ...(t.expect && r.decision ? {
              expected: { decision: t.expect.decision, ...(t.expect.reason !== undefined ? { reason: t.expect.reason } : {}) },
              actual: { decision: r.decision.decision, reason: r.decision.reason },
            } : {}),
            ...(t.assertions?.length ? { failures: r.failures } : {}),
            pass: r.passed, policy_version: set.version,
          });
        }
        continue;
      }
      if (!run.length) { shown.stdout(`no tests${groups.length > 1 ? ` in ${g.dir}` : ''}\n`); continue; }
      for (const r of run) {
        if (r.passed) shown.stdout(`ok    ${r.name}\n`);
        else shown.stdout(`FAIL  ${r.name} (${r.source}): ${r.failures.join('; ')}\n`);
      }
      shown.stdout(`${run.length - groupFailed} passed, ${groupFailed} failed; policy version ${set.version}\n`);
    }
    if (asJunit) io.stdout(junitXml(junitCases, junitBroken));
    else if (asJson) json(io, { ok: !broken && failed === 0, passed, failed, diagnostics, results });
    let under = false;
    if (coverage) {
      const c = combineCoverage(coverages);
      if (!printCoverage) {
        // measured for --min-coverage alone
      } else if (format === 'lcov') io.stdout(coverageLcov(c));
      else if (coverageOnly) json(io, c);
      else io.stdout(coverageText(c));
      if (minCoverage !== undefined && c.percent < minCoverage) {
        under = true;
        io.stderr(`coverage ${c.percent}% is under the minimum of ${minCoverage}%\n`);
      }
    }
    return broken || failed || under ? 1 : 0;
  });
}

function minCoverageOf(a: ParsedArgs): number | undefined {
  const v = a.options.get('--min-coverage');
  if (v === undefined) return undefined;
  const n = typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) ? Number(v) : NaN;
  if (!(n >= 0 && n <= 100)) throw new UsageError(`--min-coverage must be a percent from 0 to 100, not '${String(v)}'`);
  return n;
}

// ---- diff -------------------------------------------------------------------------------

/**
 * One side of a diff: a file or directory on disk as itself; anything else a git revision, whose
 * `--dir` (default the policy directory) is read from the repository of the working directory.
 */
async function sideFiles(io: CliIO, target: string, dir: string): Promise<SourceFile[]> {
  let onDisk = true;
  try { await stat(abs(io, target)); } catch { onDisk = false; }
  if (onDisk) return (await readTarget(io, target, [POLICY_EXT])).filter((f) => !isTestsFile(f.path));
  try {
    return (await filesAtRevision(target, dir, [POLICY_EXT], io.cwd)).filter((f) => !isTestsFile(f.path));
  } catch (e) {
    if (e instanceof GitError) throw new InputError(e.message);
    throw e;
  }
}

function loadSide(io: CliIO, files: SourceFile[]) {
  const parsed = parseAndValidate({ files });
  const errs = parsed.diagnostics.filter(isError);
  if (errs.length) { printDiagnostics(io, errs, sourcesOf(files)); return null; }
  return buildPolicySet(parsed.files, []);
}

export function diff(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'diff', async () => {
    const dirOpt = a.options.get('--dir');
    const dir = typeof dirOpt === 'string' ? dirOpt : defaultDir();
    // One argument: that revision's policies against the working tree's.
    const [oldT, newT] = a.positionals.length === 1 ? [a.positionals[0]!, dir] : (a.positionals as [string, string]);
    const before = loadSide(io, await sideFiles(io, oldT, dir));
    const after = loadSide(io, await sideFiles(io, newT, dir));
    if (!before || !after) return 2;
    // Given relationships (the project file's or the importer's `{"relationships": [...]}`): which pairs change.
    const relFile = a.options.get('--relationships');
    let given: Relationship[] | undefined;
    if (typeof relFile === 'string') {
      const raw = parseJson(relFile, (await readSource(io, relFile)).text) as { relationships?: unknown };
      if (typeof raw !== 'object' || raw === null || !Array.isArray(raw.relationships)) throw new UsageError(`${relFile}: needs {"relationships": [...]}`);
      given = raw.relationships.map((x, i) => {
        const rel = typeof x === 'string' ? parseRelationshipText(x) : parseRelationshipJson(x);
        if (typeof rel === 'string') throw new UsageError(`${relFile}: relationships[${i}]: ${rel}`);
        return rel;
      });
    }
    // What diff does not model is refused, never answered partially.
    const refused = unmodelled(before, after);
    if (refused) { io.stderr(`gatehouse policy diff: ${new DiffRefused(refused).message}\n`); return 2; }
    // --budget: the steps the diff may spend (computing and rendering), for sets larger than the default allows.
    const budgetOpt = a.options.get('--budget');
    let steps: number | undefined;
    if (budgetOpt !== undefined) {
      steps = Number(budgetOpt);
      if (typeof budgetOpt !== 'string' || !Number.isInteger(steps) || steps < 1) throw new UsageError('--budget needs a whole number of steps above 0');
    }
    let r;
    try {
      r = diffPolicySets(before, after, steps === undefined ? {} : { steps });
    } catch (e) {
      if (e instanceof DiffTooLarge || e instanceof DiffRefused) { io.stderr(`gatehouse policy diff: ${e.message}\n`); return 2; }
      throw e;
    }
    const rel = diffRelations(before, after, given);
    const relations = rel.definitions.length || given ? rel : undefined;
    const relationText = rel.definitions.length || rel.pairs?.length ? relationDiffText(rel) : '';
    const format = a.options.get('--format');
    if (format === 'markdown') {
      io.stdout(diffMarkdown(r, { before: oldT, after: a.positionals.length === 1 ? `${dir} (working tree)` : newT }) + (relationText ? `\n\`\`\`\n${relationText}\`\`\`\n` : ''));
    } else if (wantsJson(a)) json(io, { changes: r.changes, ...(r.notes.length ? { notes: r.notes } : {}), ...(relations ? { relations } : {}) });
    else io.stdout((rel.definitions.length && !r.changes.length ? '' : diffText(r)) + relationDiffText(rel));
    const changed = r.changes.length > 0 || rel.changes.length > 0 || (rel.pairs?.length ?? 0) > 0;
    return changed ? 1 : 0;
  });
}

// ---- verify -----------------------------------------------------------------------------

export function verify(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'verify', async () => {
    const dir = a.positionals[0] ?? defaultDir();
    const files = (await readTarget(io, dir, [POLICY_EXT])).filter((f) => !isTestsFile(f.path));
    const set = loadSide(io, files);
    if (!set) return 2;
    const results = verifyInvariants(set);
    if (wantsJson(a)) {
      json(io, { invariants: results.map((r) => ({ name: r.name, file: r.file, line: r.line, holds: r.holds, counterexample: r.counterexample, ...(r.error ? { error: r.error } : {}) })) });
    } else {
      for (const r of results) {
        const at = `${r.file}:${r.line}`;
        if (r.error) io.stdout(`error   invariant "${r.name}" (${at}): ${r.error}\n`);
        else if (r.holds) io.stdout(`holds   invariant "${r.name}" (${at})\n`);
        else io.stdout(`broken  invariant "${r.name}" (${at})\n  counterexample: ${counterexampleText(r.counterexample!)}\n`);
      }
      if (!results.length) io.stdout('no invariants\n');
    }
    if (results.some((r) => r.error)) {
      for (const r of results) if (r.error) io.stderr(`gatehouse policy verify: invariant "${r.name}": ${r.error}\n`);
      return 2;
    }
    return results.every((r) => r.holds) ? 0 : 1;
  });
}

// ---- explain ----------------------------------------------------------------------------

function parseJson(what: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${what} is not JSON: ${(e as Error).message}`);
  }
}

const ACTION = /^[^\s:*]+:[^\s:*]+$/;
const RESOURCE = /^[^\s:*]+:[^\s*]+$/;

async function explainRequest(a: ParsedArgs, io: CliIO): Promise<Record<string, unknown>> {
  const str = (k: string) => { const v = a.options.get(k); return typeof v === 'string' ? v : undefined; };
  const reqArg = str('--request');
  let raw: unknown;
  if (reqArg !== undefined) {
    const flags = ['--agent', '--action', '--resource', '--context', '--person', '--person-permissions', '--mode', '--permissions', '--capabilities', '--approved'].filter((f) => a.options.has(f));
    if (flags.length) throw new UsageError(`--request already holds the whole request: drop ${flags.join(', ')}`);
    raw = parseJson('--request', reqArg.startsWith('@') ? (await readSource(io, reqArg.slice(1))).text : reqArg);
  } else {
    const missing = ['--agent', '--action', '--resource'].filter((f) => !str(f));
    if (missing.length) throw new UsageError(`explain needs --request, or --agent, --action and --resource (missing ${missing.join(', ')})`);
    const context = str('--context') !== undefined ? parseJson('--context', str('--context')!) : {};
    const agent: Record<string, unknown> = { id: str('--agent') };
    if (str('--mode')) agent.mode = str('--mode');
    if (str('--permissions') !== undefined) agent.permissions = str('--permissions')!.split(',').filter(Boolean);
    if (str('--capabilities') !== undefined) agent.capabilities = str('--capabilities')!.split(',').filter(Boolean);
    if (str('--person-permissions') !== undefined && !str('--person')) throw new UsageError('--person-permissions needs --person');
    const person = str('--person') ? { id: str('--person'), ...(str('--person-permissions') !== undefined ? { permissions: str('--person-permissions')!.split(',').filter(Boolean) } : {}) } : undefined;
    raw = { agent, action: str('--action'), resource: str('--resource'), context, ...(person ? { person } : {}), ...(a.options.has('--approved') ? { approved: true } : {}) };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UsageError('the request must be a JSON object');
  const r = raw as Record<string, unknown>;
  for (const field of ['action', 'resource'] as const) {
    if (typeof r[field] !== 'string' || !r[field]) throw new UsageError(`the request needs "${field}", a non-empty string`);
  }
  // A request names one action on one object, as the decision endpoint takes them.
  if (!ACTION.test(r.action as string)) throw new UsageError(`the action ${JSON.stringify(r.action)} is not <verb>:<kind> (such as create:refunds)`);
  if (!RESOURCE.test(r.resource as string)) throw new UsageError(`the resource ${JSON.stringify(r.resource)} is not <kind>:<id> (such as refund:r1)`);
  if (r.context !== undefined && (typeof r.context !== 'object' || r.context === null || Array.isArray(r.context))) {
    throw new UsageError('the request\'s "context" must be a JSON object');
  }
  return r;
}

export function explain(a: ParsedArgs, io: CliIO): Promise<number> {
  return guarded(io, 'explain', async () => {
    const raw = await explainRequest(a, io).catch((e: unknown) => {
      // A request read from a file: what is wrong with it names the file.
      const from = a.options.get('--request');
      if (e instanceof UsageError && typeof from === 'string' && from.startsWith('@')) throw new UsageError(`${from.slice(1)}: ${e.message}`);
      throw e;
    });
    const dir = a.positionals[0] ?? defaultDir();
    const files = (await readTarget(io, dir, [POLICY_EXT])).filter((f) => !isTestsFile(f.path));
    const parsed = parseAndValidate({ files });
    const errs = parsed.diagnostics.filter(isError);
    if (errs.length) {
      printDiagnostics(io, errs, sourcesOf(files));
      io.stderr(`${summary(errs.length, 0)}\n`);
      return 1;
    }
    const set = buildPolicySet(parsed.files, []);
    const { request, assumed } = completeRequest(raw);
    // Relations grant through relationships: the `relationships { }` blocks of the policy files
    // and the request's own `relationships` (text `doc:1#viewer@user:anne`, or the JSON form).
    const relationships = [...fixturesOf(parsed.files).values()].flat();
    const own = raw.relationships;
    if (own !== undefined && !Array.isArray(own)) throw new UsageError('the request\'s "relationships" must be a list');
    for (const [i, r] of ((own ?? []) as unknown[]).entries()) {
      const rel = typeof r === 'string' ? parseRelationshipText(r) : parseRelationshipJson(r);
      if (typeof rel === 'string') throw new UsageError(`relationships[${i}]: ${rel}`);
      relationships.push(rel);
    }
    // A request that states its relationships, even none, is decided on them (as the service decides on its store).
    if (relationships.length || own !== undefined) {
      const index = new MemoryIndex();
      for (const r of relationships) index.add(r);
      request.relationships = index;
    }
    // The decision the endpoints give (the same decide()), traced in full: every rule of the
    // action and object with the values it read and why it applied or not, and the counters read.
    const d = explainDecision(request, set);
    const { relationships: _index, ...shown } = request;
    if (wantsJson(a)) json(io, { request: relationships.length ? { ...shown, relationships: relationships.map((r) => `${r.object}#${r.relation}@${r.subject}`) } : shown, assumed, ...d });
    else io.stdout(explainText(request, d, assumed));
    return EXPLAIN_EXIT[d.decision];
  });
}
