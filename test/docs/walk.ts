// Running a document's shell blocks as a reader pastes them: in order, in one bash session, in
// the project folder, against a server the test started (the lines that start, stop or wait
// for the server are the test's to do). `localhost:3000` points at that server and `/tmp/` at a
// directory of the test's own.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { projectRoot } from '../../src/paths.js';

export interface Block { index: number; lang: string; text: string }

/** The fenced blocks of the section under `heading` (to the next heading of its level), in order. */
export function sectionBlocks(file: string, heading: string): Block[] {
  const text = readFileSync(join(projectRoot, file), 'utf8');
  const start = text.indexOf(`\n${heading}`);
  if (start < 0) throw new Error(`${file} has no section "${heading}"`);
  const level = /^#+ /.exec(heading)![0];
  const end = text.indexOf(`\n${level}`, start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m, index) => ({ index, lang: m[1]!, text: m[2]! }));
}

/** The lines that start, stop or wait for the server. */
export const SERVER_LINE = /npm (ci|start)|^until curl -sf localhost:3000\/healthz|^kill %1|^export GATEHOUSE_ADMIN_TOKEN=/;

export interface Ran { code: number; stdout: string; stderr: string }

function bash(script: string, env: Record<string, string>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', script], {
      cwd: projectRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      timeout: 150_000,
      maxBuffer: 16 * 1024 * 1024,
    }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

export interface Outputs {
  /** What a block printed, and the exit status of its last command. */
  of(index: number): { text: string; code: number };
}

/** Runs the shell blocks (server lines left out) in one bash session; `before` and `after` are test lines. */
export async function runBlocks(blocks: Block[], opts: { port: number; tmp: string; env: Record<string, string>; before?: string; after?: string }): Promise<Outputs> {
  const body = blocks
    .filter((b) => b.lang === 'sh')
    .map((b) => {
      const text = b.text
        .split('\n')
        .filter((l) => !SERVER_LINE.test(l))
        .join('\n')
        .replaceAll('localhost:3000', `localhost:${opts.port}`)
        .replaceAll('/tmp/', `${opts.tmp}/`);
      return `echo "@@begin ${b.index}"\n${text}\necho "@@end ${b.index} exit $?"`;
    })
    .join('\n');
  const ran = await bash(`mkdir -p ${opts.tmp}\n${opts.before ?? ''}\n${body}\n${opts.after ?? ''}`, opts.env);
  return {
    of(index) {
      const m = new RegExp(`@@begin ${index}\\n([\\s\\S]*?)@@end ${index} exit (\\d+)`).exec(ran.stdout);
      if (!m) throw new Error(`block ${index} did not finish:\n${ran.stdout.slice(-2000)}\n${ran.stderr}`);
      return { text: m[1]!, code: Number(m[2]) };
    },
  };
}

/** A shell block's own trailing comment lines (`# {"decision":true}`): the output it promises, `...` for "anything". */
export function expectPromisedOutput(block: Block, printed: string): void {
  const promised = block.text.trimEnd().split('\n').reverse();
  const lines: string[] = [];
  for (const l of promised) {
    if (!l.startsWith('# ')) break;
    lines.unshift(l.slice(2));
  }
  for (const line of lines) {
    const pattern = line.split('...').map((p) => p.trim().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*?');
    expect(printed, `block ${block.index} promises: ${line}`).toMatch(new RegExp(pattern, 'i'));
  }
}
