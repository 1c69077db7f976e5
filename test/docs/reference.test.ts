// The docs name only what exists, and what exists is named: every environment variable the
// sources read is in the configuration table of docs/operations.md, every variable the README
// and the docs mention is read somewhere, and every `gatehouse ...` command line they show is
// a command of the CLI's table with options it accepts (each command and option is in
// docs/cli.md too).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { COMMANDS } from '../../src/cli/commands.js';

function files(dir: string, ext: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

const read = (p: string) => readFileSync(p, 'utf8');
const DOCS = [join(projectRoot, 'README.md'), ...files(join(projectRoot, 'docs'), '.md')];
const OPERATIONS = read(join(projectRoot, 'docs', 'operations.md'));

/** Variables read by code: GATEHOUSE_* names anywhere, and `env.X` / `process.env.X` reads. */
function variablesIn(paths: string[]): Set<string> {
  const found = new Set<string>();
  for (const p of paths) {
    const text = read(p);
    for (const m of text.matchAll(/\b(GATEHOUSE_[A-Z0-9_]*[A-Z0-9])\b/g)) found.add(m[1]!);
    for (const m of text.matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) found.add(m[1]!);
  }
  return found;
}

/** The configuration table's first column: every `VARIABLE` named there. */
function configurationTable(): Set<string> {
  const section = OPERATIONS.slice(OPERATIONS.indexOf('## Configuration'), OPERATIONS.indexOf('\n## ', OPERATIONS.indexOf('## Configuration') + 1));
  const names = new Set<string>();
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `')) continue;
    for (const m of line.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) names.add(m[1]!);
  }
  return names;
}

describe('environment variables', () => {
  const source = variablesIn(files(join(projectRoot, 'src'), '.ts'));
  const tests = variablesIn(files(join(projectRoot, 'test', 'helpers'), '.ts'));
  // The benchmarks' own settings (a database to measure on) are documented beside their figures.
  const bench = variablesIn(files(join(projectRoot, 'bench'), '.ts'));
  const table = configurationTable();

  it('the sources read the ones we expect to find (the scan works)', () => {
    for (const v of ['PORT', 'GATEHOUSE_ISSUER', 'GATEHOUSE_DB', 'LOG_LEVEL', 'GATEHOUSE_SSF_POLL_MS', 'NODE_ENV']) expect(source).toContain(v);
  });

  it('every variable the sources read is in the configuration table of docs/operations.md', () => {
    expect([...source].filter((v) => !table.has(v)).sort()).toEqual([]);
  });

  it('every variable the table lists is read by the sources', () => {
    expect([...table].filter((v) => !source.has(v)).sort()).toEqual([]);
  });

  it('every GATEHOUSE_ variable the README and the docs mention exists', () => {
    const unknown: string[] = [];
    for (const p of DOCS) {
      for (const m of read(p).matchAll(/\b(GATEHOUSE_[A-Z0-9_]*[A-Z0-9])\b/g)) {
        if (!source.has(m[1]!) && !tests.has(m[1]!) && !bench.has(m[1]!)) unknown.push(`${relative(projectRoot, p)}: ${m[1]}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});

/** `gatehouse ...` command lines in fenced blocks and inline code, with where they are. */
function commandLines(): { where: string; line: string }[] {
  const out: { where: string; line: string }[] = [];
  for (const p of DOCS) {
    const text = read(p);
    const fenced = [...text.matchAll(/^```\w*\n([\s\S]*?)^```$/gm)].flatMap((m) => m[1]!.split('\n'));
    const inline = [...text.replace(/^```\w*\n[\s\S]*?^```$/gm, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
    for (const line of [...fenced, ...inline]) {
      const at = line.search(/\bgatehouse (serve|policy|audit|migrate)\b/);
      if (at >= 0) out.push({ where: relative(projectRoot, p), line: line.slice(at) });
    }
  }
  return out;
}

describe('command lines in the README and the docs', () => {
  const lines = commandLines();

  it('are found', () => {
    expect(lines.length).toBeGreaterThan(10);
  });

  it('name a command of the CLI and only options it accepts', () => {
    const wrong: string[] = [];
    for (const { where, line } of lines) {
      const words = line.split(/\s+/).slice(1).map((w) => w.replace(/:$/, ''));
      const spec = COMMANDS.find((c) => c.path.every((w, i) => words[i] === w));
      // `gatehouse policy` alone names the group of commands.
      if (!spec && COMMANDS.some((c) => c.path.length > words.length && words.every((w, i) => c.path[i] === w))) continue;
      if (!spec) {
        wrong.push(`${where}: no such command: ${line}`);
        continue;
      }
      const accepted = new Set(['--help', '-h', ...spec.options.flatMap((o) => [o.name, ...(o.short ? [o.short] : [])])]);
      // Options up to the end of the command (a pipe, a comment or a shell operator ends it).
      const command = line.split(/\s(?:\||#|&&|;|>)\s?/)[0]!;
      for (const m of command.matchAll(/(?:^|[\s[|])(--?[a-z][a-z-]*)/g)) {
        // A doc may show a wrong option on purpose, with the error it gets.
        if (!accepted.has(m[1]!) && !read(join(projectRoot, where)).includes(`unknown option '${m[1]}'`)) wrong.push(`${where}: ${spec.path.join(' ')} has no option ${m[1]}: ${line}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every command and option is in docs/cli.md', () => {
    const cli = read(join(projectRoot, 'docs', 'cli.md'));
    const missing: string[] = [];
    for (const c of COMMANDS) {
      if (!cli.includes(`gatehouse ${c.path.join(' ')}`)) missing.push(c.path.join(' '));
      for (const o of c.options) if (!cli.includes(o.name)) missing.push(`${c.path.join(' ')} ${o.name}`);
    }
    expect(missing).toEqual([]);
  });
});
