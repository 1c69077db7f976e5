import Database from 'better-sqlite3';
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

describe('gatehouse audit verify', () => {
  it('reports an intact chain', async () => {
    const { code, stdout } = await run(['verify', '--db', dbFile]);
    expect(code).toBe(0);
    // a token and three decisions
    expect(Number(/^ok: (\d+) records\n$/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(4);
  });

  it('the trail refuses updates while the trigger stands', () => {
    const db = new Database(dbFile);
    try {
      expect(() => db.prepare("UPDATE audit_log SET decision = 'allow' WHERE seq = 2").run()).toThrow(/append-only/);
    } finally {
      db.close();
    }
  });

  it('finds a tampered record (after the append-only trigger is dropped) and names it', async () => {
    const db = new Database(dbFile);
    try {
      db.exec('DROP TRIGGER audit_log_no_update');
      db.prepare("UPDATE audit_log SET decision = 'deny', reason = 'rule_denied: forged' WHERE seq = 3").run();
    } finally {
      db.close();
    }
    const { code, stdout } = await run(['verify', `--db=${dbFile}`]);
    expect(code).toBe(1);
    expect(stdout).toBe('broken at record 3: content does not match its hash\n');
  });

  it('reads GATEHOUSE_DB when no --db is given, and refuses a usage error', async () => {
    const before = process.env.GATEHOUSE_DB;
    process.env.GATEHOUSE_DB = 'gatehouse.db';
    try {
      expect((await run(['verify'])).code).toBe(1);
    } finally {
      if (before === undefined) delete process.env.GATEHOUSE_DB;
      else process.env.GATEHOUSE_DB = before;
    }
    expect((await run(['check'])).code).toBe(2);
    expect((await run(['verify', '--db', join(server.dir, 'missing.db')])).code).toBe(2);
  });
});
