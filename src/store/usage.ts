import type { Sql } from './sql.js';

/**
 * Counters of limits over time (rates and budgets). A counter keeps a running total (`used`)
 * of its events after `horizon`; reading it at a time `t` moves the horizon to the start of
 * the window `t - per_seconds`, subtracting the events that left the window (or adding back
 * ones a clock that went backwards brings in again), so a check costs a few primary-key reads
 * however much the window holds. The events themselves are kept a little past their window
 * (for the transaction-token check), then pruned, a few at a time, as counters move on.
 *
 * Every method that reads or changes a counter belongs inside a store transaction: the caller
 * locks each counter first (`lock`), so concurrent decisions on it, in any process, run one
 * after another and never together pass its window.
 */

/** What a counter counts, as the decision names it. */
export interface CounterDef {
  id: string;
  agent_id: string;
  capability: string;
  usage_key: string;
  kind: 'count' | 'sum';
  field: string | null;
  per_seconds: number;
  scope: 'agent' | 'resource' | 'person';
  scope_key: string;
}

export interface CounterRow extends CounterDef {
  used: number;
  horizon: number;
  next_seq: number;
  updated_at: number;
}

/** A counter as a decision reads it, under its lock: what `write` continues from. */
export interface CounterState {
  id: string;
  /** the usage in the window ending at the time read */
  used: number;
  /** the start of that window (`t - per_seconds`) */
  target: number;
  /** the sequence number of the next event; 0 when the counter has no row yet */
  nextSeq: number;
}

/** One allowed action's share of a counter, to be written. */
export interface NewEvent {
  at: number;
  seq: number;
  amount: number;
  txn: string | null;
}

/**
 * How long an event outlives its window: a transaction token lives 60 seconds, and asking
 * again with it must still find what it consumed; the rest is slack for clocks that disagree.
 */
export const EVENT_GRACE_SECONDS = 300;

/** Every this many events on one counter, its events long out of the window are pruned. */
const PRUNE_EVERY = 32;

const add = (a: number, b: number): number => Number((a + b).toPrecision(15));

/** A row with its numbers as numbers (PostgreSQL hands 64-bit integers over as text). */
const toRow = (r: CounterRow | undefined): CounterRow | undefined =>
  r && { ...r, per_seconds: Number(r.per_seconds), used: Number(r.used), horizon: Number(r.horizon), next_seq: Number(r.next_seq), updated_at: Number(r.updated_at) };

