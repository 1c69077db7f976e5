import { randomUUID } from 'node:crypto';

/**
 * A UUID version 7 (RFC 9562): the time in milliseconds, then 74 random bits. Ids made one
 * after another sort one after another, so a table indexed by them grows at its end: an insert
 * touches the index's last pages instead of a random page of an ever larger index (which, for
 * the ids of consumed transaction tokens, was most of a budgeted decision's write cost).
 *
 * The random bits are a version 4 UUID's (Node draws those from a buffered pool, where asking
 * the system for 16 fresh bytes each time costs a system call), with its first 48 bits replaced
 * by the time and its version digit by 7.
 */
export function timeOrderedId(nowMs: number): string {
  const time = (Math.max(0, Math.floor(nowMs)) % 2 ** 48).toString(16).padStart(12, '0');
  const random = randomUUID();
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(15)}`;
}
