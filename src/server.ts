import cluster, { type Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import type { Config } from './config.js';
import { ConfigError, loadConfig } from './config.js';
import { nowSeconds, systemClock, type Clock } from './clock.js';
import type { AppContext } from './context.js';
import { randomToken, sha256 } from './crypto/hash.js';
import { createSecretBox, resolveSecretKey, type SecretBox } from './crypto/secret-box.js';
import { SigningKeys } from './crypto/signing.js';
import { createMetrics, serveClusterMetrics, workerMetrics } from './metrics.js';
import { auditBacklog } from './authz/audit.js';
import { relayVerifiedTokens, shareVerifiedTokens } from './authz/verified-tokens.js';
import { PolicyLoadError, PolicyService } from './policy-service.js';
import { createApp } from './http/app.js';
import { fastPaths } from './http/fast-path.js';
import { startTracing, tracingConfigured, tracingEnabled } from './telemetry.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { DRAIN_GRACE_MS, drainServer, trackConnections } from './http/drain.js';
import { markDraining } from './http/health.js';
import { EDGE_ROUTES } from './http/routes.js';
import { createLogger, type Logger } from './logger.js';
import { formatDiagnostic } from './policy/index.js';
import { createSignalSink } from './ssf/sink.js';
import { deliveryOptionsFromEnv, startDeliveryWorker } from './ssf/delivery-worker.js';
import { migrate, openDatabase } from './store/db.js';
import { startHousekeeping, type AuditRetention } from './store/housekeeping.js';
import { CHECKPOINT_TYP } from './store/audit.js';
import { createStore, type Store } from './store/index.js';
import { isStoreUnavailable } from './store/unavailable.js';
import { flushRefusalSummary } from './agents/refusal-summary.js';
import { endpointUrls } from './urls.js';
import { applyProjectFile } from './project-file.js';
import { relationshipGraph } from './authz/relationships.js';
import { ensureApiApplication } from './authzen/api-application.js';
import { ensureConsoleApplication } from './console/application.js';

export type ProcessRole = 'primary' | 'worker';

const ADMIN_TOKEN_KEY = 'admin_token_hash';

export interface OpenOptions {
  clock?: Clock;
  /** where a generated admin token is shown, once (default: standard error, never the JSON log) */
  terminal?: (line: string) => void;
}

/**
 * Opens the database and builds the context, refusing with a ConfigError (one line naming the
 * variable) what would otherwise fail later: a database path that is not a database or not
 * writable, a second instance on the same database, a secret that does not open the stored
 * keys. The primary (or a single process) also does the once-per-deployment work: migrations,
 * first keys, the admin token, the policy files and the project file. Workers only read what
 * the primary prepared.
 */
export async function openContext(config: Config, logger: Logger, role: ProcessRole = 'primary', opts: OpenOptions = {}): Promise<AppContext> {
  const clock = opts.clock ?? systemClock;
  const { store, lease } = await openStore(config, logger, role, clock);
  try {
    const box = await openSecretBox(config, store, role, logger);
    const keys = new SigningKeys(store.keys, store.settings, box, () => nowSeconds(clock));
    const policy = new PolicyService(store, config.policyDir, logger);
    const metrics = createMetrics();

    let adminTokenHash: string;
    if (config.adminToken) {
      adminTokenHash = sha256(config.adminToken);
    } else if (role === 'primary') {
      const token = randomToken();
      if (await store.settings.setIfAbsent(ADMIN_TOKEN_KEY, sha256(token))) {
        // Shown once, on the terminal; only its hash is kept, and the JSON log never sees it.
        (opts.terminal ?? ((line) => void process.stderr.write(`${line}\n`)))(
          `gatehouse: generated a management API token (shown once; set GATEHOUSE_ADMIN_TOKEN to choose your own): ${token}`,
        );
        logger.warn('GATEHOUSE_ADMIN_TOKEN is not set: generated a management API token and printed it once on the terminal');
      }
      adminTokenHash = (await store.settings.get(ADMIN_TOKEN_KEY))!;
    } else {
      adminTokenHash = (await store.settings.get(ADMIN_TOKEN_KEY)) ?? sha256(randomToken());
    }

    const ctx: AppContext = {
      config,
      logger,
      store,
      keys,
      box,
      urls: endpointUrls(config.issuer),
      signals: createSignalSink({ issuer: config.issuer, clock }),
      policy,
      clock,
      metrics,
      adminTokenHash,
    };
    metrics.attach({ auditBacklog: () => auditBacklog(ctx), ssfBacklog: () => ctx.store.ssf.backlog(), policyState: () => ctx.policy.state() });
    if (lease) leases.set(ctx, lease);

    if (role === 'primary') {
      await keys.ensureKeys();
      await ensureConsoleApplication(ctx);
      try {
        await policy.reloadFromDisk();
      } catch (err) {
        if (err instanceof PolicyLoadError) {
          throw new ConfigError('GATEHOUSE_POLICY_DIR', `the policy files have errors:\n${err.diagnostics.map(formatDiagnostic).join('\n')}`);
        }
        throw err;
      }
      await ensureApiApplication(ctx);
      if (config.projectFile) await applyProjectFile(ctx, config.projectFile);
    }
    // The relationship graph is read once at start; a failed read is tried again by the first decision.
    await relationshipGraph(ctx).current().catch((err: unknown) => logger.warn({ err }, 'the relationships could not be loaded; the next decision tries again'));
    return ctx;
  } catch (err) {
    await lease?.release();
    await store.close();
    throw err;
  }
}

// ---- The database: a real, writable SQLite file used by one instance at a time, or PostgreSQL shared by many. ----

async function openStore(config: Config, logger: Logger, role: ProcessRole, clock: Clock): Promise<{ store: Store; lease: InstanceLease | null }> {
  const file = config.dbFile;
  let db: Awaited<ReturnType<typeof openDatabase>>;
  try {
    db = await openDatabase({ file, url: config.databaseUrl, worker: role === 'worker', timeoutMs: config.databaseTimeoutMs, warn: (msg) => logger.warn(msg) });
  } catch (err) {
    throw databaseError(config, err);
  }
  let store: Store | undefined;
  try {
    const applied = role === 'primary' ? await migrate(db) : [];
    if (applied.length) logger.info({ migrations: applied }, 'database migrated');
    store = createStore(db, await db.changeFeed(), clock);
    // One instance per SQLite file; PostgreSQL is shared by many instances by design.
    const lease = role === 'primary' && db.dialect === 'sqlite' ? await InstanceLease.acquire(store, file) : null;
    return { store, lease };
  } catch (err) {
    await (store ? store.close() : db.close()).catch(() => undefined);
    throw err instanceof ConfigError ? err : databaseError(config, err);
  }
}

function databaseError(config: Config, err: unknown): ConfigError {
  if (err instanceof ConfigError) return err;
  const e = err as { code?: string; message?: string };
  if (config.databaseUrl) return new ConfigError('GATEHOUSE_DATABASE_URL', `the database cannot be used (${e.message ?? String(err)})`, { cause: err });
  const file = config.dbFile;
  const code = e.code ?? '';
  const why =
    code === 'SQLITE_NOTADB'
      ? 'is not a SQLite database'
      : code === 'SQLITE_READONLY' || code.startsWith('SQLITE_READONLY') || code === 'EACCES' || code === 'EROFS' || code === 'SQLITE_PERM'
        ? 'is not writable'
        : code === 'SQLITE_CANTOPEN' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST'
          ? 'cannot be opened for reading and writing'
          : 'cannot be used';
  return new ConfigError('GATEHOUSE_DB', `${file} ${why} (${e.message ?? String(err)})`, { cause: err });
}

const LEASE_KEY = 'instance_lease';
const LEASE_TTL_SECONDS = 30;
const LEASE_RENEW_MS = 10_000;

interface LeaseRecord { id: string; pid: number; host: string; expires_at: number }

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One instance per SQLite file: the primary (or the single process) holds a lease row, renewed
 * every 10 s and valid for 30 s, so background work (Shared Signals delivery, WAL checkpoints)
 * never runs twice. A lease left by a process that died on this host is taken over at once;
 * one from another host, once it expires.
 */
class InstanceLease {
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly store: Store,
    private readonly record: LeaseRecord,
  ) {}

  static async acquire(store: Store, file: string): Promise<InstanceLease> {
    const now = Math.floor(Date.now() / 1000);
    const mine: LeaseRecord = { id: randomUUID(), pid: process.pid, host: hostname(), expires_at: now + LEASE_TTL_SECONDS };
    await store.transaction(async (tx) => {
      const raw = await tx.settings.get(LEASE_KEY);
      const held = raw ? (JSON.parse(raw) as LeaseRecord) : null;
      const live = held && held.expires_at > now && (held.host !== mine.host || processAlive(held.pid));
      if (live) {
        throw new ConfigError(
          'GATEHOUSE_DB',
          `${file} is in use by another Gatehouse instance (pid ${held.pid} on ${held.host}); stop it first, or give this one its own database`,
        );
      }
      await tx.settings.set(LEASE_KEY, JSON.stringify(mine));
    });
    const lease = new InstanceLease(store, mine);
    lease.timer = setInterval(() => void lease.renew(), LEASE_RENEW_MS);
    lease.timer.unref();
    return lease;
  }

  private async renew(): Promise<void> {
    try {
      this.record.expires_at = Math.floor(Date.now() / 1000) + LEASE_TTL_SECONDS;
      await this.store.settings.set(LEASE_KEY, JSON.stringify(this.record));
    } catch {
      /* the database is busy or gone: the next renewal tries again, /healthz reports the database */
    }
  }

  async release(): Promise<void> {
    clearInterval(this.timer);
    try {
      await this.store.transaction(async (tx) => {
        const raw = await tx.settings.get(LEASE_KEY);
        if (raw && (JSON.parse(raw) as LeaseRecord).id === this.record.id) await tx.settings.set(LEASE_KEY, JSON.stringify({ ...this.record, expires_at: 0 }));
      });
    } catch {
      /* closing anyway */
    }
  }
}

