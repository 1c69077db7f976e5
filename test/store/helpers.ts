import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';

export interface TestStore {
  store: Store;
  /**
   * Stores that compete as separate instances do: on PostgreSQL each is its own pool; on
   * SQLite they are the one connection of the process (a second connection in the same
   * thread would wait on the file lock synchronously, which a real second process never does).
   */
  peers(n: number): Promise<Store[]>;
  close(): Promise<void>;
}

/** A migrated store on a fresh SQLite file. */
export async function openTestStore(): Promise<TestStore> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  const file = join(dir, 'store.db');
  const db = await openDatabase({ file });
  await migrate(db);
  const store = createStore(db);
  return {
    store,
    async peers(n) {
      return Array.from({ length: n }, () => store);
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
