import { createHash, createPublicKey, verify as verifyBytes } from 'node:crypto';
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
  /** the OpenTelemetry trace the record was written in, when tracing is on */
  trace_id?: string | null;
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
  trace_id: string | null;
  prev_hash: string;
  hash: string;
}
interface Row extends Omit<AuditRecord, 'context' | 'usage' | 'chain' | 'facts'> { context: string | null; usage: string | null; chain: string | null; facts: string | null }

export const GENESIS_HASH = '0'.repeat(64);

/**
 * A text field as the database keeps it: a lone UTF-16 surrogate (a JSON body can carry one as
 * `\ud800`) is stored as U+FFFD, so it is replaced before hashing; a record hashed over the
 * surrogate would read back as tampered with. So is the NUL character, which PostgreSQL cannot
 * hold in text: a request carrying one is still recorded (alike on either database), not lost.
 * JSON fields need no care: JSON.stringify escapes both.
 */
const asStored = (v: string | null): string | null => (v === null ? null : v.replace(UNSTORABLE, '\ufffd'));
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

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
  // And the trace it was written in.
  if (r.trace_id != null) fields.push({ trace_id: r.trace_id });
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

/**
 * A cut of the trail: every record up to `seq` was pruned; `hash` is that record's hash (the
 * chain head at the cut), `record_time` its time, `created_at` when the cut was made, `pruned`
 * how many records this cut removed and `pruned_total` how many all cuts have. `jws` is the
 * same fields signed with the server's signing key (a JWT of type `audit-checkpoint+jwt`).
 */
export interface AuditCheckpoint {
  seq: number;
  hash: string;
  record_time: number;
  created_at: number;
  pruned: number;
  pruned_total: number;
  jws: string;
}
export const CHECKPOINT_TYP = 'audit-checkpoint+jwt';
export type CheckpointClaims = Omit<AuditCheckpoint, 'jws'>;

const checkpointOf = (r: Record<string, unknown>): AuditCheckpoint => ({
  seq: Number(r.seq),
  hash: String(r.hash),
  record_time: Number(r.record_time),
  created_at: Number(r.created_at),
  pruned: Number(r.pruned),
  pruned_total: Number(r.pruned_total),
  jws: String(r.jws),
});

/**
 * Why a checkpoint's signature does not hold, or undefined: a compact JWS of type
 * `audit-checkpoint+jwt`, signed by one of the server's keys (held in `signing_keys`), whose
 * claims are exactly the checkpoint's fields.
 */
export async function checkpointSignatureProblem(sql: Sql, c: AuditCheckpoint): Promise<string | undefined> {
  const parts = c.jws.split('.');
  if (parts.length !== 3) return 'its signature is not a compact JWS';
  const [h, p, sig] = parts as [string, string, string];
  let header: { alg?: string; kid?: string; typ?: string };
  let claims: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as typeof header;
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return 'its signature is not a compact JWS';
  }
  if (header.typ !== CHECKPOINT_TYP) return `its signature is not of type ${CHECKPOINT_TYP}`;
  const key = await sql.get<{ alg: string; public_jwk: string }>('SELECT alg, public_jwk FROM signing_keys WHERE kid = ?', [String(header.kid ?? '')]);
  if (!key) return `it is signed by key ${JSON.stringify(header.kid ?? null)}, which this server does not hold`;
  if (key.alg !== header.alg) return 'its signature names another algorithm than its key';
  const ok = verifyBytes(key.alg === 'RS256' ? 'sha256' : null, Buffer.from(`${h}.${p}`), createPublicKey({ key: JSON.parse(key.public_jwk), format: 'jwk' }), Buffer.from(sig, 'base64url'));
  if (!ok) return 'its signature does not verify';
  for (const f of ['seq', 'hash', 'record_time', 'created_at', 'pruned', 'pruned_total'] as const) {
    if (claims[f] !== c[f]) return `its ${f} differs from what was signed`;
  }
  return undefined;
}

const VERIFY_PAGE = 1000;
const COLUMNS = ['seq', 'time', 'kind', 'agent_id', 'user_id', 'action', 'resource', 'context', 'decision', 'reason', 'policy_version', 'actor', 'caller', 'usage', 'chain', 'facts', 'trace_id', 'prev_hash', 'hash'] as const;
/**
 * PostgreSQL: a batch of any size in one prepared statement, each column sent as an array
 * (one round trip, where rows per INSERT would take one per chunk).
 */
