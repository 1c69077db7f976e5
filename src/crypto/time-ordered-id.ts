import { randomFillSync } from 'node:crypto';

/**
 * A UUID version 7 (RFC 9562): the time in milliseconds, then 74 random bits. Ids made one
 * after another sort one after another, so a table indexed by them grows at its end: an insert
 * touches the index's last pages instead of a random page of an ever larger index (which, for
 * the ids of consumed transaction tokens, was most of a budgeted decision's write cost).
 */
export function timeOrderedId(nowMs: number): string {
  const b = randomFillSync(Buffer.alloc(16));
  b.writeUIntBE(Math.max(0, Math.floor(nowMs)) % 2 ** 48, 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