const leases = new WeakMap<AppContext, InstanceLease>();

/** Closes the database, giving up this instance's lease first. */
export async function closeContext(ctx: AppContext): Promise<void> {
  await flushRefusalSummary(ctx);
  const lease = leases.get(ctx);
  leases.delete(ctx);
  await lease?.release();
  await ctx.store.close();
}

/**
 * The secret box, checked against the stored signing keys: a GATEHOUSE_SECRET (or key file)
 * that does not open them would start a healthy-looking server whose every token fails.
 */
async function openSecretBox(config: Config, store: Store, role: ProcessRole, logger: Logger): Promise<SecretBox> {
  const keyFile = `${config.dbFile}.key`;
  const box = createSecretBox(resolveSecretKey(config.secret, keyFile, (msg) => role === 'primary' && logger.warn(msg)));
  const sample = (await store.keys.active())[0];
  if (sample) {
    try {
      box.open(sample.private_enc);
    } catch {
      throw new ConfigError(
        'GATEHOUSE_SECRET',
        config.secret
          ? `does not open the signing keys stored in ${store.database.location}; set the secret this database was created with`
          : `is not set, and the key file ${keyFile} does not open the signing keys stored in ${config.dbFile}; set the secret this database was created with`,
      );
    }
  }
  return box;
}

