// Every `gatehouse` command, declared once: the dispatcher, `--help` and the usage errors all
// read this table. Each command loads its module only when it runs, so `gatehouse --help` or
// `gatehouse policy fmt` never loads the server.

import type { CommandSpec, OptionSpec } from './args.js';

const FORMAT: OptionSpec = { name: '--format', value: 'text|json', choices: ['text', 'json'], help: 'output format (default text)' };
const JSON_FLAG: OptionSpec = { name: '--json', help: 'same as --format json' };
const POLICY_DIR = 'The default dir is $GATEHOUSE_POLICY_DIR, else ./policies.';

export const COMMANDS: CommandSpec[] = [
  {
    path: ['serve'],
    args: '',
    summary: 'start the server',
    description: 'Start the server. Configuration comes from the environment and ./.env (see README).',
    positionals: { min: 0, max: 0 },
    options: [],
    run: async () => { await (await import('./serve.js')).serve(); return undefined; },
  },
  {
    path: ['policy', 'check'],
    args: '[dir|file...]',
    summary: 'parse and validate; every error with its source line',
    description: 'Parse and validate policy and tests files: every error and warning as file:line:col: message, then the source line with a caret under the column.',
    positionals: { min: 0, max: Infinity },
    options: [{ ...FORMAT, value: 'text|json|sarif', choices: ['text', 'json', 'sarif'], help: 'output format (default text); sarif: a SARIF 2.1.0 log for code scanning' }, JSON_FLAG, { name: '--strict', help: 'warnings fail the check too (exit 1)' }],
    details: [POLICY_DIR, 'Exit 0 when valid (warnings are printed), 1 on an error (or a warning with --strict), 2 on a usage or input error.'],
    run: async (a, io) => (await import('./policy.js')).check(a, io),
  },
  {
    path: ['policy', 'fmt'],
    args: '[dir|file...]',
    summary: 'print the canonical layout (or --write, --check, --diff)',
    description: 'Print the canonical layout of policy and tests files; for several files, each under a "==> path <==" header.',
    positionals: { min: 0, max: Infinity },
    options: [
      { name: '--write', short: '-w', help: 'rewrite the files in place; print the name of each file changed' },
      { name: '--check', short: '-c', help: 'print nothing but the name of each file that would change; exit 1 if any' },
      { name: '--diff', short: '-d', help: 'print a unified diff from each file to its canonical layout' },
    ],
    details: [POLICY_DIR, 'Exit 0, or 1 when --check finds a file to change or a file does not parse; 2 on a usage or input error.'],
    run: async (a, io) => (await import('./policy.js')).fmt(a, io),
  },
  {
    path: ['policy', 'test'],
    args: '[dir|file...]',
    summary: 'run the tests kept beside the policies',
    description: 'Run the test blocks of a directory\'s *.policy and *.tests files against the policies of that directory. A file runs its own tests against the policies of its directory.',
    positionals: { min: 0, max: Infinity },
    options: [
      { ...FORMAT, value: 'text|json|junit|lcov', choices: ['text', 'json', 'junit', 'lcov'], help: 'output format (default text); junit: JUnit XML, a testsuite per file and a testcase per test; lcov: coverage for CI tools (with --coverage)' },
      JSON_FLAG,
      { name: '--coverage', help: 'print which rules, limits and conditions (each comparison true and false) the tests exercise; --format json gives it to machines' },
      { name: '--min-coverage', value: '<percent>', help: 'with --coverage: exit 1 when coverage is under this percent' },
    ],
    details: [POLICY_DIR, 'Coverage counts each rule evaluated by some test, each comparison of a condition seen true and seen false, and each limit seen kept and seen broken.', 'Exit 0 when every test passes, 1 on a failing test, a policy error or coverage under --min-coverage, 2 on a usage or input error.'],
    run: async (a, io) => (await import('./policy.js')).test(a, io),
  },
  {
    path: ['policy', 'diff'],
    args: '<old> [<new>]',
    summary: 'requests whose decision changes between two versions',
    description: 'The requests whose decision changes between two versions, as regions of the request space, each with its decision before and after and an example request. Each version is a file or a directory, else a git revision (its --dir read with git, no checkout); with one argument, that version against the working tree\'s --dir.',
    positionals: { min: 1, max: 2 },
    options: [
      { ...FORMAT, value: 'text|json|markdown', choices: ['text', 'json', 'markdown'], help: 'output format (default text); markdown: a pull-request comment' },
      JSON_FLAG,
      { name: '--dir', value: '<dir>', help: 'the policy directory read at a git revision (default $GATEHOUSE_POLICY_DIR, else ./policies)' },
      { name: '--relationships', value: '<file.json>', help: 'relationships ({"relationships": [...]}): list the subject-object pairs that gain or lose a changed relation' },
      { name: '--budget', value: '<steps>', help: 'the steps the diff may spend computing and rendering regions (default 200000); a pair that needs more is refused with exit 2, never answered in part' },
    ],
    details: ['A change to types and relations is reported as the relations that answer differently, each with the smallest example graph and request found, and with --relationships the concrete pairs that change. Rules that ask relationship questions, and changed relationship conditions, are refused (exit 2).', '`policy diff main` compares main\'s policies with the working tree\'s; `policy diff HEAD~1 HEAD` two revisions\'.', 'Exit 0 when nothing changes, 1 when something does, 2 on an error (a revision that names no commit among them).'],
    run: async (a, io) => (await import('./policy.js')).diff(a, io),
  },
  {
    path: ['policy', 'explain'],
    args: '[dir]',
    summary: 'the decision for one request and every check behind it',
    description: 'The decision of the policies in dir for one request, and every check that led to it with the values it read.',
    positionals: { min: 0, max: 1 },
    options: [
      { name: '--request', value: '<json|@file>', help: 'the request as JSON (as printed in a diff example), or @ and a file holding it' },
      { name: '--agent', value: '<id>', help: 'the agent ID (instead of --request)' },
      { name: '--action', value: '<action>', help: 'the relation asked for, <action>:<kinds>' },
      { name: '--resource', value: '<kind:id>', help: 'the object acted on' },
      { name: '--context', value: '<json>', help: 'the request context, a JSON object (default {})' },
      { name: '--person', value: '<id>', help: 'the person a delegated agent acts for' },
      { name: '--person-permissions', value: '<a,b,...>', help: 'the permissions of that person (default: none; the server grants only what roles give)' },
      { name: '--mode', value: 'delegated|autonomous', choices: ['delegated', 'autonomous'], help: 'the agent mode (default: delegated with --person, else autonomous)' },
      { name: '--permissions', value: '<a,b,...>', help: 'the agent\'s permissions (default: none; the server grants only what roles give)' },
      { name: '--capabilities', value: '<a,b,...>', help: 'the agent\'s capabilities (default: the action)' },
      { name: '--approved', help: 'a person has approved this action' },
      FORMAT,
      JSON_FLAG,
    ],
    details: [POLICY_DIR, 'Nothing is assumed granted: what the request leaves out is printed under "assuming", with the option that states it.', 'Exit 0 allow, 3 deny, 4 approval_required; 1 on a policy error, 2 on a usage or input error (an action not <verb>:<kind>, a resource not <kind>:<id>).'],
    run: async (a, io) => (await import('./policy.js')).explain(a, io),
  },
  {
    path: ['policy', 'import', 'openfga'],
    args: '<file>',
    summary: 'an OpenFGA model or store file as a policy (with its relationships and tests)',
    description:
      'Read an OpenFGA model (a .fga file in schema 1.1, its JSON form, or a modular model\'s fga.mod) or a store file (.fga.yaml: model, tuples, tests) and write the equivalent policy file; for a store file also its relationships as JSON and its tests as a .tests file that `policy test` runs.',
    positionals: { min: 1, max: 1 },
    options: [{ name: '--out', value: '<dir>', help: 'write <name>.policy (and <name>.tests, <name>.relationships.json) into dir, created if missing; print each path' }],
    details: ['Without --out the policy is printed. Exit 0 when imported; 2 when the file cannot be read or holds what the import cannot carry over, each place as file:line: why.'],
    run: async (a, io) => (await import('./import.js')).importOpenfgaCommand(a, io),
  },
  {
    path: ['audit', 'verify'],
    args: '',
    summary: 'check the audit trail\'s hash chain',
    description: 'Walk the audit trail\'s hash chain: "ok: N records", or the first broken link.',
    positionals: { min: 0, max: 0 },
    options: [{ name: '--db', value: '<file>', help: 'a SQLite file (default $GATEHOUSE_DATABASE_URL, else $GATEHOUSE_DB, else ./data/gatehouse.db)' }],
    details: ['Exit 0 when the chain holds, 1 at a broken link, 2 on a usage or input error.'],
    run: async (a, io) => (await import('./audit.js')).verify(a, io),
  },
  {
    path: ['backup'],
    args: '<file>',
    summary: 'copy the database to a file, checked (SQLite online backup; pg_dump on PostgreSQL)',
    description:
      'Copy the database ($GATEHOUSE_DATABASE_URL, else the SQLite file $GATEHOUSE_DB) to <file>, which must not exist. SQLite: an online backup (the server may keep running), checked for integrity and an unbroken audit chain before it is written under its name. PostgreSQL: pg_dump in its custom format when pg_dump is on the PATH, else the command to run.',
    positionals: { min: 1, max: 1 },
    options: [{ name: '--db', value: '<file>', help: 'a SQLite file (default $GATEHOUSE_DATABASE_URL, else $GATEHOUSE_DB, else ./data/gatehouse.db)' }],
    details: ['Exit 0 when backed up, 1 when the copy failed or does not check out, 2 on a usage error (the file exists, no database, PostgreSQL without pg_dump).'],
    run: async (a, io) => (await import('./backup.js')).backupCommand(a, io),
  },
  {
    path: ['restore'],
    args: '<file>',
    summary: 'put a SQLite backup in place of the database (server stopped)',
    description:
      'Check the backup <file> (integrity, schema, audit chain) and copy it to the SQLite file $GATEHOUSE_DB (or --db). Refuses when a database is there unless --force; stop the server first. On PostgreSQL it prints the pg_restore command instead.',
    positionals: { min: 1, max: 1 },
    options: [
      { name: '--db', value: '<file>', help: 'the SQLite file to restore to (default $GATEHOUSE_DB, else ./data/gatehouse.db)' },
      { name: '--force', help: 'replace an existing database (its write-ahead log is removed too)' },
    ],
    details: ['Exit 0 when restored, 1 when the backup does not check out, 2 on a usage error. Start the server with the GATEHOUSE_SECRET it had: the signing keys are sealed with it.'],
    run: async (a, io) => (await import('./backup.js')).restoreCommand(a, io),
  },
  {
    path: ['migrate'],
    args: '',
    summary: 'apply (or list) pending schema migrations',
    description:
      'Apply the schema migrations the database lacks ($GATEHOUSE_DATABASE_URL, else the SQLite file $GATEHOUSE_DB, default ./data/gatehouse.db), each in its own transaction; instances starting meanwhile wait for it.',
    positionals: { min: 0, max: 0 },
    options: [{ name: '--check', help: 'only list what is pending' }],
    details: ['Exit 0 when the schema is (now) current, 1 with --check when something is pending, 2 on a usage error.'],
    run: async (a, io) => (await import('./migrate.js')).migrateCommand(a, io),
  },
];
