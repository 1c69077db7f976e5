import { Router, type RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { ACR_VALUES_SUPPORTED } from '../oauth/acr.js';
import { AGENT_TOKEN_GRANT_TYPES } from '../agents/token.js';
import { declaredTypes } from '../oauth/authorization-details.js';
import { ID_JAG_TOKEN_TYPE } from '../oauth/grants/id-jag.js';
import { TOKEN_ENDPOINT_GRANT_TYPES } from '../oauth/token.js';
import { DPOP_SIGNING_ALGS } from '../oauth/dpop.js';
import { SUPPORTED_EVENT_TYPES } from '../signals.js';

/** Discovery documents and keys: no authentication, open CORS, a short public cache. */
const publicDocument =
  (maxAge: number): RequestHandler =>
  (_req, res, next) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Access-Control-Allow-Methods', 'GET, OPTIONS');
    res.setHeader('Cache-Control', `public, max-age=${maxAge}`);
    next();
  };

export const CLAIMS_SUPPORTED = [
  'sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'c_hash',
  'email', 'email_verified', 'name', 'scope', 'groups', 'roles',
];
export const SCOPES_SUPPORTED = ['openid', 'profile', 'email', 'offline_access'];

export function discoveryDocuments(ctx: AppContext) {
  const u = ctx.urls;
  return {
    'openid-configuration': {
      issuer: u.issuer,
      authorization_endpoint: u.authorize,
      token_endpoint: u.token,
      userinfo_endpoint: u.userinfo,
      jwks_uri: u.jwks,
      revocation_endpoint: u.revoke,
      end_session_endpoint: u.logout,
      introspection_endpoint: u.introspect,
      response_types_supported: ['code'],
      grant_types_supported: TOKEN_ENDPOINT_GRANT_TYPES,
      // ID-JAGs are issued by token exchange at the token endpoint (Identity Chaining's metadata).
      identity_chaining_requested_token_types_supported: [ID_JAG_TOKEN_TYPE],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
      // As the interface fixes it; clients known by their metadata document may also use
      // private_key_jwt with the keys they publish (their document says which).
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: SCOPES_SUPPORTED,
      claims_supported: CLAIMS_SUPPORTED,
      acr_values_supported: ACR_VALUES_SUPPORTED,
      pushed_authorization_request_endpoint: u.par,
      require_pushed_authorization_requests: false,
      // the declared types, filled in per request (they change through the management API)
      authorization_details_types_supported: [] as string[],
      client_id_metadata_document_supported: true,
      dpop_signing_alg_values_supported: DPOP_SIGNING_ALGS,
    },
    'oauth-authorization-server': {
      issuer: u.issuer,
      // RFC 8414 allows leaving it out, but the MCP SDK refuses metadata without it.
      authorization_endpoint: u.authorize,
      token_endpoint: u.agentToken,
      jwks_uri: u.jwks,
      grant_types_supported: AGENT_TOKEN_GRANT_TYPES,
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      token_endpoint_auth_signing_alg_values_supported: ['EdDSA'],
      access_token_signing_alg_values_supported: ['EdDSA'],
      backchannel_authentication_endpoint: u.backchannelAuthorize,
      backchannel_token_delivery_modes_supported: ['poll'],
      backchannel_user_code_parameter_supported: false,
      agent_configuration_endpoint: u.agentConfiguration,
      response_types_supported: [],
      dpop_signing_alg_values_supported: DPOP_SIGNING_ALGS,
      // CIBA and token exchange at this token endpoint take authorization_details too (per request)
      authorization_details_types_supported: [] as string[],
    },
    'agent-configuration': {
      modes: ['delegated', 'autonomous'],
      algorithms: ['EdDSA'],
      agent_id_scheme: 'spiffe',
      approval_methods: ['ciba', 'service_hitl'],
      default_location: u.mcp,
      endpoints: { token: u.agentToken, backchannel_authorize: u.backchannelAuthorize },
    },
    'oauth-protected-resource': {
      resource: u.mcp,
      authorization_servers: [u.issuer],
      // RFC 9728: DPoP-bound tokens are accepted (with their proofs); bearer tokens too.
      dpop_signing_alg_values_supported: DPOP_SIGNING_ALGS,
      dpop_bound_access_tokens_required: false,
    },
    'ssf-configuration': {
      issuer: u.issuer,
      jwks_uri: u.jwks,
      configuration_endpoint: u.ssfStreams,
      status_endpoint: u.ssfStatus,
      add_subject_endpoint: u.ssfAddSubject,
      remove_subject_endpoint: u.ssfRemoveSubject,
      verification_endpoint: u.ssfVerify,
      delivery_methods_supported: ['urn:ietf:rfc:8935'],
      events_supported: SUPPORTED_EVENT_TYPES,
      authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6750' }],
      spec_version: '1_0',
    },
  };
}

export function discoveryRouter(ctx: AppContext): Router {
  const router = Router();
  const docs = discoveryDocuments(ctx);
  const doc = publicDocument(300);
  const paths: [string, object][] = Object.entries(docs).map(([name, body]) => [`/.well-known/${name}`, body]);
  // RFC 9728 section 3.1: the metadata of the resource {base_url}/mcp also lives at the
  // well-known URL with the resource's path appended (where the MCP SDK looks first).
  paths.push([`/.well-known/oauth-protected-resource${new URL(ctx.urls.mcp).pathname}`, docs['oauth-protected-resource']]);
  for (const [path, body] of paths) {
    const json = JSON.stringify(body);
    if (body === docs['openid-configuration'] || body === docs['oauth-authorization-server']) {
      router.get(path, doc, async (_req, res) => {
        const types = [...(await declaredTypes(ctx)).keys()];
        res.type('application/json').send(JSON.stringify({ ...body, authorization_details_types_supported: types }));
      });
      router.options(path, doc, (_req, res) => void res.sendStatus(204));
      continue;
    }
    router.get(path, doc, (_req, res) => {
      res.type('application/json').send(json);
    });
    router.options(path, doc, (_req, res) => void res.sendStatus(204));
  }
  const keys = publicDocument(60);
  const jwks: RequestHandler = async (_req, res) => {
    res.type('application/json').send(JSON.stringify(await ctx.keys.jwks()));
  };
  router.get('/.well-known/jwks.json', keys, jwks);
  router.get('/oidc/.well-known/jwks.json', keys, jwks);
  router.options(['/.well-known/jwks.json', '/oidc/.well-known/jwks.json'], keys, (_req, res) => void res.sendStatus(204));
  return router;
}