// ---- The HTTP server. ----

export interface RunningServer {
  url: string;
  port: number;
  ctx: AppContext;
  /**
   * Stops. With `drainMs`, gracefully: no new connections, requests in flight answered (for
   * at most that long), then the background work and the database; without, at once.
   */
  close(opts?: { drainMs?: number }): Promise<void>;
}

/**
 * Binds the port first (so `PORT=0` and a defaulted issuer agree on the real port), answering
 * 503 until the app is attached. A taken port is a configuration error naming PORT.
 */
export function bind(port: number): Promise<Server> {
  const server = createServer(starting);
  trackConnections(server);
  return new Promise((resolve, reject) => {
    server.once('listening', () => resolve(server));
    server.once('error', (err: NodeJS.ErrnoException) => reject(listenError(port, err)));
    server.listen(port);
  });
}

function starting(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
  res.end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'starting' }));
}

function listenError(port: number, err: NodeJS.ErrnoException): Error {
  if (err.code === 'EADDRINUSE') return new ConfigError('PORT', `port ${port} is already in use`);
  if (err.code === 'EACCES') return new ConfigError('PORT', `no permission to listen on port ${port}`);
  return err;
}

/** Replaces the start-up handler with the app; the route table's requests skip Express when plain. */
export function attach(server: Server, ctx: AppContext): void {
  const app = createApp(ctx);
  const fast = fastPaths(ctx, EDGE_ROUTES);
  server.removeListener('request', starting);
  server.on('request', (req, res) => {
    // With tracing on every request goes through Express, where its span is made.
    if (tracingEnabled() || !fast(req, res)) app(req, res);
  });
}

