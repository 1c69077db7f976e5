import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from './helpers.js';
import { decodePageToken, type Relationship } from '../../src/store/relationships.js';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore();
});
afterAll(() => t?.close());

const rel = (object: string, relation: string, subject: string, condition?: Relationship['condition']): Relationship =>
  condition ? { object, relation, subject, condition } : { object, relation, subject };

describe('relationships in the store', () => {
  it('writes and deletes all or nothing, logging each change in commit order', async () => {
    const { relationships } = t.store;
    const before = await relationships.latestChange();
    const stamp = await t.store.changes.version('relationships');
    const res = await relationships.apply(
      [
        rel('document:1', 'viewer', 'user:anne'),
        rel('document:1', 'viewer', 'group:eng#member'),
        rel('document:1', 'viewer', 'user:*'),
        rel('folder:a:b', 'owner', 'user:bob', { name: 'office_hours', context: { start: 9 } }),
      ],
      [],
    );
    expect(res).toEqual({ written: 4, deleted: 0 });
    expect(await t.store.changes.version('relationships')).toBeGreaterThan(stamp);
    const changes = await relationships.changesSince(before);
    expect(changes.map((c) => [c.op, c.relationship.subject])).toEqual([
      ['write', 'user:anne'],
      ['write', 'group:eng#member'],
      ['write', 'user:*'],
      ['write', 'user:bob'],
    ]);
    expect(changes[3]!.relationship).toEqual(rel('folder:a:b', 'owner', 'user:bob', { name: 'office_hours', context: { start: 9 } }));
    // the same writes again change nothing and log nothing
    const latest = await relationships.latestChange();
    await relationships.apply([rel('document:1', 'viewer', 'user:anne')], [rel('document:9', 'viewer', 'user:nobody')]);
    expect(await relationships.latestChange()).toBe(latest);
    // a changed condition is a write
    await relationships.apply([rel('folder:a:b', 'owner', 'user:bob', { name: 'office_hours', context: { start: 8 } })], []);
    const [changed] = await relationships.changesSince(latest);
    expect(changed!.relationship.condition).toEqual({ name: 'office_hours', context: { start: 8 } });
  });

  it('rolls a failing batch back whole', async () => {
    const { relationships } = t.store;
    const count = await relationships.count();
    await expect(
      t.store.transaction(async (tx) => {
        await tx.relationships.apply([rel('document:2', 'viewer', 'user:carl')], []);
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(await relationships.count()).toBe(count);
  });

  it('pages by key with filters on object, type, relation and subject', async () => {
    const { relationships } = t.store;
    await relationships.apply(
      Array.from({ length: 25 }, (_, i) => rel(`doc:${String(i).padStart(2, '0')}`, i % 2 ? 'viewer' : 'editor', `user:u${i % 3}`)),
      [],
    );
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await relationships.page({ object: 'doc:' }, 10, token ? decodePageToken(token) : undefined);
      expect(page.data.length).toBeLessThanOrEqual(10);
      seen.push(...page.data.map((r) => r.object));
      token = page.next;
    } while (token);
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
    expect((await relationships.page({ object: 'doc:03' }, 100)).data).toEqual([rel('doc:03', 'viewer', 'user:u0')]);
    expect((await relationships.page({ object: 'doc:', relation: 'viewer' }, 100)).data).toHaveLength(12);
    expect((await relationships.page({ subject: 'user:u1' }, 100)).data.every((r) => r.subject === 'user:u1')).toBe(true);
    expect((await relationships.page({ subject: 'group:eng#member' }, 100)).data).toEqual([rel('document:1', 'viewer', 'group:eng#member')]);
    expect(decodePageToken('not-a-token')).toBeUndefined();
  });

  it('reads every relationship in chunks', async () => {
    let n = 0;
    for await (const chunk of t.store.relationships.each(7)) n += chunk.length;
    expect(n).toBe(await t.store.relationships.count());
  });
});
