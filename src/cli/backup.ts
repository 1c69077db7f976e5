import { spawnSync } from 'node:child_process';
import { existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { systemClock } from '../clock.js';
import { auditStore } from '../store/audit.js';
import { openPostgres } from '../store/postgres.js';
import { openSqlite } from '../store/sqlite.js';
import type { CliIO, ParsedArgs } from './args.js';
import { databaseOf, loadDotEnv, noDatabaseAt } from './env.js';
import { makeDirectory } from '../paths.js';

/**
 * `gatehouse backup FILE` and `gatehouse restore FILE`. SQLite: an online copy through SQLite's
 * backup API (the server may keep running; the copy is one consistent moment), checked before it
 * is called done: its integrity, its schema and its audit chain. PostgreSQL: `pg_dump` (custom
 * format) when it is on the PATH, its file then read back by `pg_restore --list`; a restore runs
 * `pg_restore` into the configured database (empty, or emptied with --force) and checks the
 * restored audit chain before it is called done.
 */

/** The setting a running server holds its SQLite file under (see InstanceLease in src/server.ts). */
const INSTANCE_LEASE_KEY = 'instance_lease';

/** Why the SQLite file at `file` is not a whole Gatehouse database, or undefined; with the audit chain's result. */
async function checkCopy(file: string): Promise<{ problem?: string; records?: number }> {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    return { problem: `cannot open it as SQLite: ${(err as Error).message}` };
  }
  try {
    const integrity = db.pragma('integrity_check', { simple: true });
    if (integrity !== 'ok') return { problem: `integrity check: ${String(integrity)}` };
    const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name));
    for (const t of ['schema_migrations', 'audit_log', 'signing_keys']) if (!tables.has(t)) return { problem: `not a Gatehouse database (no ${t} table)` };
  } catch (err) {
    return { problem: `cannot read it: ${(err as Error).message}` };
  } finally {
    db.close();
  }
  const sql = openSqlite(file);
  try {
    const { checked, broken } = await auditStore(sql, systemClock).verify();
    if (broken) return { problem: `its audit trail is broken at record ${broken.seq}: ${broken.why}` };
    return { records: checked };
  } finally {
    await sql.close();
  }
}

/**
 * SQLite's online backup of `from` into a file beside `to` under another name (the caller renames
 * it once checked, so a file at `to` is always whole); its path, or undefined when the copy failed.
 */
async function onlineCopy(from: string, to: string, what: 'backup' | 'restore', io: CliIO): Promise<string | undefined> {
  const partial = join(dirname(to), `.${basename(to)}.partial`);
  rmSync(partial, { force: true });
  const source = new Database(from, { readonly: true, fileMustExist: true });
  try {
    await source.backup(partial);
    return partial;
  } catch (err) {
    rmSync(partial, { force: true });
    io.stderr(`gatehouse: the ${what} failed: ${(err as Error).message}\n`);
    return undefined;
  } finally {
    source.close();
  }
}

export async function backupCommand(args: ParsedArgs, io: CliIO): Promise<number> {
  const out = resolve(io.cwd, args.positionals[0]!);
  loadDotEnv();
  const where = databaseOf(args, io);
  if (existsSync(out)) {
    io.stderr(`gatehouse: ${out} exists; a backup never overwrites a file\n`);
    return 2;
  }
  if (where.url) {
    const found = spawnSync('pg_dump', ['--version'], { encoding: 'utf8' });
    if (found.error || found.status !== 0) {
      io.stderr(
        'gatehouse: the database is PostgreSQL: back it up with pg_dump, which is not on the PATH here:\n' +
          `  pg_dump --format=custom --file=${out} "$GATEHOUSE_DATABASE_URL"\n` +
          'and restore it into an empty database with pg_restore --no-owner --dbname=... (see docs/operations.md)\n',
      );
      return 2;
    }
    const dump = spawnSync('pg_dump', ['--format=custom', `--file=${out}`, where.url], { encoding: 'utf8' });
    if (dump.status !== 0) {
      rmSync(out, { force: true });
      io.stderr(`gatehouse: pg_dump failed: ${(dump.stderr || dump.error?.message || '').trim()}\n`);
      return 1;
    }
    // Read back: a file pg_restore cannot list is no backup.
    const listed = spawnSync('pg_restore', ['--list', out], { encoding: 'utf8' });
    if (listed.status !== 0 || !/TABLE DATA \S+ audit_log /.test(listed.stdout ?? '')) {
      rmSync(out, { force: true });
      io.stderr(`gatehouse: the dump does not read back (${(listed.stderr || listed.error?.message || 'no audit_log data in it').trim()}); nothing was kept\n`);
      return 1;
    }
    io.stdout(`backed up to ${out} (pg_dump custom format; restore with gatehouse restore)\n`);
    return 0;
  }
  if (!existsSync(where.file) || !statSync(where.file).isFile()) {
    io.stderr(`gatehouse: ${noDatabaseAt(where)}\n`);
    return 2;
  }
  const partial = await onlineCopy(where.file, out, 'backup', io);
  if (!partial) return 1;
  const { problem, records } = await checkCopy(partial);
  if (problem) {
    rmSync(partial, { force: true });
    io.stderr(`gatehouse: the copy does not check out (${problem}); nothing was written\n`);
    return 1;
  }
  renameSync(partial, out);
  io.stdout(`backed up to ${out} (audit trail: ${records} records, chain ok)\n`);
  return 0;
}

