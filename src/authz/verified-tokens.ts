import cluster, { type Worker } from 'node:cluster';
import { hash } from 'node:crypto';
import type { JWTPayload } from 'jose';
import type { AppContext } from '../context.js';

/**
 * Tokens already verified (or signed here), until they expire. An Ed25519 verify costs 150 µs
 * and more on a small machine; an agent reuses its access token for many calls, and a
 * transaction token is presented right after it was bound, so a repeat costs a hash and a map
 * lookup instead.
 *
 * The cache keeps the SHA-256 of the exact token text and its expiry, nothing else: only a
 * byte-identical token hits, so nothing unverified is ever accepted; the claims are decoded
 * again from the token on a hit; expiry is checked again on every hit. An entry costs about a
 * hundred bytes (a transaction token is 600 characters), so the cache holds every token of the
 * last minute even at thousands of bindings a second.
 *
 * In a cluster, the workers of one instance tell each other what they signed or verified (in
 * batches, through the primary): a token bound on one worker and presented
 * on another (a client with several connections, or a new connection per call) is not verified
 * again.
 */
export interface VerifiedTokenCacheOptions {
  /** how many tokens at the most (the oldest go first) */
  max?: number;
  /** called for each token remembered here (to tell the other workers) */
  onRemember?: (digest: string, exp: number) => void;
  /** called on each lookup, hit or miss */
  onLookup?: (hit: boolean) => void;
  /** called for each token another worker told of */
  onAdopt?: () => void;
}

export class VerifiedTokenCache {
  /** SHA-256 of the token text → its `exp` (seconds) */
  private entries = new Map<string, number>();

  private readonly max: number;

  constructor(private readonly options: VerifiedTokenCacheOptions = {}) {
    this.max = options.max ?? 100_000;
  }

  get(token: string, nowSeconds: number): { payload: JWTPayload; header: Record<string, unknown> } | undefined {
    const found = this.lookup(token, nowSeconds);
    this.options.onLookup?.(found !== undefined);
    return found;
  }

  private lookup(token: string, nowSeconds: number): { payload: JWTPayload; header: Record<string, unknown> } | undefined {
    const key = digestOf(token);
    const exp = this.entries.get(key);
    if (exp === undefined) return undefined;
    if (exp <= nowSeconds) {
      this.entries.delete(key);
      return undefined;
    }
    const decoded = decode(token);
    // A token that verified decodes; anything else is not the token that was remembered.
    if (!decoded) this.entries.delete(key);
    return decoded;
  }

  /** Remembers a token that was just verified or signed here (`payload.exp` bounds how long). */
  set(token: string, payload: JWTPayload): void {
    if (typeof payload.exp !== 'number') return;
    const key = digestOf(token);
    this.put(key, payload.exp);
    this.options.onRemember?.(key, payload.exp);
  }

  /** A token another worker of this instance verified or signed, by its digest. */
  adopt(digest: string, exp: number): void {
    this.put(digest, exp);
    this.options.onAdopt?.();
  }

  get size(): number {
    return this.entries.size;
  }

  private put(key: string, exp: number): void {
    if (this.entries.size >= this.max && !this.entries.has(key)) {
      // Drop the oldest insertions (Map keeps insertion order); cheap and bounded.
      let n = Math.ceil(this.max / 10);
      for (const k of this.entries.keys()) {
        this.entries.delete(k);
        if (--n <= 0) break;
      }
    }
    this.entries.set(key, exp);
  }
}

const digestOf = (token: string): string => hash('sha256', token, 'base64');

function decode(token: string): { payload: JWTPayload; header: Record<string, unknown> } | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const payload = decodePart(parts[1]!) as JWTPayload | undefined;
  if (!payload) return undefined;
  // Callers rarely look at the header: it is decoded when asked for.
  return {
    payload,
    get header() {
      return decodePart(parts[0]!) ?? {};
    },
  };
}

