import type { AppContext } from '../context.js';
import { createHash } from 'node:crypto';
import type { AuditInput } from '../store/audit.js';
import { activeTraceId } from '../telemetry.js';

/**
 * The largest `context` a record keeps, as JSON bytes. A larger one (anyone who can name an
 * agent can send one) is kept as its size and digest: the record still ties to the request, and
 * the trail does not grow by what a caller chooses to send.
 */
export const AUDIT_CONTEXT_MAX_BYTES = 8192;

/** The context as a record keeps it: itself, or past the cap `{"$truncated": {bytes, sha256}}`. */
export function cappedContext(context: unknown): unknown {
  if (context === undefined || context === null) return context;
  const json = JSON.stringify(context);
  if (json === undefined) return context;
  const bytes = Buffer.byteLength(json);
  if (bytes <= AUDIT_CONTEXT_MAX_BYTES) return context;
  return { $truncated: { bytes, sha256: createHash('sha256').update(json).digest('hex') } };
}

/**
 * The context with the fields named redacted: each such top-level field is kept as
 * `{"$redacted": {"sha256": <hex of its JSON>}}`, so a record proves what was sent without
 * keeping it (a replay reads such a field as that object: a condition on it fails closed).
 */
export function redactedContext(context: unknown, fields: readonly string[]): unknown {
  if (!fields.length || typeof context !== 'object' || context === null || Array.isArray(context)) return context;
  const c = context as Record<string, unknown>;
  if (!fields.some((f) => Object.hasOwn(c, f))) return context;
  const out: Record<string, unknown> = { ...c };
  for (const f of fields) {
    if (!Object.hasOwn(c, f)) continue;
    out[f] = { $redacted: { sha256: createHash('sha256').update(JSON.stringify(c[f]) ?? 'undefined').digest('hex') } };
  }
  return out;
}

interface Pending { input: AuditInput; resolve: () => void; reject: (err: unknown) => void }

/**
 * Group commit for the audit trail: the records of every request handled in one event-loop
 * turn are appended in one transaction (one commit, one turn of the chain's lock) just after
 * the turn, and each caller resumes only once its record is committed. While a batch is being
 * written (on PostgreSQL that takes round trips), the records arriving meanwhile wait and go
 * together in the next one: the busier the instance, the larger its batches. The chain is the
 * same as with one append per record; only the commits are shared.
 */
class AuditWriter {
  private queue: Pending[] = [];
  private scheduled = false;
  private writing = false;
  /** records waiting for their commit (queued or in the transaction now running) */
  backlog = 0;

  constructor(private readonly ctx: AppContext) {}

  append(input: AuditInput): Promise<void> {
    // The trace is read now, in the request's context: the batch is written outside it.
    const traceId = input.trace_id === undefined ? activeTraceId() : undefined;
    if (traceId) input = { ...input, trace_id: traceId };
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.backlog++;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.writing || !this.queue.length) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
    this.writing = true;
    try {
      await this.ctx.store.audit.appendAll(batch.map((p) => p.input));
      for (const p of batch) p.resolve();
    } catch (err) {
      for (const p of batch) p.reject(err);
    } finally {
      this.backlog -= batch.length;
      this.writing = false;
      this.schedule();
    }
  }
}

const writers = new WeakMap<AppContext, AuditWriter>();

function writer(ctx: AppContext): AuditWriter {
  let w = writers.get(ctx);
  if (!w) writers.set(ctx, (w = new AuditWriter(ctx)));
  return w;
}

/** Appends one audit record in this turn's shared transaction; resolves once it is committed. */
export function recordAudit(ctx: AppContext, input: AuditInput): Promise<void> {
  const redact = ctx.config.auditRedactContext ?? [];
  return writer(ctx).append(input.context === undefined ? input : { ...input, context: cappedContext(redactedContext(input.context, redact)) });
}

/**
 * The same, for records that accompany an answer already decided (a refusal): a record that
 * cannot be written is logged, and the answer stands.
 */
export async function recordAuditOrLog(ctx: AppContext, input: AuditInput): Promise<void> {
  try {
    await recordAudit(ctx, input);
  } catch (err) {
    ctx.logger.error({ err, kind: input.kind, agent_id: input.agent_id }, 'audit append failed');
  }
}

/** Records not yet committed in this process. */
export function auditBacklog(ctx: AppContext): number {
  return writers.get(ctx)?.backlog ?? 0;
}
