import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/crypto/hash.js';
import { startHousekeeping } from '../../src/store/housekeeping.js';
import type { Store } from '../../src/store/index.js';
import { openTestStore, type TestStore } from './helpers.js';

let t: TestStore;
let store: Store;
beforeAll(async () => {
  t = await openTestStore();
  store = t.store;
});
afterAll(async () => t.close());

const now = () => Math.floor(Date.now() / 1000);

async function person(s: Store): Promise<string> {
  const id = randomUUID();
  await s.users.create(id, { email: `${id}@example.com`, name: 'P', email_verified: true, picture: null, locale: null, groups: [], roles: [] }, null, null);
  return id;
}
async function app(s: Store): Promise<string> {
  const id = randomUUID();
  await s.applications.create({ client_id: id, name: 'A', type: 'web', redirect_uris: ['https://a.example/cb'], post_logout_redirect_uris: [], confidential: true, secret_hash: null, refresh_tokens: true, first_party: true });
  return id;
}

describe('transactions', () => {
  it('commit on return, roll back on throw; afterCommit runs only after a commit', async () => {
    const ran: string[] = [];
    await store.transaction(async (tx) => {
      await tx.settings.set('tx-commit', 'yes');
      tx.sql.afterCommit(() => ran.push('commit'));
    });
    await expect(
      store.transaction(async (tx) => {
        await tx.settings.set('tx-rollback', 'yes');
        tx.sql.afterCommit(() => ran.push('rollback'));
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(await store.settings.get('tx-commit')).toBe('yes');
    expect(await store.settings.get('tx-rollback')).toBeUndefined();
    expect(ran).toEqual(['commit']);
  });

  it('a transaction inside a transaction is the same one', async () => {
    await expect(
      store.transaction(async (tx) => {
        await tx.transaction(async (inner) => inner.settings.set('nested', 'x'));
        throw new Error('outer fails');
      }),
    ).rejects.toThrow('outer fails');
    expect(await store.settings.get('nested')).toBeUndefined();
  });

  it('other store calls never see a transaction that is still open, and never write into it', async () => {
    let outside: { read: Promise<string | undefined>; write: Promise<void> } | undefined;
    const inside = store.transaction(async (tx) => {
      await tx.settings.set('isolation', 'uncommitted');
      // another request runs meanwhile: its read and its write are not part of this transaction
      let settled = false;
      const read = store.settings.get('isolation');
      void read.then(() => (settled = true));
      outside = { read, write: store.settings.set('isolation-other', 'outside') };
      await tx.settings.get('isolation');
      // on SQLite the one connection is shared: the other call waits for the transaction to end
      if (store.sql.dialect === 'sqlite') expect(settled).toBe(false);
      throw new Error('rolled back');
    });
    await expect(inside).rejects.toThrow('rolled back');
    expect(await outside!.read).toBeUndefined();
    await outside!.write;
    // the outside write was not swept into the rolled-back transaction
    expect(await store.settings.get('isolation-other')).toBe('outside');
  });

  it('a transaction executor used after its end refuses', async () => {
    let kept: Store | undefined;
    await store.transaction(async (tx) => {
      kept = tx;
    });
    if (store.sql.dialect === 'sqlite') await expect(kept!.settings.get('x')).rejects.toThrow('ended');
  });

  it("a pipeline answers each statement's rows in order, its parameters taken as parameters are", async () => {
    // Quotes, a backslash, a comment marker and placeholder characters, all inside a value.
    const tricky = "it's a \\ back'slash -- ? @key 'x'";
    await store.settings.set('pipeline-read', tricky);
    const [one, none, typed] = await store.sql.pipeline([
      { sql: 'SELECT value FROM settings WHERE key = ?', params: ['pipeline-read'] },
      { sql: 'SELECT value FROM settings WHERE key = @key', params: { key: tricky } },
      { sql: 'SELECT CAST(? AS TEXT) AS absent, CAST(? AS INTEGER) + 1 AS n, CAST(? AS TEXT) AS s', params: [null, 41, 'ünï'] },
    ]);
    expect(one).toEqual([{ value: tricky }]);
    expect(none).toEqual([]);
    expect(typed).toEqual([{ absent: null, n: 42, s: 'ünï' }]);
    await expect(store.sql.pipeline([{ sql: 'SELECT CAST(? AS TEXT) AS v', params: [{ not: 'a scalar' }] }])).rejects.toThrow();
  });

  it('inside a transaction a pipeline goes with the BEGIN and the locks asked for, and commits or rolls back with it', async () => {
    await expect(
      store.transaction(async (tx) => {
        await tx.sql.lock('pipeline-test');
        const [written, read] = await tx.sql.pipeline([
          { sql: 'INSERT INTO settings (key, value) VALUES (?, ?)', params: ['pipeline-rolled-back', 'x'] },
          { sql: 'SELECT value FROM settings WHERE key = ?', params: ['pipeline-rolled-back'] },
        ]);
        expect(written).toEqual([]);
        expect(read).toEqual([{ value: 'x' }]);
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(await store.settings.get('pipeline-rolled-back')).toBeUndefined();
    await store.transaction(async (tx) => {
      await tx.sql.lock('pipeline-test');
      await tx.sql.pipeline([{ sql: 'INSERT INTO settings (key, value) VALUES (?, ?)', params: ['pipeline-committed', 'y'] }]);
      await tx.settings.set('pipeline-committed-after', 'z');
    });
    expect(await store.settings.get('pipeline-committed')).toBe('y');
    expect(await store.settings.get('pipeline-committed-after')).toBe('z');
  });
});

describe('single use and one winner, with competing callers', () => {
  it('a client assertion jti is used once', async () => {
    const peers = await t.peers(3);
    const results = await Promise.all(peers.flatMap((s) => [s, s].map((x) => x.agentAuth.useJti('agent-1', 'jti-1', now() + 60))));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('an authorization code is redeemed once; a second exchange revokes the family the first started', async () => {
    const [userId, clientId] = [await person(store), await app(store)];
    const code = sha256(randomUUID());
    await store.oauth.createCode(code, { client_id: clientId, user_id: userId, sid: 's', redirect_uri: 'https://a.example/cb', scope: ['openid'], resource: null, nonce: null, code_challenge: null, auth_time: now(), amr: ['pwd'], acr: '1' }, 60);
    const peers = await t.peers(4);
    const results = await Promise.all(
      peers.map((s, i) => s.oauth.redeemCode(code, () => undefined, { familyId: `family-${i}`, tokenHash: sha256(`refresh-${i}`), ttl: 3600 })),
    );
    const winners = results.filter((r) => r.ok);
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => !r.ok && r.reason === 'reused')).toHaveLength(3);
    const winner = results.indexOf(winners[0]!);
    const family = await store.oauth.familyOfRefresh(sha256(`refresh-${winner}`));
    expect(family?.revoked_at).not.toBeNull();
  });

  it('of concurrent refreshes with one token exactly one wins', async () => {
    const [userId, clientId] = [await person(store), await app(store)];
    const code = sha256(randomUUID());
    await store.oauth.createCode(code, { client_id: clientId, user_id: userId, sid: 's', redirect_uri: 'https://a.example/cb', scope: ['openid'], resource: null, nonce: null, code_challenge: null, auth_time: now(), amr: ['pwd'], acr: '1' }, 60);
    const first = sha256(randomUUID());
    expect((await store.oauth.redeemCode(code, () => undefined, { familyId: randomUUID(), tokenHash: first, ttl: 3600 })).ok).toBe(true);
    const peers = await t.peers(5);
    const results = await Promise.all(peers.map((s, i) => s.oauth.rotateRefresh(first, sha256(`next-${i}-${first}`), 3600, () => 'ok')));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    // the first loser is a reuse and revokes the family; the rest find it revoked
    expect(results.filter((r) => !r.ok && (r.reason === 'reused' || r.reason === 'revoked'))).toHaveLength(4);
    expect(results.some((r) => !r.ok && r.reason === 'reused')).toBe(true);
  });

  it('an approval is consumed once', async () => {
    const a = await store.agentAuth.createAction({ id: randomUUID(), agent_id: 'agent', user_id: null, action: 'x', resource: 'r', context: '{}', action_key: randomUUID(), rule: null, binding_message: null, expires_at: now() + 600 });
    expect(await store.agentAuth.decide(a.id, 'approved', 'admin', now() + 600)).toBe(true);
    const peers = await t.peers(4);
    const results = await Promise.all(peers.map((s) => s.agentAuth.consume(a.id)));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('a TOTP step is accepted once, and never an older one', async () => {
    const userId = await person(store);
    const peers = await t.peers(3);
    const results = await Promise.all(peers.map((s) => s.oauth.useTotpStep(userId, 1000)));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await store.oauth.useTotpStep(userId, 999)).toBe(false);
    expect(await store.oauth.useTotpStep(userId, 1001)).toBe(true);
  });

  it('the failure counter counts every hit', async () => {
    const peers = await t.peers(3);
    await Promise.all(peers.flatMap((s) => Array.from({ length: 5 }, () => s.rateLimits.hit('rl-test', 60))));
    expect(await store.rateLimits.count('rl-test', 60)).toBe(15);
  });

  it('the audit chain stays one line with concurrent writers', async () => {
    const peers = await t.peers(3);
    await Promise.all(peers.flatMap((s, i) => Array.from({ length: 10 }, (_, j) => s.audit.append({ agent_id: `a${i}`, action: 'x', resource: `r${j}`, decision: 'allow' }))));
    const v = await store.audit.verify();
    expect(v.broken).toBeNull();
    expect(v.checked).toBeGreaterThanOrEqual(30);
  });
});

describe('audit batches', () => {
  it('a batch keeps every value as given (quotes, backslashes, braces, NULL as text, absent fields) and the chain verifies', async () => {
    const tricky = ['a "quoted" {brace}, comma', 'back\\slash \\" end', 'NULL', '', 'ünï ✓', "it's"];
    const inputs = Array.from({ length: 37 }, (_, i) => ({
      agent_id: tricky[i % tricky.length]!,
      action: i % 2 ? null : 'x',
      resource: `r${i}`,
      context: { note: tricky[(i + 1) % tricky.length], n: i },
      decision: 'allow',
      reason: i % 3 ? null : tricky[(i + 2) % tricky.length]!,
    }));
    const written = await store.audit.appendAll(inputs);
    const listed = (await store.audit.list({ limit: 1000 })).filter((r) => r.seq >= written[0]!.seq && r.seq <= written.at(-1)!.seq).reverse();
    expect(listed.map((r) => [r.agent_id, r.action, r.context, r.reason])).toEqual(inputs.map((x) => [x.agent_id, x.action, x.context, x.reason]));
    expect(listed.map((r) => r.hash)).toEqual(written.map((r) => r.hash));
    expect((await store.audit.verify()).broken).toBeNull();
  });

  it('a lone surrogate in a text field is kept as U+FFFD and hashed as kept: the chain still verifies', async () => {
    // What a JSON body can carry as "\ud800": the database stores U+FFFD in its place.
    const one = await store.audit.append({ agent_id: 'a', action: 'send:a\ud800b', resource: 'email:\udc00', context: { k: 'v\ud800' }, decision: 'deny', reason: 'x\ud83d' });
    const batch = await store.audit.appendAll([{ agent_id: 'b\udfff', action: 'x', decision: 'allow' }, { agent_id: 'c', action: 'pair \ud83d\ude00 kept', decision: 'allow' }]);
    expect([one.action, one.resource, one.reason]).toEqual(['send:a\ufffdb', 'email:\ufffd', 'x\ufffd']);
    expect([batch[0]!.agent_id, batch[1]!.action]).toEqual(['b\ufffd', 'pair \ud83d\ude00 kept']);
    const listed = (await store.audit.list({ limit: 1000 })).filter((r) => r.seq >= one.seq && r.seq <= batch[1]!.seq).sort((x, y) => x.seq - y.seq);
    expect(listed.map((r) => r.hash)).toEqual([one, ...batch].map((r) => r.hash));
    expect(listed[0]!.context).toEqual({ k: 'v\ud800' });
    expect((await store.audit.verify()).broken).toBeNull();
  });

  it('a NUL character in a text field is recorded as U+FFFD on either database (PostgreSQL cannot hold it in text), and the chain verifies', async () => {
    const r = await store.audit.append({ agent_id: 'a', action: 'send:a\u0000b', resource: '\u0000', context: { k: 'v\u0000' }, decision: 'deny' });
    expect([r.action, r.resource]).toEqual(['send:a\ufffdb', '\ufffd']);
    const [listed] = (await store.audit.list({ limit: 1000 })).filter((x) => x.seq === r.seq);
    expect([listed!.action, listed!.resource, listed!.hash]).toEqual(['send:a\ufffdb', '\ufffd', r.hash]);
    expect(listed!.context).toEqual({ k: 'v\u0000' });
    expect((await store.audit.verify()).broken).toBeNull();
  });
});

describe('audit chain across a cut', () => {
  it('after a cut that pruned every record, the next record follows the cut', async () => {
    // A store of its own: the cut here is not signed, and would fail the others' verify.
    const own = await openTestStore();
    const s = own.store;
    await s.audit.append({ agent_id: 'cut', action: 'x', resource: 'r', decision: 'allow' });
    const last = (await s.audit.list({ limit: 1 }))[0]!;
    const before = await s.audit.latestCheckpoint();
    await s.audit.prune({ seq: last.seq, hash: last.hash, record_time: last.time, created_at: now(), pruned: 1, pruned_total: (before?.pruned_total ?? 0) + 1, jws: 'unsigned.for.test' });
    const next = await s.audit.append({ agent_id: 'cut', action: 'x', resource: 'r2', decision: 'allow' });
    expect(next.seq).toBe(last.seq + 1);
    expect(next.prev_hash).toBe(last.hash);
    await own.close();
  });
});

describe('change counters', () => {
  it('a bump is seen by the next read once it commits, and not at all when rolled back', async () => {
    const before = await store.changes.version('test-domain');
    await expect(
      store.transaction(async (tx) => {
        await tx.settings.bump('test-domain');
        throw new Error('undo');
      }),
    ).rejects.toThrow('undo');
    expect(await store.changes.version('test-domain')).toBe(before);
    await store.settings.bump('test-domain');
    expect(await store.changes.version('test-domain')).toBeGreaterThan(before);
  });
});

describe('across instances', () => {
  it('a change committed by one instance is seen by the others within a second', async () => {
    const [a, b, c] = await t.peers(3);
    const before = await Promise.all([b!, c!].map((s) => s.changes.version('cross-domain')));
    await a!.settings.bump('cross-domain');
    await new Promise((r) => setTimeout(r, 1000));
    const after = await Promise.all([b!, c!].map((s) => s.changes.version('cross-domain')));
    after.forEach((v, i) => expect(v).toBeGreaterThan(before[i]!));
    expect(new Set([...after, await a!.changes.version('cross-domain')]).size).toBe(1);
  });

  it('a lease has one holder among competing instances until it expires or is given up', async () => {
    const peers = await t.peers(4);
    const owners = peers.map(() => randomUUID());
    const name = `lease-${randomUUID()}`;
    const won = await Promise.all(peers.map((s, i) => s.leases.acquire(name, owners[i]!, 60_000)));
    expect(won.filter(Boolean)).toHaveLength(1);
    const holder = won.indexOf(true);
    const other = (holder + 1) % peers.length;
    // the holder renews it; the others are refused
    expect(await peers[holder]!.leases.acquire(name, owners[holder]!, 300)).toBe(true);
    expect(await peers[other]!.leases.acquire(name, owners[other]!, 60_000)).toBe(false);
    // a release by someone else does nothing
    await peers[other]!.leases.release(name, owners[other]!);
    expect(await peers[other]!.leases.acquire(name, owners[other]!, 60_000)).toBe(false);
    // expired (a holder that died): taken over
    await new Promise((r) => setTimeout(r, 400));
    expect(await peers[other]!.leases.acquire(name, owners[other]!, 60_000)).toBe(true);
    expect(await peers[holder]!.leases.acquire(name, owners[holder]!, 60_000)).toBe(false);
    // given up: free for the next one at once
    await peers[other]!.leases.release(name, owners[other]!);
    expect(await peers[holder]!.leases.acquire(name, owners[holder]!, 60_000)).toBe(true);
  });

  it('housekeeping started on three instances runs one pass per period', async () => {
    const peers = await t.peers(3);
    // the lease is shared with every other test's store: start from a free one
    await t.store.sql.run(`DELETE FROM leases WHERE name = 'housekeeping'`);
    const passes: Record<string, number>[] = [];
    const errors: unknown[] = [];
    const stops = peers.map((s) => startHousekeeping(s, { everyMs: 2500, onError: (e) => errors.push(e), onDone: (removed) => passes.push(removed) }));
    // the first pass of each comes after one period; the next ones after two
    await new Promise((r) => setTimeout(r, 3500));
    for (const stop of stops) await stop();
    expect(errors).toEqual([]);
    expect(passes).toHaveLength(1);
    expect(Object.keys(passes[0]!).sort()).toEqual(['agent_auth', 'dpop', 'id_jag_jtis', 'oauth', 'rate_limits', 'relationship_changes', 'signing_keys', 'usage_counters']);
  });
});