/** The configuration with the issuer following the bound port when it was not set. */
export function withBoundPort(config: Config, port: number): Config {
  if (!config.issuerDefaulted || config.port === port) return config;
  const issuer = `http://localhost:${port}`;
  return { ...config, port, issuer, issuerHost: 'localhost' };
}

/** Audit retention of `days`, its checkpoints signed with the server's active EdDSA key. */
export function auditRetention(ctx: AppContext, days: number): AuditRetention {
  return {
    days,
    sign: (claims) => ctx.keys.sign('EdDSA', { ...claims }, CHECKPOINT_TYP),
    activeKid: () => ctx.keys.activeKid('EdDSA'),
  };
}

/** Background work of one instance (its primary, or its single process); instances share it through leases. */
export function startBackground(ctx: AppContext, opts: { walCheckpoints?: boolean } = {}): () => Promise<void> {
  const stops: (() => Promise<void> | void)[] = [];
  stops.push(startDeliveryWorker(ctx, deliveryOptionsFromEnv()));
  stops.push(
    startHousekeeping(ctx.store, {
      everyMs: 10 * 60 * 1000,
      ...(ctx.config.auditRetentionDays !== undefined ? { auditRetention: auditRetention(ctx, ctx.config.auditRetentionDays) } : {}),
      onError: (err) => ctx.logger.warn({ err }, 'housekeeping failed'),
      onDone: (removed) => ctx.logger.debug({ removed }, 'housekeeping done'),
    }),
  );
  if (opts.walCheckpoints) {
    const timer = setInterval(() => {
      ctx.store.database.maintenance().catch((err: unknown) => ctx.logger.warn({ err }, 'database maintenance failed'));
    }, 1000);
    timer.unref();
    stops.push(() => clearInterval(timer));
  }
  return async () => {
    for (const stop of stops) await stop();
  };
}

export interface StartOptions extends OpenOptions {
  logger?: Logger;
  /** `worker`: a second process over a database a primary prepared (no migrations, lease or background work) */
  role?: ProcessRole;
  /** traces go to this exporter (tests); otherwise to OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else nowhere */
  spanExporter?: SpanExporter;
}

/** Whether the port is bound before the context opens: when the issuer follows a port the system chooses. */
const bindsFirst = (config: Config): boolean => config.port === 0 && config.issuerDefaulted;

/**
 * Binds the port and opens the context, in the order that keeps a starting process out of
 * rotation: the context first, so that no connection is accepted before the app can answer it
 * (a proxy's connection is refused and goes to another instance); only when the issuer follows
 * a port the system chooses, the port first, answering 503 until the app is attached.
 */
async function bindAndOpen(config: Config, open: (config: Config) => Promise<AppContext>): Promise<{ server: Server; ctx: AppContext }> {
  if (bindsFirst(config)) {
    const server = await bind(config.port);
    try {
      return { server, ctx: await open(withBoundPort(config, (server.address() as AddressInfo).port)) };
    } catch (err) {
      server.close();
      throw err;
    }
  }
  const ctx = await open(config);
  try {
    return { server: await bind(config.port), ctx };
  } catch (err) {
    await closeContext(ctx);
    throw err;
  }
}

