// `gatehouse policy replay <draft dir> [--since 7d] [--json]`: the decisions recorded in the
// configured database's audit trail, decided again under the draft's files (with the live
// rules of the database). Exit 0 when no decision changes, 1 when one does, 2 on an error.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { systemClock } from '../clock.js';
import { DatabaseUnavailable, openExistingDatabase } from '../store/db.js';
import { createStore } from '../store/index.js';
import { loadPolicySet, readPolicyDir, formatDiagnostic, type SourceFile } from '../policy/index.js';
import { toJsonRule } from '../policy-service.js';
import { parseWindow, replay, type ReplayResult } from '../authz/replay.js';
import type { CliIO, ParsedArgs } from './args.js';
import { databaseOf, loadDotEnv, noDatabaseAt } from './env.js';

export function replayText(r: ReplayResult): string {
  const out = [`${r.decisions} decisions from ${r.from} to ${r.to} replayed: ${r.changed} change${r.changed === 1 ? 's' : ''} decision`];
  for (const c of r.changes) {
    out.push(`  ${c.before} -> ${c.after}: ${c.count}`);
    for (const e of c.examples) out.push(`    audit ${e.audit_id}: ${e.agent_id ?? '(a person)'} ${e.action} ${e.resource}`);
  }
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.join('\n') + '\n';
}

export async function replayCommand(a: ParsedArgs, io: CliIO): Promise<number> {
  loadDotEnv();
  const fail = (m: string) => { io.stderr(`gatehouse policy replay: ${m}\n`); return 2; };
  const since = parseWindow(String(a.options.get('--since') ?? '7d'));
  if (since === null) return fail('--since: a window such as 7d, 24h, 30m or 90s');
  const dir = resolve(io.cwd, a.positionals[0]!);
  if (!existsSync(dir)) return fail(`no such directory: ${dir}`);
  let files: SourceFile[];
  try {
    files = (await readPolicyDir(dir)).filter((f) => f.path.endsWith('.policy'));
  } catch (e) {
    return fail(`cannot read ${dir}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const where = databaseOf(a, io);
  if (!where.url && !existsSync(where.file)) return fail(noDatabaseAt(where));
  let db;
  try {
    db = await openExistingDatabase(where);
  } catch (err) {
    if (!(err instanceof DatabaseUnavailable)) throw err;
    return fail(`cannot read the audit trail: ${err.message}`);
  }
  const store = createStore(db);
  try {
    const rules = (await store.rules.live()).map(toJsonRule);
    const { policySet, diagnostics } = loadPolicySet({ files, rules });
    if (!policySet) {
      for (const d of diagnostics.filter((x) => x.severity !== 'warning')) io.stderr(formatDiagnostic(d) + '\n');
      return fail('the draft has errors');
    }
    const until = Math.floor(systemClock.now() / 1000);
    const r = await replay(store, policySet, { since: until - since, until });
    if (a.options.has('--json') || a.options.get('--format') === 'json') io.stdout(JSON.stringify(r, null, 2) + '\n');
    else io.stdout(replayText(r));
    return r.changed > 0 ? 1 : 0;
  } catch (e) {
    return fail(`cannot read the audit trail: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    await store.close();
  }
}
