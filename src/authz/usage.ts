import { createHash } from 'node:crypto';
import { usageKey, type UsageCheck, type UsageFacts, type UsageLimit } from '../policy/usage.js';
import type { CounterDef, CounterReading, UsageStore } from '../store/usage.js';

/**
 * Limits over time in a decision: which counters a request touches, reading them (locked, so
 * that concurrent decisions on one counter run one after another in every process and
 * instance), and consuming them when the decision allows. The policy decides from the usage
 * it is given; this module gives it and records what an allow used, all inside the caller's
 * one store transaction:
 *
 *   const read = await readUsage(tx, counters, t, txn);          // lock + read
 *   const d = decide({ ...request, usage: read.facts }, policy); // judge
 *   const changes = await settleUsage(tx, read, d, t, txn);      // an allow consumes
 */

/** Whose usage a request is: the acting agent, the capability, the object and the person. */
export interface UsageSubject {
  agentId: string;
  capability: string;
  resource: string;
  /** the person a delegated agent acts for; null or '' when none (a `per person` limit then counts all such calls together) */
  personId: string | null;
}

/** A counter's stable id: the same agent, capability, thing counted and scope key give the same id in every process. */
export function counterId(agentId: string, capability: string, key: string, scopeKey: string): string {
  return createHash('sha256').update(JSON.stringify([agentId, capability, key, scopeKey])).digest('base64url').slice(0, 22);
}

/** The object or person a scoped limit counts for, '' for the agent's own counter. */
export function scopeKeyOf(limit: Pick<UsageLimit, 'scope'>, s: UsageSubject): string {
  if (limit.scope === 'resource') return s.resource;
  if (limit.scope === 'person') return s.personId ?? '';
  return '';
}

export function counterFor(s: UsageSubject, limit: UsageLimit): CounterDef {
  const key = usageKey(limit);
  const scopeKey = scopeKeyOf(limit, s);
  return {
    id: counterId(s.agentId, s.capability, key, scopeKey),
    agent_id: s.agentId,
    capability: s.capability,
    usage_key: key,
    kind: limit.kind,
    field: limit.field,
    per_seconds: limit.seconds,
    scope: limit.scope,
    scope_key: scopeKey,
  };
}

/**
 * The counters these limits count on, one per usage key (limits that count the same thing
 * share one), in id order: every decision locks in the same order, so two never wait on
 * each other.
 */
export function countersFor(s: UsageSubject, limits: readonly UsageLimit[]): CounterDef[] {
  const byId = new Map<string, CounterDef>();
  for (const l of limits) {
    const c = counterFor(s, l);
    if (!byId.has(c.id)) byId.set(c.id, c);
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export interface UsageRead {
  counters: CounterDef[];
  readings: CounterReading[];
  /** the usage to decide with: each counter's, without what this transaction token consumed itself */
  facts: UsageFacts;
}

/** A transaction of the store with the counters. */
export interface UsageTx {
  usage: UsageStore;
}

/**
 * Inside the caller's transaction: locks and reads each counter at time `t` (Unix seconds).
 * A request repeated under the same transaction token is judged without its own earlier
 * consumption, so asking again gives the answer the first ask had.
 */
export async function readUsage(tx: UsageTx, counters: CounterDef[], t: number, txn: string | null): Promise<UsageRead> {
  const readings: CounterReading[] = [];
  const facts: UsageFacts = {};
  for (const c of counters) {
    await tx.usage.lock(c.id);
    const r = await tx.usage.read(c, t, txn);
    readings.push(r);
    facts[c.usage_key] = r.own !== null ? Math.max(0, r.used - r.own) : r.used;
  }
  return { counters, readings, facts };
}

/** A counter's value before and after a decision, for its audit record. */
export interface CounterChange {
  id: string;
  counter: string;
  /** the object or person of a scoped counter */
  key?: string;
  max: number;
  before: number;
  after: number;
}

/**
 * Inside the same transaction, after the decision: an `allow` consumes on every counter
 * (once per transaction token: where the token already consumed, nothing more); anything else
 * consumes nothing. Returns every counter's value before and after.
 */
export async function settleUsage(
  tx: UsageTx,
  read: UsageRead,
  decision: { decision: string; usage?: readonly UsageCheck[] },
  t: number,
  txn: string | null,
): Promise<CounterChange[]> {
  const changes: CounterChange[] = [];
  const checks = decision.usage ?? [];
  for (let i = 0; i < read.counters.length; i++) {
    const c = read.counters[i]!;
    const r = read.readings[i]!;
    const mine = checks.filter((k) => k.key === c.usage_key);
    const max = mine.length ? Math.min(...mine.map((k) => k.limit.max)) : Number.NaN;
    const change: CounterChange = { id: c.id, counter: c.usage_key, max, before: r.used, after: r.used };
    if (c.scope !== 'agent') change.key = c.scope_key;
    if (decision.decision === 'allow' && r.own === null) {
      // Every limit on a counter computes the same amount; a counter the decision did not check is not consumed.
      const check = mine[0];
      if (check && !check.violated) {
        const { before, after } = await tx.usage.consume(c, t, check.amount, txn);
        change.before = before;
        change.after = after;
      }
    }
    changes.push(change);
  }
  return changes;
}
