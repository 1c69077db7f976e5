import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { projectRoot } from '../paths.js';
import type { Dialect, Sql, SqlDatabase } from './sql.js';
import { openSqlite } from './sqlite.js';

const MIGRATIONS_DIR = join(projectRoot, 'src', 'store', 'migrations');

export interface DatabaseOptions {
  /** the SQLite file (used when `url` is not given) */
  file: string;
  /** `postgres://...`: PostgreSQL instead of the SQLite file */
  url?: string;
  /** a cluster worker: leaves SQLite WAL checkpoints to the primary */
  worker?: boolean;
  /** PostgreSQL: the longest wait for a connection and the longest statement, in ms */
  timeoutMs?: number;
  warn?: (msg: string) => void;
}

/** Opens the database the configuration names. Does not migrate. */
export async function openDatabase(opts: DatabaseOptions): Promise<SqlDatabase> {
  if (opts.url) {
    const { openPostgres } = await import('./postgres.js');
    return openPostgres(opts.url, { warn: opts.warn, ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}) });
  }
  return openSqlite(opts.file, { autoCheckpoint: !opts.worker, warn: opts.warn });
}

/** Why a database a command reads could not be opened (the command exits 2 with the message). */
export class DatabaseUnavailable extends Error {}

/**
 * Opens the database a command reads but does not create (`audit verify`, `policy replay`): a
 * SQLite file must exist, be a SQLite database and hold Gatehouse's schema, and PostgreSQL must
 * answer. The file is looked at read-only first, because opening it for use switches it to WAL
 * mode, which writes to it: a file that is not Gatehouse's is left as it was. With `sqlite`, a
 * SQLite database without the schema is taken too (`migrate` makes it). Throws
 * DatabaseUnavailable saying which and why.
 */
export async function openExistingDatabase(opts: DatabaseOptions, want: 'schema' | 'sqlite' = 'schema'): Promise<SqlDatabase> {
  if (!opts.url) {
    const found = inspectSqliteFile(opts.file);
    if (found.problem) throw new DatabaseUnavailable(found.problem);
    if (!found.schema && want === 'schema') throw new DatabaseUnavailable(`${opts.file} is not a Gatehouse database (no schema_migrations table; gatehouse migrate makes one)`);
  }
  try {
    return await openDatabase(opts);
  } catch (err) {
    throw new DatabaseUnavailable(err instanceof Error ? err.message : String(err));
  }
}

/** What the file at `file` is, read-only: why it is no SQLite database, or whether it holds Gatehouse's schema. */
export function inspectSqliteFile(file: string): { problem?: string; schema: boolean } {
  let db: InstanceType<typeof Database>;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    return { problem: `no database at ${file} (${(err as Error).message})`, schema: false };
  }
  try {
    const found = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    return { schema: found !== undefined };
  } catch (err) {
    return { problem: `${file} cannot be read as a SQLite database (${(err as Error).message})`, schema: false };
  } finally {
    db.close();
  }
}

export interface Migration { version: number; name: string; sql: string }

