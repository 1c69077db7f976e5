// `gatehouse <command> ...`: finds the command in the table, parses its arguments, prints help
// and version. Exit codes shared by every command: 0 success, 1 a failure the command reports
// (invalid policy, failing test, broken chain), 2 a usage or input error.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../paths.js';
import { commandHelp, optionLabel, parseArgs, UsageError, type CliIO, type CommandSpec } from './args.js';
import { COMMANDS } from './commands.js';

export type { CliIO } from './args.js';

export function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

const GLOBAL_OPTIONS = [
  { name: '--help', short: '-h', help: 'show this help; `gatehouse <command> --help` shows one command' },
  { name: '--version', short: '-V', help: 'print the version' },
];

function commandLine(c: CommandSpec): string {
  return `${c.path.join(' ')}${c.args ? ' ' + c.args : ''}`;
}

/** Every command with every option, grouped as in the table. */
export function topHelp(): string {
  const w = Math.max(...COMMANDS.map((c) => commandLine(c).length), ...COMMANDS.flatMap((c) => c.options.map((o) => optionLabel(o).length + 2)));
  const lines = [
    `gatehouse ${version()}: identity provider and authorization service`,
    '',
    'usage: gatehouse <command> [options]',
    '',
    'commands:',
  ];
  for (const c of COMMANDS) {
    lines.push(`  ${commandLine(c).padEnd(w)}  ${c.summary}`);
    for (const o of c.options) lines.push(`    ${optionLabel(o).padEnd(w - 2)}  ${o.help}`);
  }
  lines.push('', 'options:');
  for (const o of GLOBAL_OPTIONS) lines.push(`  ${`${o.short}, ${o.name}`.padEnd(w)}  ${o.help}`);
  lines.push('', 'Exit codes: 0 success, 1 failure (invalid policy, failing test, broken chain), 2 usage or input error;');
  lines.push('policy explain: 0 allow, 3 deny, 4 approval_required.');
  return lines.join('\n') + '\n';
}

/** The commands under leading words (`policy`, or `policy import`). */
function groupHelp(...group: string[]): string {
  const cs = COMMANDS.filter((c) => group.every((w, i) => c.path[i] === w) && c.path.length > group.length);
  const w = Math.max(...cs.map((c) => commandLine(c).length));
  const g = group.join(' ');
  return [`usage: gatehouse ${g} <command> [options]`, '', 'commands:', ...cs.map((c) => `  ${commandLine(c).padEnd(w)}  ${c.summary}`), '', `\`gatehouse ${g} <command> --help\` lists a command's options.`].join('\n') + '\n';
}

/** The command named by the leading words of argv, if any. */
function findCommand(argv: string[]): CommandSpec | undefined {
  return COMMANDS.find((c) => c.path.every((w, i) => argv[i] === w));
}

export async function runCli(argv: string[], io: CliIO): Promise<number | undefined> {
  const [first, second] = argv;
  if (first === undefined) { io.stderr(topHelp()); return 2; }
  if (first === '--version' || first === '-V' || first === 'version') {
    if (argv.length > 1) return usage(io, `${first} takes no arguments`, 'gatehouse --help');
    io.stdout(`gatehouse ${version()}\n`);
    return 0;
  }
  if (first === '--help' || first === '-h') { io.stdout(topHelp()); return 0; }
  if (first === 'help') return help(argv.slice(1), io);
  if (first.startsWith('-')) return usage(io, `unknown option '${first}'`, 'gatehouse --help');

  const spec = findCommand(argv);
  if (!spec) {
    if (!COMMANDS.some((c) => c.path[0] === first)) return usage(io, `unknown command '${first}'`, 'gatehouse --help');
    if (second === undefined) { io.stderr(groupHelp(first)); return 2; }
    if (second === '--help' || second === '-h') { io.stdout(groupHelp(first)); return 0; }
    // A group of its own under the group (`policy import openfga`).
    if (COMMANDS.some((c) => c.path.length > 2 && c.path[0] === first && c.path[1] === second)) {
      const third = argv[2];
      if (third === undefined) { io.stderr(groupHelp(first, second)); return 2; }
      if (third === '--help' || third === '-h') { io.stdout(groupHelp(first, second)); return 0; }
      return usage(io, `unknown command '${first} ${second} ${third}'`, `gatehouse ${first} ${second} --help`);
    }
    return usage(io, `unknown command '${first} ${second}'`, `gatehouse ${first} --help`);
  }
  let args;
  try {
    args = parseArgs(spec, argv.slice(spec.path.length));
  } catch (e) {
    if (e instanceof UsageError) return usage(io, e.message, `gatehouse ${spec.path.join(' ')} --help`, spec);
    throw e;
  }
  if (args.options.has('--help')) { io.stdout(commandHelp(spec)); return 0; }
  try {
    return await spec.run(args, io);
  } catch (e) {
    // A command may find a usage mistake only once it reads its input (a --request that is not JSON).
    if (e instanceof UsageError) return usage(io, e.message, `gatehouse ${spec.path.join(' ')} --help`, spec);
    // A setting the command reads that cannot be used (GATEHOUSE_DATABASE_URL not a postgres://
    // URL) is an input error: exit 2, where 1 would read as the command's own finding (a broken
    // chain, a change, something pending). `serve` keeps its start-up promise: one line, exit 1.
    // (By name: the configuration module is not loaded for the policy commands.)
    if (e instanceof Error && e.name === 'ConfigError' && spec.path[0] !== 'serve') {
      io.stderr(`gatehouse: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}

function help(words: string[], io: CliIO): number {
  if (!words.length) { io.stdout(topHelp()); return 0; }
  const spec = findCommand(words);
  if (spec && words.length === spec.path.length) { io.stdout(commandHelp(spec)); return 0; }
  if (words.length === 1 && COMMANDS.some((c) => c.path[0] === words[0])) { io.stdout(groupHelp(words[0]!)); return 0; }
  return usage(io, `no command '${words.join(' ')}'`, 'gatehouse --help');
}

/** One line on stderr, exit 2. */
function usage(io: CliIO, message: string, see: string, spec?: CommandSpec): number {
  io.stderr(`gatehouse${spec ? ' ' + spec.path.join(' ') : ''}: ${message} (see '${see}')\n`);
  return 2;
}
