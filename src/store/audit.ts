import { createHash } from 'node:crypto';
import type { Sql } from './sql.js';
import type { Clock } from '../clock.js';
import { parseJson, secondsOf } from './util.js';

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
  /** the application that asked (an AuthZEN caller's client ID); absent for an agent's own request */
  caller?: string | null;
  /** a decision under limits over time: each counter's value before and after it */
  usage?: unknown;
  /** a decision through a delegation chain: its agents, first (acting for the person) to current */
  chain?: string[] | null;
  /** a decision: the facts it was decided on, for replay (AuditFacts in src/authz/core.ts) */
  facts?: unknown;
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
  caller: string | null;
  usage: unknown;
  chain: string[] | null;
  facts: unknown;
  prev_hash: string;
  hash: string;
}
interface Row extends Omit<AuditRecord, 'context' | 'usage' | 'chain' | 'facts'> { context: string | null; usage: string | null; chain: string | null; facts: string | null }

export const GENESIS_HASH = '0'.repeat(64);

/**
 * The hash of one record: its content and the hash before it, so any change breaks the chain from there.
 * `actor` and `usage` join the hashed content only when set, so records written before they existed keep their hashes.
 */
export function auditHash(r: Omit<Row, 'hash'>): string {
  const fields: unknown[] = [
    r.seq, r.time, r.kind, r.agent_id, r.user_id, r.action, r.resource, r.context, r.decision, r.reason, r.policy_version, r.prev_hash,
    ...(r.actor != null ? [r.actor] : []),
    ...(r.usage != null ? [['usage', r.usage]] : []),
  ];
  // The caller joined the record later still: hashed only when set, tagged so it cannot pass for an actor.
  if (r.caller != null) fields.push({ caller: r.caller });
  // So did the delegation chain, the same way.
  if (r.chain != null) fields.push({ chain: r.chain });
  // And the facts a decision read, the same way.
  if (r.facts != null) fields.push({ facts: r.facts });
  const content = JSON.stringify(fields);
  return createHash('sha256').update(content).digest('hex');
}

const toRecord = (r: Row): AuditRecord => ({ ...r, context: parseJson(r.context, null), usage: parseJson(r.usage, null), chain: parseJson(r.chain ?? null, null), facts: parseJson(r.facts ?? null, null) });

