import Database from 'better-sqlite3';
import { dbSpan } from '../telemetry.js';
import { dirname } from 'node:path';
import { makeDirectory } from '../paths.js';
import { perTurnFeed, type ChangeFeed } from './changes.js';
import type { Params, RunResult, Sql, SqlDatabase, Statement as PipelinedStatement } from './sql.js';

type Statement = Database.Statement<unknown[], unknown>;

/** A transaction open longer than this is almost surely awaiting something other than its own store. */
const LONG_TRANSACTION_MS = 2000;
/** How long a transaction waits for another process's write lock before it fails (as busy_timeout does for single statements). */
const WRITE_LOCK_WAIT_MS = 5000;
const BUSY_TIMEOUT_MS = 5000;

const isBusy = (err: unknown): boolean => (err as { code?: string } | null)?.code === 'SQLITE_BUSY';
const pause = (ms: number): Promise<void> => new Promise((resolve) => (ms === 0 ? setImmediate(resolve) : setTimeout(resolve, ms)));

/**
 * The SQLite executor: one better-sqlite3 connection per process, prepared statements cached
 * by their SQL text. better-sqlite3 is synchronous, so a call costs what it did before plus
 * one resolved promise.
 *
 * A transaction body awaits between its statements, and other requests' microtasks run in
 * those gaps on the same connection. So while a transaction is open, every store call that
 * is not part of it waits for it to end (one comparison when none is open). The
 * transaction's own calls go through `tx`, which skips the wait.
 */
class SqliteExecutor implements SqlDatabase {
  readonly dialect = 'sqlite' as const;
  readonly inTransaction = false;
  private readonly statements = new Map<string, Statement>();
  /** set while a transaction is open; resolves when it ends */
  private gate: Promise<void> | null = null;
  private readonly tx: SqliteTransaction;
  private readonly begin: Statement;
  private readonly commit: Statement;
  private readonly rollback: Statement;

  constructor(
    readonly db: Database.Database,
    readonly location: string,
    private readonly warn: (msg: string) => void,
  ) {
    this.tx = new SqliteTransaction(this);
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
  }

  /**
   * BEGIN IMMEDIATE without SQLite's own busy wait, and then the gate closed, in one synchronous
   * step; answers the gate's release. SQLite's wait sleeps the whole process (1, 2, 5, 10 ... ms
   * at a time) while another process holds the write lock, which it does for well under a
   * millisecond: so the lock is asked for without waiting, and asked again after yielding to the
   * event loop. Until the lock is held the gate stays open: this process's other store calls go
   * on meanwhile, as statements of their own outside any transaction, so the connection's busy
   * timeout is lowered only for each attempt itself.
   */
  private async beginImmediate(): Promise<() => void> {
    // A duration: real time passing, not a time the store keeps.
    const started = performance.now();
    for (let attempt = 0; ; attempt++) {
      while (this.gate) await this.gate;
      this.busyTimeout(0);
      try {
        this.begin.run();
        let release!: () => void;
        this.gate = new Promise<void>((resolve) => (release = resolve));
        return release;
      } catch (err) {
        if (!isBusy(err) || performance.now() - started > WRITE_LOCK_WAIT_MS) throw err;
      } finally {
        this.busyTimeout(BUSY_TIMEOUT_MS);
      }
      await pause(attempt < 2 ? 0 : 1);
    }
  }

  /**
   * Sets the connection's busy timeout. Compiled afresh each time: SQLite applies a
   * `PRAGMA busy_timeout` when it compiles the statement, so running a prepared one again
   * does not set it.
   */
  private busyTimeout(ms: number): void {
    this.db.exec(`PRAGMA busy_timeout = ${ms}`);
  }

