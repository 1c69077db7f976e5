import { createHash } from 'node:crypto';
import type { Db } from './db.js';
import { now, parseJson } from './util.js';

export interface AuditInput {
  kind?: 'decision' | 'token' | 'approval' | 'tool_call' | string;
  time?: number;
  agent_id?: string | null;
  user_id?: string | null;
  action?: string | null;
  resource?: string | null;
  context?: unknown;
  decision?: string | null;
  reason?: string | null;
  policy_version?: string | null;
  /** the person who made the change (their user id), for changes made in the console */
  actor?: string | null;
}
export interface AuditRecord {
  seq: number;
  time: number;
  kind: string;
  agent_id: string | null;
  user_id: string | null;
  action: string | null;
  resource: string | null;
  context: unknown;
  decision: string | null;
  reason: string | null;
  policy_version: string | null;
  actor: string | null;
  prev_hash: string;
  hash: string;
}
interface Row extends Omit<AuditRecord, 'context'> { context: string | null }

export const GENESIS_HASH = '0'.repeat(64);

/**
 * The hash of one record: its content and the hash before it, so any change breaks the chain from there.
 * `actor` joins the hashed content only when set, so records written before it existed keep their hashes.
 */
export function auditHash(r: Omit<Row, 'hash'>): string {
  const content = JSON.stringify([
    r.seq, r.time, r.kind, r.agent_id, r.user_id, r.action, r.resource, r.context, r.decision, r.reason, r.policy_version, r.prev_hash,
    ...(r.actor != null ? [r.actor] : []),
  ]);
  return createHash('sha256').update(content).digest('hex');
}

const toRecord = (r: Row): AuditRecord => ({ ...r, context: parseJson(r.context, null) });

export interface AuditFilter {
  agent_id?: string;
  user_id?: string;
  decision?: string;
  kind?: string;
  /** the reason's code: `constraint_violated` matches `constraint_violated: amount max` */
  reason_code?: string;
  /** unix seconds, inclusive */
  since?: number;
  until?: number;
  before?: number;
  limit?: number;
}

export function auditStore(db: Db) {
  const last = db.prepare<[], { seq: number; hash: string }>('SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1');
  const insert = db.prepare(
    `INSERT INTO audit_log (seq, time, kind, agent_id, user_id, action, resource, context, decision, reason, policy_version, actor, prev_hash, hash)
     VALUES (@seq, @time, @kind, @agent_id, @user_id, @action, @resource, @context, @decision, @reason, @policy_version, @actor, @prev_hash, @hash)`,
  );
  const page = db.prepare<Record<string, unknown>, Row>(
    `SELECT * FROM audit_log
     WHERE (@agent_id IS NULL OR agent_id = @agent_id) AND (@user_id IS NULL OR user_id = @user_id)
       AND (@decision IS NULL OR decision = @decision) AND (@kind IS NULL OR kind = @kind) AND seq < @before
       AND (@reason_code IS NULL OR reason = @reason_code OR substr(reason, 1, length(@reason_code) + 1) = @reason_code || ':')
       AND (@since IS NULL OR time >= @since) AND (@until IS NULL OR time <= @until)
     ORDER BY seq DESC LIMIT @limit`,
  );
  const iterate = db.prepare<[], Row>('SELECT * FROM audit_log ORDER BY seq');

  const append = db.transaction((input: AuditInput): AuditRecord => {
    const prev = last.get();
    const row: Omit<Row, 'hash'> = {
      seq: (prev?.seq ?? 0) + 1,
      time: input.time ?? now(),
      kind: input.kind ?? 'decision',
      agent_id: input.agent_id ?? null,
      user_id: input.user_id ?? null,
      action: input.action ?? null,
      resource: input.resource ?? null,
      context: input.context === undefined ? null : JSON.stringify(input.context),
      decision: input.decision ?? null,
      reason: input.reason ?? null,
      policy_version: input.policy_version ?? null,
      actor: input.actor ?? null,
      prev_hash: prev?.hash ?? GENESIS_HASH,
    };
    const full = { ...row, hash: auditHash(row) };
    insert.run(full);
    return toRecord(full);
  });

  return {
    /** Appends one record in its own immediate transaction (or inside the caller's). */
    append: (input: AuditInput): AuditRecord => (db.inTransaction ? append(input) : append.immediate(input)),
    list(f: AuditFilter = {}): AuditRecord[] {
      return page
        .all({
          agent_id: f.agent_id ?? null,
          user_id: f.user_id ?? null,
          decision: f.decision ?? null,
          kind: f.kind ?? null,
          reason_code: f.reason_code ?? null,
          since: f.since ?? null,
          until: f.until ?? null,
          before: f.before ?? Number.MAX_SAFE_INTEGER,
          limit: Math.min(Math.max(f.limit ?? 50, 1), 1000),
        })
        .map(toRecord);
    },
    /** Walks the chain; the first record whose hash or link does not hold, or null when all do. */
    verify(): { checked: number; broken: { seq: number; why: string } | null } {
      let prevHash = GENESIS_HASH;
      let checked = 0;
      for (const r of iterate.iterate()) {
        checked++;
        if (r.prev_hash !== prevHash) return { checked, broken: { seq: r.seq, why: 'prev_hash does not match the record before' } };
        const { hash, ...rest } = r;
        if (auditHash(rest) !== hash) return { checked, broken: { seq: r.seq, why: 'content does not match its hash' } };
        prevHash = hash;
      }
      return { checked, broken: null };
    },
  };
}
export type AuditStore = ReturnType<typeof auditStore>;