/** Numbered `.sql` files in src/store/migrations, `NNN-name.sql`, applied in order. */
export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+-[\w-]+\.sql$/.test(f))
    .map((f) => ({ version: Number.parseInt(f, 10), name: f, sql: readFileSync(join(dir, f), 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

/**
 * A migration as one dialect runs it. The files are written in the portable subset; lines
 * between `-- dialect: sqlite` (or `-- dialect: postgres`) and `-- dialect: all` belong to one
 * dialect only. For PostgreSQL the column types (written in capitals) are then translated: INTEGER → BIGINT (SQLite
 * integers are 64-bit), REAL → DOUBLE PRECISION, TEXT → TEXT COLLATE "C" (byte order, as SQLite
 * compares and sorts), COLLATE NOCASE → the case-insensitive `nocase` collation, an INTEGER
 * PRIMARY KEY AUTOINCREMENT → an identity column; WITHOUT ROWID is dropped.
 */
export function migrationSql(sql: string, dialect: Dialect): string {
  const kept: string[] = [];
  let section: Dialect | 'all' = 'all';
  for (const line of sql.split('\n')) {
    const marker = /^\s*--\s*dialect:\s*(sqlite|postgres|all)\s*$/i.exec(line);
    if (marker) {
      section = marker[1]!.toLowerCase() as Dialect | 'all';
      continue;
    }
    if (section === 'all' || section === dialect) kept.push(line);
  }
  const text = kept.join('\n');
  return dialect === 'postgres' ? toPostgresTypes(text) : text;
}

/** Drops `--` comments (outside string literals): an apostrophe in a comment must not start a literal. */
function stripComments(sql: string): string {
  let out = '';
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'") {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === "'" && sql[j + 1] !== "'")) j += sql[j] === "'" ? 2 : 1;
      out += sql.slice(i, j + 1);
      i = j;
    } else if (c === '-' && sql[i + 1] === '-') {
      while (i < sql.length && sql[i] !== '\n') i++;
      out += '\n';
    } else {
      out += c;
    }
  }
  return out;
}

function toPostgresTypes(sql: string): string {
  return stripComments(sql)
    .split(/('(?:[^']|'')*')/)
    .map((part, i) => {
      if (i % 2 === 1) return part; // a string literal: left alone
      return part
        .replace(/\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b/g, 'BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY')
        .replace(/\)\s*WITHOUT\s+ROWID\b/g, ')')
        .replace(/\bINTEGER\b/g, 'BIGINT')
        .replace(/\bREAL\b/g, 'DOUBLE PRECISION')
        .replace(/\bTEXT\b(?![^,\n]*\bCOLLATE\b)/g, 'TEXT COLLATE "C"')
        .replace(/\bCOLLATE\s+NOCASE\b/g, 'COLLATE nocase');
    })
    .join('');
}

/** What every PostgreSQL schema needs before the first migration. */
const POSTGRES_PRELUDE = `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'nocase' AND collnamespace = current_schema()::regnamespace) THEN
    CREATE COLLATION nocase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
  END IF;
END $$`;

/**
 * Applies every migration not yet applied, each in its own transaction, and returns the names
 * applied. Instances starting together take turns (a lock); each looks again at what is applied
 * once it holds the lock.
 */
export async function migrate(db: Sql, migrations = listMigrations()): Promise<string[]> {
  await db.transaction(async (tx) => {
    await noStatementTimeout(tx);
    await tx.lock('schema_migrations');
    if (db.dialect === 'postgres') await tx.exec(POSTGRES_PRELUDE);
    await tx.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  });
  const done: string[] = [];
  for (const m of migrations) {
    const applied = await db.transaction(async (tx) => {
      await noStatementTimeout(tx);
      await tx.lock('schema_migrations');
      if (await tx.get('SELECT version FROM schema_migrations WHERE version = ?', [m.version])) return false;
      await tx.exec(migrationSql(m.sql, db.dialect));
      // When the schema really changed (the system clock): no store exists yet, and nothing judges this time.
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [m.version, m.name, Math.floor(Date.now() / 1000)]);
      return true;
    });
    if (applied) done.push(m.name);
  }
  return done;
}

/** A migration (or the wait for another instance's) may take longer than any request may: no statement timeout for it. */
async function noStatementTimeout(tx: Sql): Promise<void> {
  if (tx.dialect === 'postgres') await tx.exec('SET LOCAL statement_timeout = 0');
}

/** Migrations in the list that the database has not applied yet (for `gatehouse migrate --check`). */
export async function pendingMigrations(db: Sql, migrations = listMigrations()): Promise<Migration[]> {
  const exists = await hasMigrationTable(db);
  if (!exists) return migrations;
  const rows = await db.all<{ version: number }>('SELECT version FROM schema_migrations');
  const applied = new Set(rows.map((r) => Number(r.version)));
  return migrations.filter((m) => !applied.has(m.version));
}

async function hasMigrationTable(db: Sql): Promise<boolean> {
  const row =
    db.dialect === 'postgres'
      ? await db.get("SELECT 1 AS x FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'")
      : await db.get("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'");
  return row !== undefined;
}
