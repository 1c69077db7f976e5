import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseDatabaseUrl } from '../config.js';
import { inspectSqliteFile, listMigrations, migrate, openDatabase, openExistingDatabase, pendingMigrations } from '../store/db.js';
import type { CliIO, ParsedArgs } from './args.js';
import { loadDotEnv } from './env.js';

/**
 * `gatehouse migrate [--check]`: brings the schema up to date before instances of a new
 * version start, or (--check) lists what is pending and exits 1 when something is.
 */
export async function migrateCommand(args: ParsedArgs, io: CliIO): Promise<number> {
  loadDotEnv();
  const check = args.options.get('--check') === true;
  const url = parseDatabaseUrl(process.env.GATEHOUSE_DATABASE_URL);
  const file = resolve(io.cwd, process.env.GATEHOUSE_DB || './data/gatehouse.db');
  const exists = existsSync(file);
  if (check && !url) {
    // A check writes nothing: where no SQLite file is yet, or one without the schema, every migration is pending.
    const found: { problem?: string; schema: boolean } = exists ? inspectSqliteFile(file) : { schema: false };
    if (found.problem) {
      io.stderr(`gatehouse: cannot check: ${found.problem}\n`);
      return 2;
    }
    if (!found.schema) {
      io.stdout(`pending on ${file}${exists ? '' : ' (no database there yet)'}:\n${listMigrations().map((m) => `  ${m.name}\n`).join('')}`);
      return 1;
    }
  }
  let db;
  try {
    // An existing file must be a SQLite database; a missing one is made by the migration.
    db = url || exists ? await openExistingDatabase({ file, url }, 'sqlite') : await openDatabase({ file, url });
  } catch (err) {
    // Unusable, or (a new SQLite file) not makeable there.
    io.stderr(`gatehouse: cannot ${check ? 'check' : 'migrate'}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  try {
    const where = url ? db.location : file;
    if (check) {
      const pending = await pendingMigrations(db);
      if (!pending.length) {
        io.stdout(`up to date: ${where} (${listMigrations().length} migrations)\n`);
        return 0;
      }
      io.stdout(`pending on ${where}:\n${pending.map((m) => `  ${m.name}\n`).join('')}`);
      return 1;
    }
    const applied = await migrate(db);
    io.stdout(applied.length ? `applied to ${where}:\n${applied.map((n) => `  ${n}\n`).join('')}` : `up to date: ${where}\n`);
    return 0;
  } finally {
    await db.close();
  }
}
