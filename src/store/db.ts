import Database from 'better-sqlite3';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { projectRoot } from '../paths.js';

export type Db = Database.Database;

const MIGRATIONS_DIR = join(projectRoot, 'src', 'store', 'migrations');

/** Opens the SQLite file with the pragmas every process uses. Does not migrate. */
export function openDatabase(file: string): Db {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  return db;
}

export interface Migration { version: number; name: string; sql: string }

/** Numbered `.sql` files in src/store/migrations, `NNN-name.sql`, applied in order. */
export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+-[\w-]+\.sql$/.test(f))
    .map((f) => ({ version: Number.parseInt(f, 10), name: f, sql: readFileSync(join(dir, f), 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

/** Applies every migration not yet applied, each in its own transaction. Returns the names applied. */
export function migrate(db: Db, migrations = listMigrations()): string[] {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const applied = new Set(
    (db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version),
  );
  const done: string[] = [];
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        Math.floor(Date.now() / 1000),
      );
    }).immediate();
    done.push(m.name);
  }
  return done;
}

/**
 * In cluster mode the workers leave WAL checkpoints to the primary: an automatic
 * checkpoint runs inside whichever worker commits and stalls its requests for milliseconds.
 */
export function disableAutoCheckpoint(db: Db): void {
  db.pragma('wal_autocheckpoint = 0');
}

/** A checkpoint that never waits for readers or writers; the primary runs it every second. */
export function checkpointWal(db: Db): void {
  db.pragma('wal_checkpoint(PASSIVE)');
}
