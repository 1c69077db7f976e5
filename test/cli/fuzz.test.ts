// A generative fuzz of the command line: a small valid project in a temporary directory (policies,
// tests, a changed copy for diff, a git repository for diff's revisions, invariants for verify, a
// request for explain, OpenFGA models and store files), a valid invocation of each command that
// reads only files, and random mutations of it: a file emptied, truncated, made huge or deep,
// given NUL, invalid UTF-8, a BOM, CRLF or a lone surrogate, a line from another kind of file;
// a path that is a directory, missing, a symlink loop or unreadable; an option with a wrong,
// repeated or missing value. Whatever comes, the exit code is one the docs give for the command,
// stderr shows no stack trace or source path, an input error names its file (and, for a
// diagnostic, its line and column), JSON output parses when the run happened, and nothing is
// written but what the command writes.
//
// The commands run in process (runCli with a captured CliIO), as the `gatehouse` binary runs
// them: a command that throws would end the process with exit 1 and one line, which no command's
// docs promise for an unexpected error, so a throw fails the property. A new seed every run,
// printed; GATEHOUSE_TEST_SEED=<seed> replays one. Bounded in time: a slow machine runs fewer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { chmod, lstat, mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.js';
import { parseArgs } from '../../src/cli/args.js';
import { COMMANDS } from '../../src/cli/commands.js';
import { REFUNDS, refundTest, workDir } from './helpers.js';

const SEED = process.env.GATEHOUSE_TEST_SEED ? Number(process.env.GATEHOUSE_TEST_SEED) : Math.floor(Math.random() * 2 ** 31);
const TIME_LIMIT_MS = 45_000;
const RUN_TIMEOUT_MS = 30_000;

const INVARIANT = `invariant "no huge refund for agents" {
  never allow "create:refunds" on "refund:*" when subject.type == "agent" and amount > 10000
}
`;

const FGA = `model
  schema 1.1

type user
type folder
  relations
    define viewer: [user] or viewer from parent
    define parent: [folder]
type document
  relations
    define parent: [folder]
    define viewer: [user, user with in_hours] or viewer from parent

condition in_hours(hour: int) {
  hour >= 9 && hour < 17
}
`;

const FGA_JSON = JSON.stringify({
  schema_version: '1.1',
  type_definitions: [
    { type: 'user' },
    { type: 'document', relations: { viewer: { this: {} } }, metadata: { relations: { viewer: { directly_related_user_types: [{ type: 'user' }] } } } },
  ],
}, null, 2) + '\n';

const STORE = `name: docs
model_file: docs.fga
tuples:
  - user: user:anne
    relation: viewer
    object: folder:root
  - user: folder:root
    relation: parent
    object: document:1
tests:
  - name: anne reads through the folder
    check:
      - user: user:anne
        object: document:1
        assertions:
          viewer: true
`;

const TUPLES = `- user: user:bob
  relation: viewer
  object: document:2
`;

const REQUEST = JSON.stringify({
  subject: { type: 'agent', id: 'spiffe://localhost/agent/ops', mode: 'autonomous', permissions: ['create:refunds'], capabilities: ['create:refunds'] },
  action: 'create:refunds', resource: 'refund:r1', context: { amount: 5000 },
}) + '\n';

/** The project every run starts from (restored after each run). */
const FILES: Record<string, string> = {
  'p/refunds.policy': REFUNDS + '\n' + INVARIANT,
  'p/refunds.tests': refundTest('small refund', 10, 'allow') + '\n' + refundTest('medium refund', 5000, 'approval_required'),
  'q/refunds.policy': REFUNDS.replace('amount > 10000', 'amount > 5000') + '\n' + INVARIANT,
  'req.json': REQUEST,
  'rels.json': JSON.stringify({ relationships: [{ object: 'document:1', relation: 'viewer', subject: 'user:anne' }] }) + '\n',
  'm/docs.fga': FGA,
  'm/docs.json': FGA_JSON,
  'm/docs.fga.yaml': STORE,
  'm/more.fga.yaml': STORE.replace(/tuples:[\s\S]*?tests:/, 'tuple_file: more.tuples.yaml\ntests:'),
  'm/more.tuples.yaml': TUPLES,
};

