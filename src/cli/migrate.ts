import { resolve } from 'node:path';
import { parseDatabaseUrl } from '../config.js';
import { listMigrations, migrate, openDatabase, pendingMigrations } from '../store/db.js';
import type { CliIo } from './audit.js';

const USAGE = `usage: gatehouse migrate [--check]

  Applies the schema migrations the database lacks (GATEHOUSE_DATABASE_URL, else the SQLite
  file GATEHOUSE_DB, default ./data/gatehouse.db), each in its own transaction; instances
  starting meanwhile wait for it. --check only lists what is pending (exit 1 when any is).
`;

/** `gatehouse migrate`: brings the schema up to date before instances of a new version start. */
export async function runMigrateCommand(args: string[], io: CliIo): Promise<number> {
  const check = args.includes('--check');
  const unknown = args.filter((a) => a !== '--check');
  if (unknown.length) {
    io.stderr(`gatehouse: unknown argument '${unknown[0]}'\n${USAGE}`);
    return 2;
  }
  const url = parseDatabaseUrl(process.env.GATEHOUSE_DATABASE_URL);
  const file = resolve(io.cwd, process.env.GATEHOUSE_DB || './data/gatehouse.db');
  const db = await openDatabase({ file, url });
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
