import { randomUUID } from 'node:crypto';
import { RETIRED_KEY_PUBLISHED_SECONDS } from './keys.js';
import type { Store } from './index.js';
import { secondsOf } from './util.js';

/** How long the relationship change log is kept: a process further behind than this reads every relationship again. */
export const RELATIONSHIP_CHANGES_KEPT_SECONDS = 60 * 60;

export interface HousekeepingOptions {
  everyMs: number;
  onError: (err: unknown) => void;
  onDone?: (removed: Record<string, number>) => void;
}

/**
 * Periodic clean-up of rows nobody needs any more: signing keys retired past their
 * publication window, expired authorization requests and codes, old failure counters, used
 * assertion jtis, used DPoP proofs and answered approvals, and counters of rates and budgets with nothing left in
 * their window, and relationship changes older than an hour (each in its own short transaction). However many processes and instances run it, one
 * pass runs per period (a lease named `housekeeping`, held for the period).
 */
export function startHousekeeping(store: Store, opts: HousekeepingOptions): () => Promise<void> {
  const owner = randomUUID();
  let running: Promise<void> = Promise.resolve();
  const pass = async () => {
    if (!(await store.leases.acquire('housekeeping', owner, opts.everyMs))) return;
    const t = secondsOf(store.clock);
    const removed = {
      signing_keys: await store.keys.purgeRetiredBefore(t - RETIRED_KEY_PUBLISHED_SECONDS),
      oauth: await store.oauth.purgeExpired(t),
      rate_limits: await store.rateLimits.purgeOlderThan(t - 24 * 60 * 60),
      agent_auth: await store.agentAuth.purgeExpired(t),
      usage_counters: await store.usage.purgeIdle(t, 1000),
      relationship_changes: await store.relationships.purgeChangesBefore(t - RELATIONSHIP_CHANGES_KEPT_SECONDS),
      dpop: await store.dpop.purgeExpired(t),
      id_jag_jtis: await store.idJag.purgeExpiredJtis(t),
    };
    opts.onDone?.(removed);
  };
  const tick = () => {
    running = pass().catch(opts.onError);
  };
  // the period starts with the first pass (an interval started at once would tick with it when the period is short)
  let timer: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    tick();
    timer = setInterval(tick, opts.everyMs);
    timer.unref();
  }, Math.min(opts.everyMs, 5000));
  first.unref();
  return async () => {
    clearTimeout(first);
    clearInterval(timer);
    await running;
  };
}
