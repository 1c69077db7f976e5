/** Absolute URLs on the issuer: every discovery field and token `iss`/`aud` is built here. */
export function endpointUrls(issuer: string) {
  const u = (path: string) => `${issuer}${path}`;
  return {
    issuer,
    authorize: u('/oauth/authorize'),
    token: u('/oauth/token'),
    par: u('/oauth/par'),
    userinfo: u('/oauth/userinfo'),
    introspect: u('/oauth/token/introspect'),
    revoke: u('/oauth/token/revoke'),
    logout: u('/oauth/logout'),
    login: u('/login'),
    approvals: u('/approvals'),
    jwks: u('/.well-known/jwks.json'),
    oidcJwks: u('/oidc/.well-known/jwks.json'),
    openidConfiguration: u('/.well-known/openid-configuration'),
    authorizationServer: u('/.well-known/oauth-authorization-server'),
    agentConfiguration: u('/.well-known/agent-configuration'),
    protectedResource: u('/.well-known/oauth-protected-resource'),
    ssfConfiguration: u('/.well-known/ssf-configuration'),
    agentToken: u('/apis/regional/v1/ai/auth/token'),
    backchannelAuthorize: u('/apis/regional/v1/ai/auth/backchannel-authorize'),
    transactionToken: u('/apis/regional/v1/ai/auth/transaction-token'),
    agentAuthorize: u('/apis/regional/v1/agents/authorize'),
    mcp: u('/mcp'),
    ssfStreams: u('/v1/ssf/streams'),
    ssfStatus: u('/v1/ssf/status'),
    ssfAddSubject: u('/v1/ssf/subjects:add'),
    ssfRemoveSubject: u('/v1/ssf/subjects:remove'),
    ssfVerify: u('/v1/ssf/verify'),
    samlMetadata: u('/saml/metadata'),
    admin: u('/admin/v1'),
  };
}
export type EndpointUrls = ReturnType<typeof endpointUrls>;
