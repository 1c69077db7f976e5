// The commands that read a database (`audit verify`, `policy replay`, `migrate --check`, `backup`)
// pointed at something that is not a Gatehouse database: a directory, a text file, an empty file,
// a PostgreSQL that does not answer. Each exits 2 (the docs' code for an input error; 1 would say
// "broken chain", "something changed" or "something pending"), says why in one line naming the
// command, and leaves the file byte for byte as it was (opening a SQLite file for use switches it
// to WAL mode, which writes to it). `migrate --check` writes nothing where no database is yet;
// `restore` does not put a database where a directory stands, nor leave its partial copy behind;
// a path under which no directory can be made (under /proc) fails at once instead of hanging.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.js';
import { workDir } from './helpers.js';

let cwd: string;
const TEXT = 'not a database, only words\n';

beforeAll(async () => {
  cwd = await workDir({ 'm.fga': 'model\n  schema 1.1\n\ntype user\ntype document\n  relations\n    define viewer: [user]\n', 'draft/a.policy': 'rule "x" {\n  effect permit\n  subjects "group:eng"\n  relation "read:docs"\n  object "doc:*"\n}\n', 'text.db': TEXT });
  mkdirSync(join(cwd, 'dir.db'));
  writeFileSync(join(cwd, 'empty.db'), '');
});
afterAll(async () => {
  if (cwd) await rm(cwd, { recursive: true, force: true, maxRetries: 5 });
});

/** Runs `gatehouse <args>` in process with `env` in place of the database variables. */
async function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const names = ['GATEHOUSE_DB', 'GATEHOUSE_DATABASE_URL'];
  const before = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  for (const n of names) delete process.env[n];
  Object.assign(process.env, env);
  let stdout = '';
  let stderr = '';
  try {
    const code = await runCli(args, { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), cwd });
    return { code: code ?? 0, stdout, stderr };
  } finally {
    for (const n of names) {
      if (before[n] === undefined) delete process.env[n];
      else process.env[n] = before[n];
    }
  }
}

const bytes = (f: string) => readFileSync(join(cwd, f));
const UNREACHABLE = 'postgres://gatehouse:hunter2-secret@127.0.0.1:1/gatehouse';

