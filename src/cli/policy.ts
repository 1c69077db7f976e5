// `gatehouse policy check|fmt|test|diff|explain` (CONTRACT section 5).

import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import type { Diagnostic, SourceFile } from '../policy/types.js';
import { formatDiagnostic } from '../policy/diagnostics.js';
import { buildPolicySet, isTestsFile, parseAndValidate, POLICY_EXT, TESTS_EXT } from '../policy/load.js';
import { parsePolicy } from '../policy/parser.js';
import { formatFile } from '../policy/format.js';
import { collectTests, runTests } from '../policy/test-runner.js';
import { DiffTooLarge, diffPolicySets, diffText } from '../policy/diff.js';
import { decide } from '../policy/decide.js';
import { completeRequest, explainText } from '../policy/explain.js';

export interface PolicyIO { stdout: (s: string) => void; stderr: (s: string) => void; cwd: string }

const USAGE = `usage: gatehouse policy <command>
  check [dir]                      parse and validate; every error as file:line:col: message
  fmt [dir|file...] [--check]      rewrite in the canonical layout (--check: list files that would change, exit 1)
  test [dir]                       run the test blocks kept beside the policies
  diff <old> <new> [--json]        requests whose decision changes (exit 0 none, 1 some, 2 error)
  explain [dir] --request <json|@file>
  explain [dir] --agent <id> --action <a> --resource <r> [--context <json>] [--person <id>]
                [--mode delegated|autonomous] [--permissions a,b] [--approved] [--json]
The default dir is $GATEHOUSE_POLICY_DIR or ./policies.
`;

function defaultDir(): string {
  return process.env.GATEHOUSE_POLICY_DIR || 'policies';
}

function parseArgs(args: string[]): { pos: string[]; flags: Map<string, string | true> } {
  const pos: string[] = [];
  const flags = new Map<string, string | true>();
  const valued = new Set(['--request', '--agent', '--action', '--resource', '--context', '--person', '--mode', '--permissions', '--capabilities']);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (eq > 0) flags.set(a.slice(0, eq), a.slice(eq + 1));
      else if (valued.has(a)) {
        if (i + 1 >= args.length) throw new UsageError(`${a} needs a value`);
        flags.set(a, args[++i]!);
      } else flags.set(a, true);
    } else pos.push(a);
  }
  return { pos, flags };
}

class UsageError extends Error {}

/** Files of a target (a file, or the policy and tests files of a directory), with paths as the user wrote them. */
async function readTarget(target: string, cwd: string, exts: string[]): Promise<SourceFile[]> {
  const abs = isAbsolute(target) ? target : resolve(cwd, target);
  const st = await stat(abs);
  if (st.isFile()) return [{ path: target, text: await readFile(abs, 'utf8') }];
  const names = (await readdir(abs, { withFileTypes: true }))
    .filter((d) => d.isFile() && exts.some((e) => d.name.endsWith(e)))
    .map((d) => d.name)
    .sort();
  return Promise.all(names.map(async (n) => ({ path: join(target, n), text: await readFile(join(abs, n), 'utf8') })));
}

function printDiagnostics(io: PolicyIO, ds: Diagnostic[]): void {
  for (const d of ds) io.stderr(formatDiagnostic(d) + '\n');
}

export async function runPolicyCommand(args: string[], io: PolicyIO): Promise<number> {
  const [cmd, ...rest] = args;
  try {
    const { pos, flags } = parseArgs(rest);
    switch (cmd) {
      case 'check': return await check(pos, io);
      case 'fmt': return await fmt(pos, flags.has('--check'), io);
      case 'test': return await test(pos, io);
      case 'diff': return await diff(pos, flags.has('--json'), io);
      case 'explain': return await explain(pos, flags, io);
      case undefined: case 'help': case '--help': case '-h':
        io.stdout(USAGE);
        return cmd === undefined ? 2 : 0;
      default:
        io.stderr(`gatehouse policy: unknown command "${cmd}"\n${USAGE}`);
        return 2;
    }
  } catch (e) {
    if (e instanceof UsageError) { io.stderr(`gatehouse policy ${cmd}: ${e.message}\n${USAGE}`); return 2; }
    const err = e as NodeJS.ErrnoException;
    io.stderr(`gatehouse policy ${cmd}: ${err.code === 'ENOENT' ? `no such file or directory: ${err.path}` : err.message}\n`);
    return 2;
  }
}

async function check(pos: string[], io: PolicyIO): Promise<number> {
  const dir = pos[0] ?? defaultDir();
  const files = await readTarget(dir, io.cwd, [POLICY_EXT, TESTS_EXT]);
  const parsed = parseAndValidate({ files });
  if (parsed.diagnostics.length) {
    printDiagnostics(io, parsed.diagnostics);
    io.stderr(`${parsed.diagnostics.length} error${parsed.diagnostics.length === 1 ? '' : 's'}\n`);
    return 1;
  }
  const set = buildPolicySet(parsed.files, []);
  const rules = set.compiled.rules.length;
  const tests = collectTests(parsed.files).length;
  io.stdout(`ok: ${files.length} file${files.length === 1 ? '' : 's'}, ${rules} rule${rules === 1 ? '' : 's'}, ${tests} test${tests === 1 ? '' : 's'}; policy version ${set.version}\n`);
  return 0;
}

