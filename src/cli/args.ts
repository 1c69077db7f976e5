// Command-line declarations and their parser. One declaration per command gives its help text,
// its accepted options and positionals, and the usage error for anything else: an unknown
// option or a missing value is exit 2 with a one-line message, never a guess.

export interface CliIO {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

export interface OptionSpec {
  /** `--format` */
  name: string;
  /** `-w` */
  short?: string;
  /** Present when the option takes a value: its placeholder in help (`text|json`, `<json|@file>`). */
  value?: string;
  /** The only values accepted, when the set is closed. */
  choices?: readonly string[];
  help: string;
}

export interface ParsedArgs {
  positionals: string[];
  /** Flags are `true`; valued options hold their (last) value. Keyed by long name. */
  options: Map<string, string | true>;
}

export interface CommandSpec {
  /** Words after `gatehouse`: `['policy', 'check']`. */
  path: string[];
  /** Positional arguments as shown in help: `[dir|file...]`. */
  args: string;
  /** One line for the list of commands. */
  summary: string;
  /** The paragraph of `<command> --help`. */
  description: string;
  positionals: { min: number; max: number };
  options: OptionSpec[];
  /** Lines printed under the options in `<command> --help`. */
  details?: string[];
  /** Exit code, or undefined when the command keeps running (serve). */
  run: (args: ParsedArgs, io: CliIO) => Promise<number | undefined>;
}

/** A mistake in how the command was called: printed as one line, exit 2. */
export class UsageError extends Error {}

export const HELP_OPTION: OptionSpec = { name: '--help', short: '-h', help: 'show this help' };

/** Parse the words after a command's path against its declaration. Throws UsageError. */
export function parseArgs(spec: CommandSpec, argv: string[]): ParsedArgs {
  const options = new Map<string, string | true>();
  const positionals: string[] = [];
  const all = [...spec.options, HELP_OPTION];
  const byName = (word: string) => all.find((o) => o.name === word || o.short === word);
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') { positionals.push(...argv.slice(i + 1)); break; }
    if (!word.startsWith('-') || word === '-') { positionals.push(word); continue; }
    const eq = word.startsWith('--') ? word.indexOf('=') : -1;
    const name = eq > 0 ? word.slice(0, eq) : word;
    const opt = byName(name);
    if (!opt) throw new UsageError(`unknown option '${name}'`);
    if (opt.value === undefined) {
      if (eq > 0) throw new UsageError(`option '${opt.name}' takes no value`);
      options.set(opt.name, true);
      continue;
    }
    let value: string;
    if (eq > 0) value = word.slice(eq + 1);
    else if (i + 1 < argv.length) value = argv[++i]!;
    else throw new UsageError(`option '${opt.name}' needs a value (${opt.value})`);
    if (opt.choices && !opt.choices.includes(value)) {
      throw new UsageError(`option '${opt.name}' must be ${orList(opt.choices)}, not '${value}'`);
    }
    options.set(opt.name, value);
  }
  if (options.has('--help')) return { positionals, options };
  const { min, max } = spec.positionals;
  if (positionals.length < min) throw new UsageError(`needs ${spec.args}`);
  if (positionals.length > max) {
    throw new UsageError(max === 0 ? `takes no arguments (got '${positionals[0]}')` : `takes at most ${max} argument${max === 1 ? '' : 's'} (${spec.args}), got ${positionals.length}`);
  }
  return { positionals, options };
}

export function orList(xs: readonly string[]): string {
  return xs.length <= 1 ? (xs[0] ?? '') : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;
}

export function optionLabel(o: OptionSpec): string {
  const long = o.value !== undefined ? `${o.name} ${o.value}` : o.name;
  return o.short ? `${o.short}, ${long}` : `    ${long}`;
}

/** The help of one command: usage, summary, every option. */
export function commandHelp(spec: CommandSpec): string {
  const opts = [...spec.options, HELP_OPTION];
  const w = Math.max(...opts.map((o) => optionLabel(o).length));
  const lines = [
    `usage: gatehouse ${spec.path.join(' ')}${spec.args ? ' ' + spec.args : ''}${spec.options.length ? ' [options]' : ''}`,
    '',
    ...wrap(spec.description, 90),
    '',
    'options:',
    ...opts.map((o) => `  ${optionLabel(o).padEnd(w)}  ${o.help}`),
  ];
  if (spec.details?.length) lines.push('', ...spec.details.flatMap((d) => wrap(d, 90)));
  return lines.join('\n') + '\n';
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) { lines.push(line); line = word; } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}
