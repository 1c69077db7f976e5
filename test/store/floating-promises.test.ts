import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findFloatingPromises } from './floating-promises.js';

const root = join(import.meta.dirname, '..', '..');

describe('no promise is dropped', () => {
  it('every promise in src/ and test/ is awaited, returned, or explicitly voided', () => {
    const found = findFloatingPromises(root, (f) => !f.includes('/node_modules/'));
    expect(found.map((f) => `${f.file}:${f.line}: ${f.why}: ${f.text}`)).toEqual([]);
  }, 120_000);
});
