import pg from 'pg';
import { dbSpan } from '../telemetry.js';
import { ConfigError } from '../config.js';
import type { ChangeFeed } from './changes.js';
import type { Params, RunResult, Sql, SqlDatabase, Statement } from './sql.js';

/** Attempts of a transaction body that lost a deadlock or a serialization check. */
const MAX_ATTEMPTS = 5;
const RETRYABLE = new Set(['40001', '40P01']);
/** The change feed's safety net: counters are read this often even when no notification comes. */
const POLL_MS = 500;
const CHANNEL = 'gatehouse_changes';

interface Compiled {
  text: string;
  /** the statement's name on each connection (prepared once per connection) */
  name: string;
  /** for `@name` parameters: the name of each `$n`, in order; null for `?` parameters */
  names: string[] | null;
}

/**
 * `?` and `@name` placeholders to `$1, $2, ...`, outside string literals, quoted identifiers
 * and comments. A name used twice is one parameter. `placeholder` writes each one instead
 * (given its number, and its name when named).
 */
export function toPositional(sql: string, placeholder: (n: number, name: string | null) => string = (n) => `$${n}`): { text: string; names: string[] | null } {
  let out = '';
  let n = 0;
  const names: string[] = [];
  let named = false;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const end = closing(sql, i, c);
      out += sql.slice(i, end + 1);
      i = end;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end < 0 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '?') {
      out += placeholder(++n, null);
    } else if (c === '@' && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const m = /^[A-Za-z_]\w*/.exec(sql.slice(i + 1))!;
      named = true;
      let at = names.indexOf(m[0]);
      if (at < 0) at = names.push(m[0]) - 1;
      out += placeholder(at + 1, m[0]);
      i += m[0].length;
    } else {
      out += c;
    }
  }
  if (named && n > 0) throw new Error('a statement mixes ? and @name parameters');
  return { text: out, names: named ? names : null };
}

function closing(sql: string, start: number, quote: string): number {
  for (let i = start + 1; i < sql.length; i++) {
    if (sql[i] === quote) {
      if (sql[i + 1] === quote) i++;
      else return i;
    }
  }
  return sql.length - 1;
}

/**
 * A parameter as a quoted literal: the text pg would send for it, escaped, so that the server
 * types it from where it stands, as it types a parameter.
 */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Buffer.isBuffer(value)) return `'\\x${value.toString('hex')}'`;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`a pipelined parameter is not a finite number: ${value}`);
    return `'${String(value)}'`;
  }
  if (typeof value === 'bigint' || typeof value === 'boolean') return `'${String(value)}'`;
  if (typeof value === 'string') return pg.Client.prototype.escapeLiteral(value);
  throw new Error(`a pipelined parameter must be a number, string, boolean, buffer or null (got ${typeof value})`);
}

/** A statement with its parameters inlined as literals, for the simple-protocol query of a pipeline. */
export function inlined(statement: Statement): string {
  const { sql, params } = statement;
  const valueOf = (n: number, name: string | null): unknown => {
    if (name === null) return (params as readonly unknown[] | undefined)?.[n - 1];
    const obj = (params ?? {}) as Record<string, unknown>;
    if (!(name in obj)) throw new Error(`missing named parameter @${name}`);
    return obj[name];
  };
  return toPositional(sql, (n, name) => literal(valueOf(n, name))).text;
}

/** The rows of each statement of a simple-protocol query (pg answers one result, or an array for several). */
function resultsOf(r: pg.QueryResult | pg.QueryResult[]): Record<string, unknown>[][] {
  return (Array.isArray(r) ? r : [r]).map((x) => x.rows as Record<string, unknown>[]);
}

