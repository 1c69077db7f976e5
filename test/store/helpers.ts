import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase } from '../../src/store/db.js';
import { openStore, type Store } from '../../src/store/index.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { dropTestDatabase, testDatabase, testServerUrl } from '../helpers/database.js';

export interface TestStore {
  store: Store;
  /** the database URL (PostgreSQL) or undefined (SQLite) */
  url: string | undefined;
  /**
   * Stores that compete as separate instances do: on PostgreSQL each is its own pool; on
   * SQLite they are the one connection of the process (a second connection in the same
   * thread would wait on the file lock synchronously, which a real second process never does).
   */
  peers(n: number): Promise<Store[]>;
  close(): Promise<void>;
}

/** A migrated store on a fresh database of the backend under test, on `clock` (default: the system's). */
export async function openTestStore(clock: Clock = systemClock): Promise<TestStore> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  const file = join(dir, 'store.db');
  const url = testServerUrl() ? await testDatabase(dir) : undefined;
  const db = await openDatabase({ file, url });
  await migrate(db);
  const store = await openStore(db, clock);
  const others: Store[] = [];
  return {
    store,
    url,
    async peers(n) {
      if (!url) return Array.from({ length: n }, () => store);
      const out: Store[] = [];
      for (let i = 0; i < n; i++) out.push(await openStore(await openDatabase({ file, url }), clock));
      others.push(...out);
      return out;
    },
    async close() {
      for (const s of others) await s.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      if (url) await dropTestDatabase(dir);
    },
  };
}
