import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseDatabaseUrl } from '../config.js';
import type { CliIO, ParsedArgs } from './args.js';

/** Variables from ./.env, for the commands that read the server's configuration (serve, audit). */
export function loadDotEnv(): void {
  if (existsSync('.env')) process.loadEnvFile('.env');
}

/** Where a command's database is: PostgreSQL when `url` is set, else the SQLite `file`, named by `setting` (for messages). */
export interface DatabaseTarget {
  url?: string;
  file: string;
  setting: '--db' | 'GATEHOUSE_DB';
}

/**
 * The database of the commands that take `--db` (audit verify, policy replay, backup, restore):
 * `--db` names a SQLite file; otherwise GATEHOUSE_DATABASE_URL (PostgreSQL) comes first, else the
 * SQLite file GATEHOUSE_DB, else ./data/gatehouse.db. Read after loadDotEnv.
 */
export function databaseOf(args: ParsedArgs, io: CliIO): DatabaseTarget {
  const dbArg = args.options.get('--db') as string | undefined;
  const url = dbArg ? undefined : parseDatabaseUrl(process.env.GATEHOUSE_DATABASE_URL);
  const file = resolve(io.cwd, dbArg ?? (process.env.GATEHOUSE_DB || './data/gatehouse.db'));
  return { ...(url ? { url } : {}), file, setting: dbArg ? '--db' : 'GATEHOUSE_DB' };
}

/** The one line for a SQLite file that is not there. */
export const noDatabaseAt = (where: { file: string; setting: string }): string => `${where.setting}: no database at ${where.file}`;