async function fmt(pos: string[], checkOnly: boolean, io: PolicyIO): Promise<number> {
  const targets = pos.length ? pos : [defaultDir()];
  let failed = false;
  const changed: string[] = [];
  for (const t of targets) {
    for (const f of await readTarget(t, io.cwd, [POLICY_EXT, TESTS_EXT])) {
      const r = parsePolicy(f.path, f.text);
      if (!r.file) { printDiagnostics(io, r.diagnostics); failed = true; continue; }
      const out = formatFile(r.file);
      if (out === f.text) continue;
      changed.push(f.path);
      if (!checkOnly) await writeFile(isAbsolute(f.path) ? f.path : resolve(io.cwd, f.path), out);
    }
  }
  for (const c of changed) io.stdout(`${checkOnly ? 'would reformat' : 'formatted'} ${c}\n`);
  if (failed) return 1;
  return checkOnly && changed.length ? 1 : 0;
}

async function test(pos: string[], io: PolicyIO): Promise<number> {
  const dir = pos[0] ?? defaultDir();
  const files = await readTarget(dir, io.cwd, [POLICY_EXT, TESTS_EXT]);
  const parsed = parseAndValidate({ files });
  if (parsed.diagnostics.length) { printDiagnostics(io, parsed.diagnostics); return 1; }
  const set = buildPolicySet(parsed.files, []);
  const tests = collectTests(parsed.files);
  if (!tests.length) { io.stdout('no tests\n'); return 0; }
  const results = runTests(tests, set);
  let failed = 0;
  for (const r of results) {
    if (r.passed) io.stdout(`ok    ${r.name}\n`);
    else {
      failed++;
      io.stdout(`FAIL  ${r.name} (${r.source}): expected ${r.expected}, got ${r.decision.decision} "${r.decision.reason}"\n`);
    }
  }
  io.stdout(`${results.length - failed} passed, ${failed} failed; policy version ${set.version}\n`);
  return failed ? 1 : 0;
}

async function loadSide(target: string, io: PolicyIO) {
  const files = (await readTarget(target, io.cwd, [POLICY_EXT])).filter((f) => !isTestsFile(f.path));
  const parsed = parseAndValidate({ files });
  if (parsed.diagnostics.length) { printDiagnostics(io, parsed.diagnostics); return null; }
  return buildPolicySet(parsed.files, []);
}

async function diff(pos: string[], json: boolean, io: PolicyIO): Promise<number> {
  if (pos.length !== 2) throw new UsageError('diff needs <old> and <new> (each a file or a directory)');
  const before = await loadSide(pos[0]!, io);
  const after = await loadSide(pos[1]!, io);
  if (!before || !after) return 2;
  let r;
  try { r = diffPolicySets(before, after); } catch (e) {
    if (e instanceof DiffTooLarge) { io.stderr(`gatehouse policy diff: ${e.message}\n`); return 2; }
    throw e;
  }
  if (json) io.stdout(JSON.stringify(r.notes.length ? { changes: r.changes, notes: r.notes } : { changes: r.changes }, null, 2) + '\n');
  else io.stdout(diffText(r));
  return r.changes.length ? 1 : 0;
}

async function explain(pos: string[], flags: Map<string, string | true>, io: PolicyIO): Promise<number> {
  const dir = pos[0] ?? defaultDir();
  let raw: unknown;
  const str = (k: string) => { const v = flags.get(k); return typeof v === 'string' ? v : undefined; };
  const reqArg = str('--request');
  if (reqArg !== undefined) {
    const text = reqArg.startsWith('@') ? await readFile(resolve(io.cwd, reqArg.slice(1)), 'utf8') : reqArg;
    try { raw = JSON.parse(text); } catch (e) { throw new UsageError(`--request is not JSON: ${(e as Error).message}`); }
  } else {
    if (!str('--agent') || !str('--action') || !str('--resource')) throw new UsageError('explain needs --request, or --agent, --action and --resource');
    let context: unknown = {};
    if (str('--context')) { try { context = JSON.parse(str('--context')!); } catch (e) { throw new UsageError(`--context is not JSON: ${(e as Error).message}`); } }
    const agent: Record<string, unknown> = { id: str('--agent') };
    if (str('--mode')) agent.mode = str('--mode');
    if (str('--permissions')) agent.permissions = str('--permissions')!.split(',').filter(Boolean);
    if (str('--capabilities')) agent.capabilities = str('--capabilities')!.split(',').filter(Boolean);
    raw = { agent, action: str('--action'), resource: str('--resource'), context, ...(str('--person') ? { person: str('--person') } : {}), ...(flags.has('--approved') ? { approved: true } : {}) };
  }
  const files = (await readTarget(dir, io.cwd, [POLICY_EXT])).filter((f) => !isTestsFile(f.path));
  const parsed = parseAndValidate({ files });
  if (parsed.diagnostics.length) { printDiagnostics(io, parsed.diagnostics); return 2; }
  const set = buildPolicySet(parsed.files, []);
  const { request, assumed } = completeRequest(raw);
  const d = decide(request, set);
  if (flags.has('--json')) io.stdout(JSON.stringify({ request, assumed, ...d }, null, 2) + '\n');
  else {
    if (assumed.length) io.stdout(`assuming: ${assumed.join(', ')}\n`);
    io.stdout(explainText(request, d));
  }
  return 0;
}
