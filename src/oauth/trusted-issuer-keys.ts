import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { AppContext } from '../context.js';
import type { TrustedIssuer } from '../store/id-jag.js';
import { fetchJson, OutboundRefused } from '../outbound.js';

/** A fetched JWKS is used this long before it is fetched again. */
const JWKS_FRESH_MS = 5 * 60_000;
/** A key set is fetched again early (an unknown `kid`: the issuer rotated) at most this often. */
const REFETCH_COOLDOWN_MS = 30_000;

interface Cached { keys: JWTVerifyGetKey; fetchedAt: number; source: string }
const caches = new WeakMap<AppContext, Map<string, Cached>>();

function isJwks(v: unknown): v is JSONWebKeySet {
  return typeof v === 'object' && v !== null && Array.isArray((v as { keys?: unknown }).keys);
}

/**
 * The keys an issuer's ID-JAGs are verified with: the JWKS kept in its record, or the one at
 * its `jwks_uri` (fetched under the outbound rules, kept 5 minutes per process). `fresh`
 * fetches again (at most every 30 seconds) when a token's key was not among those held.
 */
export async function issuerKeys(ctx: AppContext, issuer: TrustedIssuer, fresh = false): Promise<JWTVerifyGetKey> {
  if (issuer.jwks) return createLocalJWKSet(issuer.jwks as JSONWebKeySet);
  const uri = issuer.jwks_uri!;
  let cache = caches.get(ctx);
  if (!cache) caches.set(ctx, (cache = new Map()));
  const now = Date.now();
  const hit = cache.get(issuer.issuer);
  const age = hit && hit.source === uri ? now - hit.fetchedAt : Infinity;
  if (age < JWKS_FRESH_MS && !(fresh && age > REFETCH_COOLDOWN_MS)) return hit!.keys;
  const doc = await fetchJson(uri, { allowPrivate: ctx.config.outboundAllowPrivate });
  if (!isJwks(doc)) throw new OutboundRefused('the document at jwks_uri is not a JWKS');
  const keys = createLocalJWKSet(doc);
  if (cache.size > 1000) cache.clear();
  cache.set(issuer.issuer, { keys, fetchedAt: now, source: uri });
  return keys;
}
