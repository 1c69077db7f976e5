// Search paging: results come in a stable order (by identifier), and a page token says where
// the previous page ended, the page size, and which request it belongs to. A token replayed
// with a changed request is refused, as the specification asks; a follow-up request may leave
// out `page.limit` (the specification's own example does), which then keeps the token's size.

import { createHash } from 'node:crypto';
import { canonicalJson } from '../authz/canonical.js';
import { badRequest, type SearchRequest } from './request.js';

/** The page size when the request names none. */
export const DEFAULT_PAGE = 100;

/** What the request asks, less its page: the part that must not change across pages. */
export function requestFingerprint(kind: string, req: SearchRequest): string {
  const { page: _page, ...rest } = req;
  return createHash('sha256').update(canonicalJson({ kind, ...rest })).digest('base64url').slice(0, 22);
}

export function encodePageToken(after: string, limit: number, fingerprint: string): string {
  return Buffer.from(JSON.stringify([after, limit, fingerprint])).toString('base64url');
}

/** Where the previous page ended and its size; a 400 for a foreign token, or one replayed with a changed request or limit. */
export function decodePageToken(token: string, fingerprint: string, limit: number | undefined): { after: string; limit: number } {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    decoded = undefined;
  }
  if (
    !Array.isArray(decoded) ||
    decoded.length !== 3 ||
    typeof decoded[0] !== 'string' ||
    !Number.isInteger(decoded[1]) ||
    decoded[1] < 0 ||
    typeof decoded[2] !== 'string'
  ) {
    throw badRequest([{ path: 'page.token', message: 'is not a token this PDP issued', code: 'invalid_value' }]);
  }
  if (decoded[2] !== fingerprint || (limit !== undefined && limit !== decoded[1])) {
    throw badRequest([{ path: 'page.token', message: 'belongs to another request: only page.token may change between pages', code: 'invalid_value' }]);
  }
  return { after: decoded[0], limit: decoded[1] };
}

export interface Paged<T> {
  results: T[];
  page?: { next_token: string; count: number };
}

/**
 * Walks `ids` (sorted, unique) after the token's position and keeps those `accept` admits,
 * until the page is full; asks `accept` about one more only to know whether a next page exists.
 * The page object is present when the request carried one or when more results follow.
 * At most `maxExamined` candidates are asked about per request: when that bound stops the walk
 * before the candidates run out, the page ends there (possibly short, even empty) and its
 * `next_token` resumes after the last candidate examined, so a caller pages on as usual.
 */
export async function collectPage<T>(
  kind: string,
  req: SearchRequest,
  ids: string[],
  accept: (id: string) => Promise<T | undefined> | T | undefined,
  maxExamined = Number.POSITIVE_INFINITY,
): Promise<Paged<T>> {
  const fingerprint = requestFingerprint(kind, req);
  const resumed = req.page?.token !== undefined ? decodePageToken(req.page.token, fingerprint, req.page.limit) : undefined;
  const after = resumed?.after;
  const limit = resumed?.limit ?? req.page?.limit ?? DEFAULT_PAGE;
  let i = 0;
  if (after !== undefined) {
    // Binary search: ids are sorted, and `after` may have disappeared since.
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ids[mid]! <= after) lo = mid + 1;
      else hi = mid;
    }
    i = lo;
  }
  const results: T[] = [];
  let last: string | undefined;
  let more = false;
  let examined = 0;
  for (; i < ids.length; i++) {
    if (examined === maxExamined) {
      // The bound, not the end: resume after the last candidate examined.
      more = true;
      last = ids[i - 1];
      break;
    }
    examined++;
    const hit = await accept(ids[i]!);
    if (hit === undefined) continue;
    if (results.length === limit) {
      more = true;
      break;
    }
    results.push(hit);
    last = ids[i]!;
  }
  const next = more ? encodePageToken(last ?? after ?? '', limit, fingerprint) : '';
  if (!more && !req.page) return { results };
  return { page: { next_token: next, count: results.length }, results };
}

/** Sorted unique identifiers, in code-unit order (the order page tokens compare in). */
export const sortedIds = (ids: Iterable<string>): string[] => [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
