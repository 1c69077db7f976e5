import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-proc-'));
mkdirSync(join(dir, 'policies'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run { child: ChildProcess; lines: string[]; exited: Promise<number | null> }

/** `gatehouse serve` as a user runs it (through tsx, so no build is needed). */
function serve(env: Record<string, string>): Run {
  const tsx = pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, join(projectRoot, 'src/cli.ts'), 'serve'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      GATEHOUSE_DB: join(dir, 'gh.db'),
      GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
      GATEHOUSE_WORKERS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const collect = (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited };
}

async function waitFor<T>(fn: () => T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const listeningPort = (run: Run) => () => {
  for (const l of run.lines) {
    try {
      const j = JSON.parse(l);
      if (j.msg === 'listening') return j.port as number;
    } catch {
      /* not a log line */
    }
  }
  return undefined;
};

describe('gatehouse serve', () => {
  it('starts, prints a generated admin token once, keeps keys across a restart, and stops on SIGTERM', async () => {
    const first = serve({});
    const port = await waitFor(listeningPort(first));
    const token = first.lines.map((l) => JSON.parse(l)).find((j) => j.admin_token)?.admin_token as string;
    expect(token).toMatch(/^[\w-]{43}$/);
    const keys1 = (await (await fetch(`http://localhost:${port}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    const ok = await fetch(`http://localhost:${port}/admin/v1/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).not.toBe(401);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = serve({});
    const port2 = await waitFor(listeningPort(second));
    expect(second.lines.some((l) => l.includes('admin_token'))).toBe(false);
    const keys2 = (await (await fetch(`http://localhost:${port2}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    for (const k of keys1.keys) expect(keys2.keys.map((x: { kid: string }) => x.kid)).toContain(k.kid);
    const still = await fetch(`http://localhost:${port2}/admin/v1/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(still.status).not.toBe(401);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('a bad variable stops start-up with one line naming it', async () => {
    const run = serve({ GATEHOUSE_ISSUER: 'nope' });
    expect(await run.exited).toBe(1);
    expect(run.lines).toHaveLength(1);
    expect(run.lines[0]).toMatch(/^gatehouse: GATEHOUSE_ISSUER: /);
  });

  it('a port that is taken stops start-up naming PORT', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, r));
    const port = (blocker.address() as { port: number }).port;
    const run = serve({ PORT: String(port) });
    expect(await run.exited).toBe(1);
    expect(run.lines.at(-1)).toMatch(/^gatehouse: PORT: port \d+ is already in use$/);
    blocker.close();
  });
});