/** BIGINT and NUMERIC as JavaScript numbers (times, counters and amounts fit); everything else as pg reads it. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v));
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

type Queryable = pg.Pool | pg.PoolClient;

class Statements {
  private compiled = new Map<string, Compiled>();
  private counter = 0;

  get(sql: string): Compiled {
    let c = this.compiled.get(sql);
    if (!c) {
      const { text, names } = toPositional(sql);
      c = { text, names, name: `gh${++this.counter}` };
      // Statements are constants in the store modules; a bound guards against a generated one.
      if (this.compiled.size > 2000) this.compiled.clear();
      this.compiled.set(sql, c);
    }
    return c;
  }

  query<T>(on: Queryable, sql: string, params: Params | undefined): Promise<pg.QueryResult<T & pg.QueryResultRow>> {
    return dbSpan('postgresql', sql, () => this.queryUntraced<T>(on, sql, params));
  }

  private async queryUntraced<T>(on: Queryable, sql: string, params: Params | undefined): Promise<pg.QueryResult<T & pg.QueryResultRow>> {
    const c = this.get(sql);
    let values: unknown[] = [];
    if (params !== undefined) {
      if (c.names) {
        const obj = params as Record<string, unknown>;
        values = c.names.map((n) => {
          if (!(n in obj)) throw new Error(`missing named parameter @${n}`);
          return obj[n];
        });
      } else {
        values = params as unknown[];
      }
    }
    return on.query<T & pg.QueryResultRow>({ name: c.name, text: c.text, values });
  }
}

class PostgresExecutor implements SqlDatabase {
  readonly dialect = 'postgres' as const;
  readonly inTransaction = false;
  readonly statements = new Statements();

  constructor(
    readonly pool: pg.Pool,
    readonly location: string,
    /** the schema this deployment lives in: lock names and notifications are scoped to it */
    readonly schema: string,
    private readonly warn: (msg: string) => void,
  ) {}

  async all<T>(sql: string, params?: Params): Promise<T[]> {
    return (await this.statements.query<T>(this.pool, sql, params)).rows;
  }
  async get<T>(sql: string, params?: Params): Promise<T | undefined> {
    return (await this.statements.query<T>(this.pool, sql, params)).rows[0];
  }
  async run(sql: string, params?: Params): Promise<RunResult> {
    return { changes: (await this.statements.query(this.pool, sql, params)).rowCount ?? 0 };
  }
  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }
  /** One simple-protocol query (outside a transaction block, the server runs its statements as one). */
  async pipeline(statements: readonly Statement[]): Promise<Record<string, unknown>[][]> {
    if (!statements.length) return [];
    return resultsOf(await this.pool.query(statements.map(inlined).join(';\n')));
  }

  /**
   * One pooled client with BEGIN ... COMMIT (READ COMMITTED). The BEGIN is not a round trip of
   * its own when the body's first statement is a pipeline: it goes with it (and so do the
   * locks the body asks for first). A body that lost a deadlock or a serialization check runs
   * again, up to five times, with a short random pause.
   */
  async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      const tx = new PostgresTransaction(client, this);
      let broken: Error | undefined;
      // A checked-out client whose server goes away emits 'error' (between statements too); unheard,
      // that would end the process. Heard, the statement fails, and the client is dropped on release.
      const lost = (err: Error) => {
        broken = err;
      };
      client.on('error', lost);
      try {
        const result = await fn(tx);
        if (tx.begun) await client.query('COMMIT');
        const hooks = tx.finish();
        for (const hook of hooks) hook();
        return result;
      } catch (err) {
        tx.finish();
        try {
          if (tx.begun) await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError as Error;
        }
        const code = (err as { code?: string }).code;
        if (code && RETRYABLE.has(code) && attempt < MAX_ATTEMPTS) {
          await new Promise((r) => setTimeout(r, Math.random() * 20 * attempt));
          continue;
        }
        throw err;
      } finally {
        client.removeListener('error', lost);
        client.release(broken);
      }
    }
  }

  async lock(): Promise<void> {
    throw new Error('lock() needs a transaction');
  }
  afterCommit(fn: () => void): void {
    fn();
  }
  async maintenance(): Promise<void> {
    // The server checkpoints and vacuums on its own.
  }
  changeFeed(): Promise<ChangeFeed> {
    return postgresFeed(this);
  }
  async close(): Promise<void> {
    await this.pool.end();
  }

  lockKey(name: string): string {
    return `${this.schema}:${name}`;
  }
  warning(msg: string): void {
    this.warn(msg);
  }
}

class PostgresTransaction implements Sql {
  readonly dialect = 'postgres' as const;
  readonly inTransaction = true;
  private hooks: (() => void)[] | null = [];
  /** BEGIN and locks asked for, not yet sent: they go with the next round trip */
  private owed: string[] = ['BEGIN'];
  /** the BEGIN was sent (a body that sent nothing has nothing to commit or roll back) */
  begun = false;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly root: PostgresExecutor,
  ) {}

  finish(): (() => void)[] {
    const hooks = this.hooks ?? [];
    this.hooks = null;
    return hooks;
  }
  private check(): void {
    if (!this.hooks) throw new Error('this transaction has ended');
  }
  /** What is owed, sent now (one round trip), before a statement that cannot carry it. */
  private async settle(): Promise<void> {
    this.check();
    if (!this.owed.length) return;
    const owed = this.owed.join(';\n');
    this.owed = [];
    this.begun = true;
    await this.client.query(owed);
  }
  async all<T>(sql: string, params?: Params): Promise<T[]> {
    await this.settle();
    return (await this.root.statements.query<T>(this.client, sql, params)).rows;
  }
  async get<T>(sql: string, params?: Params): Promise<T | undefined> {
    await this.settle();
    return (await this.root.statements.query<T>(this.client, sql, params)).rows[0];
  }
  async run(sql: string, params?: Params): Promise<RunResult> {
    await this.settle();
    return { changes: (await this.root.statements.query(this.client, sql, params)).rowCount ?? 0 };
  }
  async exec(sql: string): Promise<void> {
    await this.settle();
    await this.client.query(sql);
  }
  async pipeline(statements: readonly Statement[]): Promise<Record<string, unknown>[][]> {
    this.check();
    const owed = this.owed;
    const texts = [...owed, ...statements.map(inlined)];
    if (!texts.length) return [];
    this.owed = [];
    this.begun = true;
    return resultsOf(await this.client.query(texts.join(';\n'))).slice(owed.length);
  }
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
    this.check();
    return fn(this);
  }
  /** A transaction-level advisory lock, scoped to the schema: released by COMMIT or ROLLBACK. Sent with the next statement. */
  async lock(name: string): Promise<void> {
    this.check();
    this.owed.push(`SELECT pg_advisory_xact_lock(hashtextextended(${literal(this.root.lockKey(name))}, 0))`);
  }
  afterCommit(fn: () => void): void {
    this.check();
    this.hooks!.push(fn);
  }
}

