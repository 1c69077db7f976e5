import { createHash } from 'node:crypto';
import pg from 'pg';

/**
 * With GATEHOUSE_TEST_DATABASE_URL (a PostgreSQL server URL whose user may create databases),
 * every test server runs on PostgreSQL: each test directory gets its own fresh database, so
 * a server restarted on the same directory finds its data again. Without it, SQLite.
 */
export const testServerUrl = (): string | undefined => process.env.GATEHOUSE_TEST_DATABASE_URL || undefined;

const nameFor = (key: string) => `gh_test_${createHash('sha256').update(key).digest('hex').slice(0, 20)}`;

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: testServerUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The URL of the database for `key` (a test directory), created when it does not exist yet. */
export async function testDatabase(key: string): Promise<string> {
  const name = nameFor(key);
  await admin(async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) await c.query(`CREATE DATABASE ${name}`);
  });
  const url = new URL(testServerUrl()!);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops the database of `key` (its servers must be stopped). */
export async function dropTestDatabase(key: string): Promise<void> {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${nameFor(key)} WITH (FORCE)`));
}
