import { existsSync } from 'node:fs';
import { systemClock } from '../clock.js';
import { DatabaseUnavailable, openExistingDatabase } from '../store/db.js';
import { auditStore } from '../store/audit.js';
import type { CliIO, ParsedArgs } from './args.js';
import { databaseOf, loadDotEnv, noDatabaseAt } from './env.js';
import { runCli } from './main.js';

export type CliIo = CliIO;

/** `gatehouse audit ...` as one call (tests run it in process). */
export function runAuditCommand(args: string[], io: CliIO): Promise<number> {
  return runCli(['audit', ...args], io).then((code) => code ?? 0);
}

/**
 * `gatehouse audit verify`: walks the audit trail's hash chain, from the latest signed
 * checkpoint when records were pruned (its signature checked against the server's keys). Prints `ok: N records` (exit 0)
 * or the first broken link `broken at record <seq>: <why>` (exit 1); 2 on a usage error.
 */
export async function verify(args: ParsedArgs, io: CliIO): Promise<number> {
  loadDotEnv();
  const where = databaseOf(args, io);
  if (!where.url && !existsSync(where.file)) {
    io.stderr(`gatehouse: ${noDatabaseAt(where)}\n`);
    return 2;
  }
  let db;
  try {
    db = await openExistingDatabase(where);
  } catch (err) {
    if (!(err instanceof DatabaseUnavailable)) throw err;
    io.stderr(`gatehouse: cannot read the audit trail: ${err.message}\n`);
    return 2;
  }
  try {
    // Verifying reads no time: any clock will do.
    const { checked, broken, checkpoint } = await auditStore(db, systemClock).verify();
    if (broken) {
      io.stdout(`broken at record ${broken.seq}: ${broken.why}\n`);
      return 1;
    }
    const since = checkpoint
      ? ` after the signed checkpoint at record ${checkpoint.seq} (${checkpoint.pruned_total} records pruned, the last cut ${new Date(checkpoint.created_at * 1000).toISOString()})`
      : '';
    io.stdout(`ok: ${checked} records${since}\n`);
    return 0;
  } catch (err) {
    io.stderr(`gatehouse: cannot read the audit trail: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  } finally {
    await db.close();
  }
}
