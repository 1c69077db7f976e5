import type { ZodError } from 'zod';

/**
 * A protocol error as data: the OAuth form (`error`, `error_description`) with its HTTP
 * status. Every endpoint throws these; one handler turns them into responses.
 */
export class ProtocolError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description?: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(description ? `${error}: ${description}` : error);
    this.name = 'ProtocolError';
  }

  body(): Record<string, unknown> {
    return { error: this.error, ...(this.description ? { error_description: this.description } : {}), ...this.extra };
  }
}

const make =
  (status: number, error: string) =>
  (description?: string, extra?: Record<string, unknown>, headers?: Record<string, string>) =>
    new ProtocolError(status, error, description, extra, headers);

/** What a 503 for want of the database asks the caller to wait, in seconds. */
export const STORE_RETRY_AFTER_SECONDS = 2;

/** The OAuth error codes of the sign-in endpoints, plus the management API's. */
export const errors = {
  invalidRequest: make(400, 'invalid_request'),
  invalidClient: make(401, 'invalid_client'),
  invalidGrant: make(400, 'invalid_grant'),
  unauthorizedClient: make(400, 'unauthorized_client'),
  unsupportedGrantType: make(400, 'unsupported_grant_type'),
  invalidScope: make(400, 'invalid_scope'),
  invalidTarget: make(400, 'invalid_target'),
  accessDenied: make(403, 'access_denied'),
  loginRequired: make(401, 'login_required'),
  interactionRequired: make(401, 'interaction_required'),
  unmetAuthenticationRequirements: make(400, 'unmet_authentication_requirements'),
  insufficientUserAuthentication: make(401, 'insufficient_user_authentication'),
  temporarilyUnavailable: make(503, 'temporarily_unavailable'),
  forbidden: make(403, 'forbidden'),
  rateLimited: make(429, 'rate_limited'),
  invalidToken: make(401, 'invalid_token'),
  insufficientScope: make(403, 'insufficient_scope'),
  notFound: make(404, 'not_found'),
  conflict: make(409, 'conflict'),
  methodNotAllowed: make(405, 'method_not_allowed'),
  unsupportedMediaType: make(415, 'invalid_request'),
  payloadTooLarge: make(413, 'invalid_request'),
  serverError: make(500, 'server_error'),
  /** the database cannot do its part now (away, out of connections, out of time): try again shortly */
  storeUnavailable: (description = 'the database is unavailable; try again shortly') =>
    new ProtocolError(503, 'temporarily_unavailable', description, {}, { 'Retry-After': String(STORE_RETRY_AFTER_SECONDS) }),
  /** authorization_details of an undeclared type, or one its type's schema refuses (RFC 9396 section 5) */
  invalidAuthorizationDetails: make(400, 'invalid_authorization_details'),
  /** a request_uri that is unknown, used, expired or another client's (RFC 9126 section 4) */
  invalidRequestUri: make(400, 'invalid_request_uri'),
  /** request objects (`request`) are not taken (OpenID Connect Core 6) */
  requestNotSupported: make(400, 'request_not_supported'),
  /** a relationship question that needs more hops through the graph than the limit allows */
  resolutionTooComplex: make(400, 'resolution_too_complex'),
  /** RFC 9449 section 5: a token request whose DPoP proof is missing (where one is required), malformed or fails a check */
  invalidDpopProof: make(400, 'invalid_dpop_proof'),
  /** RFC 9449 section 8: the token request's proof must carry the server nonce sent in the `DPoP-Nonce` header */
  useDpopNonce: make(400, 'use_dpop_nonce'),
  /** RFC 9449 section 7.1: a resource request's proof is missing or fails a check (with a `WWW-Authenticate: DPoP` challenge) */
  resourceInvalidDpopProof: make(401, 'invalid_dpop_proof'),
  /** RFC 9449 section 9: the resource request's proof must carry the server nonce sent in the `DPoP-Nonce` header */
  resourceUseDpopNonce: make(401, 'use_dpop_nonce'),
};

/** A zod failure as the management API's 400: each bad field named in `issues`. */
export function validationError(err: ZodError, where = 'body'): ProtocolError {
  const issues = err.issues.map((i) => ({
    path: i.path.map(String).join('.') || where,
    message: i.message,
    code: i.code,
  }));
  const description = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  return errors.invalidRequest(description, { issues });
}