/** Exit codes the docs give each command. */
const EXITS: Record<string, number[]> = {
  check: [0, 1, 2], fmt: [0, 1, 2], test: [0, 1, 2], diff: [0, 1, 2], verify: [0, 1, 2],
  explain: [0, 1, 2, 3, 4], import: [0, 2],
};
/** The codes that say the command ran (its --format json output is then a JSON document). */
const RAN: Record<string, number[]> = {
  check: [0, 1], fmt: [0, 1], test: [0, 1], diff: [0, 1], verify: [0, 1], explain: [0, 3, 4], import: [0],
};

interface Seed {
  command: keyof typeof EXITS;
  args: string[];
  /** the files the command reads, which the fuzz mutates */
  reads: string[];
}

const SEEDS: Seed[] = [
  { command: 'check', args: ['policy', 'check', 'p'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'check', args: ['policy', 'check', 'p/refunds.policy', '--format', 'json'], reads: ['p/refunds.policy'] },
  { command: 'check', args: ['policy', 'check', 'p', '--format', 'sarif', '--strict'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'fmt', args: ['policy', 'fmt', 'p'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'fmt', args: ['policy', 'fmt', '--check', '--diff', 'p/refunds.tests'], reads: ['p/refunds.tests'] },
  { command: 'fmt', args: ['policy', 'fmt', '--write', 'p/refunds.policy'], reads: ['p/refunds.policy'] },
  { command: 'test', args: ['policy', 'test', 'p'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'test', args: ['policy', 'test', 'p', '--coverage', '--format', 'json'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'test', args: ['policy', 'test', 'p/refunds.tests', '--format', 'junit', '--min-coverage', '50'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'test', args: ['policy', 'test', 'p', '--coverage', '--format', 'lcov'], reads: ['p/refunds.policy', 'p/refunds.tests'] },
  { command: 'diff', args: ['policy', 'diff', 'p', 'q'], reads: ['p/refunds.policy', 'q/refunds.policy'] },
  { command: 'diff', args: ['policy', 'diff', 'p', 'q', '--format', 'json', '--budget', '50000'], reads: ['p/refunds.policy', 'q/refunds.policy'] },
  { command: 'diff', args: ['policy', 'diff', 'p/refunds.policy', 'q/refunds.policy', '--format', 'markdown', '--relationships', 'rels.json'], reads: ['p/refunds.policy', 'q/refunds.policy', 'rels.json'] },
  { command: 'diff', args: ['policy', 'diff', 'HEAD', '--dir', 'q'], reads: ['q/refunds.policy'] },
  { command: 'verify', args: ['policy', 'verify', 'p'], reads: ['p/refunds.policy'] },
  { command: 'verify', args: ['policy', 'verify', 'q', '--json'], reads: ['q/refunds.policy'] },
  { command: 'explain', args: ['policy', 'explain', 'p', '--request', '@req.json'], reads: ['p/refunds.policy', 'req.json'] },
  { command: 'explain', args: ['policy', 'explain', 'p', '--agent', 'spiffe://localhost/agent/ops', '--action', 'create:refunds', '--resource', 'refund:r1', '--context', '{"amount": 20000}', '--permissions', 'create:refunds', '--format', 'json'], reads: ['p/refunds.policy'] },
  { command: 'import', args: ['policy', 'import', 'openfga', 'm/docs.fga'], reads: ['m/docs.fga'] },
  { command: 'import', args: ['policy', 'import', 'openfga', 'm/docs.json'], reads: ['m/docs.json'] },
  { command: 'import', args: ['policy', 'import', 'openfga', 'm/docs.fga.yaml', '--out', 'out'], reads: ['m/docs.fga.yaml', 'm/docs.fga'] },
  { command: 'import', args: ['policy', 'import', 'openfga', 'm/more.fga.yaml'], reads: ['m/more.fga.yaml', 'm/docs.fga', 'm/more.tuples.yaml'] },
];

// ---- mutations of a file ----------------------------------------------------------------------

const NESTING = 5_000;
type FileMutation = (text: string, pick: number, other: string) => string | Buffer;
const FILE_MUTATIONS: Record<string, FileMutation> = {
  empty: () => '',
  truncated: (t, pick) => t.slice(0, pick % Math.max(1, t.length)),
  // A megabyte: the parser reads about one in seven seconds here, and the run is bounded in time.
  huge: (t) => t.repeat(Math.ceil(1_000_000 / Math.max(1, t.length))),
  longLine: (t) => t.replace('\n', `${'x'.repeat(1_000_000)}\n`),
  parens: (t) => t.replace(/amount > \d+|amount >= \d+|"amount": 5000|user:anne|hour >= 9|\[user\]/, (m) => `${'('.repeat(NESTING)}${m}${')'.repeat(NESTING)}`),
  brackets: (t) => t.replace(/\{ amount|\{"|\[user/, (m) => `${'['.repeat(NESTING)}${m}`),
  nots: (t) => t.replace(/when /, `when ${'not '.repeat(NESTING)}`).replace('hour >= 9', `${'!'.repeat(NESTING)}(hour >= 9)`),
  unclosed: (t) => '('.repeat(NESTING) + t,
  nul: (t, pick) => at(t, pick, '\0'),
  invalidUtf8: (t, pick) => Buffer.concat([Buffer.from(t.slice(0, pick % (t.length + 1))), Buffer.from([0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]), Buffer.from(t.slice(pick % (t.length + 1)))]),
  bom: (t) => '\uFEFF' + t,
  crlf: (t) => t.replace(/\n/g, '\r\n'),
  loneCr: (t) => t.replace(/\n/g, '\r'),
  loneSurrogate: (t, pick) => at(t, pick, '\uD800'),
  quoteSurrogate: (t) => t.replace('"', '"\uDFFF'),
  controls: (t, pick) => at(t, pick, '\u0001\u001b[31m\u2028\u202e'),
  spliced: (t, pick, other) => {
    const lines = t.split('\n');
    const from = other.split('\n');
    lines.splice(pick % (lines.length + 1), 0, from[pick % from.length]!);
    return lines.join('\n');
  },
  doubled: (t) => t + t,
  bigNumber: (t) => t.replace(/\d+/, '1' + '0'.repeat(400)),
  hugeFloat: (t) => t.replace(/\d+/, '1e309'),
  negative: (t) => t.replace(/\d+/, '-0'),
};

function at(t: string, pick: number, s: string): string {
  const i = pick % (t.length + 1);
  return t.slice(0, i) + s + t.slice(i);
}

/** What replaces a path: another kind of thing at it. */
const PATH_MUTATIONS = ['directory', 'missing', 'symlinkLoop', 'unreadable', 'dangling'] as const;
type PathMutation = (typeof PATH_MUTATIONS)[number];

// ---- mutations of the arguments ----------------------------------------------------------------

const BAD_VALUES = ['', '-1', '0', '1e309', '-1e309', 'NaN', 'Infinity', '101', '-5', '99999999999999999999', '0x10', '1.5', 'nope', '--json', '\0', '\uD800', '99999999999d', ' 50', '{', '@', '@missing.json', '@.', '[]', 'null', '{"amount": 1e999}', 'a'.repeat(100_000)];
const OPTIONS = ['--format', '--json', '--budget', '--min-coverage', '--coverage', '--strict', '--dir', '--relationships', '--request', '--agent', '--action', '--resource', '--context', '--person', '--permissions', '--capabilities', '--mode', '--out', '--write', '--check', '--diff', '--since', '--approved', '--db', '--', '-', '-w', '-x', '--format=', '--help'];

type ArgMutation =
  | { kind: 'none' }
  | { kind: 'setValue'; index: number; value: string }
  | { kind: 'dropValue'; index: number }
  | { kind: 'repeat'; index: number }
  | { kind: 'add'; option: string; value?: string }
  | { kind: 'dropArg'; index: number }
  | { kind: 'positional'; value: string };

function applyArgs(args: string[], m: ArgMutation, fixed: number): string[] {
  const out = [...args];
  const rest = out.length - fixed;
  const i = rest > 0 ? fixed + ((m as { index?: number }).index ?? 0) % rest : -1;
  switch (m.kind) {
    case 'none': return out;
    case 'setValue': if (i >= 0) out[i] = m.value; return out;
    case 'dropValue': if (i >= 0 && out[i]!.startsWith('--') && i + 1 < out.length) out.splice(i + 1, 1); else if (i >= 0) out.splice(i, 1); return out;
    case 'repeat': if (i >= 0) out.push(...out.slice(i, i + 2)); return out;
    case 'add': out.push(m.option, ...(m.value === undefined ? [] : [m.value])); return out;
    case 'dropArg': if (i >= 0) out.splice(i, 1); return out;
    case 'positional': out.push(m.value); return out;
  }
}

const argMutation: fc.Arbitrary<ArgMutation> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<ArgMutation>({ kind: 'none' }) },
  fc.record({ kind: fc.constant('setValue' as const), index: fc.nat(), value: fc.constantFrom(...BAD_VALUES) }),
  fc.record({ kind: fc.constant('dropValue' as const), index: fc.nat() }),
  fc.record({ kind: fc.constant('repeat' as const), index: fc.nat() }),
  fc.record({ kind: fc.constant('add' as const), option: fc.constantFrom(...OPTIONS), value: fc.option(fc.constantFrom(...BAD_VALUES), { nil: undefined }) }),
  fc.record({ kind: fc.constant('dropArg' as const), index: fc.nat() }),
  fc.record({ kind: fc.constant('positional' as const), value: fc.constantFrom('p', 'missing', 'req.json', '.', '/', '', 'loop', 'm/docs.fga', 'p/refunds.tests', 'HEAD~5', 'nope^{tree}', '-') }),
);

type Mutation =
  | { kind: 'file'; file: number; how: string; pick: number; other: number }
  | { kind: 'path'; file: number; how: PathMutation };

const mutation: fc.Arbitrary<Mutation | null> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('file' as const), file: fc.nat(), how: fc.constantFrom(...Object.keys(FILE_MUTATIONS)), pick: fc.nat(), other: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('path' as const), file: fc.nat(), how: fc.constantFrom(...PATH_MUTATIONS) }) },
);

// ---- the project ------------------------------------------------------------------------------

let cwd: string;

beforeAll(async () => {
  cwd = await workDir(FILES);
  // diff's revisions: the project committed once, in a repository of its own.
  const git = (...a: string[]) => execFileSync('git', a, { cwd, stdio: 'ignore', env: { ...process.env, GIT_AUTHOR_NAME: 'fuzz', GIT_AUTHOR_EMAIL: 'fuzz@example.com', GIT_COMMITTER_NAME: 'fuzz', GIT_COMMITTER_EMAIL: 'fuzz@example.com' } });
  git('init', '-q');
  git('add', '.');
  git('commit', '-q', '-m', 'project');
  await symlink('loop', join(cwd, 'loop'));
});

afterAll(async () => {
  if (cwd) await rm(cwd, { recursive: true, force: true, maxRetries: 5 });
});

/** Every path under the project (but .git) with its kind, size and modification time. */
async function snapshot(dir = cwd, prefix = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (e.name === '.git') continue;
    const rel = prefix + e.name;
    const s = await lstat(join(dir, e.name));
    out.set(rel, `${s.isDirectory() ? 'd' : s.isSymbolicLink() ? 'l' : 'f'} ${s.size} ${s.mtimeMs}`);
    if (e.isDirectory()) for (const [k, v] of await snapshot(join(dir, e.name), rel + '/')) out.set(k, v);
  }
  return out;
}

/** Puts the project back as FILES says (and removes what a run wrote). */
async function restore(): Promise<void> {
  await rm(join(cwd, 'out'), { recursive: true, force: true });
  for (const [p, text] of Object.entries(FILES)) {
    const full = join(cwd, p);
    await chmod(full, 0o644).catch(() => {});
    await rm(full, { recursive: true, force: true });
    await writeFile(full, text);
  }
}

async function mutate(m: Mutation, seed: Seed): Promise<string> {
  const file = seed.reads[m.file % seed.reads.length]!;
  const full = join(cwd, file);
  if (m.kind === 'file') {
    const others = Object.keys(FILES).filter((f) => f !== file);
    const other = FILES[others[m.other % others.length]!]!;
    await writeFile(full, FILE_MUTATIONS[m.how]!(FILES[file]!, m.pick, other));
    return file;
  }
  await rm(full, { force: true });
  switch (m.how) {
    case 'directory': await mkdir(full); break;
    case 'missing': break;
    case 'symlinkLoop': await symlink(file.split('/').pop()!, full); break;
    case 'dangling': await symlink('nowhere/at/all', full); break;
    case 'unreadable': await writeFile(full, FILES[file]!); await chmod(full, 0o000); break;
  }
  return file;
}

interface Outcome { code: number | undefined; stdout: string; stderr: string; thrown?: unknown }

async function run(args: string[]): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: (s: string) => { stdout += s; }, stderr: (s: string) => { stderr += s; }, cwd };
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${RUN_TIMEOUT_MS} ms`)), RUN_TIMEOUT_MS); });
  try {
    const code = await Promise.race([runCli(args, io), hang]);
    return { code, stdout, stderr };
  } catch (thrown) {
    return { code: undefined, stdout, stderr, thrown };
  } finally {
    clearTimeout(timer);
  }
}

const STACK = /^\s+at |node:internal|node_modules|\/src\/[\w/-]+\.ts|\.ts:\d+:\d+\)/m;
const ROOT = process.getuid?.() === 0;

describe('the command line under hostile files and arguments', () => {
  it('exits as documented, without a stack trace, naming the file, and writes only what it writes', async () => {
    // eslint-disable-next-line no-console
    console.log(`cli fuzz seed ${SEED} (GATEHOUSE_TEST_SEED=${SEED} replays it)`);
    let runs = 0;
    await fc.assert(fc.asyncProperty(fc.nat(SEEDS.length - 1), mutation, argMutation, async (which, m, am) => {
      const seed = SEEDS[which]!;
      // The command words (and the import's file) stay: a mutation of them is a usage error the dispatcher tests cover.
      const fixed = seed.command === 'import' ? 4 : 2;
      const args = applyArgs(seed.args, am, fixed);
      const label = `gatehouse ${args.map((a) => JSON.stringify(a.length > 60 ? a.slice(0, 60) + '...' : a)).join(' ')}`;
      try {
        const mutated = m ? await mutate(m, seed) : undefined;
        const before = await snapshot();
        const r = await run(args);
        runs++;
        const what = `${label} with ${JSON.stringify(m)}\nexit ${r.code}\nstderr: ${r.stderr.slice(0, 2000)}\nstdout: ${r.stdout.slice(0, 500)}`;
        if (r.thrown !== undefined) throw new Error(`threw ${r.thrown instanceof Error ? r.thrown.stack : String(r.thrown)}\n${what}`);
        const code = r.code ?? 0;
        expect(EXITS[seed.command], what).toContain(code);
        expect(r.stderr, what).not.toMatch(STACK);
        expect(r.stdout, what).not.toMatch(/^\s+at .*:\d+:\d+\)?$|node:internal/m);

        // The options as the command reads them: a word that follows an option taking a value is
        // that value (`--out --json` writes to a directory named --json and asks for no JSON).
        const opts = optionsOf(args);
        const lastFormat = opts?.get('--format') as string | undefined;
        const help = opts?.has('--help') ?? true;
        if (RAN[seed.command]!.includes(code) && !help && (lastFormat === 'json' || (opts?.get('--json') === true && lastFormat === undefined))) {
          expect(() => JSON.parse(r.stdout), `stdout is not JSON: ${what}`).not.toThrow();
          // check's diagnostics each name their file, line and column.
          if (seed.command === 'check') {
            for (const d of JSON.parse(r.stdout).diagnostics as { file: unknown; line: unknown; col: unknown }[]) {
              expect(typeof d.file === 'string' && Number.isInteger(d.line) && (d.line as number) >= 1 && Number.isInteger(d.col) && (d.col as number) >= 1, `${JSON.stringify(d)}: ${what}`).toBe(true);
            }
          }
        }
        if (lastFormat === 'sarif' && RAN[seed.command]!.includes(code) && !help) {
          expect(() => JSON.parse(r.stdout), `SARIF is not JSON: ${what}`).not.toThrow();
        }

        // An input error caused by the mutated file names it (a usage error from the arguments names the option instead).
        if (mutated && am.kind === 'none' && code === 2 && !(m!.kind === 'file' && (m!.how === 'huge' || m!.how === 'doubled'))) {
          const name = mutated.split('/').pop()!;
          const dirOf = mutated.split('/')[0]!;
          expect(r.stderr + r.stdout, `the error names no file: ${what}`).toMatch(new RegExp(`${escape(name)}|${escape(dirOf)}|HEAD`));
        }
        // check promises file:line:col for each diagnostic.
        if (seed.command === 'check' && am.kind === 'none' && code === 1 && lastFormat === undefined) {
          expect(r.stderr, `no file:line:col: ${what}`).toMatch(/^[^\s:]+:\d+:\d+: /m);
        }
        // fmt reports a file that does not parse with its caret (its other exit 1 is --check's list, on stdout).
        if (seed.command === 'fmt' && am.kind === 'none' && code === 1 && r.stderr !== '') {
          expect(r.stderr, `no file:line:col: ${what}`).toMatch(/^[^\s:]+:\d+:\d+: /m);
        }

        const after = await snapshot();
        const writes = opts?.get('--write') === true;
        const out = opts?.get('--out'); // the last value given counts
        for (const [p, v] of after) {
          if (before.get(p) === v) continue;
          const allowed = (writes && seed.reads.includes(p)) || (typeof out === 'string' && seed.command === 'import' && r.code === 0 && p.startsWith(normalizeOut(out) ?? '\0'));
          expect(allowed, `wrote ${p}: ${what}`).toBe(true);
        }
        for (const p of before.keys()) expect(after.has(p) || (writes && seed.reads.includes(p)), `removed ${p}: ${what}`).toBe(true);
      } finally {
        await restore();
      }
    }), { seed: SEED, numRuns: 400, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false, endOnFailure: true });
    // eslint-disable-next-line no-console
    console.log(`cli fuzz: ${runs} runs${ROOT ? ' (as root: an unreadable file is still read)' : ''}`);
    expect(runs).toBeGreaterThan(10);
  }, 120_000);
});

/** The options of `args` as the command's own parser reads them; undefined for a usage error (nothing ran). */
function optionsOf(args: string[]): Map<string, string | true> | undefined {
  const spec = COMMANDS.filter((c) => c.path.every((w, i) => args[i] === w)).sort((a, b) => b.path.length - a.path.length)[0];
  if (!spec) return undefined;
  try {
    return parseArgs(spec, args.slice(spec.path.length)).options;
  } catch {
    return undefined;
  }
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function normalizeOut(p: string | undefined): string | undefined {
  if (p === undefined || p === '') return undefined;
  // As the process receives it: an argument travels as UTF-8, where a lone surrogate becomes U+FFFD.
  return Buffer.from(p, 'utf8').toString('utf8').replace(/^\.\//, '').replace(/\/+$/, '');
}
