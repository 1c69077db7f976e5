import type { JWTPayload } from 'jose';
import type { AppContext } from '../context.js';

/**
 * Tokens this process has already verified, keyed by the exact token text, until they expire.
 * An Ed25519 verify costs ~170 µs; an agent reuses its access token and a transaction token
 * for many calls, so a repeat costs a map lookup. Only a byte-identical token hits the cache,
 * so nothing unverified is ever accepted; expiry is checked again on every hit.
 */
export class VerifiedTokenCache {
  private entries = new Map<string, { payload: JWTPayload; header: Record<string, unknown>; exp: number }>();

  constructor(private readonly max = 20_000) {}

  get(key: string, nowSeconds: number): { payload: JWTPayload; header: Record<string, unknown> } | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.exp <= nowSeconds) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }

  set(key: string, payload: JWTPayload, header: Record<string, unknown>): void {
    if (typeof payload.exp !== 'number') return;
    if (this.entries.size >= this.max) {
      // Drop the oldest insertions (Map keeps insertion order); cheap and bounded.
      let n = Math.ceil(this.max / 10);
      for (const k of this.entries.keys()) {
        this.entries.delete(k);
        if (--n <= 0) break;
      }
    }
    this.entries.set(key, { payload, header, exp: payload.exp });
  }
}

const caches = new WeakMap<AppContext, Map<string, VerifiedTokenCache>>();

/** One cache per context and purpose (access tokens, transaction tokens). */
export function verifiedTokens(ctx: AppContext, purpose: string): VerifiedTokenCache {
  let m = caches.get(ctx);
  if (!m) caches.set(ctx, (m = new Map()));
  let c = m.get(purpose);
  if (!c) m.set(purpose, (c = new VerifiedTokenCache()));
  return c;
}
