import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import type { TestServer } from '../helpers/server.js';

export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
export const CIBA_GRANT = 'urn:openid:params:grant-type:ciba';

/** An agent as a real one is written: an Ed25519 key pair made with jose, its ID from registration. */
export interface TestAgent {
  id: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function newKeyPair(): Promise<{ privateKey: CryptoKey; publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  return { privateKey, publicJwk: await exportJWK(publicKey) };
}

/** Registers an agent through the management API. */
export async function registerAgent(
  server: TestServer,
  body: { name: string; mode: 'delegated' | 'autonomous'; roles?: string[]; capabilities?: { name: string; limits?: Record<string, unknown> }[] },
): Promise<TestAgent> {
  const keys = await newKeyPair();
  const res = await server.admin('POST', '/agents', { ...body, public_jwk: keys.publicJwk });
  if (res.status !== 201) throw new Error(`agent registration failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.agent_id, ...keys };
}

export async function putRole(server: TestServer, name: string, permissions: string[]): Promise<void> {
  const res = await server.admin('PUT', `/roles/${encodeURIComponent(name)}`, { permissions });
  if (res.status >= 300) throw new Error(`role failed: ${res.status} ${JSON.stringify(res.body)}`);
}

export interface AssertionOptions {
  aud?: string | string[];
  iss?: string;
  sub?: string;
  expIn?: number;
  iat?: number;
  jti?: string;
  key?: CryptoKey;
  omit?: ('exp' | 'iat' | 'jti')[];
}

/** A client assertion (RFC 7523) signed with the agent's key. */
export async function assertion(server: TestServer, agent: TestAgent, o: AssertionOptions = {}): Promise<string> {
  const t = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: o.iss ?? agent.id,
    sub: o.sub ?? agent.id,
    aud: o.aud ?? server.ctx.urls.agentToken,
    exp: t + (o.expIn ?? 60),
    iat: o.iat ?? t,
    jti: o.jti ?? randomUUID(),
  };
  for (const k of o.omit ?? []) delete claims[k];
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA' }).sign(o.key ?? agent.privateKey);
}

export async function postForm(url: string, fields: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }> {
  return readJson(await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) }));
}

export async function postJson(url: string, json: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  return readJson(await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(json) }));
}

/** A response's status, its body (parsed when it is JSON) and its headers. */
export async function readJson(res: Response): Promise<{ status: number; body: any; headers: Headers }> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, headers: res.headers };
}

/** client_credentials at the agent token endpoint. */
export async function agentToken(server: TestServer, agent: TestAgent, extra: Record<string, string> = {}) {
  return postForm(server.ctx.urls.agentToken, {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertion(server, agent),
    ...extra,
  });
}

export async function accessTokenFor(server: TestServer, agent: TestAgent, extra: Record<string, string> = {}): Promise<string> {
  const res = await agentToken(server, agent, extra);
  if (res.status !== 200) throw new Error(`token failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.access_token;
}

export async function bind(server: TestServer, accessToken: string, action: string, resource: string, context: Record<string, unknown>) {
  return postJson(server.ctx.urls.transactionToken, { action, resource, context }, { authorization: `Bearer ${accessToken}` });
}

export async function authorize(server: TestServer, body: Record<string, unknown>) {
  return postJson(server.ctx.urls.agentAuthorize, body);
}

/** Binds then asks for the decision: the full agent round trip. */
export async function bindAndDecide(
  server: TestServer,
  agent: TestAgent,
  accessToken: string,
  action: string,
  resource: string,
  context: Record<string, unknown>,
): Promise<{ bindStatus: number; decision?: { decision: string; reason: string; policy_version: string; approval_id?: string } }> {
  const b = await bind(server, accessToken, action, resource, context);
  if (b.status !== 200) return { bindStatus: b.status };
  const d = await authorize(server, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action, resource, context });
  if (d.status !== 200) throw new Error(`authorize failed: ${d.status} ${JSON.stringify(d.body)}`);
  return { bindStatus: 200, decision: d.body.data };
}

/** Creates a rule through the management API; `live` validates and enables it too. */
export async function createRule(server: TestServer, rule: Record<string, unknown>, live = true): Promise<string> {
  const created = await server.admin('POST', '/rules', rule);
  if (created.status !== 201) throw new Error(`rule failed: ${created.status} ${JSON.stringify(created.body)}`);
  if (live) await enableRule(server, created.body.id);
  return created.body.id;
}

export async function enableRule(server: TestServer, id: string): Promise<void> {
  const v = await server.admin('POST', `/rules/${id}/validate`);
  if (v.status !== 200 || !v.body.valid) throw new Error(`validate failed: ${JSON.stringify(v.body)}`);
  const e = await server.admin('POST', `/rules/${id}/enable`);
  if (e.status !== 200) throw new Error(`enable failed: ${e.status} ${JSON.stringify(e.body)}`);
}

/** A tiny browser: keeps cookies, reads hidden form inputs, does not follow redirects. */
export class Browser {
  private jar = new Map<string, string>();

  constructor(private readonly base: string) {}

  private store(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      const name = pair!.slice(0, i).trim();
      const value = pair!.slice(i + 1).trim();
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(c)) this.jar.delete(name);
      else this.jar.set(name, value);
    }
  }

  private cookie(): string {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async get(path: string): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(new URL(path, this.base), { headers: { cookie: this.cookie() }, redirect: 'manual' });
    this.store(res);
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  }

  async post(path: string, fields: Record<string, string>): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(new URL(path, this.base), {
      method: 'POST',
      headers: { cookie: this.cookie(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields),
      redirect: 'manual',
    });
    this.store(res);
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  }

  /** Signs in on the sign-in page (email, password, hidden inputs). */
  async signIn(email: string, password: string, returnTo = '/approvals'): Promise<void> {
    const page = await this.get(`/login?return_to=${encodeURIComponent(returnTo)}`);
    const res = await this.post('/login', { ...hiddenInputs(page.text), email, password });
    if (res.status !== 302 && res.status !== 303) throw new Error(`sign-in failed: ${res.status}`);
  }
}

/** The hidden inputs of the first form (or of the form holding `marker`). */
export function hiddenInputs(html: string, marker?: string): Record<string, string> {
  const forms = html.split(/<form\b/i).slice(1);
  const form = (marker ? forms.find((f) => f.includes(marker)) : forms[0]) ?? '';
  const out: Record<string, string> = {};
  const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  for (const m of form.split(/<\/form>/i)[0]!.matchAll(/<input\b[^>]*>/gi)) {
    const tag = m[0];
    if (!/type="hidden"/i.test(tag)) continue;
    const name = /name="([^"]*)"/.exec(tag)?.[1];
    const value = /value="([^"]*)"/.exec(tag)?.[1] ?? '';
    if (name) out[unescape(name)] = unescape(value);
  }
  return out;
}
