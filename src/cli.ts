#!/usr/bin/env node
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { attach, bind, openContext, startBackground, startServer, withBoundPort } from './server.js';

const USAGE = `usage: gatehouse <command>

  serve                          start the server (configuration from the environment, see README)
  policy check [dir]             parse and validate policy files
  policy fmt [dir] [--check]     print or check the canonical layout
  policy test [dir]              run the test cases kept beside the policies
  policy diff <old> <new> [--json]
  policy explain ...             the decision for one request and every check behind it
  audit verify                   check the audit trail's hash chain (GATEHOUSE_DATABASE_URL or GATEHOUSE_DB)
  migrate [--check]              apply (or list) pending schema migrations
`;

function loadDotEnv(): void {
  if (existsSync('.env')) process.loadEnvFile('.env');
}

function fail(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`gatehouse: ${err.message}\n`);
  } else {
    process.stderr.write(`gatehouse: ${err instanceof Error ? err.message : String(err)}\n`);
  }
  process.exit(1);
}

async function serve(): Promise<void> {
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

async function main(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  const io = {
    stdout: (s: string) => void process.stdout.write(s),
    stderr: (s: string) => void process.stderr.write(s),
    cwd: process.cwd(),
  };
  switch (command) {
    case 'serve':
      await serve();
      return undefined;
    case 'policy': {
      const { runPolicyCommand } = await import('./cli/policy.js');
      return runPolicyCommand(rest, io);
    }
    case 'audit': {
      loadDotEnv();
      const { runAuditCommand } = await import('./cli/audit.js');
      return runAuditCommand(rest, io);
    }
    case 'migrate': {
      loadDotEnv();
      const { runMigrateCommand } = await import('./cli/migrate.js');
      return runMigrateCommand(rest, io);
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.stdout(USAGE);
      return command ? 0 : 2;
    default:
      io.stderr(`gatehouse: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err) => fail(err),
);
