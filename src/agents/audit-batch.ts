import type { AppContext } from '../context.js';
import type { AuditInput } from '../store/audit.js';

interface Pending { input: AuditInput; resolve: () => void; reject: (err: unknown) => void }

/**
 * Group commit for the audit trail on the HTTP hot paths: the records of every request
 * handled in one event-loop turn are appended in one transaction (one commit, one turn of
 * the chain's lock) just after the turn, and each request answers only once its record is
 * committed. While a batch is being written (on PostgreSQL that takes round trips), the
 * records arriving meanwhile wait and go together in the next one: the busier the instance,
 * the larger its batches. The chain is the same as with one append per request; only the
 * commits are shared.
 */
class AuditBatch {
  private queue: Pending[] = [];
  private scheduled = false;
  private writing = false;

  constructor(private readonly ctx: AppContext) {}

  append(input: AuditInput): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
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
      await this.ctx.store.audit.appendMany(batch.map((p) => p.input));
      for (const p of batch) p.resolve();
    } catch (err) {
      for (const p of batch) p.reject(err);
    } finally {
      this.writing = false;
      this.schedule();
    }
  }
}

const batches = new WeakMap<AppContext, AuditBatch>();

/** Appends an audit record in this turn's shared transaction; resolves once it is committed. */
export function appendAudit(ctx: AppContext, input: AuditInput): Promise<void> {
  let b = batches.get(ctx);
  if (!b) batches.set(ctx, (b = new AuditBatch(ctx)));
  return b.append(input);
}
