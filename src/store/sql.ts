/**
 * The one interface every store module is written against, with SQL that both SQLite and
 * PostgreSQL accept. Parameters are positional (`?`, with an array) or named (`@name`, with an
 * object); the PostgreSQL executor rewrites both to `$1, $2, ...`.
 *
 * Portable SQL, in short: INTEGER/TEXT columns, JSON kept as TEXT, times as INTEGER Unix
 * seconds (milliseconds where named so); `INSERT ... ON CONFLICT`, `RETURNING`; no
 * SQLite-only functions (`MAX(a, b)` as a scalar, `IFNULL`, `rowid`) and no PostgreSQL-only
 * ones; a parameter tested with `IS NULL` is cast (`CAST(? AS TEXT) IS NULL`) so PostgreSQL
 * knows its type; a subquery in FROM has an alias.
 */
import type { ChangeFeed } from './changes.js';

export type Dialect = 'sqlite' | 'postgres';
/** `?` values in order, or an object whose keys are the `@name`s */
export type Params = readonly unknown[] | object;
/** One statement of a pipeline. */
export interface Statement {
  sql: string;
  params?: Params;
}
export interface RunResult {
  /** rows inserted, updated or deleted */
  changes: number;
}

export interface Sql {
  readonly dialect: Dialect;
  /** true for an executor bound to an open transaction */
  readonly inTransaction: boolean;
  all<T>(sql: string, params?: Params): Promise<T[]>;
  get<T>(sql: string, params?: Params): Promise<T | undefined>;
  run(sql: string, params?: Params): Promise<RunResult>;
  /** Statements without parameters, separated by semicolons (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * Statements sent together, answered with each one's rows in order (none for a write). On
   * PostgreSQL they go in one round trip (one simple-protocol query, each parameter inlined
   * as an escaped literal, which the server types as it types a parameter), together with
   * what the transaction still owes the server (its BEGIN, a lock asked for); SQLite runs
   * them one after another. Parameters are numbers, strings, booleans, null or buffers; for
   * short statements (each literal is escaped in JavaScript, and the server plans the statement
   * anew), such as reads that would otherwise each cost a round trip.
   */
  pipeline(statements: readonly Statement[]): Promise<Record<string, unknown>[][]>;
  /**
   * Runs `fn` in one transaction and commits when it resolves (rolls back when it throws).
   * Inside a transaction, `transaction` runs `fn` in the same one.
   *
   * The body awaits only calls on `tx` (never another store, a network call or a timer):
   * on SQLite the one connection is shared by every request of the process, so other
   * store calls wait while a transaction is open; on PostgreSQL `tx` is one pooled client
   * and the body may run again after a serialization failure or a deadlock.
   */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  /**
   * Inside a transaction: holds the named lock until the transaction ends, so transactions
   * taking the same name run one after another (a PostgreSQL advisory lock; on SQLite a
   * transaction already holds the database's write lock).
   */
  lock(name: string): Promise<void>;
  /** Runs `fn` once the current transaction commits (at once outside a transaction); never after a rollback. */
  afterCommit(fn: () => void): void;
}

/** The executor a process opens: one SQLite connection or one PostgreSQL pool. */
export interface SqlDatabase extends Sql {
  /** where the data lives, for logs (a file name, or the server and database without password) */
  readonly location: string;
  /**
   * Periodic maintenance that one process runs for everyone (a SQLite WAL checkpoint;
   * nothing on PostgreSQL, whose server does its own).
   */
  maintenance(): Promise<void>;
  /** Starts the change feed the caches of this process follow (after migrations: it reads the counters). */
  changeFeed(): Promise<ChangeFeed>;
  close(): Promise<void>;
}

/** A constraint violation (duplicate key, foreign key) as either database reports it. */
export function isConstraintError(err: unknown): boolean {
  const e = err as { code?: unknown } | null;
  if (!e || typeof e.code !== 'string') return false;
  return e.code.startsWith('SQLITE_CONSTRAINT') || e.code === '23505' || e.code === '23503' || e.code === '23514';
}

/** A row still referenced by another (a foreign key without a cascade). */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || code === '23503';
}

/**
 * A value the database cannot hold as text: PostgreSQL refuses the NUL character (U+0000) in a
 * text value (22021) and its escape in a JSON one (22P05). It came with the request, so it is
 * the caller's error, not the server's.
 */
export function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22021' || code === '22P05';
}

/** A duplicate primary key or unique value. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505';
}
