import { afterEach, describe, expect, it } from 'vitest';
import { auditRetention } from '../../src/server.js';
import { pruneAudit } from '../../src/store/housekeeping.js';
import { startTestServer, verifyAuditTrail, type TestServer } from '../helpers/server.js';

/**
 * Audit retention: records older than the retention are pruned behind a checkpoint signed with
 * the server's key, and `gatehouse audit verify` verifies what remains from it. Runs on SQLite,
 * and on PostgreSQL with GATEHOUSE_TEST_DATABASE_URL.
 */

const DAY = 24 * 60 * 60;
let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function withHistory(): Promise<{ server: TestServer; now: number }> {
  server = await startTestServer({ env: { GATEHOUSE_AUDIT_RETENTION_DAYS: '30' } });
  expect(server.ctx.config.auditRetentionDays).toBe(30);
  const now = Math.floor(Date.now() / 1000);
  // old records, then recent ones
  for (let i = 0; i < 5; i++) await server.ctx.store.audit.append({ kind: 'decision', time: now - 60 * DAY + i, agent_id: `old-${i}`, decision: 'allow' });
  for (let i = 0; i < 3; i++) await server.ctx.store.audit.append({ kind: 'decision', time: now - i, agent_id: `new-${i}`, decision: 'deny' });
  return { server, now };
}

describe('audit retention', () => {
  it('prunes the old records, leaves a signed checkpoint, and verify still passes', async () => {
    const { server } = await withHistory();
    const before = await server.ctx.store.audit.list({ limit: 1000 });
    const old = before.filter((r) => r.agent_id?.startsWith('old-'));
    expect(old).toHaveLength(5);
    const removed = await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30));
    expect(removed).toBe(5);
    const after = await server.ctx.store.audit.list({ limit: 1000 });
    expect(after.some((r) => r.agent_id?.startsWith('old-'))).toBe(false);
    expect(after.length).toBe(before.length - 5);
    expect(after.filter((r) => r.agent_id?.startsWith('new-'))).toHaveLength(3);
    const checkpoint = await server.ctx.store.audit.latestCheckpoint();
    const lastOld = old.reduce((a, b) => (a.seq > b.seq ? a : b));
    expect(checkpoint).toMatchObject({ seq: lastOld.seq, hash: lastOld.hash, record_time: lastOld.time, pruned: 5, pruned_total: 5 });
    // the signature is the server's: it verifies with its published key
    const { payload } = await server.ctx.keys.verify(checkpoint!.jws, 'EdDSA', { typ: 'audit-checkpoint+jwt' });
    expect(payload).toMatchObject({ seq: lastOld.seq, hash: lastOld.hash, pruned: 5 });

    const verified = await verifyAuditTrail(server);
    expect(verified.stdout).toMatch(new RegExp(`^ok: ${after.length} records after the signed checkpoint at record ${lastOld.seq} \\(5 records pruned`));
    expect(verified.code).toBe(0);

    // a second pass has nothing older to prune
    expect(await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30))).toBe(0);
    // new records keep the chain going from the checkpoint
    await server.ctx.store.audit.append({ kind: 'decision', agent_id: 'later', decision: 'allow' });
    expect((await verifyAuditTrail(server)).stdout).toMatch(new RegExp(`^ok: ${after.length + 1} records after`));
  });

  it('refuses a checkpoint whose fields were changed, or whose signature is not the server\'s', async () => {
    const { server } = await withHistory();
    await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30));
    const checkpoint = (await server.ctx.store.audit.latestCheckpoint())!;
    const db = server.ctx.store.database;
    await db.run('UPDATE audit_checkpoints SET pruned_total = ? WHERE seq = ?', [1, checkpoint.seq]);
    let result = await verifyAuditTrail(server);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('its pruned_total differs from what was signed');
    await db.run('UPDATE audit_checkpoints SET pruned_total = ?, jws = ? WHERE seq = ?', [checkpoint.pruned_total, checkpoint.jws.replace(/\.[^.]+$/, '.' + Buffer.alloc(64).toString('base64url')), checkpoint.seq]);
    result = await verifyAuditTrail(server);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('its signature does not verify');
  });

  it('still refuses deleting records above the checkpoint (append-only)', async () => {
    const { server } = await withHistory();
    await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30));
    const [newest] = await server.ctx.store.audit.list({ limit: 1 });
    await expect(server.ctx.store.database.run('DELETE FROM audit_log WHERE seq = ?', [newest!.seq])).rejects.toThrow(/append-only/);
  });

  it('signs the checkpoint again after a key rotation, so it outlives the old key', async () => {
    const { server } = await withHistory();
    await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30));
    const first = (await server.ctx.store.audit.latestCheckpoint())!;
    expect((await server.admin('POST', '/keys/rotate', {})).status).toBeLessThan(300);
    await pruneAudit(server.ctx.store, auditRetention(server.ctx, 30));
    const again = (await server.ctx.store.audit.latestCheckpoint())!;
    expect(again.seq).toBe(first.seq);
    expect(again.jws).not.toBe(first.jws);
    const kid = (jws: string) => (JSON.parse(Buffer.from(jws.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid;
    expect(kid(again.jws)).toBe(await server.ctx.keys.activeKid('EdDSA'));
    expect((await verifyAuditTrail(server)).code).toBe(0);
  });
});
