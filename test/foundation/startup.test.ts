import { createServer } from 'node:net';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listeningPort, serveProcess, stopRun, waitFor, type Run } from './serve-process.js';

// What a newcomer runs into on the first start, each refused with one line naming the variable.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-startup-'));
mkdirSync(join(dir, 'policies'));
const runs: Run[] = [];
afterAll(async () => {
  for (const r of runs) await stopRun(r);
  rmSync(dir, { recursive: true, force: true });
});

const SECRET = 'first-secret-0123456789abcdef-0123456789';
const ADMIN = 'startup-admin-token-0123456789abcdef';

function serve(db: string, env: Record<string, string> = {}): Run {
  const run = serveProcess(dir, {
    GATEHOUSE_DB: join(dir, db),
    GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
    GATEHOUSE_SECRET: SECRET,
    GATEHOUSE_ADMIN_TOKEN: ADMIN,
    ...env,
  });
  runs.push(run);
  return run;
}

/** Exit code 1 and exactly one line on the terminal. */
async function refused(run: Run): Promise<string> {
  expect(await run.exited).toBe(1);
  expect(run.stderr, run.lines.join('\n')).toHaveLength(1);
  return run.stderr[0]!;
}

describe('start-up refuses, in one line naming the variable', () => {
  it('a GATEHOUSE_SECRET that does not open the stored keys', async () => {
    const first = serve('secret.db');
    await waitFor(listeningPort(first));
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const line = await refused(serve('secret.db', { GATEHOUSE_SECRET: 'another-secret-0123456789abcdef-0123456789' }));
    expect(line).toMatch(/^gatehouse: GATEHOUSE_SECRET: does not open the signing keys stored in .*secret\.db; set the secret this database was created with$/);
  });

  it('a secret or admin token shorter than 32 characters, unless NODE_ENV=development', async () => {
    expect(await refused(serve('short.db', { GATEHOUSE_SECRET: 'short-secret' }))).toMatch(/^gatehouse: GATEHOUSE_SECRET: must be at least 32 characters/);
    expect(await refused(serve('short.db', { GATEHOUSE_ADMIN_TOKEN: 'admin' }))).toMatch(/^gatehouse: GATEHOUSE_ADMIN_TOKEN: must be at least 32 characters/);
    const dev = serve('short.db', { GATEHOUSE_SECRET: 'short-secret', GATEHOUSE_ADMIN_TOKEN: 'admin', NODE_ENV: 'development' });
    await waitFor(listeningPort(dev));
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
  });

  it('a database path that is not a database, or cannot be written', async () => {
    writeFileSync(join(dir, 'notes.db'), 'these are my notes, not a database\n'.repeat(200));
    expect(await refused(serve('notes.db'))).toMatch(/^gatehouse: GATEHOUSE_DB: .*notes\.db is not a SQLite database \(/);
    const line = await refused(serveProcess(dir, { GATEHOUSE_DB: '/proc/gatehouse.db', GATEHOUSE_POLICY_DIR: join(dir, 'policies'), GATEHOUSE_SECRET: SECRET }));
    expect(line).toMatch(/^gatehouse: GATEHOUSE_DB: \/proc\/gatehouse\.db cannot be opened for reading and writing/);
  });

  it('a second instance on the same SQLite file; the file is free again once the first stops (or dies)', async () => {
    const first = serve('shared.db');
    await waitFor(listeningPort(first));
    const line = await refused(serve('shared.db'));
    expect(line).toMatch(new RegExp(`^gatehouse: GATEHOUSE_DB: .*shared\\.db is in use by another Gatehouse instance \\(pid ${first.child.pid} on .+\\); stop it first`));

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const second = serve('shared.db');
    await waitFor(listeningPort(second));
    // A process that dies without a word leaves its lease behind; on the same host it is taken over.
    second.child.kill('SIGKILL');
    await second.exited;
    const third = serve('shared.db');
    await waitFor(listeningPort(third));
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  });

  it('a port in use with several workers: one line, no worker restarts', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const run = serve('ports.db', { PORT: String(port), GATEHOUSE_WORKERS: '2' });
      expect(await refused(run)).toBe(`gatehouse: PORT: port ${port} is already in use`);
      expect(run.stdout.some((l) => l.includes('worker exited'))).toBe(false);
    } finally {
      blocker.close();
    }
  });
});

describe('workers that die at start', () => {
  it('are started again with growing pauses, and the primary gives up with one line after a few', async () => {
    // Every worker process exits as it starts (the primary is unaffected).
    const crash = join(dir, 'crash-workers.cjs');
    writeFileSync(crash, "if (require('node:cluster').isWorker) process.exit(3);\n");
    const run = serve('crash.db', { GATEHOUSE_WORKERS: '2', NODE_OPTIONS: `--require ${crash}` });
    const line = await refused(run);
    expect(line).toBe('gatehouse: workers exit right after they start (5 in a row, the last with code 3); giving up');
    const delays = run.stdout
      .map((l) => JSON.parse(l) as { msg?: string; restart_in_ms?: number })
      .filter((j) => j.msg === 'worker exited; starting another')
      .map((j) => j.restart_in_ms!);
    expect(delays).toEqual([250, 500, 1000, 2000]);
  });
});
