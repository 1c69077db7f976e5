import { createServer } from 'node:net';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listeningPort, serveProcess, waitFor } from './serve-process.js';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-proc-'));
mkdirSync(join(dir, 'policies'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const serve = (env: Record<string, string>) =>
  serveProcess(dir, { GATEHOUSE_DB: join(dir, 'gh.db'), GATEHOUSE_POLICY_DIR: join(dir, 'policies'), ...env });

describe('gatehouse serve', () => {
  it('starts, prints a generated admin token once on the terminal (never in the log), keeps keys across a restart, and stops on SIGTERM', async () => {
    const first = serve({});
    const port = await waitFor(listeningPort(first));
    const shown = first.stderr.map((l) => /^gatehouse: generated a management API token .*: ([\w-]{43})$/.exec(l)?.[1]).find(Boolean);
    expect(shown).toBeDefined();
    const token = shown!;
    // The JSON log says a token was made, and never what it is.
    expect(first.stdout.some((l) => l.includes(token))).toBe(false);
    expect(first.stdout.some((l) => l.includes('generated a management API token'))).toBe(true);
    const keys1 = (await (await fetch(`http://localhost:${port}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    const ok = await fetch(`http://localhost:${port}/admin/v1/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).not.toBe(401);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = serve({});
    const port2 = await waitFor(listeningPort(second));
    expect(second.lines.some((l) => l.includes('generated a management API token'))).toBe(false);
    const keys2 = (await (await fetch(`http://localhost:${port2}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
    for (const k of keys1.keys) expect(keys2.keys.map((x: { kid: string }) => x.kid)).toContain(k.kid);
    const still = await fetch(`http://localhost:${port2}/admin/v1/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(still.status).not.toBe(401);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  // Ctrl-C in a terminal and a service manager stopping a unit signal every process of the
  // group: each worker hears the signal itself and again from the primary.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`a ${signal} to the whole process group drains every worker once: each exits 0, none is killed`, async () => {
      const run = serveProcess(dir, { GATEHOUSE_DB: join(dir, 'group.db'), GATEHOUSE_POLICY_DIR: join(dir, 'policies'), GATEHOUSE_WORKERS: '2', GATEHOUSE_DRAIN_NOTICE_MS: '300' }, { group: true });
      try {
        const port = await waitFor(listeningPort(run), 60_000);
        await waitFor(() => (run.stdout.filter((l) => l.includes('"msg":"listening"')).length >= 2 ? true : undefined), 60_000);
        expect((await fetch(`http://localhost:${port}/healthz`)).status).toBe(200);
        process.kill(-run.child.pid!, signal);
        expect(await run.exited).toBe(0);
        const stopped = run.stdout.filter((l) => l.includes('"msg":"worker stopped"')).map((l) => JSON.parse(l) as { code: unknown; signal: unknown });
        expect(stopped).toHaveLength(2);
        for (const w of stopped) expect([w.code, w.signal]).toEqual([0, null]);
      } finally {
        try {
          process.kill(-run.child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }, 120_000);
  }

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
