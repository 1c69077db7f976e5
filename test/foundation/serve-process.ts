import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/paths.js';

export interface Run {
  child: ChildProcess;
  /** stdout and stderr lines, in arrival order */
  lines: string[];
  stdout: string[];
  stderr: string[];
  exited: Promise<number | null>;
}

/** `gatehouse serve` as a user runs it (through tsx, so no build is needed), in `cwd`, with only these variables. */
export function serveProcess(cwd: string, env: Record<string, string>, opts: { group?: boolean } = {}): Run {
  const tsx = pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, join(projectRoot, 'src/cli.ts'), 'serve'], {
    cwd,
    env: { PATH: process.env.PATH, PORT: '0', GATEHOUSE_WORKERS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own, signalled as a whole as a terminal or a service manager does.
    detached: opts.group ?? false,
  });
  const run: Run = { child, lines: [], stdout: [], stderr: [], exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
  const collect = (into: string[]) => (b: Buffer) => {
    const lines = b.toString().split('\n').filter(Boolean);
    into.push(...lines);
    run.lines.push(...lines);
  };
  child.stdout!.on('data', collect(run.stdout));
  child.stderr!.on('data', collect(run.stderr));
  return run;
}

export async function waitFor<T>(fn: () => T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The port of the first `listening` log line, once there is one. */
export const listeningPort = (run: Run) => () => {
  for (const l of run.stdout) {
    try {
      const j = JSON.parse(l) as { msg?: string; port?: number };
      if (j.msg === 'listening') return j.port;
    } catch {
      /* not a log line */
    }
  }
  return undefined;
};

/** Stops a run that is still going (a test that failed midway) and waits for it. */
export async function stopRun(run: Run): Promise<void> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  await run.exited;
}
