import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
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

/** The error codes of the description's Errors section, plus the management API's. */
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

export function sendError(res: Response, err: ProtocolError): void {
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.setHeader('Cache-Control', 'no-store');
  res.status(err.status).json(err.body());
}

interface BodyParserError { type?: string; status?: number; statusCode?: number; expose?: boolean }

/** The one error path: protocol errors as their data, parser errors as 400/413, the rest as a bare 500. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const log = (req as { log?: Logger }).log ?? logger;
    let perr: ProtocolError;
    if (err instanceof ProtocolError) {
      perr = err;
    } else {
      const bp = err as BodyParserError;
      if (bp?.type === 'entity.parse.failed') perr = errors.invalidRequest('the request body is not valid JSON');
      else if (bp?.type === 'entity.too.large') perr = errors.payloadTooLarge('the request body is too large');
      else if (bp?.type === 'encoding.unsupported' || bp?.type === 'charset.unsupported')
        perr = errors.unsupportedMediaType('unsupported body encoding');
      else if (typeof bp?.status === 'number' && bp.status >= 400 && bp.status < 500 && bp.expose)
        perr = errors.invalidRequest('the request body could not be read');
      else {
        log.error({ err }, 'unhandled error');
        perr = errors.serverError('an unexpected error occurred');
      }
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    sendError(res, perr);
  };
}