function decodePart(part: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

// ---- sharing among the workers of one instance --------------------------------------------

/** The message a worker sends (to the primary, which passes it on to the other workers). */
const SHARED = 'gatehouse:verified-tokens';
interface SharedMessage {
  type: typeof SHARED;
  /** purpose → [digest, exp] pairs */
  tokens: Record<string, [string, number][]>;
}

const isShared = (m: unknown): m is SharedMessage =>
  !!m && typeof m === 'object' && (m as { type?: unknown }).type === SHARED && typeof (m as { tokens?: unknown }).tokens === 'object';

/**
 * Messages pass through the primary to every other worker, so under load a worker sends at
 * most one per this many milliseconds (a busy instance of many workers would otherwise keep
 * its primary busy relaying); when quiet, a message leaves right after the turn.
 */
const MIN_INTERVAL_MS = 10;

/** What one worker tells the others, in batches. */
class Outbox {
  private pending: Record<string, [string, number][]> = {};
  private scheduled = false;
  private lastSent = -Infinity;

  add(purpose: string, digest: string, exp: number): void {
    (this.pending[purpose] ??= []).push([digest, exp]);
    if (this.scheduled) return;
    this.scheduled = true;
    const wait = this.lastSent + MIN_INTERVAL_MS - performance.now();
    if (wait <= 0) setImmediate(() => this.flush());
    else setTimeout(() => this.flush(), wait).unref();
  }

  private flush(): void {
    const tokens = this.pending;
    this.pending = {};
    this.scheduled = false;
    this.lastSent = performance.now();
    if (!process.send || !process.connected) return;
    // Telling the others is an optimisation: a channel closing under us (shutdown) is ignored.
    try {
      process.send({ type: SHARED, tokens } satisfies SharedMessage, undefined, {}, () => {});
    } catch {
      /* the primary is gone */
    }
  }
}

const caches = new WeakMap<AppContext, Map<string, VerifiedTokenCache>>();
const outboxes = new WeakMap<AppContext, Outbox>();

/** One cache per context and purpose (access tokens of one audience, transaction tokens). */
export function verifiedTokens(ctx: AppContext, purpose: string): VerifiedTokenCache {
  let m = caches.get(ctx);
  if (!m) caches.set(ctx, (m = new Map()));
  let c = m.get(purpose);
  if (!c) {
    const kind = purpose === 'txn' ? 'transaction' : purpose.startsWith('at:') ? 'access' : purpose.split(':')[0]!;
    const count = (result: 'hit' | 'miss' | 'shared') => ctx.metrics.verifiedTokenCache.labels(kind, result);
    const [hits, misses, shared] = [count('hit'), count('miss'), count('shared')];
    c = new VerifiedTokenCache({
      onRemember: (digest, exp) => outboxes.get(ctx)?.add(purpose, digest, exp),
      onLookup: (hit) => (hit ? hits : misses).inc(),
      onAdopt: () => shared.inc(),
    });
    m.set(purpose, c);
  }
  return c;
}

/**
 * In a cluster worker: tells the other workers of this instance about the tokens remembered
 * here, and remembers what they tell. Call once, before the first request.
 */
export function shareVerifiedTokens(ctx: AppContext): void {
  if (!cluster.isWorker || !process.send) return;
  outboxes.set(ctx, new Outbox());
  process.on('message', (m: unknown) => {
    if (!isShared(m)) return;
    for (const [purpose, list] of Object.entries(m.tokens)) {
      if (!Array.isArray(list)) continue;
      const cache = verifiedTokens(ctx, purpose);
      for (const entry of list) {
        if (Array.isArray(entry) && typeof entry[0] === 'string' && typeof entry[1] === 'number') cache.adopt(entry[0], entry[1]);
      }
    }
  });
}

/** In the primary: passes each worker's message on to the other workers. */
export function relayVerifiedTokens(): void {
  cluster.on('message', (from: Worker, m: unknown) => {
    if (!isShared(m)) return;
    for (const w of Object.values(cluster.workers ?? {})) {
      if (w && w !== from && w.isConnected()) w.send(m);
    }
  });
}
