import { randomUUID } from 'node:crypto';
import { RETIRED_KEY_PUBLISHED_SECONDS } from './keys.js';
import type { Store } from './index.js';
import type { AuditCheckpoint, CheckpointClaims } from './audit.js';
import { secondsOf } from './util.js';

/** How long the relationship change log is kept: a process further behind than this reads every relationship again. */
export const RELATIONSHIP_CHANGES_KEPT_SECONDS = 60 * 60;

/** How audit records are kept: pruned past `days`, each cut signed by `sign` (the server's active key, named by `activeKid`). */
export interface AuditRetention {
  days: number;
  sign: (claims: CheckpointClaims) => Promise<string>;
  activeKid: () => Promise<string>;
}

/**
 * Prunes the audit records older than the retention, writing at the cut a signed checkpoint
 * (the chain head there, the time and the count). The latest checkpoint is signed again when
 * its key is no longer the active one, so it never outlives the key that verifies it (a
 * retired key is purged a day after its rotation). Answers the records removed.
 */
export async function pruneAudit(store: Store, retention: AuditRetention): Promise<number> {
  const t = secondsOf(store.clock);
  const latest = await store.audit.latestCheckpoint();
  if (latest && kidOf(latest) !== (await retention.activeKid())) {
    const { jws: _old, ...claims } = latest;
    await store.audit.resign(latest.seq, await retention.sign(claims));
  }
  const cut = await store.audit.cutBefore(t - retention.days * 24 * 60 * 60);
  if (!cut || (latest && cut.seq <= latest.seq)) return 0;
  const claims: CheckpointClaims = {
    seq: cut.seq,
    hash: cut.hash,
    record_time: cut.time,
    created_at: t,
    pruned: cut.count,
    pruned_total: (latest?.pruned_total ?? 0) + cut.count,
  };
  return store.audit.prune({ ...claims, jws: await retention.sign(claims) });
}

function kidOf(c: AuditCheckpoint): string | undefined {
  try {
    return (JSON.parse(Buffer.from(c.jws.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: string }).kid;
  } catch {
    return undefined;
  }
}

export interface HousekeepingOptions {
  everyMs: number;
  /** audit retention (GATEHOUSE_AUDIT_RETENTION_DAYS); absent: records are kept for ever */
  auditRetention?: AuditRetention;
  onError: (err: unknown) => void;
  onDone?: (removed: Record<string, number>) => void;
}

/**
 * Periodic clean-up of rows nobody needs any more: signing keys retired past their
 * publication window, expired authorization requests and codes, old failure counters, used
 * assertion jtis, used DPoP proofs and answered approvals, and counters of rates and budgets with nothing left in
 * their window, relationship changes older than an hour, and (with a retention) audit records past it behind a signed checkpoint (each in its own short transaction). However many processes and instances run it, one
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
      // with a retention only
      ...(opts.auditRetention ? { audit_log: await pruneAudit(store, opts.auditRetention) } : {}),
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