export async function restoreCommand(args: ParsedArgs, io: CliIO): Promise<number> {
  const from = resolve(io.cwd, args.positionals[0]!);
  loadDotEnv();
  const where = databaseOf(args, io);
  if (where.url) return restorePostgres(from, where.url, args.options.get('--force') === true, io);
  if (!existsSync(from)) {
    io.stderr(`gatehouse: no backup at ${from}\n`);
    return 2;
  }
  const force = args.options.get('--force') === true;
  if (existsSync(where.file) && !statSync(where.file).isFile()) {
    io.stderr(`gatehouse: ${where.file} is not a file; restore names the database file to write (--db or GATEHOUSE_DB)\n`);
    return 2;
  }
  if (existsSync(where.file) && !force) {
    io.stderr(`gatehouse: a database exists at ${where.file}; stop the server and pass --force to replace it\n`);
    return 2;
  }
  const { problem, records } = await checkCopy(from);
  if (problem) {
    io.stderr(`gatehouse: ${from} cannot be restored: ${problem}\n`);
    return 1;
  }
  try {
    makeDirectory(dirname(where.file));
  } catch (err) {
    io.stderr(`gatehouse: cannot write the database at ${where.file}: ${(err as Error).message}\n`);
    return 2;
  }
  const partial = await onlineCopy(from, where.file, 'restore', io);
  if (!partial) return 1;
  // The copy was taken from a running server: its instance lease and background leases are that server's, not the restored one's.
  const copy = new Database(partial);
  try {
    copy.prepare('DELETE FROM settings WHERE key = ?').run(INSTANCE_LEASE_KEY);
    copy.prepare('DELETE FROM leases').run();
  } finally {
    copy.close();
  }
  // The old database's write-ahead log must not be replayed over the restored file.
  for (const suffix of ['-wal', '-shm']) rmSync(where.file + suffix, { force: true });
  try {
    renameSync(partial, where.file);
  } catch (err) {
    rmSync(partial, { force: true });
    io.stderr(`gatehouse: the restore failed: ${(err as Error).message}\n`);
    return 1;
  }
  io.stdout(`restored ${from} to ${where.file} (audit trail: ${records} records, chain ok); start the server with the same GATEHOUSE_SECRET\n`);
  return 0;
}

/** Whether the PostgreSQL database at `url` already holds a Gatehouse schema. */
async function holdsGatehouse(url: string): Promise<boolean> {
  const sql = await openPostgres(url, { poolSize: 1, warn: () => undefined });
  try {
    const row = await sql.get<{ found: string | null }>("SELECT to_regclass('schema_migrations')::text AS found");
    return row?.found != null;
  } finally {
    await sql.close();
  }
}

/**
 * A `pg_dump` custom-format file into the configured PostgreSQL database: refused over a database
 * that holds Gatehouse already unless --force (then pg_restore drops what the dump recreates);
 * the background leases of the server the dump was taken from are cleared; the restored audit
 * chain is verified before the restore is called done.
 */
async function restorePostgres(from: string, url: string, force: boolean, io: CliIO): Promise<number> {
  const found = spawnSync('pg_restore', ['--version'], { encoding: 'utf8' });
  if (found.error || found.status !== 0) {
    io.stderr(
      'gatehouse: the database is PostgreSQL: restore a pg_dump backup with pg_restore, which is not on the PATH here:\n' +
        `  pg_restore --no-owner --dbname="$GATEHOUSE_DATABASE_URL" ${from}\n`,
    );
    return 2;
  }
  if (!existsSync(from)) {
    io.stderr(`gatehouse: no backup at ${from}\n`);
    return 2;
  }
  let occupied: boolean;
  try {
    occupied = await holdsGatehouse(url);
  } catch (err) {
    io.stderr(`gatehouse: ${(err as Error).message}\n`);
    return 1;
  }
  if (occupied && !force) {
    io.stderr('gatehouse: the database named by GATEHOUSE_DATABASE_URL holds Gatehouse data; stop its servers and pass --force to replace it\n');
    return 2;
  }
  const restore = spawnSync('pg_restore', ['--no-owner', '--no-privileges', '--exit-on-error', ...(occupied ? ['--clean', '--if-exists'] : []), `--dbname=${url}`, from], { encoding: 'utf8' });
  if (restore.status !== 0) {
    io.stderr(`gatehouse: pg_restore failed: ${(restore.stderr || restore.error?.message || '').trim()}\n`);
    return 1;
  }
  const sql = await openPostgres(url, { poolSize: 1, warn: () => undefined });
  try {
    await sql.run('DELETE FROM leases');
    const { checked, broken } = await auditStore(sql, systemClock).verify();
    if (broken) {
      io.stderr(`gatehouse: restored, but its audit trail is broken at record ${broken.seq}: ${broken.why}\n`);
      return 1;
    }
    io.stdout(`restored ${from} (audit trail: ${checked} records, chain ok); start the server with the same GATEHOUSE_SECRET\n`);
    return 0;
  } finally {
    await sql.close();
  }
}
