// The CLI as a user runs it: a process started through the package's "bin" (which runs dist/
// when it is current, else the sources through tsx), in a working directory of the test's own.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { projectRoot } from '../../src/paths.js';

const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };
export const VERSION = pkg.version;
export const BIN = join(projectRoot, pkg.bin.gatehouse!);

export interface Ran { code: number; stdout: string; stderr: string }

export function gatehouse(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
    }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** A fresh directory holding the given files (paths relative to it). */
export async function workDir(files: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gh-cli-'));
  await writeFiles(dir, files);
  return dir;
}

export async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [p, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, p)), { recursive: true });
    await writeFile(join(dir, p), text);
  }
}

export const REFUNDS = `policy "refunds" version 1

rule "block-large-refunds" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 10000
}

rule "approve-medium-refunds" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount >= 1000
}
`;

/** A test block for an autonomous agent holding create:refunds, with the given amount and expectation. */
export function refundTest(name: string, amount: number, expect: string): string {
  return `test "${name}" {
  agent "spiffe://localhost/agent/ops" autonomous
  permissions "create:refunds"
  capability "create:refunds"
  action "create:refunds"
  resource "refund:r1"
  context { amount: ${amount} }
  expect ${expect}
}
`;
}

export interface JsonDiagnostic { file: string; line: number; col: number; severity: string; code: string; message: string }

/**
 * Every diagnostic's block in the text output: `file:line:col: message` (warnings with
 * `warning: ` before the message), the gutter, the source line exactly as in the file, and a
 * caret under the column.
 */
export async function expectCaretBlocks(cwd: string, stderr: string, ds: JsonDiagnostic[]): Promise<void> {
  const lines = stderr.split('\n');
  for (const d of ds) {
    const head = `${d.file}:${d.line}:${d.col}: ${d.severity === 'warning' ? 'warning: ' : ''}${d.message}`;
    const at = lines.indexOf(head);
    expect(at, `no block for ${head} in\n${stderr}`).toBeGreaterThanOrEqual(0);
    const source = (await readFile(join(cwd, d.file), 'utf8')).split('\n')[d.line - 1]!;
    const gutter = String(d.line);
    const pad = ' '.repeat(gutter.length);
    expect(lines[at + 1]).toBe(` ${pad} |`);
    expect(lines[at + 2]).toBe(` ${gutter} | ${source}`);
    const caretLine = lines[at + 3]!;
    expect(caretLine.startsWith(` ${pad} | `)).toBe(true);
    const marks = caretLine.slice(pad.length + 4);
    expect(marks.indexOf('^'), `caret of ${head}`).toBe(d.col - 1);
    expect(marks.slice(0, d.col - 1)).toBe(source.slice(0, d.col - 1).replace(/[^\t]/g, ' ')); // tabs kept: aligned anywhere
  }
}
