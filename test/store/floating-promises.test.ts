import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findFloatingPromises } from './floating-promises.js';

const root = join(import.meta.dirname, '..', '..');

// A check of the code, not of the database: the PostgreSQL run of the suite skips it.
describe.skipIf(!!process.env.GATEHOUSE_TEST_DATABASE_URL)('no promise is dropped', () => {
  it('every promise in src/ and test/ is awaited, returned, or explicitly voided', () => {
    const found = findFloatingPromises(root, (f) => !f.includes('/node_modules/'));
    expect(found.map((f) => `${f.file}:${f.line}: ${f.why}: ${f.text}`)).toEqual([]);
  }, 300_000);
});
