/**
 * When the database cannot do its part right now: the server is down, restarting or out of
 * connections, the pool has no client free in time, a statement ran out of time, or a write was
 * refused. Such a failure is the caller's "try again shortly" (503 with Retry-After), never a
 * 500, and never a decision given without its record.
 */
export class StoreUnavailableError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** PostgreSQL SQLSTATE classes and codes of a server that is away or overloaded, or of a statement cut short. */
const PG_CLASSES = ['08', '53', '57']; // connection exception, insufficient resources, operator intervention (shutdown, statement timeout)
const PG_CODES = new Set(['55P03', '25P03', '40001', '40P01']); // lock timeout, idle-in-transaction timeout, retries used up
/** Errors of the socket under the PostgreSQL client. */
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);
/** The client library's own words for a lost or unobtainable connection (they carry no code). */
const PG_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
  'Query read timeout',
];
/** SQLite: busy or locked beyond the busy timeout, disk or I/O trouble, a file that cannot be written now. */
const SQLITE_PREFIXES = ['SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_IOERR', 'SQLITE_FULL', 'SQLITE_READONLY', 'SQLITE_CANTOPEN', 'SQLITE_PROTOCOL'];

/** Whether `err` (or what it wraps) says the database is unavailable rather than that the request or the code is wrong. */
export function isStoreUnavailable(err: unknown, depth = 0): boolean {
  if (err instanceof StoreUnavailableError) return true;
  if (!err || typeof err !== 'object' || depth > 3) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (/^[0-9A-Z]{5}$/.test(code) && (PG_CLASSES.includes(code.slice(0, 2)) || PG_CODES.has(code))) return true;
  if (NET_CODES.has(code)) return true;
  if (SQLITE_PREFIXES.some((p) => code.startsWith(p))) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  if (PG_MESSAGES.some((m) => message.includes(m))) return true;
  // An AggregateError (a connection tried on several addresses) or a wrapped cause.
  if (Array.isArray(e.errors) && e.errors.some((x) => isStoreUnavailable(x, depth + 1))) return true;
  return e.cause !== undefined && isStoreUnavailable(e.cause, depth + 1);
}
