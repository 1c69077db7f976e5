import { randomUUID } from 'node:crypto';
import { ConfigError } from '../config.js';
import type { AppContext } from '../context.js';
import { OutboundRefused, outboundFetch } from '../outbound.js';
import type { OutboxEvent } from '../store/ssf.js';
import { SET_CONTENT_TYPE, signSet, type SetClaims } from './set.js';

export interface DeliveryOptions {
  /** how often the outbox is looked at for due events */
  pollIntervalMs: number;
  /** first retry delay; doubled on each further failure */
  retryBaseMs: number;
  /** ceiling of one retry delay */
  retryMaxDelayMs: number;
  /** attempts in all (the first one included) before an event is marked failed */
  maxAttempts: number;
  /** one push may take this long */
  requestTimeoutMs: number;
  /** events looked at per poll */
  batchSize: number;
  /** delivered and dropped events are removed after this long */
  retentionSeconds: number;
}

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  pollIntervalMs: 500,
  retryBaseMs: 1000,
  retryMaxDelayMs: 5 * 60 * 1000,
  maxAttempts: 8,
  requestTimeoutMs: 10_000,
  batchSize: 50,
  retentionSeconds: 7 * 24 * 60 * 60,
};

const ENV_OPTIONS: [string, keyof DeliveryOptions, number, number][] = [
  ['GATEHOUSE_SSF_POLL_MS', 'pollIntervalMs', 10, 60_000],
  ['GATEHOUSE_SSF_RETRY_BASE_MS', 'retryBaseMs', 1, 3_600_000],
  ['GATEHOUSE_SSF_RETRY_MAX_MS', 'retryMaxDelayMs', 1, 86_400_000],
  ['GATEHOUSE_SSF_MAX_ATTEMPTS', 'maxAttempts', 1, 100],
  ['GATEHOUSE_SSF_TIMEOUT_MS', 'requestTimeoutMs', 100, 120_000],
];

/** The delivery tuning from the environment (all optional; documented with the Shared Signals docs). */
export function deliveryOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): DeliveryOptions {
  const opts = { ...DEFAULT_DELIVERY_OPTIONS };
  for (const [name, key, min, max] of ENV_OPTIONS) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) {
      throw new ConfigError(name, `must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})`);
    }
    opts[key] = n;
  }
  return opts;
}

/** Exponential backoff with jitter: base, 2×base, 4×base ... capped; each delay lands in [d/2, d]. */
export function retryDelay(failedAttempts: number, opts: Pick<DeliveryOptions, 'retryBaseMs' | 'retryMaxDelayMs'>, random = Math.random): number {
  const d = Math.min(opts.retryMaxDelayMs, opts.retryBaseMs * 2 ** Math.max(0, failedAttempts - 1));
  return Math.round(d / 2 + random() * (d / 2));
}

/** A stream lease outlives one push by this much. */
const LEASE_MARGIN_MS = 10_000;

/** Rows of one stream looked at per pass: a backlog on one stream cannot starve the others. */
const PER_STREAM_PER_PASS = 25;

/** Whether the abort of a push came from stopping the worker rather than its timeout. */
const stoppingAbort = (signal: AbortSignal): boolean => signal.aborted && (signal.reason as Error | undefined)?.name !== 'TimeoutError';

type PushResult = { delivered: true } | { delivered: false; error: string; aborted?: boolean };

/**
 * One RFC 8935 push: only 202 Accepted counts as delivered. It goes out under the outbound
 * rules (a receiver on a loopback, private or link-local address is refused unless allowed).
 */
async function push(fetch: ReturnType<typeof outboundFetch>, url: string, authorization: string | undefined, jwt: string, signal: AbortSignal): Promise<PushResult> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': SET_CONTENT_TYPE,
        accept: 'application/json',
        ...(authorization ? { authorization } : {}),
      },
      body: jwt,
      redirect: 'manual',
      signal,
    });
    // The receiver's body is never read into the outbox, a log or an answer: only its status counts.
    await res.body?.cancel().catch(() => undefined);
    if (res.status === 202) return { delivered: true };
    return { delivered: false, error: `HTTP ${res.status}` };
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
    if (err instanceof OutboundRefused) return { delivered: false, error: `refused: ${e.message}` };
    if (e.name === 'TimeoutError' || (e.name === 'AbortError' && !stoppingAbort(signal))) return { delivered: false, error: 'timed out' };
    if (e.name === 'AbortError') return { delivered: false, error: 'stopped', aborted: true };
    return { delivered: false, error: `network error: ${e.cause?.code ?? e.code ?? e.cause?.message ?? e.message}` };
  }
}

/**
 * Delivers the outbox. Runs in the background process of every instance (startBackground);
 * instances share the streams through leases. The outbox is the truth:
 * a row leaves `pending` only on a 202 (delivered) or after the last attempt (failed), so a
 * crash or restart loses nothing; at worst an event is sent again (receivers dedupe on `jti`).
 */