  statement(sql: string): Statement {
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      // Statements are constants in the store modules; a bound guards against a generated one.
      if (this.statements.size > 2000) this.statements.clear();
      this.statements.set(sql, s);
    }
    return s;
  }

  // Each call checks the gate right before its statement, in the same synchronous step: a
  // transaction that began while it waited is waited for too.
  async all<T>(sql: string, params?: Params): Promise<T[]> {
    while (this.gate) await this.gate;
    return all<T>(this.statement(sql), params);
  }
  async get<T>(sql: string, params?: Params): Promise<T | undefined> {
    while (this.gate) await this.gate;
    return get<T>(this.statement(sql), params);
  }
  async run(sql: string, params?: Params): Promise<RunResult> {
    while (this.gate) await this.gate;
    return run(this.statement(sql), params);
  }
  async exec(sql: string): Promise<void> {
    while (this.gate) await this.gate;
    this.db.exec(sql);
  }
  async pipeline(statements: readonly PipelinedStatement[]): Promise<Record<string, unknown>[][]> {
    while (this.gate) await this.gate;
    return statements.map((s) => rowsOf(this.statement(s.sql), s.params));
  }

  async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    const release = await this.beginImmediate();
    const started = performance.now(); // real time open, as above
    const watchdog = setTimeout(
      () => this.warn(`a store transaction has been open for ${Math.round(performance.now() - started)} ms: its body must await only calls on its own transaction`),
      LONG_TRANSACTION_MS,
    );
    watchdog.unref();
    const hooks: (() => void)[] = [];
    this.tx.hooks = hooks;
    try {
      let result: T;
      try {
        result = await fn(this.tx);
        this.commit.run();
      } catch (err) {
        if (this.db.inTransaction) this.rollback.run();
        throw err;
      }
      for (const hook of hooks) hook();
      return result;
    } finally {
      clearTimeout(watchdog);
      this.tx.hooks = null;
      this.gate = null;
      release();
    }
  }

  async lock(): Promise<void> {
    throw new Error('lock() needs a transaction');
  }
  afterCommit(fn: () => void): void {
    fn();
  }

  async maintenance(): Promise<void> {
    // A checkpoint that never waits for readers or writers.
    while (this.gate) await this.gate;
    this.db.pragma('wal_checkpoint(PASSIVE)');
  }
  async changeFeed(): Promise<ChangeFeed> {
    return perTurnFeed(this);
  }
  async close(): Promise<void> {
    while (this.gate) await this.gate;
    this.db.close();
  }
}

/** The executor inside the open transaction: the same statements, without the wait. */
class SqliteTransaction implements Sql {
  readonly dialect = 'sqlite' as const;
  readonly inTransaction = true;
  hooks: (() => void)[] | null = null;

  constructor(private readonly root: SqliteExecutor) {}

  private check(): void {
    // A body that kept `tx` past its transaction would otherwise write outside any.
    if (!this.hooks) throw new Error('this transaction has ended');
  }
  async all<T>(sql: string, params?: Params): Promise<T[]> {
    this.check();
    return all<T>(this.root.statement(sql), params);
  }
  async get<T>(sql: string, params?: Params): Promise<T | undefined> {
    this.check();
    return get<T>(this.root.statement(sql), params);
  }
  async run(sql: string, params?: Params): Promise<RunResult> {
    this.check();
    return run(this.root.statement(sql), params);
  }
  async exec(sql: string): Promise<void> {
    this.check();
    this.root.db.exec(sql);
  }
  /** One after another; the commit is the transaction's, after the body. */
  async pipeline(statements: readonly PipelinedStatement[]): Promise<Record<string, unknown>[][]> {
    this.check();
    return statements.map((s) => rowsOf(this.root.statement(s.sql), s.params));
  }
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    this.check();
    return fn(this);
  }
  /** BEGIN IMMEDIATE already holds the write lock: transactions run one at a time. */
  async lock(): Promise<void> {
    this.check();
  }
  afterCommit(fn: () => void): void {
    this.check();
    this.hooks!.push(fn);
  }
}

const all = <T>(s: Statement, p: Params | undefined): T[] => dbSpan('sqlite', s.source, () => (p === undefined ? s.all() : s.all(p)) as T[]);
const get = <T>(s: Statement, p: Params | undefined): T | undefined => dbSpan('sqlite', s.source, () => (p === undefined ? s.get() : s.get(p)) as T | undefined);
/** A pipelined statement's rows: a query's, or none for a write. */
const rowsOf = (s: Statement, p: Params | undefined): Record<string, unknown>[] => (s.reader ? all<Record<string, unknown>>(s, p) : (run(s, p), []));
const run = (s: Statement, p: Params | undefined): RunResult => dbSpan('sqlite', s.source, () => ({ changes: (p === undefined ? s.run() : s.run(p)).changes }));

export interface SqliteOptions {
  /** cluster workers leave WAL checkpoints to the primary (an automatic one stalls the worker that commits) */
  autoCheckpoint?: boolean;
  warn?: (msg: string) => void;
}

/** Opens (creating when needed) the SQLite file with the pragmas every process uses. Does not migrate. */
export function openSqlite(file: string, opts: SqliteOptions = {}): SqlDatabase & { db: Database.Database } {
  if (file !== ':memory:') makeDirectory(dirname(file));
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  if (opts.autoCheckpoint === false) db.pragma('wal_autocheckpoint = 0');
  return new SqliteExecutor(db, file, opts.warn ?? ((msg) => process.emitWarning(msg)));
}
