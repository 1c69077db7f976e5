import { resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { parseDatabaseUrl } from '../config.js';
import { openDatabase } from '../store/db.js';
import { auditStore } from '../store/audit.js';

export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

const USAGE = 'usage: gatehouse audit verify [--db <file>]   (default: GATEHOUSE_DATABASE_URL, else GATEHOUSE_DB or ./data/gatehouse.db)\n';

/**
 * `gatehouse audit verify`: walks the audit trail's hash chain. Prints `ok: N records` (exit 0)
 * or the first broken link `broken at record <seq>: <why>` (exit 1); 2 on a usage error.
 */
export async function runAuditCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'verify') {
    io.stderr(USAGE);
    return 2;
  }
  let dbArg: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === '--db' && rest[i + 1]) dbArg = rest[++i];
    else if (a.startsWith('--db=')) dbArg = a.slice(5);
    else {
      io.stderr(`gatehouse: unknown argument '${a}'\n${USAGE}`);
      return 2;
    }
  }
  // --db names a SQLite file; otherwise GATEHOUSE_DATABASE_URL (PostgreSQL) comes first.
  const url = dbArg ? undefined : parseDatabaseUrl(process.env.GATEHOUSE_DATABASE_URL);
  const file = resolve(io.cwd, dbArg ?? (process.env.GATEHOUSE_DB || './data/gatehouse.db'));
  if (!url && !existsSync(file)) {
    io.stderr(`gatehouse: GATEHOUSE_DB: no database at ${file}\n`);
    return 2;
  }
  const db = await openDatabase({ file, url });
  try {
    const { checked, broken } = await auditStore(db).verify();
    if (broken) {
      io.stdout(`broken at record ${broken.seq}: ${broken.why}\n`);
      return 1;
    }
    io.stdout(`ok: ${checked} records\n`);
    return 0;
  } catch (err) {
    io.stderr(`gatehouse: cannot read the audit trail: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  } finally {
    await db.close();
  }
}
