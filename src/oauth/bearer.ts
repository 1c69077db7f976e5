/**
 * The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), or undefined when the
 * header is absent or not a bearer credential: for the doors whose tokens are not access tokens
 * (the management API's, the metrics scraper's). Whether the token is good is each verifier's
 * question; this only finds it.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  return BEARER.exec(authorization)?.[1];
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** An access token as a resource receives it: with its scheme, `Bearer` or `DPoP` (RFC 9449 section 7.1). */
export interface AccessCredential {
  scheme: 'Bearer' | 'DPoP';
  token: string;
}

/**
 * The access token of `Authorization: Bearer <token>` or `Authorization: DPoP <token>`: the one
 * parser of every door that takes access tokens (userinfo, the MCP gateway, the
 * transaction-token endpoint, AuthZEN). Whether a DPoP-bound token came with its proof is
 * checkSenderConstraint's question (src/oauth/dpop.ts).
 */
export function accessCredential(authorization: string | undefined): AccessCredential | undefined {
  if (!authorization) return undefined;
  const m = CREDENTIAL.exec(authorization);
  if (!m) return undefined;
  return { scheme: m[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer', token: m[2]! };
}

const CREDENTIAL = /^(Bearer|DPoP)[ \t]+(\S+)[ \t]*$/i;
