/** What the HTTP benchmarks share: autocannon, free ports, child servers in their own process group. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';

export interface CannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
}
export type Cannon = (opts: Record<string, unknown>) => Promise<CannonResult>;
export const autocannon = createRequire(import.meta.url)('autocannon') as Cannon;

export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

/** Waits until `url` answers with anything below 500. */
export async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not start`);
}

/** `node <args>` in its own process group, so a cluster's workers go down with it. */
export function start(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'], detached: true });
  child.on('exit', (code) => code && code !== 0 && process.stderr.write(`child exited with ${code}\n`));
  return child;
}

export function stop(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
}
