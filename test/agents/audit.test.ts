import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAuditCommand } from '../../src/cli/audit.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bindAndDecide, putRole, registerAgent } from './helpers.js';

let server: TestServer;
let dbFile: string;

const run = async (args: string[]) => {
  let stdout = '';
  let stderr = '';
  const code = await runAuditCommand(args, { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), cwd: server.dir });
  return { code, stdout, stderr };
};

beforeAll(async () => {
  server = await startTestServer();
  dbFile = join(server.dir, 'gatehouse.db');
  await putRole(server, 'mailer', ['send:emails']);
  const agent = await registerAgent(server, { name: 'mailer', mode: 'autonomous', roles: ['mailer'], capabilities: [{ name: 'send:emails' }] });
  const token = await accessTokenFor(server, agent);
  for (let i = 0; i < 3; i++) await bindAndDecide(server, agent, token, 'send:emails', `email:${i}`, { n: i });
});
afterAll(async () => server?.stop());

// On PostgreSQL (GATEHOUSE_TEST_DATABASE_URL) the command finds the database through GATEHOUSE_DATABASE_URL.
const verifyArgs = () => (server.ctx.config.databaseUrl ? ['verify'] : ['verify', '--db', dbFile]);
async function withDatabaseUrl<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.env.GATEHOUSE_DATABASE_URL;
  if (server.ctx.config.databaseUrl) process.env.GATEHOUSE_DATABASE_URL = server.ctx.config.databaseUrl;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.GATEHOUSE_DATABASE_URL;
    else process.env.GATEHOUSE_DATABASE_URL = before;
  }
}

describe('gatehouse audit verify', () => {
  it('reports an intact chain', async () => {
    const { code, stdout } = await withDatabaseUrl(() => run(verifyArgs()));
    expect(code).toBe(0);
    // a token and three decisions
    expect(Number(/^ok: (\d+) records\n$/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(4);
  });

  it('the trail refuses updates while the trigger stands', async () => {
    await expect(server.ctx.store.sql.run("UPDATE audit_log SET decision = 'allow' WHERE seq = 2")).rejects.toThrow(/append-only/);
    await expect(server.ctx.store.sql.run('DELETE FROM audit_log WHERE seq = 2')).rejects.toThrow(/append-only/);
  });

  it('finds a tampered record (after the append-only trigger is dropped) and names it', async () => {
    const sql = server.ctx.store.sql;
    await sql.exec(sql.dialect === 'postgres' ? 'DROP TRIGGER audit_log_no_update ON audit_log' : 'DROP TRIGGER audit_log_no_update');
    await sql.run("UPDATE audit_log SET decision = 'deny', reason = 'rule_denied: forged' WHERE seq = 3");
    const { code, stdout } = await withDatabaseUrl(() => run(server.ctx.config.databaseUrl ? ['verify'] : ['verify', `--db=${dbFile}`]));
    expect(code).toBe(1);
    expect(stdout).toBe('broken at record 3: content does not match its hash\n');
  });

  it('reads GATEHOUSE_DB when no --db is given, and refuses a usage error', async () => {
    const before = process.env.GATEHOUSE_DB;
    process.env.GATEHOUSE_DB = 'gatehouse.db';
    try {
      expect((await withDatabaseUrl(() => run(['verify']))).code).toBe(1);
    } finally {
      if (before === undefined) delete process.env.GATEHOUSE_DB;
      else process.env.GATEHOUSE_DB = before;
    }
    expect((await run(['check'])).code).toBe(2);
    expect((await run(['verify', '--db', join(server.dir, 'missing.db')])).code).toBe(2);
  });
});
