import * as client from 'openid-client';
import { startTestServer, type TestServer, type TestServerOptions } from '../helpers/server.js';

/** A started server and an m2m caller holding a grant on the built-in AuthZEN `api` application. */
export interface AuthzenFixture {
  server: TestServer;
  base: string;
  /** `{base}/access/v1`: the audience and the `api` application's client ID */
  api: string;
  caller: { client_id: string; client_secret: string };
  token: string;
  /** POST to an AuthZEN endpoint with the caller's token (override or drop it with `headers`). */
  post(path: string, body: unknown, headers?: Record<string, string | null>): Promise<PdpResponse>;
}

export interface PdpResponse {
  status: number;
  body: any;
  headers: Headers;
}

export async function createApp(server: TestServer, body: Record<string, unknown>): Promise<{ client_id: string; client_secret?: string }> {
  const res = await server.admin('POST', '/applications', { name: `app-${Math.random().toString(36).slice(2, 8)}`, ...body });
  if (res.status !== 201) throw new Error(`application failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The m2m application's token for `resource`, through openid-client's client_credentials grant. */
export async function tokenFor(base: string, app: { client_id: string; client_secret: string }, resource: string): Promise<string> {
  const config = await client.discovery(new URL(base), app.client_id, app.client_secret, client.ClientSecretBasic(app.client_secret), {
    execute: [client.allowInsecureRequests],
  });
  return (await client.clientCredentialsGrant(config, { resource })).access_token;
}

/** An m2m application with a grant on the AuthZEN API, and its token. */
export async function newCaller(server: TestServer): Promise<{ client_id: string; client_secret: string; token: string }> {
  const api = `${server.ctx.urls.issuer}/access/v1`;
  const m2m = (await createApp(server, { type: 'm2m' })) as { client_id: string; client_secret: string };
  const grant = await server.admin('PUT', `/applications/${m2m.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] });
  if (grant.status !== 204) throw new Error(`grant failed: ${grant.status} ${JSON.stringify(grant.body)}`);
  return { ...m2m, token: await tokenFor(server.ctx.urls.issuer, m2m, api) };
}

export async function pdpPost(base: string, path: string, body: unknown, headers: Record<string, string | null>): Promise<PdpResponse> {
  const h: Record<string, string> = { 'content-type': 'application/json' };
  for (const [k, v] of Object.entries(headers)) {
    if (v === null) delete h[k];
    else h[k] = v;
  }
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

export async function startAuthzen(opts: TestServerOptions = {}): Promise<AuthzenFixture> {
  const server = await startTestServer(opts);
  const base = server.ctx.urls.issuer;
  const caller = await newCaller(server);
  return {
    server,
    base,
    api: `${base}/access/v1`,
    caller,
    token: caller.token,
    post: (path, body, headers = {}) => pdpPost(base, path, body, { authorization: `Bearer ${caller.token}`, ...headers }),
  };
}

/** Creates a person through the management API (with a chosen id when given). */
export async function putUser(server: TestServer, u: { id?: string; email: string; roles?: string[]; groups?: string[]; name?: string; attributes?: Record<string, unknown> }): Promise<string> {
  const res = await server.admin('POST', '/users', { password: 'correct horse battery staple', name: u.name ?? u.email, ...u });
  if (res.status !== 201) throw new Error(`user failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

/**
 * An example set served as `npm start` serves it (`GATEHOUSE_POLICY_DIR` and
 * `GATEHOUSE_PROJECT_FILE`), with its PEP application granted on the AuthZEN API as
 * docs/authzen.md shows, and that PEP's token.
 */
export async function serveExample(dir: string, pep: { client_id: string; client_secret: string }): Promise<AuthzenFixture> {
  const server = await startTestServer({ env: { GATEHOUSE_POLICY_DIR: dir, GATEHOUSE_PROJECT_FILE: `${dir}/project.json` } });
  const base = server.ctx.urls.issuer;
  const api = `${base}/access/v1`;
  const grant = await server.admin('PUT', `/applications/${pep.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] });
  if (grant.status !== 204) throw new Error(`grant failed: ${grant.status} ${JSON.stringify(grant.body)}`);
  const token = await tokenFor(base, pep, api);
  return {
    server,
    base,
    api,
    caller: pep,
    token,
    post: (path, body, headers = {}) => pdpPost(base, path, body, { authorization: `Bearer ${token}`, ...headers }),
  };
}
