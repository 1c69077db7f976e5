import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate, openDatabase } from '../../src/store/db.js';
import { openStore, type Store } from '../../src/store/index.js';
import { testServerUrl } from '../helpers/database.js';
import { openTestStore, type TestStore } from './helpers.js';

// A DPoP proof's single-use record: the proofs of one turn are committed together, and each
// answer still says whether that proof was fresh, on one store and across instances.
let t: TestStore;
beforeAll(async () => {
  t = await openTestStore();
});
afterAll(async () => t.close());

const later = () => Math.floor(Date.now() / 1000) + 120;
/** Where used proofs are kept: a log on SQLite, a table keyed by the proof on PostgreSQL. */
const table = () => (t.store.sql.dialect === 'sqlite' ? 'dpop_proof_log' : 'dpop_proof_jtis');
const recorded = async (keyHash: string) =>
  (await t.store.sql.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table()} WHERE key_hash = ?`, [keyHash]))!.n;

describe('the single-use record of a DPoP proof', () => {
  it('a proof is fresh once; the record is committed when the answer comes', async () => {
    const key = randomUUID();
    expect(await t.store.dpop.useProof(key, later())).toBe(true);
    expect(Number(await recorded(key))).toBe(1);
    expect(await t.store.dpop.useProof(key, later())).toBe(false);
  });

  it('of the same proof used many times at once, on several instances, exactly one use is fresh; other proofs of the same turn are all fresh', async () => {
    const peers = await t.peers(3);
    const replayed = randomUUID();
    const others = Array.from({ length: 150 }, () => randomUUID());
    const uses = [
      ...peers.flatMap((s) => Array.from({ length: 5 }, () => s.dpop.useProof(replayed, later()))),
      ...others.map((k, i) => peers[i % peers.length]!.dpop.useProof(k, later())),
    ];
    const answers = await Promise.all(uses);
    expect(answers.slice(0, 15).filter(Boolean)).toHaveLength(1);
    expect(answers.slice(15).every(Boolean)).toBe(true);
    for (const k of [replayed, ...others.slice(0, 5)]) expect(Number(await recorded(k))).toBe(1);
  });

  it('a batch that cannot be recorded fails every use in it, and the next one is tried afresh', async () => {
    const own = await openTestStore();
    try {
      await own.store.sql.exec(`ALTER TABLE ${table()} RENAME TO proofs_away`);
      const failed = await Promise.allSettled([own.store.dpop.useProof(randomUUID(), later()), own.store.dpop.useProof(randomUUID(), later())]);
      expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      await own.store.sql.exec(`ALTER TABLE proofs_away RENAME TO ${table()}`);
      expect(await own.store.dpop.useProof(randomUUID(), later())).toBe(true);
    } finally {
      await own.close();
    }
  });

  it('inside a transaction the record is part of it: rolled back with it', async () => {
    const key = randomUUID();
    await expect(
      t.store.transaction(async (tx) => {
        expect(await tx.dpop.useProof(key, later())).toBe(true);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await t.store.dpop.useProof(key, later())).toBe(true);
  });
});

// Processes on one SQLite file each keep their own copy of the log: two connections in this
// process stand for two of them.
describe.skipIf(testServerUrl() !== undefined)('the log of used proofs on SQLite', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-dpop-log-'));
  });
  const opened: Store[] = [];
  const open = async (migrations = listMigrations()) => {
    const db = await openDatabase({ file: join(dir, 'gh.db') });
    await migrate(db, migrations);
    const store = await openStore(db);
    opened.push(store);
    return store;
  };
  afterAll(async () => {
    for (const s of opened) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('proofs recorded before an upgrade are still refused after it', async () => {
    const before = await open(listMigrations().filter((m) => m.version < 23));
    await before.sql.run('INSERT INTO dpop_proof_jtis (key_hash, expires_at) VALUES (?, ?)', ['from-before', later()]);
    const after = await open();
    expect(await after.dpop.useProof('from-before', later())).toBe(false);
    expect(await after.dpop.useProof(randomUUID(), later())).toBe(true);
  });

  it('a process refuses what another appended, whether it reads the log for the first time or again', async () => {
    const [a, b] = [await open(), await open()];
    const first = randomUUID();
    expect(await a.dpop.useProof(first, later())).toBe(true);
    expect(await b.dpop.useProof(first, later())).toBe(false); // b's first read
    const second = randomUUID();
    expect(await b.dpop.useProof(second, later())).toBe(true);
    expect(await a.dpop.useProof(second, later())).toBe(false); // a reads on from where it was
    // the same proofs on both at once: one use each
    const keys = Array.from({ length: 20 }, () => randomUUID());
    const answers = await Promise.all(keys.flatMap((k) => [a.dpop.useProof(k, later()), b.dpop.useProof(k, later())]));
    for (let i = 0; i < keys.length; i++) expect([answers[2 * i], answers[2 * i + 1]].filter(Boolean)).toHaveLength(1);
  });

  it('numbering never goes back: housekeeping keeps the last row, so a process reading on from it misses no proof', async () => {
    const [a, b] = [await open(), await open()];
    const past = Math.floor(Date.now() / 1000) - 1;
    expect(await a.dpop.useProof(randomUUID(), later())).toBe(true);
    expect(await b.dpop.useProof(randomUUID(), later())).toBe(true); // b has read up to the last row
    // every row expires and housekeeping runs: all but the last go
    await a.sql.run('UPDATE dpop_proof_log SET expires_at = ?', [past]);
    await a.dpop.purgeExpired();
    expect((await a.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM dpop_proof_log'))!.n).toBe(1);
    const next = randomUUID();
    expect(await a.dpop.useProof(next, later())).toBe(true);
    expect(await b.dpop.useProof(next, later())).toBe(false); // b reads on from its last number and finds it
  });

  it('an upgrade keeps the numbering of a log that housekeeping had emptied', async () => {
    const oldDir = mkdtempSync(join(tmpdir(), 'gatehouse-dpop-upgrade-'));
    const file = join(oldDir, 'gh.db');
    const openAt = async (migrations = listMigrations()) => {
      const db = await openDatabase({ file });
      await migrate(db, migrations);
      const store = await openStore(db);
      opened.push(store);
      return store;
    };
    try {
      const before = await openAt(listMigrations().filter((m) => m.version < 25));
      await before.sql.run('INSERT INTO dpop_proof_log (key_hash, expires_at) VALUES (?, ?), (?, ?)', ['x1', 1, 'x2', 1]);
      await before.sql.run('DELETE FROM dpop_proof_log');
      const after = await openAt();
      const first = randomUUID();
      expect(await after.dpop.useProof(first, later())).toBe(true);
      expect((await after.sql.get<{ seq: number }>('SELECT seq FROM dpop_proof_log WHERE key_hash = ?', [first]))!.seq).toBeGreaterThan(2);
    } finally {
      rmSync(oldDir, { recursive: true, force: true });
    }
  });

  it('a proof past its window is forgotten, and housekeeping drops its row', async () => {
    const s = await open();
    const old = randomUUID();
    const past = Math.floor(Date.now() / 1000) - 1;
    await s.sql.run('INSERT INTO dpop_proof_log (key_hash, expires_at) VALUES (?, ?)', [old, past]);
    expect(await s.dpop.useProof(old, later())).toBe(true);
    expect(await s.dpop.purgeExpired()).toBeGreaterThanOrEqual(1);
    expect(await s.dpop.useProof(old, later())).toBe(false);
  });
});
