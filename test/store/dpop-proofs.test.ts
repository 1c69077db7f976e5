import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from './helpers.js';

// A DPoP proof's single-use record: the proofs of one turn are committed together, and each
// answer still says whether that proof was fresh, on one store and across instances.
let t: TestStore;
beforeAll(async () => {
  t = await openTestStore();
});
afterAll(async () => t.close());

const later = () => Math.floor(Date.now() / 1000) + 120;
const recorded = async (keyHash: string) =>
  (await t.store.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM dpop_proof_jtis WHERE key_hash = ?', [keyHash]))!.n;

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
      await own.store.sql.exec('ALTER TABLE dpop_proof_jtis RENAME TO dpop_proof_jtis_away');
      const failed = await Promise.allSettled([own.store.dpop.useProof(randomUUID(), later()), own.store.dpop.useProof(randomUUID(), later())]);
      expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      await own.store.sql.exec('ALTER TABLE dpop_proof_jtis_away RENAME TO dpop_proof_jtis');
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
