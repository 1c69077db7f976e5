/**
 * SPIFFE IDs (the SPIFFE-ID standard, section 2): `spiffe://<trust domain>/<path>`.
 * The trust domain is lowercase letters, digits, `.`, `-` and `_` (so no port, user info
 * or upper case); the path is non-empty segments of letters, digits, `.`, `-` and `_`,
 * none of them `.` or `..`; no query or fragment.
 */
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SEGMENT = /^[A-Za-z0-9._-]+$/;

/** Why `id` is not a SPIFFE ID of a workload, or null when it is one. */
export function spiffeIdProblem(id: string): string | null {
  if (!id.startsWith('spiffe://')) return 'must be a SPIFFE ID: spiffe://<trust domain>/<path> (lowercase scheme)';
  if (id.includes('?') || id.includes('#')) return 'a SPIFFE ID has no query or fragment';
  const rest = id.slice('spiffe://'.length);
  const slash = rest.indexOf('/');
  const trustDomain = slash < 0 ? rest : rest.slice(0, slash);
  if (!trustDomain) return 'a SPIFFE ID needs a trust domain';
  if (trustDomain.includes('@')) return 'a SPIFFE ID has no user info';
  if (trustDomain.includes(':')) return 'a SPIFFE trust domain has no port';
  if (!TRUST_DOMAIN.test(trustDomain)) return 'a SPIFFE trust domain is lowercase letters, digits, ".", "-" and "_"';
  if (slash < 0 || slash === rest.length - 1) return 'an agent SPIFFE ID needs a path, such as /agent/<name>';
  for (const seg of rest.slice(slash + 1).split('/')) {
    if (seg === '') return 'a SPIFFE ID path has no empty segments (no "//" and no trailing "/")';
    if (seg === '.' || seg === '..') return 'a SPIFFE ID path has no "." or ".." segments';
    if (!SEGMENT.test(seg)) return 'a SPIFFE ID path segment is letters, digits, ".", "-" and "_"';
  }
  return null;
}

/** The default agent ID: `spiffe://<issuer host, no port>/agent/<name>`. */
export const defaultAgentId = (issuerHost: string, name: string): string => `spiffe://${issuerHost.toLowerCase()}/agent/${name}`;