export interface AuditFilter {
  agent_id?: string;
  user_id?: string;
  /** the client ID of the application that asked */
  caller?: string;
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

const VERIFY_PAGE = 1000;
const COLUMNS = ['seq', 'time', 'kind', 'agent_id', 'user_id', 'action', 'resource', 'context', 'decision', 'reason', 'policy_version', 'actor', 'caller', 'usage', 'chain', 'facts', 'prev_hash', 'hash'] as const;
/** Rows per INSERT: a batch goes in as few statements as these sizes allow (few distinct statements to prepare). */
const CHUNKS = [64, 16, 4, 1];
const insertOf = new Map<number, string>();
const insertSql = (n: number): string => {
  let text = insertOf.get(n);
  if (!text) {
    const tuple = `(${COLUMNS.map(() => '?').join(', ')})`;
    text = `INSERT INTO audit_log (${COLUMNS.join(', ')}) VALUES ${Array.from({ length: n }, () => tuple).join(', ')}`;
    insertOf.set(n, text);
  }
  return text;
};

export function auditStore(sql: Sql, clock: Clock) {
  const now = (): number => secondsOf(clock);
  const appendAll = (inputs: AuditInput[]): Promise<AuditRecord[]> => {
    if (!inputs.length) return Promise.resolve([]);
    return sql.transaction(async (tx) => {
      await tx.lock('audit_log');
      const prev = await tx.get<{ seq: number; hash: string }>('SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1');
      let seq = prev ? Number(prev.seq) : 0;
      let prevHash = prev?.hash ?? GENESIS_HASH;
      const rows: Row[] = inputs.map((input) => {
        const row: Omit<Row, 'hash'> = {
          seq: ++seq,
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
          caller: input.caller ?? null,
          usage: input.usage === undefined ? null : JSON.stringify(input.usage),
          chain: input.chain ? JSON.stringify(input.chain) : null,
          facts: input.facts === undefined ? null : JSON.stringify(input.facts),
          prev_hash: prevHash,
        };
        const full = { ...row, hash: auditHash(row) };
        prevHash = full.hash;
        return full;
      });
      for (let i = 0; i < rows.length; ) {
        const n = CHUNKS.find((c) => c <= rows.length - i)!;
        await tx.run(insertSql(n), rows.slice(i, i + n).flatMap((r) => COLUMNS.map((c) => r[c])));
        i += n;
      }
      // The records as stored, without parsing back the JSON just written.
      return rows.map((r, i) => ({ ...r, context: r.context === null ? null : inputs[i]!.context, usage: r.usage === null ? null : inputs[i]!.usage, chain: r.chain === null ? null : inputs[i]!.chain!, facts: r.facts === null ? null : inputs[i]!.facts }));
    });
  };

  return {
    /**
     * Appends one record in its own transaction (or inside the caller's). Appends take turns
     * (a lock held until the transaction ends), so the chain stays one line with any number of
     * writers, on every instance.
     */
    append: async (input: AuditInput): Promise<AuditRecord> => (await appendAll([input]))[0]!,
    /**
     * Appends records in order, in one transaction (or inside the caller's): one lock, one read
     * of the chain's end, and their inserts in a few multi-row statements.
     */
    appendAll,
    async list(f: AuditFilter = {}): Promise<AuditRecord[]> {
      const rows = await sql.all<Row>(
        `SELECT * FROM audit_log
         WHERE (CAST(@agent_id AS TEXT) IS NULL OR agent_id = @agent_id) AND (CAST(@user_id AS TEXT) IS NULL OR user_id = @user_id)
           AND (CAST(@caller AS TEXT) IS NULL OR caller = @caller)
           AND (CAST(@decision AS TEXT) IS NULL OR decision = @decision) AND (CAST(@kind AS TEXT) IS NULL OR kind = @kind) AND seq < @before
           AND (CAST(@reason_code AS TEXT) IS NULL OR reason = @reason_code OR substr(reason, 1, length(@reason_code) + 1) = @reason_code || ':')
           AND (CAST(@since AS INTEGER) IS NULL OR time >= @since) AND (CAST(@until AS INTEGER) IS NULL OR time <= @until)
         ORDER BY seq DESC LIMIT @limit`,
        {
          agent_id: f.agent_id ?? null,
          user_id: f.user_id ?? null,
          caller: f.caller ?? null,
          decision: f.decision ?? null,
          kind: f.kind ?? null,
          reason_code: f.reason_code ?? null,
          since: f.since ?? null,
          until: f.until ?? null,
          before: f.before ?? Number.MAX_SAFE_INTEGER,
          limit: Math.min(Math.max(f.limit ?? 50, 1), 1000),
        },
      );
      return rows.map(toRecord);
    },
    /** Walks the chain page by page; the first record whose hash or link does not hold, or null when all do. */
    async verify(): Promise<{ checked: number; broken: { seq: number; why: string } | null }> {
      let prevHash = GENESIS_HASH;
      let checked = 0;
      let after = 0;
      for (;;) {
        const page = await sql.all<Row>('SELECT * FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?', [after, VERIFY_PAGE]);
        for (const r of page) {
          checked++;
          if (r.prev_hash !== prevHash) return { checked, broken: { seq: r.seq, why: 'prev_hash does not match the record before' } };
          const { hash, ...rest } = r;
          if (auditHash(rest) !== hash) return { checked, broken: { seq: r.seq, why: 'content does not match its hash' } };
          prevHash = hash;
          after = r.seq;
        }
        if (page.length < VERIFY_PAGE) return { checked, broken: null };
      }
    },
  };
}
export type AuditStore = ReturnType<typeof auditStore>;