/** A single-process server: what tests start, and what `gatehouse serve` runs with one worker. */
export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const role = opts.role ?? 'primary';
  if (!bindsFirst(config)) await checkPortFree(config.port);
  const stopTracing = opts.spanExporter || tracingConfigured() ? startTracing(opts.spanExporter ? { exporter: opts.spanExporter } : {}) : async () => undefined;
  const { server, ctx } = await bindAndOpen(config, (c) => openContext(c, logger, role, opts));
  const port = (server.address() as AddressInfo).port;
  let stopBackground: () => Promise<void> = async () => {};
  if (role === 'primary') {
    try {
      stopBackground = startBackground(ctx);
    } catch (err) {
      server.close();
      await closeContext(ctx);
      throw err;
    }
  }
  attach(server, ctx);
  logger.info({ port, issuer: ctx.urls.issuer }, 'listening');
  return {
    url: `http://localhost:${port}`,
    port,
    ctx,
    async close(opts = {}) {
      if (opts.drainMs) {
        markDraining(ctx);
        await drainServer(server, opts.drainMs, ctx.config.drainNoticeMs);
      } else {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      }
      await stopBackground();
      await closeContext(ctx);
      await stopTracing();
    },
  };
}

// ---- `gatehouse serve`: one process, or a primary keeping one worker per core. ----

const FATAL = 'gatehouse:fatal';
/** A worker that exits within this long of its start (or before listening) died at start. */
const QUICK_DEATH_MS = 10_000;
/** After this many quick deaths in a row the primary gives up. */
const MAX_QUICK_DEATHS = 5;
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 10_000;