const INSERT_COLUMNS = `INSERT INTO audit_log (${COLUMNS.join(', ')}) SELECT * FROM unnest(${COLUMNS.map((c) => `CAST(? AS ${c === 'seq' || c === 'time' ? 'BIGINT' : 'TEXT'}[])`).join(', ')})`;
/** SQLite (no round trips): rows per INSERT, a batch in as few statements as these sizes allow (few distinct statements to prepare). */
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
  /**
   * Appends in one transaction under the chain's lock. On PostgreSQL that is three round trips
   * whatever the batch: the lock and the reads of the chain's end with the BEGIN, one prepared
   * insert of every record, the COMMIT (inlining the records as literals, to send the insert
   * with the reads, cost more CPU on both sides than the round trip it saved). Past a cut that
   * pruned every record, the chain goes on from the cut's hash.
   */
  const appendAll = (inputs: AuditInput[]): Promise<AuditRecord[]> => {
    if (!inputs.length) return Promise.resolve([]);
    return sql.transaction(async (tx) => {
      await tx.lock('audit_log');
      const [last, cut] = await tx.pipeline([
        { sql: 'SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1' },
        { sql: 'SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1' },
      ]);
      const prev = (last![0] ?? cut![0]) as { seq: number; hash: string } | undefined;
      let seq = prev ? Number(prev.seq) : 0;
      let prevHash = prev?.hash ?? GENESIS_HASH;
      const rows: Row[] = inputs.map((input) => {
        const row: Omit<Row, 'hash'> = {
          seq: ++seq,
          time: input.time ?? now(),
          kind: asStored(input.kind ?? 'decision')!,
          agent_id: asStored(input.agent_id ?? null),
          user_id: asStored(input.user_id ?? null),
          action: asStored(input.action ?? null),
          resource: asStored(input.resource ?? null),
          context: input.context === undefined ? null : JSON.stringify(input.context),
          decision: asStored(input.decision ?? null),
          reason: asStored(input.reason ?? null),
          policy_version: asStored(input.policy_version ?? null),
          actor: asStored(input.actor ?? null),
          caller: asStored(input.caller ?? null),
          usage: input.usage === undefined ? null : JSON.stringify(input.usage),
          chain: input.chain ? JSON.stringify(input.chain) : null,
          facts: input.facts === undefined ? null : JSON.stringify(input.facts),
          trace_id: asStored(input.trace_id ?? null),
          prev_hash: prevHash,
        };
        const full = { ...row, hash: auditHash(row) };
        prevHash = full.hash;
        return full;
      });
      if (tx.dialect === 'postgres') {
        await tx.run(INSERT_COLUMNS, COLUMNS.map((c) => rows.map((r) => r[c])));
      } else {
        for (let i = 0; i < rows.length; ) {
          const n = CHUNKS.find((c) => c <= rows.length - i)!;
          await tx.run(insertSql(n), rows.slice(i, i + n).flatMap((r) => COLUMNS.map((c) => r[c])));
          i += n;
        }
      }
      // The records as stored, without parsing back the JSON just written.
      return rows.map((r, i) => ({ ...r, context: r.context === null ? null : inputs[i]!.context, usage: r.usage === null ? null : inputs[i]!.usage, chain: r.chain === null ? null : inputs[i]!.chain!, facts: r.facts === null ? null : inputs[i]!.facts }));
    });
  };

  const latestCheckpoint = async (): Promise<AuditCheckpoint | undefined> => {
    const r = await sql.get<Record<string, unknown>>('SELECT * FROM audit_checkpoints ORDER BY seq DESC LIMIT 1');
    return r ? checkpointOf(r) : undefined;
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
           AND (CAST(@since AS BIGINT) IS NULL OR time >= @since) AND (CAST(@until AS BIGINT) IS NULL OR time <= @until)
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
    /** The latest cut, or undefined when nothing was ever pruned. */
    latestCheckpoint,
    /** Where a cut before `time` (unix seconds) would fall: the last record older than it, and how many records precede it since the last cut. */
    async cutBefore(time: number): Promise<{ seq: number; hash: string; time: number; count: number } | undefined> {
      const last = await sql.get<{ seq: number; hash: string; time: number }>('SELECT seq, hash, time FROM audit_log WHERE time < ? ORDER BY seq DESC LIMIT 1', [time]);
      if (!last) return undefined;
      const n = await sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM audit_log WHERE seq <= ?', [last.seq]);
      return { seq: Number(last.seq), hash: last.hash, time: Number(last.time), count: Number(n?.n ?? 0) };
    },
    /**
     * Writes the checkpoint and prunes every record up to its seq, in one transaction under the
     * chain's lock (the delete is allowed only at or below a checkpoint). Answers the records removed.
     */
    prune: (checkpoint: AuditCheckpoint): Promise<number> =>
      sql.transaction(async (tx) => {
        await tx.lock('audit_log');
        await tx.run(
          'INSERT INTO audit_checkpoints (seq, hash, record_time, created_at, pruned, pruned_total, jws) VALUES (@seq, @hash, @record_time, @created_at, @pruned, @pruned_total, @jws)',
          checkpoint,
        );
        return (await tx.run('DELETE FROM audit_log WHERE seq <= ?', [checkpoint.seq])).changes;
      }),
    /** Replaces the signature of a checkpoint (signed again with a newer key before the old one is purged). */
    async resign(seq: number, jws: string): Promise<void> {
      await sql.run('UPDATE audit_checkpoints SET jws = ? WHERE seq = ?', [jws, seq]);
    },
    /**
     * Walks the chain page by page from the latest checkpoint (its signature checked first) or
     * the start; the first record whose hash or link does not hold, or null when all do.
     */
    async verify(): Promise<{ checked: number; broken: { seq: number; why: string } | null; checkpoint?: AuditCheckpoint }> {
      let prevHash = GENESIS_HASH;
      let checked = 0;
      let after = 0;
      const checkpoint = await latestCheckpoint();
      if (checkpoint) {
        const problem = await checkpointSignatureProblem(sql, checkpoint);
        if (problem) return { checked, broken: { seq: checkpoint.seq, why: `the checkpoint at the cut does not hold: ${problem}` }, checkpoint };
        prevHash = checkpoint.hash;
        after = checkpoint.seq;
      }
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
        if (page.length < VERIFY_PAGE) return { checked, broken: null, ...(checkpoint ? { checkpoint } : {}) };
      }
    },
  };
}
export type AuditStore = ReturnType<typeof auditStore>;
