import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { dropTestDatabase, testDatabase, testServerUrl } from '../helpers/database.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bind, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { findInitdb, startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The same 503 as for a database that is away, when PostgreSQL is there but cannot serve in
 * time: every pooled connection is busy, or a statement waits past GATEHOUSE_DATABASE_TIMEOUT_MS
 * (here on the audit trail's lock, held by another session). Once the pressure ends, the same
 * decision is answered and recorded.
 */

const initdb = findInitdb();
const TIMEOUT_MS = 300;

describe.skipIf(!testServerUrl() && !initdb)('PostgreSQL that cannot serve in time', () => {
  let cluster: ThrowawayPostgres | undefined;
  let server: TestServer;
  let agent: TestAgent;
  let txnToken: string;
  let dir: string;
  const action = { action: 'read:docs', resource: 'doc:1', context: {} };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-limits-'));
    let url: string;
    if (testServerUrl()) url = await testDatabase(dir);
    else {
      cluster = await startThrowawayPostgres(initdb!);
      url = cluster.url;
    }
    server = await startTestServer({ dir, env: { GATEHOUSE_DATABASE_URL: url, GATEHOUSE_DATABASE_TIMEOUT_MS: String(TIMEOUT_MS) } });
    await putRole(server, 'reader', ['read:docs']);
    agent = await registerAgent(server, { name: 'limits-agent', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
    const b = await bind(server, await accessTokenFor(server, agent), action.action, action.resource, action.context);
    expect(b.status).toBe(200);
    txnToken = b.body.data.transaction_token;
  });
  afterAll(async () => {
    await server?.stop();
    if (testServerUrl()) await dropTestDatabase(dir);
    cluster?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const decide = async () => {
    const res = await fetch(`${server.url}/apis/regional/v1/agents/authorize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: agent.id, transaction_token: txnToken, ...action }),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: string; data?: { decision: string } } };
  };
  const recorded = async () => (await server.ctx.store.audit.list({ agent_id: agent.id, kind: 'decision', limit: 1000 })).length;

  it('a statement that waits past the timeout is a 503 with Retry-After, and nothing is recorded', async () => {
    const pool = (server.ctx.store.sql as unknown as { pool: pg.Pool; schema: string }).pool;
    const schema = (server.ctx.store.sql as unknown as { schema: string }).schema;
    const before = await recorded();
    const holder = await pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`${schema}:audit_log`]);
      const refused = await decide();
      expect([refused.status, refused.body.error, refused.body.data]).toEqual([503, 'temporarily_unavailable', undefined]);
      expect(refused.retryAfter).toMatch(/^\d+$/);
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }
    expect(await recorded()).toBe(before);
    const again = await decide();
    expect([again.status, again.body.data?.decision]).toEqual([200, 'allow']);
    expect(await recorded()).toBe(before + 1);
  });

  it('a pool with no connection free in time is a 503 with Retry-After', async () => {
    const pool = (server.ctx.store.sql as unknown as { pool: pg.Pool }).pool;
    const held: pg.PoolClient[] = [];
    // Every connection the pool may open, taken.
    for (;;) {
      const next = await Promise.race([pool.connect(), new Promise<null>((r) => setTimeout(() => r(null), TIMEOUT_MS / 2))]);
      if (!next) break;
      held.push(next);
    }
    try {
      expect(held.length).toBeGreaterThan(0);
      const refused = await decide();
      expect([refused.status, refused.body.error]).toEqual([503, 'temporarily_unavailable']);
      expect(refused.retryAfter).toMatch(/^\d+$/);
      const health = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      expect(health.status).toBe(503);
    } finally {
      for (const c of held) c.release();
    }
    const again = await decide();
    expect([again.status, again.body.data?.decision]).toEqual([200, 'allow']);
  });
});
