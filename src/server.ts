import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.js';
import { ConfigError } from './config.js';
import type { AppContext } from './context.js';
import { randomToken, sha256 } from './crypto/hash.js';
import { createSecretBox, resolveSecretKey } from './crypto/secret-box.js';
import { SigningKeys } from './crypto/signing.js';
import { PolicyLoadError, PolicyService } from './authz/policy-service.js';
import { createApp } from './http/app.js';
import { fastPaths } from './http/fast-path.js';
import { tokenResponse } from './oauth/token.js';
import { decisionAnswer } from './agents/authorize.js';
import { OAUTH_CORS_HEADERS } from './oauth/router.js';
import { createLogger, type Logger } from './logger.js';
import { formatDiagnostic } from './policy/index.js';
import { createSignalSink } from './ssf/sink.js';
import { deliveryOptionsFromEnv, startDeliveryWorker } from './ssf/delivery-worker.js';
import { migrate, openDatabase } from './store/db.js';
import { startHousekeeping } from './store/housekeeping.js';
import { openStore, type Store } from './store/index.js';
import { endpointUrls } from './urls.js';
import { applyProjectFile } from './admin/project-file.js';
import { ensureConsoleApplication } from './console/application.js';

export type ProcessRole = 'primary' | 'worker';

const ADMIN_TOKEN_KEY = 'admin_token_hash';

/**
 * Opens the database and builds the context. The primary (or a single process) also does
 * the once-per-deployment work: migrations, first keys, the admin token, the policy files
 * and the project file. Workers only read what the primary prepared.
 */
export async function openContext(config: Config, logger: Logger, role: ProcessRole = 'primary'): Promise<AppContext> {
  const db = await openDatabase({ file: config.dbFile, url: config.databaseUrl, worker: role === 'worker', warn: (msg) => logger.warn(msg) });
  try {
    const applied = role === 'primary' ? await migrate(db) : [];
    if (applied.length) logger.info({ migrations: applied }, 'database migrated');
  } catch (err) {
    await db.close();
    throw err;
  }
  let store: Store;
  try {
    store = await openStore(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  try {
    return await prepareContext(config, logger, role, store);
  } catch (err) {
    await store.close();
    throw err;
  }
}

async function prepareContext(config: Config, logger: Logger, role: ProcessRole, store: Store): Promise<AppContext> {
  const box = createSecretBox(
    resolveSecretKey(config.secret, `${config.dbFile}.key`, (msg) => role === 'primary' && logger.warn(msg)),
  );
  const keys = new SigningKeys(store.keys, store.settings, box);
  const policy = new PolicyService(store, config.policyDir);

  let adminTokenHash: string;
  if (config.adminToken) {
    adminTokenHash = sha256(config.adminToken);
  } else if (role === 'primary') {
    const token = randomToken();
    if (await store.settings.setIfAbsent(ADMIN_TOKEN_KEY, sha256(token))) {
      // Printed once, on the first start; only its hash is kept.
      logger.warn({ admin_token: token }, 'GATEHOUSE_ADMIN_TOKEN is not set: generated a management API token (shown once)');
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
    signals: createSignalSink({ issuer: config.issuer }),
    policy,
    adminTokenHash,
  };

  if (role === 'primary') {
    await keys.ensureKeys();
    await ensureConsoleApplication(ctx);
    try {
      await policy.reloadFromDisk();
    } catch (err) {
      if (err instanceof PolicyLoadError) {
        throw new ConfigError(
          'GATEHOUSE_POLICY_DIR',
          `the policy files have errors:\n${err.diagnostics.map(formatDiagnostic).join('\n')}`,
        );
      }
      throw err;
    }
    if (config.projectFile) await applyProjectFile(ctx, config.projectFile);
  }
  return ctx;
}

export interface RunningServer {
  url: string;
  port: number;
  ctx: AppContext;
  close(): Promise<void>;
}

/**
 * Binds the port first (so `PORT=0` and a defaulted issuer agree on the real port), answering
 * 503 until the app is attached. A taken port is a configuration error naming PORT.
 */
export function bind(port: number): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
    res.end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'starting' }));
  });
  return new Promise((resolve, reject) => {
    server.once('listening', () => resolve(server));
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') reject(new ConfigError('PORT', `port ${port} is already in use`));
      else if (err.code === 'EACCES') reject(new ConfigError('PORT', `no permission to listen on port ${port}`));
      else reject(err);
    });
    server.listen(port);
  });
}

/** Replaces the start-up handler with the app. */
export function attach(server: Server, ctx: AppContext): void {
  const app = createApp(ctx);
  // The two hottest endpoints skip Express when the request is plain (see fast-path.ts).
  const fast = fastPaths(ctx, [
    { path: '/oauth/token', body: 'form', headers: OAUTH_CORS_HEADERS, handle: (body, req) => tokenResponse(ctx, req, body) },
    { path: '/apis/regional/v1/agents/authorize', body: 'json', handle: (body, req) => decisionAnswer(ctx, body, req.log) },
  ]);
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    if (!fast(req, res)) app(req, res);
  });
}

/** The configuration with the issuer following the bound port when it was not set. */
export function withBoundPort(config: Config, port: number): Config {
  if (!config.issuerDefaulted || config.port === port) return config;
  const issuer = `http://localhost:${port}`;
  return { ...config, port, issuer, issuerHost: 'localhost' };
}

/** Background work of one instance (its primary, or its single process); instances share it through leases. */
export function startBackground(ctx: AppContext, opts: { walCheckpoints?: boolean } = {}): () => Promise<void> {
  const stops: (() => Promise<void> | void)[] = [];
  stops.push(startDeliveryWorker(ctx, deliveryOptionsFromEnv()));
  stops.push(
    startHousekeeping(ctx.store, {
      everyMs: 10 * 60 * 1000,
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

/** A single-process server: what tests start, and what `gatehouse serve` runs with one worker. */
export async function startServer(config: Config, opts: { logger?: Logger } = {}): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const server = await bind(config.port);
  const port = (server.address() as AddressInfo).port;
  let ctx: AppContext;
  try {
    ctx = await openContext(withBoundPort(config, port), logger, 'primary');
  } catch (err) {
    server.close();
    throw err;
  }
  let stopBackground: () => Promise<void>;
  try {
    stopBackground = startBackground(ctx);
  } catch (err) {
    server.close();
    await ctx.store.close();
    throw err;
  }
  attach(server, ctx);
  logger.info({ port, issuer: ctx.urls.issuer }, 'listening');
  return {
    url: `http://localhost:${port}`,
    port,
    ctx,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await stopBackground();
      await ctx.store.close();
    },
  };
}