describe('a command that reads a database, given something else', () => {
  const commands: [string, (db: string) => string[], RegExp][] = [
    ['audit verify', (db) => ['audit', 'verify', '--db', db], /^gatehouse: cannot read the audit trail: /],
    ['policy replay', (db) => ['policy', 'replay', 'draft', '--db', db], /^gatehouse policy replay: cannot read the audit trail: /],
  ];
  for (const [name, args, says] of commands) {
    it(`${name}: a directory, a text file and an empty file are refused with exit 2, each left as it was`, async () => {
      for (const db of ['dir.db', 'text.db', 'empty.db']) {
        const before = db === 'dir.db' ? undefined : bytes(db);
        const r = await run(args(db));
        expect([r.code, r.stdout], `${db}: ${r.stderr}`).toEqual([2, '']);
        expect(r.stderr.split('\n').filter(Boolean)).toEqual([expect.stringMatching(says)]);
        if (before) expect(bytes(db).equals(before), `${db} was written to`).toBe(true);
        expect(existsSync(join(cwd, `${db}-wal`)) || existsSync(join(cwd, `${db}-shm`)), `${db} got a WAL`).toBe(false);
      }
      expect((await run(args('empty.db'))).stderr).toContain('not a Gatehouse database');
    });

    it(`${name}: a PostgreSQL that does not answer is exit 2, its password not shown`, async () => {
      const r = await run(args('x').slice(0, -2), { GATEHOUSE_DATABASE_URL: UNREACHABLE });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/GATEHOUSE_DATABASE_URL: cannot use postgres:\/\/gatehouse:\*\*\*@127\.0\.0\.1:1\/gatehouse/);
      expect(r.stderr).not.toContain('hunter2');
    });
  }

  it('migrate --check where no database is yet lists every migration pending and creates nothing', async () => {
    const r = await run(['migrate', '--check'], { GATEHOUSE_DB: join(cwd, 'not-yet', 'gatehouse.db') });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/^pending on .+gatehouse\.db \(no database there yet\):\n {2}001-foundation\.sql\n/);
    expect(existsSync(join(cwd, 'not-yet'))).toBe(false);
  });

  it('migrate --check on an empty file lists every migration pending and leaves the file as it was', async () => {
    const r = await run(['migrate', '--check'], { GATEHOUSE_DB: join(cwd, 'empty.db') });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/^pending on .+empty\.db:\n {2}001-foundation\.sql\n/);
    expect(bytes('empty.db').length).toBe(0);
  });

  it('migrate and migrate --check refuse a directory, a text file and an unreachable PostgreSQL with exit 2', async () => {
    for (const check of [['--check'], []]) {
      const envs: Record<string, string>[] = [{ GATEHOUSE_DB: join(cwd, 'dir.db') }, { GATEHOUSE_DB: join(cwd, 'text.db') }, { GATEHOUSE_DATABASE_URL: UNREACHABLE }];
      for (const env of envs) {
        const r = await run(['migrate', ...check], env);
        expect([r.code, r.stdout], `${JSON.stringify(env)} ${check}: ${r.stderr}`).toEqual([2, '']);
        expect(r.stderr.split('\n').filter(Boolean)).toEqual([expect.stringMatching(/^gatehouse: cannot (check|migrate): /)]);
        expect(r.stderr).not.toContain('hunter2');
      }
    }
    expect(bytes('text.db').toString()).toBe(TEXT);
  });

  it('a GATEHOUSE_DATABASE_URL that is not a postgres:// URL is an input error: exit 2, one line, no password', async () => {
    for (const args of [['audit', 'verify'], ['policy', 'replay', 'draft'], ['migrate', '--check'], ['migrate'], ['backup', 'out.bak']]) {
      const r = await run(args, { GATEHOUSE_DATABASE_URL: 'mysql://root:hunter2-secret@db/gatehouse' });
      expect([r.code, r.stdout], `${args.join(' ')}: ${r.stderr}`).toEqual([2, '']);
      expect(r.stderr).toBe('gatehouse: GATEHOUSE_DATABASE_URL: must be a postgres:// URL (got a mysql:// URL)\n');
    }
  });

  it('restore refuses a directory as the database file it writes, even with --force, and leaves no partial copy', async () => {
    const made = join(cwd, 'made.db');
    expect((await run(['migrate'], { GATEHOUSE_DB: made })).code).toBe(0);
    const backedUp = await run(['backup', 'made.bak', '--db', 'made.db']);
    expect(backedUp.code, backedUp.stderr).toBe(0);
    for (const force of [[], ['--force']]) {
      const r = await run(['restore', 'made.bak', '--db', 'dir.db', ...force]);
      expect([r.code, r.stdout], r.stderr).toEqual([2, '']);
      expect(r.stderr).toMatch(/^gatehouse: .+dir\.db is not a file; /);
    }
    expect(readdirSync(cwd).filter((f) => f.includes('partial'))).toEqual([]);
    const restored = await run(['restore', 'made.bak', '--db', 'restored.db']);
    expect(restored.code, restored.stderr).toBe(0);
  });

  // Node's own recursive mkdir spins forever where the system answers ENOENT for a directory
  // that can never be made, as under /proc: these commands hung instead of failing.
  it.skipIf(!existsSync('/proc/self'))('a path under which no directory can be made fails at once: import --out, migrate, restore', async () => {
    const imported = await run(['policy', 'import', 'openfga', 'm.fga', '--out', '/proc/gatehouse-nowhere']);
    expect(imported.code, imported.stderr).toBe(2);
    expect(imported.stderr).toMatch(/^cannot write into \/proc\/gatehouse-nowhere: ENOENT/);
    const migrated = await run(['migrate'], { GATEHOUSE_DB: '/proc/gatehouse-nowhere/g.db' });
    expect(migrated.code, migrated.stderr).toBe(2);
    expect(migrated.stderr).toMatch(/^gatehouse: cannot migrate: .*ENOENT/);
    const made = join(cwd, 'made2.db');
    expect((await run(['migrate'], { GATEHOUSE_DB: made })).code).toBe(0);
    expect((await run(['backup', 'made2.bak', '--db', 'made2.db'])).code).toBe(0);
    const restored = await run(['restore', 'made2.bak', '--db', '/proc/gatehouse-nowhere/g.db']);
    expect(restored.code, restored.stderr).toBe(2);
    expect(restored.stderr).toMatch(/^gatehouse: cannot write the database at \/proc\/gatehouse-nowhere\/g\.db: ENOENT/);
  });

  it('backup refuses a directory as the database it copies: exit 2', async () => {
    const r = await run(['backup', 'out.bak', '--db', 'dir.db']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^gatehouse: --db: no database at .+dir\.db\n$/);
    expect(existsSync(join(cwd, 'out.bak'))).toBe(false);
  });
});
