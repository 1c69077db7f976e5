/** What the HTTP benchmarks share: autocannon, free ports, child servers in their own process group. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';

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

/** Waits until `url` answers with anything below 500 (for up to `seconds`). */
export async function waitReady(url: string, seconds = 30): Promise<void> {
  for (let i = 0; i < seconds * 10; i++) {
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

/** `node dist/cli.js serve` on a free port over a fresh database in `dir`; answers its base URL. */
export async function startGatehouse(dir: string, env: Record<string, string>): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort();
  const base = `http://localhost:${port}`;
  // BENCH_PROFILE_DIR=<dir>: every process of the server (its workers too) writes a CPU profile there.
  const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  const child = start([...profile, 'dist/cli.js', 'serve'], {
    PORT: String(port),
    GATEHOUSE_ISSUER: base,
    GATEHOUSE_DB: join(dir, 'bench.db'),
    GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
    GATEHOUSE_SECRET: 'bench-secret-0123456789abcdef-0123456789',
    // The benches' MCP upstreams and receivers listen on this machine.
    GATEHOUSE_OUTBOUND_ALLOW_HOSTS: '127.0.0.1,localhost',
    LOG_LEVEL: 'warn',
    // One load generator on one address for one agent: the per-second request limits of the
    // agent endpoints would answer most of a run with 429s, which measures the limiter.
    GATEHOUSE_AGENT_RATE_LIMIT: '0',
    GATEHOUSE_ADDRESS_RATE_LIMIT: '0',
    ...env,
  });
  return { base, child };
}

/** The management API of a started server, as the benches set it up: a failed call throws. */
export function adminClient(base: string, token: string) {
  return async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${base}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.status === 204 ? undefined : res.json();
  };
}
