import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { exportJWK, generateKeyPair } from 'jose';
import { accessToken } from '../helpers/cluster.js';
import { testDatabase, testServerUrl } from '../helpers/database.js';
import { startTestServer, verifyAuditTrail, type TestServer } from '../helpers/server.js';
import { basic, discover, postForm, signInAndExchange, startFixture, type Fixture } from '../oauth/helpers.js';

/**
 * Backup and restore of a SQLite database: data made through HTTP, backed up while the server
 * runs, restored into a fresh data directory; a server started on it keeps its audit chain, its
 * signing keys (tokens signed before still verify) and its refresh families (an old refresh
 * token still refreshes).
 */

async function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = (await runCli(args, { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), cwd })) ?? 0;
  return { code, stdout, stderr };
}

const onSqlite = !testServerUrl();
let f: Fixture;
let restored: TestServer | undefined;
const work = mkdtempSync(join(tmpdir(), 'gatehouse-backup-'));
beforeAll(async () => {
  if (onSqlite) f = await startFixture();
});
afterAll(async () => {
  await restored?.stop();
  await f?.server.stop();
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!onSqlite)('backup and restore (SQLite)', () => {
  it('restores a database on which the chain, the keys and the refresh families hold', async () => {
    const config = await discover(f, f.web);
    const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
    // a key rotation: a change recorded in the audit trail, and keys both retired and active to carry over
    expect((await f.server.admin('POST', '/keys/rotate', {})).status).toBe(200);
    // an agent signs in: its token is recorded in the audit trail
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const agent = await f.server.admin('POST', '/agents', { name: 'backup-agent', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: [], capabilities: [] });
    expect(agent.status).toBe(201);
    await accessToken(f.server.url, { id: agent.body.agent_id, key: privateKey });
    const records = (await f.server.ctx.store.audit.list({ limit: 1000 })).length;
    expect(records).toBeGreaterThan(0);

    const file = join(work, 'gatehouse.backup');
    const backup = await cli(['backup', `--db=${join(f.server.dir, 'gatehouse.db')}`, file], work);
    expect(backup.stderr).toBe('');
    expect(backup.stdout).toBe(`backed up to ${file} (audit trail: ${records} records, chain ok)\n`);
    expect(backup.code).toBe(0);
    // never over an existing file
    expect((await cli(['backup', `--db=${join(f.server.dir, 'gatehouse.db')}`, file], work)).code).toBe(2);

    const fresh = join(work, 'fresh');
    const restore = await cli(['restore', `--db=${join(fresh, 'gatehouse.db')}`, file], work);
    expect(restore.stderr).toBe('');
    expect(restore.code).toBe(0);
    // a second restore over it needs --force
    const again = await cli(['restore', `--db=${join(fresh, 'gatehouse.db')}`, file], work);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('--force');

    // The same issuer and secret as the original (the keys are sealed with the secret).
    restored = await startTestServer({ dir: fresh, env: { GATEHOUSE_ISSUER: f.issuer } });
    const verified = await verifyAuditTrail(restored);
    expect(verified.stdout).toMatch(/^ok: \d+ records/);
    expect(verified.code).toBe(0);

    // a token signed before the backup verifies against the restored server's keys
    const { payload } = await restored.ctx.keys.verify(tokens.access_token, 'RS256', { issuer: f.issuer, typ: 'at+jwt' });
    expect(payload.sub).toBe(f.user.id);
    // the old refresh token refreshes on the restored server
    const refreshed = await postForm(`${restored.url}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basic(f.web.client_id, f.web.client_secret) });
    expect(refreshed.status).toBe(200);
    expect(typeof refreshed.body.refresh_token).toBe('string');
    expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token);
  });

  it('refuses to restore a file that is not a Gatehouse database, and writes nothing', async () => {
    const junk = join(work, 'junk.db');
    writeFileSync(junk, 'not a database at all, just text long enough to be read');
    const to = join(work, 'never', 'gatehouse.db');
    const r = await cli(['restore', `--db=${to}`, junk], work);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot be restored/);
    expect(existsSync(to)).toBe(false);
  });
});

describe('backup on PostgreSQL without pg_dump', () => {
  it('names the pg_dump command and refuses', async () => {
    const before = { url: process.env.GATEHOUSE_DATABASE_URL, path: process.env.PATH };
    process.env.GATEHOUSE_DATABASE_URL = 'postgres://gatehouse@127.0.0.1:1/gatehouse';
    process.env.PATH = '/nonexistent';
    try {
      const r = await cli(['backup', join(work, 'pg.dump')], work);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('pg_dump --format=custom');
      const restore = await cli(['restore', join(work, 'pg.dump')], work);
      expect(restore.code).toBe(2);
      expect(restore.stderr).toContain('pg_restore');
    } finally {
      if (before.url === undefined) delete process.env.GATEHOUSE_DATABASE_URL;
      else process.env.GATEHOUSE_DATABASE_URL = before.url;
      process.env.PATH = before.path;
    }
  });
});

const pgTools = !!testServerUrl() && spawnSync('pg_dump', ['--version']).status === 0 && spawnSync('pg_restore', ['--version']).status === 0;

/** The same round trip on PostgreSQL, through pg_dump and pg_restore (run when the tools are on the PATH). */
describe.skipIf(!pgTools)('backup and restore (PostgreSQL, pg_dump and pg_restore)', () => {
  it('restores into an empty database a server then runs on with its chain, keys and refresh families', async () => {
    const source = await startFixture();
    let target: TestServer | undefined;
    const before = process.env.GATEHOUSE_DATABASE_URL;
    try {
      const config = await discover(source, source.web);
      const { tokens } = await signInAndExchange(config, source, { email: source.user.email, password: source.user.password });
      expect((await source.server.admin('POST', '/keys/rotate', {})).status).toBe(200);
      const file = join(work, 'gatehouse.pgdump');
      process.env.GATEHOUSE_DATABASE_URL = source.server.ctx.config.databaseUrl!;
      const backup = await cli(['backup', file], work);
      expect(backup.stderr).toBe('');
      expect(backup.code).toBe(0);
      expect(backup.stdout).toContain('pg_dump custom format');

      // An empty database of its own, restored into; a second restore over it needs --force.
      const fresh = mkdtempSync(join(tmpdir(), 'gatehouse-pgrestore-'));
      process.env.GATEHOUSE_DATABASE_URL = await testDatabase(fresh);
      const restore = await cli(['restore', file], work);
      expect(restore.stderr).toBe('');
      expect(restore.stdout).toMatch(/audit trail: \d+ records, chain ok/);
      expect(restore.code).toBe(0);
      const again = await cli(['restore', file], work);
      expect(again.code).toBe(2);
      expect(again.stderr).toContain('--force');
      const forced = await cli(['restore', '--force', file], work);
      expect(forced.stderr).toBe('');
      expect(forced.code).toBe(0);
      process.env.GATEHOUSE_DATABASE_URL = before;
      if (before === undefined) delete process.env.GATEHOUSE_DATABASE_URL;

      target = await startTestServer({ dir: fresh, env: { GATEHOUSE_ISSUER: source.issuer } });
      const verified = await verifyAuditTrail(target);
      expect(verified.stdout).toMatch(/^ok: \d+ records/);
      expect(verified.code).toBe(0);
      const { payload } = await target.ctx.keys.verify(tokens.access_token, 'RS256', { issuer: source.issuer, typ: 'at+jwt' });
      expect(payload.sub).toBe(source.user.id);
      const refreshed = await postForm(`${target.url}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basic(source.web.client_id, source.web.client_secret) });
      expect(refreshed.status).toBe(200);
      expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token);
    } finally {
      if (before === undefined) delete process.env.GATEHOUSE_DATABASE_URL;
      else process.env.GATEHOUSE_DATABASE_URL = before;
      await target?.stop();
      await source.server.stop();
    }
  });
});
