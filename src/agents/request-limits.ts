import { isIP } from 'node:net';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';

/**
 * Request limits of the agent endpoints (sign-in, CIBA, binding, decision), which anyone can
 * reach: per client address and per agent ID, each a number of requests per second, counted in
 * memory by each process (a deployment of n processes admits up to n times as many). The
 * address is checked first, so a single address flooding one agent's ID uses up its own
 * allowance before the agent's. Over a limit: 429 `rate_limited` with `Retry-After: 1`.
 */
export interface RequestLimits {
  /** requests per second per client address; 0: no limit */
  perAddress: number;
  /** requests per second per agent ID; 0: no limit */
  perAgent: number;
  /** addresses of proxies whose X-Forwarded-For names the client */
  trustedProxies: readonly string[];
}

/** What the limiter reads of a request, on either transport. */
export interface LimitedRequest {
  get(name: string): string | undefined;
  socket: { remoteAddress?: string | undefined };
}

/** `::ffff:10.0.0.1` and `10.0.0.1` are one address. */
const plain = (address: string): string => (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address);

/**
 * The client's address: the connection's peer, unless that peer is a trusted proxy; then the
 * X-Forwarded-For entry nearest to us that is not a trusted proxy itself (entries further left
 * were written by the client and prove nothing).
 */
export function clientAddress(req: LimitedRequest, trustedProxies: readonly string[]): string {
  const peer = plain(req.socket.remoteAddress ?? '');
  if (!trustedProxies.length || !trustedProxies.includes(peer)) return peer;
  const hops = (req.get('x-forwarded-for') ?? '').split(',').map((h) => plain(h.trim())).filter((h) => isIP(h) !== 0);
  for (let i = hops.length - 1; i >= 0; i--) if (!trustedProxies.includes(hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}

class Window {
  private second = 0;
  private counts = new Map<string, number>();

  /** Counts one request for `key`; false when it is over `limit` in this second. */
  admit(key: string, limit: number, nowMs: number): boolean {
    const second = Math.floor(nowMs / 1000);
    if (second !== this.second) {
      this.second = second;
      this.counts.clear();
    }
    const n = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, n);
    return n <= limit;
  }
}

const windows = new WeakMap<AppContext, { address: Window; agent: Window }>();

/** Admits one request to an agent endpoint, or throws the 429. `agentId` is what the request names (unverified). */
export function limitAgentRequest(ctx: AppContext, req: LimitedRequest, agentId: string | undefined): void {
  const limits = ctx.config.agentRequestLimits;
  let w = windows.get(ctx);
  if (!w) windows.set(ctx, (w = { address: new Window(), agent: new Window() }));
  const now = Date.now();
  if (limits.perAddress > 0 && !w.address.admit(clientAddress(req, limits.trustedProxies), limits.perAddress, now)) {
    throw errors.rateLimited('too many requests from this address; try again in a second', {}, { 'Retry-After': '1' });
  }
  if (limits.perAgent > 0 && agentId && !w.agent.admit(agentId, limits.perAgent, now)) {
    throw errors.rateLimited('too many requests for this agent; try again in a second', {}, { 'Retry-After': '1' });
  }
}
