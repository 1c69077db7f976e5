import { createHash } from 'node:crypto';
import type { AppContext } from '../context.js';
import type { AuditInput } from '../store/audit.js';
import type { Store } from '../store/index.js';
import { addAmounts, usageKey, type UsageCheck, type UsageFacts, type UsageLimit } from '../policy/usage.js';
import type { CounterDef, CounterState, NewEvent, UsageStore } from '../store/usage.js';
import { cappedContext, redactedContext } from './audit.js';

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

/** Ids computed lately: a busy agent's counters are named on every decision. */
const recentIds = new Map<string, string>();
const RECENT_IDS_MAX = 10_000;

/** A counter's stable id: the same agent, capability, thing counted and scope key give the same id in every process. */
export function counterId(agentId: string, capability: string, key: string, scopeKey: string): string {
  const name = JSON.stringify([agentId, capability, key, scopeKey]);
  let id = recentIds.get(name);
  if (id === undefined) {
    id = createHash('sha256').update(name).digest('base64url').slice(0, 22);
    if (recentIds.size >= RECENT_IDS_MAX) recentIds.clear();
    recentIds.set(name, id);
  }
  return id;
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
export function countersFor(s: UsageSubject, limits: readonly UsageLimit[]): Counter[] {
  const byId = new Map<string, Counter>();
  for (const l of limits) {
    const c = counterFor(s, l);
    const known = byId.get(c.id);
    if (!known) byId.set(c.id, { ...c, max: l.max });
    else known.max = Math.min(known.max, l.max);
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** A counter of a request, with the tightest maximum of the limits that count on it. */
export interface Counter extends CounterDef {
  max: number;
}

/** A counter as a decision read it. */
export interface CounterReading extends CounterState {
  /** what this transaction token already consumed here and is still in the window; null when it consumed nothing here */
  own: number | null;
}

export interface UsageRead {
  counters: Counter[];
  readings: CounterReading[];
  /** the usage to decide with: each counter's, without what this transaction token consumed itself */
  facts: UsageFacts;
  /** the same usage by counter, in the order of `counters` (a chain's agents count on counters of the same usage key) */
  values: number[];
}

/** A transaction of the store with the counters. */
export interface UsageTx {
  usage: UsageStore;
}

interface Entry {
  def: Counter;
  /** as read from the database */
  from: CounterState;
  /** with what this transaction's decisions added */
  now: CounterState;
  t: number;
  events: NewEvent[];
}

/**
 * The counters of one transaction: each is read once (under its lock, which the caller
 * holds), the decisions' consumption is applied in memory in order, and each counter is
 * written once at the end (`write`): a turn's decisions cost a few statements per counter, not
 * per decision, and see exactly what one-at-a-time transactions would have seen.
 */
export class CounterSession {
  private readonly entries = new Map<string, Entry>();
  /** txn → counter id → what that transaction token consumed */
  private readonly own = new Map<string, Map<string, { amount: number; at: number }>>();

  constructor(private readonly tx: UsageTx) {}

  /** Looks up, in one go, what these transaction tokens consumed before. */
  async lookUpTxns(txns: readonly string[]): Promise<void> {
    const unknown = [...new Set(txns)].filter((t) => !this.own.has(t));
    if (!unknown.length) return;
    const found = await this.tx.usage.consumedBy(unknown);
    for (const t of unknown) this.own.set(t, found.get(t) ?? new Map());
  }

  /** What `txn` consumed on a counter (after lookUpTxns), or undefined. */
  ownOf(txn: string, id: string): { amount: number; at: number } | undefined {
    return this.own.get(txn)?.get(id);
  }

  /** The counter at time `t`: read on first use; read again (after writing) when `t` moved. */
  async state(c: Counter, t: number): Promise<CounterState> {
    let e = this.entries.get(c.id);
    if (e && e.t !== t) {
      await this.writeEntry(e);
      this.entries.delete(c.id);
      e = undefined;
    }
    if (!e) {
      const from = await this.tx.usage.read(c, t);
      e = { def: c, from, now: from, t, events: [] };
      this.entries.set(c.id, e);
    }
    return e.now;
  }

  /** One allowed action's amount on a counter read at `t`. */
  consume(c: Counter, t: number, amount: number, txn: string | null): { before: number; after: number } {
    const e = this.entries.get(c.id);
    if (!e || e.t !== t) throw new Error('a counter is consumed at the time it was read');
    const before = e.now.used;
    const seq = e.now.nextSeq || 1;
    e.events.push({ at: t, seq, amount, txn });
    e.now = { ...e.now, used: addAmounts(before, amount), nextSeq: seq + 1 };
    if (txn !== null) {
      let m = this.own.get(txn);
      if (!m) this.own.set(txn, (m = new Map()));
      m.set(c.id, { amount, at: t });
    }
    return { before, after: e.now.used };
  }

  /** Writes every counter that changed. */
  async write(): Promise<void> {
    for (const e of this.entries.values()) await this.writeEntry(e);
    this.entries.clear();
  }

  private async writeEntry(e: Entry): Promise<void> {
    if (e.events.length) await this.tx.usage.write(e.def, e.from, e.now, e.t, e.events);
    e.from = e.now;
    e.events = [];
  }
}

/**
 * Inside the caller's transaction: locks (unless the caller did) and reads each counter at
 * time `t` (Unix seconds). A request repeated under the same transaction token is judged
 * without its own earlier consumption, so asking again gives the answer the first ask had.
 */
export async function readUsage(
  session: CounterSession,
  tx: UsageTx,
  counters: Counter[],
  t: number,
  txn: string | null,
  locked = false,
): Promise<UsageRead> {
  const readings: CounterReading[] = [];
  const facts: UsageFacts = {};
  const values: number[] = [];
  if (!locked) for (const c of counters) await tx.usage.lock(c.id);
  if (txn !== null) await session.lookUpTxns([txn]);
  for (const c of counters) {
    const state = await session.state(c, t);
    const e = txn !== null ? session.ownOf(txn, c.id) : undefined;
    // What the token consumed counts only while it is still in the window.
    const own = e ? (e.at > state.target ? e.amount : 0) : null;
    readings.push({ ...state, own });
    const value = own !== null ? Math.max(0, addAmounts(state.used, -own)) : state.used;
    facts[c.usage_key] = value;
    values.push(value);
  }
  return { counters, readings, facts, values };
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
 * After the decision, in the same transaction: an `allow` consumes on every counter (once per
 * transaction token: where the token already consumed, nothing more); anything else consumes
 * nothing. Returns every counter's value before and after. The session writes it all at the end.
 */
export function settleUsage(
  session: CounterSession,
  read: UsageRead,
  decision: { decision: string; usage?: readonly UsageCheck[] },
  t: number,
  txn: string | null,
): CounterChange[] {
  const changes: CounterChange[] = [];
  const checks = decision.usage ?? [];
  for (let i = 0; i < read.counters.length; i++) {
    const c = read.counters[i]!;
    const r = read.readings[i]!;
    const change: CounterChange = { id: c.id, counter: c.usage_key, max: c.max, before: r.used, after: r.used };
    if (c.scope !== 'agent') change.key = c.scope_key;
    if (decision.decision === 'allow' && r.own === null) {
      // Every limit on a counter computes the same amount; a counter the decision did not check is not consumed.
      const check = checks.find((k) => k.key === c.usage_key);
      if (check && !check.violated) {
        const { before, after } = session.consume(c, t, check.amount, txn);
        change.before = before;
        change.after = after;
      }
    }
    changes.push(change);
  }
  return changes;
}

/**
 * One decision on counters in its own transaction: lock, read, decide (`judge`), consume.
 * (The decision endpoint shares a transaction among a turn's decisions: `UsageBatch`.)
 */
export async function decideOnce<Tx extends UsageTx, O extends { decision: { decision: string; usage?: readonly UsageCheck[] } }>(
  tx: Tx,
  counters: Counter[],
  t: number,
  txn: string | null,
  judge: (facts: UsageFacts, tx: Tx, read: UsageRead) => Promise<O>,
): Promise<{ outcome: O; changes: CounterChange[] }> {
  const session = new CounterSession(tx);
  const read = await readUsage(session, tx, counters, t, txn);
  const outcome = await judge(read.facts, tx, read);
  const changes = settleUsage(session, read, outcome.decision, t, txn);
  await session.write();
  return { outcome, changes };
}

/**
 * The usage a request would be judged with, read without a transaction and changing nothing:
 * for a check that consumes nothing (the transaction-token call).
 */
export async function peekUsage(store: UsageTx, counters: Counter[], t: number): Promise<UsageFacts> {
  const facts: UsageFacts = {};
  for (const c of counters) facts[c.usage_key] = await store.usage.peek(c, t);
  return facts;
}

/** `peekUsage` by counter, in the order of `counters`. */
export async function peekValues(store: UsageTx, counters: Counter[], t: number): Promise<number[]> {
  const values: number[] = [];
  for (const c of counters) values.push(await store.usage.peek(c, t));
  return values;
}

// ---- decisions on counters, a turn's worth in one transaction ----------------------------

/** One decision on counters. */
export interface UsageJob<Tx extends UsageTx, O extends { decision: { decision: string; usage?: readonly UsageCheck[] } }> {
  counters: Counter[];
  /** the time of the decision, Unix seconds */
  t: number;
  /** the transaction token's `txn`, when the request came with one */
  txn: string | null;
  /**
   * Decides with the usage read, and may keep its own state through `tx` (approvals). Runs
   * inside the transaction, so it awaits only `tx`; it runs again if the transaction is retried.
   */
  judge(facts: UsageFacts, tx: Tx, read: UsageRead): Promise<O>;
  /** The decision's audit record, written in the same transaction as what it consumed. */
  record?(outcome: O, changes: CounterChange[]): AuditInput;
}

export interface UsageHost<Tx extends UsageTx> {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** What a batch does besides the counters. */
export interface UsageBatchOptions<Tx extends UsageTx> {
  /** appends the jobs' audit records, in order, inside the batch's transaction */
  writeRecords?: (tx: Tx, records: AuditInput[]) => Promise<unknown>;
}

interface QueuedJob<Tx extends UsageTx> {
  job: UsageJob<Tx, any>;
  resolve(r: { outcome: any; changes: CounterChange[] }): void;
  reject(err: unknown): void;
}

/** A turn's worth of jobs in one transaction at most; more wait for the next. */
const BATCH_MAX = 256;

/**
 * Group commit for decisions on counters: the jobs of every request handled in one event-loop
 * turn run one after another in one transaction just after the turn (one write lock, one
 * commit), each reading what the ones before it consumed, so the result is that of running
 * them one at a time. All the batch's counters are locked first, in id order, so batches of
 * two processes or instances never wait on each other in a cycle.
 */
export class UsageBatch<Tx extends UsageTx> {
  private queue: QueuedJob<Tx>[] = [];
  private scheduled = false;

  constructor(
    private readonly host: UsageHost<Tx>,
    private readonly options: UsageBatchOptions<Tx> = {},
  ) {}

  run<O extends { decision: { decision: string; usage?: readonly UsageCheck[] } }>(job: UsageJob<Tx, O>): Promise<{ outcome: O; changes: CounterChange[] }> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, BATCH_MAX);
    this.scheduled = false;
    if (this.queue.length) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
    let results: { outcome: unknown; changes: CounterChange[] }[];
    try {
      results = await this.host.transaction(async (tx) => {
        const ids = [...new Set(batch.flatMap((q) => q.job.counters.map((c) => c.id)))].sort();
        for (const id of ids) await tx.usage.lock(id);
        const session = new CounterSession(tx);
        await session.lookUpTxns(batch.flatMap((q) => (q.job.txn !== null ? [q.job.txn] : [])));
        const out: { outcome: unknown; changes: CounterChange[] }[] = [];
        const records: AuditInput[] = [];
        for (const { job } of batch) {
          const read = await readUsage(session, tx, job.counters, job.t, job.txn, true);
          const outcome = await job.judge(read.facts, tx, read);
          const changes = settleUsage(session, read, outcome.decision, job.t, job.txn);
          if (job.record) records.push(job.record(outcome, changes));
          out.push({ outcome, changes });
        }
        await session.write();
        if (records.length && this.options.writeRecords) await this.options.writeRecords(tx, records);
        return out;
      });
    } catch (err) {
      for (const q of batch) q.reject(err);
      return;
    }
    batch.forEach((q, i) => q.resolve(results[i]! as { outcome: any; changes: CounterChange[] }));
  }
}

const batches = new WeakMap<AppContext, UsageBatch<Store>>();

/** The process's batch of decisions on counters. */
export function usageBatch(ctx: AppContext): UsageBatch<Store> {
  let b = batches.get(ctx);
  if (!b) {
    b = new UsageBatch<Store>(ctx.store, { writeRecords: (tx, records) => tx.audit.appendAll(records.map((r) => (r.context === undefined ? r : { ...r, context: cappedContext(redactedContext(r.context, ctx.config.auditRedactContext ?? [])) }))) });
    batches.set(ctx, b);
  }
  return b;
}

// ---- the counters of one agent, as the management API shows them ----------------------

/** One counter in the management API's listing. */
export interface CounterView {
  id: string;
  capability: string;
  kind: 'count' | 'sum';
  field?: string;
  per: string;
  scope: 'agent' | 'resource' | 'person';
  key?: string;
  max: number;
  used: number;
  remaining: number;
}

/** A capability's limits over time, as the agent holds it now, with the policy's. */
export interface CapabilityLimits {
  capability: string;
  limits: UsageLimit[];
}

/**
 * The agent's counters at time `t`: every limit over time of its capabilities (one entry per
 * thing counted, with the tightest maximum), the agent's own counters even when nothing is
 * used yet, and each object's or person's counter that holds usage. Counters of limits that
 * no longer exist are left out: nothing reads them, and they are pruned once idle.
 */
export async function listCounters(
  store: { usage: UsageStore },
  agentId: string,
  capabilities: CapabilityLimits[],
  t: number,
): Promise<CounterView[]> {
  const stored = await store.usage.listForAgent(agentId, t);
  const out: CounterView[] = [];
  for (const { capability, limits } of capabilities) {
    const byKey = new Map<string, UsageLimit & { tightest: number }>();
    for (const l of limits) {
      const key = usageKey(l);
      const cur = byKey.get(key);
      if (!cur) byKey.set(key, { ...l, tightest: l.max });
      else cur.tightest = Math.min(cur.tightest, l.max);
    }
    for (const [key, l] of byKey) {
      const view = (id: string, used: number, scopeKey?: string): CounterView => {
        const v: CounterView = { id, capability, kind: l.kind, per: l.per, scope: l.scope, max: l.tightest, used, remaining: Math.max(0, addAmounts(l.tightest, -used)) };
        if (l.kind === 'sum') v.field = l.field!;
        if (scopeKey !== undefined) v.key = scopeKey;
        return v;
      };
      const rows = stored.filter((r) => r.capability === capability && r.usage_key === key);
      if (l.scope === 'agent') {
        const id = counterId(agentId, capability, key, '');
        out.push(view(id, rows.find((r) => r.id === id)?.used ?? 0));
      } else {
        for (const r of rows) if (r.used > 0) out.push(view(r.id, r.used, r.scope_key));
      }
    }
  }
  return out;
}
