/**
 * The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), or undefined when the
 * header is absent or not a bearer credential. The one parser of every door: the management
 * API, the decision and binding endpoints, the MCP gateway, AuthZEN and userinfo. Whether the
 * token is good is each verifier's question; this only finds it.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  return BEARER.exec(authorization)?.[1];
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
