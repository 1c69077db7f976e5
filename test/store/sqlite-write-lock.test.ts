import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/store/sqlite.js';

// Another process holding SQLite's write lock (here a second connection) keeps this process's
// transaction waiting, and nothing else of this process.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-write-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a transaction waiting for the write lock', () => {
  it('lets the other store calls of its process go on, and runs once the lock is free', async () => {
    const file = join(dir, 'lock.db');
    const db = openSqlite(file);
    await db.exec('CREATE TABLE t (v INTEGER NOT NULL)');
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    other.prepare('INSERT INTO t (v) VALUES (1)').run();

    let committed = false;
    const waiting = db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (v) VALUES (2)');
      committed = true;
    });
    // a read while the transaction waits: answered at once, not after it
    expect(await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 0 });
    expect(committed).toBe(false);

    other.exec('COMMIT');
    await waiting;
    expect(committed).toBe(true);
    expect(await db.all<{ v: number }>('SELECT v FROM t ORDER BY v')).toEqual([{ v: 1 }, { v: 2 }]);
    other.close();
    await db.close();
  });
});