export function startDeliveryWorker(ctx: AppContext, opts: DeliveryOptions = DEFAULT_DELIVERY_OPTIONS): () => Promise<void> {
  const log = ctx.logger.child({ component: 'ssf-delivery' });
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let lastPrune = 0;
  /** this worker, as the holder of stream leases */
  const owner = randomUUID();
  const leaseMs = opts.requestTimeoutMs + LEASE_MARGIN_MS;
  const fetch = outboundFetch(ctx.config);

  async function deliver(row: OutboxEvent, signed: Promise<string>): Promise<boolean> {
    const stream = await ctx.store.ssf.getStream(row.stream_id);
    if (!stream || stream.status !== 'enabled') return false;
    const authorization = stream.authorization_header_enc ? ctx.box.open(stream.authorization_header_enc) : undefined;
    const jwt = await signed;
    const signal = AbortSignal.any([AbortSignal.timeout(opts.requestTimeoutMs), stopping.signal]);
    const result = await push(fetch, stream.endpoint_url, authorization, jwt, signal);
    if (result.delivered) {
      await ctx.store.ssf.markDelivered(row.id);
      ctx.metrics.ssfPushes.inc({ outcome: 'delivered' });
      log.debug({ stream_id: row.stream_id, jti: row.jti, event_type: row.event_type }, 'ssf event delivered');
      return true;
    }
    if (result.aborted) return false; // shutting down: the row stays as it was
    const attempts = row.attempts + 1;
    if (attempts >= opts.maxAttempts) {
      await ctx.store.ssf.markFailed(row.id, result.error);
      ctx.metrics.ssfPushes.inc({ outcome: 'failed' });
      log.warn({ stream_id: row.stream_id, jti: row.jti, attempts, error: result.error }, 'ssf event failed');
    } else {
      await ctx.store.ssf.markRetry(row.id, row.stream_id, ctx.clock.now() + retryDelay(attempts, opts), result.error);
      ctx.metrics.ssfPushes.inc({ outcome: 'retry' });
      log.info({ stream_id: row.stream_id, jti: row.jti, attempts, error: result.error }, 'ssf push failed; will retry');
    }
    return false;
  }

  /**
   * Due rows, stream by stream in parallel, in order within a stream; a failure ends that
   * stream's turn. A stream is delivered under its lease: of every process and instance
   * running this worker, one at a time reads and pushes a stream's rows, so an event is never
   * pushed twice at once and a stream's order holds. The lease is renewed before each push
   * and outlives one push, so it only passes to another instance when this one stops or dies.
   * Answers how many were delivered: a pass that delivered anything is followed by the next
   * one at once, so a backlog drains at the receivers' pace, not the poll's.
   */
  async function deliverDue(): Promise<number> {
    const streams = await ctx.store.ssf.dueStreams(ctx.clock.now(), opts.batchSize);
    let delivered = 0;
    await Promise.all(
      streams.map(async (streamId) => {
        const lease = `ssf-stream:${streamId}`;
        if (!(await ctx.store.leases.acquire(lease, owner, leaseMs))) return;
        try {
          const rows = await ctx.store.ssf.dueOf(streamId, ctx.clock.now(), PER_STREAM_PER_PASS);
          // Pushes go one at a time, in order; their signatures are made ahead, side by side.
          const signed = rows.map((row) => signSet(ctx.keys, row.claims as SetClaims));
          for (const p of signed) p.catch(() => undefined);
          for (const [i, row] of rows.entries()) {
            if (stopping.signal.aborted) return;
            if (!(await ctx.store.leases.acquire(lease, owner, leaseMs))) return;
            if (!(await deliver(row, signed[i]!))) return;
            delivered++;
          }
        } finally {
          await ctx.store.leases.release(lease, owner).catch((err: unknown) => log.warn({ err, stream_id: streamId }, 'could not release a stream lease'));
        }
      }),
    );
    return delivered;
  }

  async function prune(): Promise<void> {
    const t = ctx.clock.now();
    if (t - lastPrune < 60 * 60 * 1000) return;
    lastPrune = t;
    // once an hour across all instances
    if (!(await ctx.store.leases.acquire('ssf-prune', owner, 60 * 60 * 1000))) return;
    const removed = await ctx.store.ssf.prune(Math.floor(t / 1000) - opts.retentionSeconds);
    if (removed) log.info({ removed }, 'ssf outbox pruned');
  }

  async function tick(): Promise<void> {
    let delivered = 0;
    try {
      delivered = await deliverDue();
      await prune();
    } catch (err) {
      log.error({ err }, 'ssf delivery pass failed');
    }
    schedule(delivered > 0 ? 0 : opts.pollIntervalMs);
  }

  function schedule(delay: number): void {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      running = tick();
    }, delay);
  }

  // pending rows from before a restart go out straight away
  schedule(0);
  return async () => {
    stopping.abort();
    if (timer) clearTimeout(timer);
    await running;
  };
}