const SELECT_ROW = 'SELECT * FROM usage_counters WHERE id = ?';
const SUM_BETWEEN = 'SELECT COALESCE(SUM(amount), 0) AS total, COUNT(*) AS n FROM usage_events WHERE counter_id = ? AND at > ? AND at <= ?';
const MOVE_HORIZON = 'UPDATE usage_counters SET used = ?, horizon = ? WHERE id = ?';
/** Transaction tokens looked up per statement. */
const TXN_CHUNK = 16;
const OWN_EVENTS = `SELECT txn, counter_id, amount, at FROM usage_events WHERE txn IN (${Array(TXN_CHUNK).fill('?').join(', ')})`;
const INSERT_COUNTER = `INSERT INTO usage_counters
  (id, agent_id, capability, usage_key, kind, field, per_seconds, scope, scope_key, used, horizon, next_seq, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const UPDATE_COUNTER = 'UPDATE usage_counters SET used = ?, horizon = ?, next_seq = ?, updated_at = ? WHERE id = ?';
/** Events inserted per statement. */
const EVENT_CHUNK = 32;
const insertEvents = (n: number) => `INSERT INTO usage_events (counter_id, at, seq, amount, txn) VALUES ${Array(n).fill('(?, ?, ?, ?, ?)').join(', ')}`;
const INSERT_EVENTS = insertEvents(EVENT_CHUNK);
const PRUNE_EVENTS = 'DELETE FROM usage_events WHERE counter_id = ? AND at <= ?';

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The counter's used amount with its horizon at `target`, from a row whose horizon is elsewhere. */
async function usedAt(sql: Sql, row: CounterRow, target: number): Promise<{ used: number; moved: boolean }> {
  if (target === row.horizon) return { used: row.used, moved: false };
  if (target > row.horizon) {
    const r = (await sql.get<{ total: number; n: number }>(SUM_BETWEEN, [row.id, row.horizon, target]))!;
    // Totals are kept to fifteen significant digits, so taking away what left gives the exact rest.
    return { used: Number(r.n) > 0 ? Math.max(0, add(row.used, -Number(r.total))) : row.used, moved: Number(r.n) > 0 };
  }
  const r = (await sql.get<{ total: number; n: number }>(SUM_BETWEEN, [row.id, target, row.horizon]))!;
  return { used: Number(r.n) > 0 ? add(row.used, Number(r.total)) : row.used, moved: Number(r.n) > 0 };
}

export function usageStore(sql: Sql) {
  return {
    /** Serializes the transactions that touch this counter until this one ends. */
    lock: (id: string): Promise<void> => sql.lock(`usage:${id}`),

    /**
     * The counter's usage in the window (t - per_seconds, t], for a decision that holds its
     * lock. Moves the stored horizon when something left the window (so the next reader need not).
     */
    async read(def: Pick<CounterDef, 'id' | 'per_seconds'>, t: number): Promise<CounterState> {
      const target = t - def.per_seconds;
      const row = toRow(await sql.get<CounterRow>(SELECT_ROW, [def.id]));
      if (!row) return { id: def.id, used: 0, target, nextSeq: 0 };
      const { used, moved } = await usedAt(sql, row, target);
      if (moved) await sql.run(MOVE_HORIZON, [used, target, row.id]);
      return { id: def.id, used, target, nextSeq: row.next_seq };
    },

    /** What each of these transaction tokens consumed: txn → counter id → the amount and when. */
    async consumedBy(txns: readonly string[]): Promise<Map<string, Map<string, { amount: number; at: number }>>> {
      const out = new Map<string, Map<string, { amount: number; at: number }>>();
      for (let i = 0; i < txns.length; i += TXN_CHUNK) {
        const chunk = txns.slice(i, i + TXN_CHUNK);
        // A fixed number of parameters per statement (padded with the last), so the statement is prepared once.
        const params = Array.from({ length: TXN_CHUNK }, (_, j) => chunk[Math.min(j, chunk.length - 1)]);
        for (const r of await sql.all<{ txn: string; counter_id: string; amount: number; at: number }>(OWN_EVENTS, params)) {
          let m = out.get(r.txn);
          if (!m) out.set(r.txn, (m = new Map()));
          m.set(r.counter_id, { amount: Number(r.amount), at: Number(r.at) });
        }
      }
      return out;
    },

    /** The counter's usage in the window (t - per_seconds, t], changing nothing (no lock needed). */
    async peek(def: Pick<CounterDef, 'id'>, t: number): Promise<number> {
      const row = toRow(await sql.get<CounterRow>(SELECT_ROW, [def.id]));
      return row ? Number((await usedAt(sql, row, t - row.per_seconds)).used) : 0;
    },

    /**
     * Writes what decisions added to a counter since `from` was read (in this transaction, under
     * the counter's lock): its new total as of `to`, and one event per allowed action. Old
     * events are pruned now and then.
     */
    async write(def: CounterDef, from: CounterState, to: CounterState, at: number, events: readonly NewEvent[]): Promise<void> {
      if (events.length === 0) return;
      if (from.nextSeq === 0) {
        await sql.run(INSERT_COUNTER, [
          def.id, def.agent_id, def.capability, def.usage_key, def.kind, def.field, def.per_seconds, def.scope, def.scope_key, to.used, to.target, to.nextSeq, at,
        ]);
      } else {
        await sql.run(UPDATE_COUNTER, [to.used, to.target, to.nextSeq, at, def.id]);
      }
      for (let i = 0; i < events.length; i += EVENT_CHUNK) {
        const chunk = events.slice(i, i + EVENT_CHUNK);
        const statement = chunk.length === EVENT_CHUNK ? INSERT_EVENTS : insertEvents(chunk.length);
        await sql.run(statement, chunk.flatMap((e) => [def.id, e.at, e.seq, e.amount, e.txn]));
      }
      const first = Math.max(from.nextSeq, 1);
      if (Math.floor((to.nextSeq - 1) / PRUNE_EVERY) > Math.floor((first - 1) / PRUNE_EVERY)) {
        await sql.run(PRUNE_EVENTS, [def.id, to.target - EVENT_GRACE_SECONDS]);
      }
    },

    /** One counter as stored, or undefined. */
    get: async (id: string): Promise<CounterRow | undefined> => toRow(await sql.get<CounterRow>(SELECT_ROW, [id])),

    /** The agent's stored counters, each with its usage at time `t` (read only). */
    async listForAgent(agentId: string, t: number): Promise<CounterRow[]> {
      const rows = await sql.all<CounterRow>('SELECT * FROM usage_counters WHERE agent_id = ? ORDER BY capability, usage_key, scope_key', [agentId]);
      const out: CounterRow[] = [];
      for (const r of rows) {
        const row = toRow(r)!;
        out.push({ ...row, used: (await usedAt(sql, row, t - row.per_seconds)).used });
      }
      return out;
    },

    /** Forgets a counter's usage (its events and its total); false when there was none. */
    async reset(id: string): Promise<boolean> {
      await sql.run('DELETE FROM usage_events WHERE counter_id = ?', [id]);
      return (await sql.run('DELETE FROM usage_counters WHERE id = ?', [id])).changes === 1;
    },

    /**
     * Drops counters with nothing left in their window (and their events), oldest first and at
     * most `limit`, each in its own short transaction under its lock, letting the event loop
     * run between them, so pruning never holds decisions up for long. Answers how many were dropped.
     */
    async purgeIdle(t: number, limit = 100): Promise<number> {
      const idle = await sql.all<{ id: string }>(
        'SELECT id FROM usage_counters WHERE updated_at + per_seconds + ? <= ? ORDER BY updated_at LIMIT ?',
        [EVENT_GRACE_SECONDS, t, limit],
      );
      let dropped = 0;
      for (const { id } of idle) {
        const gone = await sql.transaction(async (tx) => {
          await tx.lock(`usage:${id}`);
          // Still idle now that it is ours: a decision may have used it in between.
          const row = toRow(await tx.get<CounterRow>(SELECT_ROW, [id]));
          if (!row || row.updated_at + row.per_seconds + EVENT_GRACE_SECONDS > t) return false;
          await tx.run('DELETE FROM usage_events WHERE counter_id = ?', [id]);
          return (await tx.run('DELETE FROM usage_counters WHERE id = ?', [id])).changes === 1;
        });
        if (gone) dropped++;
        // Between counters, the event loop serves what waits (on SQLite every statement is
        // synchronous, so without this the whole pass would run before any request).
        await yieldToEventLoop();
      }
      return dropped;
    },
  };
}
export type UsageStore = ReturnType<typeof usageStore>;