/** The URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

export interface PostgresOptions {
  warn?: (msg: string) => void;
  /** connections per process (default 10) */
  poolSize?: number;
  /**
   * The longest wait for a connection (a new one, or a pooled one free) and the longest
   * statement, in ms (default 5000): past it the query fails, and the caller answers 503,
   * rather than waiting on a server that is away or overloaded.
   */
  timeoutMs?: number;
}

/** Opens a pool on `url` and checks that the server answers; a failure names GATEHOUSE_DATABASE_URL. */
export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<PostgresExecutor> {
  const warn = opts.warn ?? ((msg: string) => process.emitWarning(msg));
  const location = redactUrl(url);
  const timeoutMs = opts.timeoutMs ?? 5000;
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize ?? 10,
    types,
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    keepAlive: true,
    idleTimeoutMillis: 30_000,
  });
  // An idle client that loses its server is dropped by the pool; the next query opens another.
  pool.on('error', (err) => warn(`PostgreSQL connection lost (${err.message}); reconnecting on the next query`));
  let schema: string;
  try {
    const row = (await pool.query<{ schema: string | null }>('SELECT current_schema() AS schema')).rows[0];
    if (!row?.schema) throw new Error('no schema: the search_path names none that exists');
    schema = row.schema;
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new ConfigError('GATEHOUSE_DATABASE_URL', `cannot use ${location}: ${(err as Error).message}`, { cause: err });
  }
  return new PostgresExecutor(pool, location, schema, warn);
}

/**
 * The change feed on PostgreSQL: every bump sends a notification (delivered when its
 * transaction commits) that each instance's listening connection receives, and the counters
 * are also read every half second in case a notification was lost (a dropped connection).
 * `version` answers from memory, so the hot paths cost no query.
 */
export async function postgresFeed(db: SqlDatabase): Promise<ChangeFeed> {
  const root = db as PostgresExecutor;
  const versions = new Map<string, number>();
  const observe = (domain: string, version: number) => {
    if (version > (versions.get(domain) ?? 0)) versions.set(domain, version);
  };
  const readAll = async () => {
    for (const r of await root.all<{ domain: string; version: number }>('SELECT domain, version FROM change_counters')) observe(r.domain, Number(r.version));
  };
  await readAll();

  let closed = false;
  let listener: pg.Client | undefined;
  let reconnect: NodeJS.Timeout | undefined;
  const prefix = `${root.schema}|`;
  const scheduleListen = (delay: number) => {
    if (closed || listener || reconnect) return;
    reconnect = setTimeout(() => {
      reconnect = undefined;
      listen().catch(() => scheduleListen(1000));
    }, delay);
    reconnect.unref();
  };
  const listen = async () => {
    const client = new pg.Client({ ...(root.pool.options as pg.ClientConfig), types });
    client.on('notification', (msg) => {
      if (!msg.payload?.startsWith(prefix)) return;
      const [domain, version] = msg.payload.slice(prefix.length).split('|');
      if (domain && version) observe(domain, Number(version));
    });
    client.on('error', (err) => {
      root.warning(`the change-feed connection failed (${err.message}); polling until it is back`);
      void client.end().catch(() => undefined);
      if (listener === client) listener = undefined;
      scheduleListen(1000);
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    if (closed) {
      await client.end();
      return;
    }
    listener = client;
    // what changed while no one listened
    await readAll();
  };
  try {
    await listen();
  } catch (err) {
    root.warning(`cannot listen for changes (${(err as Error).message}); polling only`);
  }
  const poll = setInterval(() => {
    readAll().catch(() => undefined);
    scheduleListen(0);
  }, POLL_MS);
  poll.unref();

  return {
    version: async (domain) => versions.get(domain) ?? 0,
    async bumped(tx, domain, version) {
      await tx.get('SELECT pg_notify(?, ?)', [CHANNEL, `${prefix}${domain}|${version}`]);
      tx.afterCommit(() => observe(domain, version));
    },
    async close() {
      closed = true;
      clearInterval(poll);
      if (reconnect) clearTimeout(reconnect);
      await listener?.end().catch(() => undefined);
    },
  };
}
