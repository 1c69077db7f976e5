// `gatehouse serve`: one process, or a primary that keeps a worker per core up.

import cluster from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { attach, bind, openContext, startBackground, startServer, withBoundPort } from '../server.js';
import { loadDotEnv } from './env.js';

export async function serve(): Promise<void> {
  loadDotEnv();
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  // A stray rejected promise is a bug to log, not a reason to drop every request in flight.
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled promise rejection'));

  if (config.workers <= 1) {
    const running = await startServer(config, { logger });
    const stop = async () => {
      logger.info('shutting down');
      await running.close();
      process.exit(0);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    return;
  }

  if (cluster.isPrimary) {
    // The primary prepares the database once, runs the background work, and keeps workers up.
    const ctx = await openContext(config, logger, 'primary');
    const stopBackground = startBackground(ctx, { walCheckpoints: true });
    let stopping = false;
    // Each worker signs on libuv's thread pool; with a worker per core, two threads each keep
    // every core busy without crowding it (measured with bench/token.ts).
    const fork = () => cluster.fork({ UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? '2' });
    for (let i = 0; i < config.workers; i++) fork();
    cluster.on('exit', (worker, code) => {
      if (stopping) return;
      logger.error({ worker: worker.process.pid, code }, 'worker exited; starting another');
      fork();
    });
    const stop = async () => {
      stopping = true;
      logger.info('shutting down');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
      await new Promise<void>((resolve) => {
        const check = () => (Object.keys(cluster.workers ?? {}).length === 0 ? resolve() : setTimeout(check, 20));
        check();
      });
      await stopBackground();
      await ctx.store.close();
      process.exit(0);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    return;
  }

  const server = await bind(config.port);
  const port = (server.address() as AddressInfo).port;
  const ctx = await openContext(withBoundPort(config, port), logger, 'worker');
  attach(server, ctx);
  logger.info({ port, issuer: ctx.urls.issuer }, 'listening');
  process.once('SIGTERM', () => {
    server.close(() => {
      void ctx.store.close().finally(() => process.exit(0));
    });
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5000).unref();
  });
}
