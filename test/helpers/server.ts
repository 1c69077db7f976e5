import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import type { Clock } from '../../src/clock.js';
import { dropTestDatabase, testDatabase, testServerUrl } from './database.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface TestServer extends RunningServer {
  dir: string;
  policyDir: string;
  adminToken: string;
  /** Calls the management API with the admin token; parses JSON answers. */
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }>;
  /** Stops the server and removes its files. */
  stop(): Promise<void>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  /** policy files to write into a fresh policy directory (name → text); default none */
  policies?: Record<string, string>;
  /** reuse a directory (to restart on the same database) */
  dir?: string;
  /** the clock decisions, tokens and approvals read (default: the system's) */
  clock?: Clock;
  /** `worker`: a second process over the database of a running server (no migrations, lease or background work) */
  role?: 'primary' | 'worker';
}

/**
 * A server on a free port with a temporary database and policy directory, in this process.
 * The database is a SQLite file in the directory, or (with GATEHOUSE_TEST_DATABASE_URL) a
 * PostgreSQL database of its own, kept as long as the directory.
 */
export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
  const policyDir = join(dir, 'policies');
  mkdirSync(policyDir, { recursive: true });
  for (const [name, text] of Object.entries(opts.policies ?? {})) writeFileSync(join(policyDir, name), text);
  const config = loadConfig({
    PORT: '0',
    GATEHOUSE_DB: join(dir, 'gatehouse.db'),
    ...(testServerUrl() ? { GATEHOUSE_DATABASE_URL: await testDatabase(dir) } : {}),
    GATEHOUSE_POLICY_DIR: policyDir,
    GATEHOUSE_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEHOUSE_SECRET: 'test-secret-0123456789abcdef-0123456789',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // The tests' receivers and upstreams listen on loopback: allowed as named destinations (a test of the refusal clears this).
    GATEHOUSE_OUTBOUND_ALLOW_HOSTS: '127.0.0.1,localhost',
    ...opts.env,
  });
  const running = await startServer(config, { logger: createLogger(config.logLevel), role: opts.role ?? 'primary', ...(opts.clock ? { clock: opts.clock } : {}) });
  const admin: TestServer['admin'] = async (method, path, body) => {
    const res = await fetch(`${running.url}/admin/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  return {
    ...running,
    dir,
    policyDir,
    adminToken: ADMIN_TOKEN,
    admin,
    async stop() {
      await running.close();
      if (!opts.dir) {
        rmSync(dir, { recursive: true, force: true });
        if (testServerUrl()) await dropTestDatabase(dir);
      }
    },
  };
}

/**
 * `gatehouse audit verify` (in this process) on the server's database: `--db` for its SQLite
 * file, GATEHOUSE_DATABASE_URL for its PostgreSQL database.
 */
export async function verifyAuditTrail(server: TestServer): Promise<{ code: number; stdout: string }> {
  const { runAuditCommand } = await import('../../src/cli/audit.js');
  let stdout = '';
  const io = { stdout: (s: string) => void (stdout += s), stderr: () => undefined, cwd: server.dir };
  const url = server.ctx.config.databaseUrl;
  if (!url) return { code: await runAuditCommand(['verify', `--db=${join(server.dir, 'gatehouse.db')}`], io), stdout };
  const before = process.env.GATEHOUSE_DATABASE_URL;
  process.env.GATEHOUSE_DATABASE_URL = url;
  try {
    return { code: await runAuditCommand(['verify'], io), stdout };
  } finally {
    if (before === undefined) delete process.env.GATEHOUSE_DATABASE_URL;
    else process.env.GATEHOUSE_DATABASE_URL = before;
  }
}