/** Stops start-up with one line on standard error (the variable named when it is a ConfigError). */
function fatal(err: unknown): never {
  process.stderr.write(`gatehouse: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

/**
 * Stops once on SIGTERM or SIGINT, and stays deaf to them while stopping. A signal often reaches
 * every process of the group at once (Ctrl-C in a terminal, systemd stopping a unit, `kill` of
 * the group), and a worker then hears it from there and again from the primary: a second signal
 * left to Node's default would kill the worker in the middle of its drain.
 */
function onStopSignal(stop: () => unknown): void {
  let stopping = false;
  const once = () => {
    if (stopping) return;
    stopping = true;
    void stop();
  };
  process.on('SIGTERM', once);
  process.on('SIGINT', once);
}

/** Runs `gatehouse serve` with the configuration from the environment. Returns once serving. */
export async function serve(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger(config.logLevel);
  // A stray rejected promise is a bug to log, not a reason to drop every request in flight.
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled promise rejection'));

  if (config.workers <= 1) {
    // Heard from before the server says `listening`: a stop asked for right after it drains, it
    // is not left to Node's default. Asked for while starting, nothing is served yet: it ends.
    let running: Awaited<ReturnType<typeof startServer>> | undefined;
    onStopSignal(async () => {
      logger.info('shutting down');
      await running?.close({ drainMs: DRAIN_GRACE_MS });
      process.exit(0);
    });
    running = await startServer(config, { logger });
    return;
  }
  if (cluster.isPrimary) return runPrimary(config, logger);
  return runWorker(config, logger);
}

/** Whether the port can be bound now (the workers bind it through the primary next). */
async function checkPortFree(port: number): Promise<void> {
  if (port === 0) return;
  const server = await bind(port);
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function runPrimary(config: Config, logger: Logger): Promise<void> {
  // The primary prepares the database once, runs the background work, and keeps workers up.
  await checkPortFree(config.port);
  const ctx = await openContext(config, logger, 'primary');
  const stopBackground = startBackground(ctx, { walCheckpoints: true });
  serveClusterMetrics(ctx.metrics.registry);
  relayVerifiedTokens();
  let stopping = false;
  let quickDeaths = 0;
  const startedAt = new Map<Worker, { at: number; listening: boolean }>();

  // Each worker signs on libuv's thread pool; with a worker per core, two threads each keep
  // every core busy without crowding it (measured with bench/token.ts).
  const fork = () => {
    const w = cluster.fork({ UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? '2' });
    startedAt.set(w, { at: performance.now(), listening: false });
    w.on('listening', () => {
      const s = startedAt.get(w);
      if (s) s.listening = true;
    });
    w.on('message', (m: { type?: unknown; message?: unknown }) => {
      // A worker that cannot start for a reason of configuration: no other worker will either.
      if (m?.type === FATAL && typeof m.message === 'string' && !stopping) {
        stopping = true;
        for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM');
        void stopBackground()
          .then(() => closeContext(ctx))
          .finally(() => fatal(m.message));
      }
    });
  };
  for (let i = 0; i < config.workers; i++) fork();

  cluster.on('exit', (worker, code, signal) => {
    const started = startedAt.get(worker);
    startedAt.delete(worker);
    if (stopping) {
      logger.info({ worker: worker.process.pid, code, signal }, 'worker stopped');
      return;
    }
    const quick = !started || !started.listening || performance.now() - started.at < QUICK_DEATH_MS;
    quickDeaths = quick ? quickDeaths + 1 : 0;
    if (quickDeaths >= MAX_QUICK_DEATHS) {
      stopping = true;
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM');
      const line = `workers exit right after they start (${quickDeaths} in a row, the last with ${signal ? `signal ${signal}` : `code ${code}`}); giving up`;
      void stopBackground()
        .then(() => closeContext(ctx))
        .finally(() => fatal(line));
      return;
    }
    const delay = quick ? Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (quickDeaths - 1)) : 0;
    logger.error({ worker: worker.process.pid, code, signal, restart_in_ms: delay }, 'worker exited; starting another');
    setTimeout(() => !stopping && fork(), delay);
  });

  onStopSignal(async () => {
    stopping = true;
    logger.info('shutting down');
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    await new Promise<void>((resolve) => {
      const check = () => (Object.keys(cluster.workers ?? {}).length === 0 ? resolve() : setTimeout(check, 20));
      check();
    });
    await stopBackground();
    await closeContext(ctx);
    process.exit(0);
  });
}

/** A worker started while the database is away (one replacing a worker that died) waits for it. */
const WORKER_OPEN_RETRY_MS = 1000;

async function runWorker(config: Config, logger: Logger): Promise<void> {
  let server: Server;
  let ctx: AppContext;
  try {
    for (;;) {
      try {
        ({ server, ctx } = await bindAndOpen(config, (c) => openContext(c, logger, 'worker')));
        break;
      } catch (err) {
        // The primary prepared this database already: its absence now is an outage, not a configuration error.
        if (!isStoreUnavailable(err)) throw err;
        logger.warn({ err }, 'the database is unavailable; trying again');
        await new Promise((resolve) => setTimeout(resolve, WORKER_OPEN_RETRY_MS));
      }
    }
  } catch (err) {
    if (err instanceof ConfigError && process.send) {
      // The primary prints the one line and stops; this worker just ends.
      process.send({ type: FATAL, message: err.message }, () => process.exit(1));
      return;
    }
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  ctx.metrics.text = workerMetrics(ctx.metrics.registry).text;
  shareVerifiedTokens(ctx);
  // Each worker exports its own spans (OTLP batches) when tracing is configured.
  if (tracingConfigured()) startTracing();
  attach(server, ctx);
  // Draining: requests in flight are answered (their audit records committed with them), then the
  // database is closed. Heard from before `listening`, so a stop asked for right after it drains.
  onStopSignal(() => {
    markDraining(ctx);
    void drainServer(server, DRAIN_GRACE_MS, ctx.config.drainNoticeMs)
      .then(() => closeContext(ctx))
      .catch((err: unknown) => logger.error({ err }, 'stopping failed'))
      .finally(() => process.exit(0));
  });
  logger.info({ port, issuer: ctx.urls.issuer }, 'listening');
}
