import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { dropTestDatabase, testDatabase, testServerUrl } from '../helpers/database.js';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-store-'));
mkdirSync(join(dir, 'policies'));
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (testServerUrl()) await dropTestDatabase(dir);
});

/** `gatehouse <args>` as a user runs it (through tsx). */
function gatehouse(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  const tsx = pathToFileURL(join(projectRoot, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, join(projectRoot, 'src/cli.ts'), ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', GATEHOUSE_POLICY_DIR: join(dir, 'policies'), PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out, err })));
}

const SECRET = 'cli-store-secret-0123456789abcdef0123';

describe('gatehouse migrate', () => {
  it('lists what is pending, applies it, then finds the schema current', async () => {
    const env: Record<string, string> = testServerUrl() ? { GATEHOUSE_DATABASE_URL: await testDatabase(dir) } : { GATEHOUSE_DB: join(dir, 'fresh.db') };
    const before = await gatehouse(['migrate', '--check'], env);
    expect(before.code).toBe(1);
    expect(before.out).toMatch(/^pending on .+:\n {2}001-foundation\.sql\n/);
    const applied = await gatehouse(['migrate'], env);
    expect(applied.code).toBe(0);
    expect(applied.out).toContain('  013-leases.sql\n');
    const after = await gatehouse(['migrate', '--check'], env);
    expect([after.code, after.out]).toEqual([0, expect.stringMatching(/^up to date: /)]);
    expect((await gatehouse(['migrate'], env)).out).toMatch(/^up to date: /);
    expect((await gatehouse(['migrate', '--now'], env)).code).toBe(2);
  }, 60_000);
});

describe('GATEHOUSE_DATABASE_URL at start-up', () => {
  it('a URL that is not postgres:// stops start-up with one line naming the variable, without the password', async () => {
    const r = await gatehouse(['serve'], { GATEHOUSE_DATABASE_URL: 'mysql://root:hunter2-secret@db/gatehouse', GATEHOUSE_SECRET: SECRET });
    expect(r.code).toBe(1);
    expect(r.err.trim().split('\n')).toEqual([expect.stringMatching(/^gatehouse: GATEHOUSE_DATABASE_URL: must be a postgres:\/\/ URL/)]);
    expect(r.err).not.toContain('hunter2');
  }, 30_000);

  it('a server that cannot be reached stops start-up with one line naming the variable, without the password', async () => {
    const r = await gatehouse(['serve'], { GATEHOUSE_DATABASE_URL: 'postgres://gatehouse:hunter2-secret@127.0.0.1:1/gatehouse', GATEHOUSE_SECRET: SECRET });
    expect(r.code).toBe(1);
    expect(r.err.trim().split('\n')).toEqual([expect.stringMatching(/^gatehouse: GATEHOUSE_DATABASE_URL: cannot use postgres:\/\/gatehouse:\*\*\*@127\.0\.0\.1:1\/gatehouse: /)]);
    expect(r.err).not.toContain('hunter2');
  }, 30_000);

  it('instances sharing a database must be given the secret', async () => {
    const r = await gatehouse(['serve'], { GATEHOUSE_DATABASE_URL: 'postgres://gatehouse@127.0.0.1:1/gatehouse' });
    expect(r.code).toBe(1);
    expect(r.err.trim()).toBe('gatehouse: GATEHOUSE_SECRET: required with GATEHOUSE_DATABASE_URL: every instance seals and opens the signing keys with it');
  }, 30_000);
});
