import * as client from 'openid-client';
import { Secret, TOTP } from 'otpauth';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A tiny cookie jar: name → value per server, enough for one browser talking to one issuer. */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  /** Raw Set-Cookie headers seen, for attribute checks. */
  readonly setCookieHeaders: string[] = [];

  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      this.setCookieHeaders.push(line);
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a)) || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

export interface ParsedForm {
  action: string;
  fields: Record<string, string>;
  inputs: string[];
  buttons: { name: string; value: string }[];
}

const attr = (tag: string, name: string): string | undefined => {
  const m = new RegExp(`\\s${name}="([^"]*)"`, 'i').exec(tag);
  return m ? decodeEntities(m[1]!) : undefined;
};
const decodeEntities = (s: string) =>
  s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&#96;/g, '`').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** The page's POST forms: action, every input's value by name, and the buttons. */
export function parseForms(html: string): ParsedForm[] {
  const forms: ParsedForm[] = [];
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    if ((attr(m[1]!, 'method') ?? 'get').toLowerCase() !== 'post') continue;
    const fields: Record<string, string> = {};
    const inputs: string[] = [];
    for (const i of m[2]!.matchAll(/<input\b[^>]*>/gi)) {
      const name = attr(i[0], 'name');
      if (!name) continue;
      inputs.push(name);
      fields[name] = attr(i[0], 'value') ?? '';
    }
    const buttons = [...m[2]!.matchAll(/<button\b[^>]*>/gi)]
      .map((b) => ({ name: attr(b[0], 'name') ?? '', value: attr(b[0], 'value') ?? '' }))
      .filter((b) => b.name);
    forms.push({ action: attr(m[1]!, 'action') ?? '', fields, inputs, buttons });
  }
  return forms;
}

/** A browser stand-in: fetch with a cookie jar and manual redirects. */
export class Browser {
  readonly jar = new CookieJar();
  /** `headers`: sent with every request (a proxy's X-Forwarded-Proto, say) */
  constructor(readonly base: string, readonly headers: Record<string, string> = {}) {}

  async get(url: string): Promise<Response> {
    const res = await fetch(new URL(url, this.base), { redirect: 'manual', headers: { ...this.headers, cookie: this.jar.header() } });
    this.jar.store(res);
    return res;
  }

  async post(url: string, form: Record<string, string>): Promise<Response> {
    const res = await fetch(new URL(url, this.base), {
      method: 'POST',
      redirect: 'manual',
      headers: { ...this.headers, cookie: this.jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    });
    this.jar.store(res);
    return res;
  }

  /** Submits the page's only POST form with `values` filled in. */
  async submit(page: Response | string, values: Record<string, string>, pageUrl: string): Promise<Response> {
    const html = typeof page === 'string' ? page : await page.text();
    const forms = parseForms(html);
    if (forms.length !== 1) throw new Error(`expected one POST form, got ${forms.length}: ${html.slice(0, 400)}`);
    const f = forms[0]!;
    return this.post(new URL(f.action || pageUrl, new URL(pageUrl, this.base)).toString(), { ...f.fields, ...values });
  }
}

export interface SignInSteps {
  email: string;
  password: string;
  /** the TOTP secret (base32) when a second step is expected */
  totpSecret?: string;
  /** which 30-second step to send (a used step is refused, so tests in one window use different ones) */
  totpOffset?: number;
  /** what to press on a consent page */
  consent?: 'approve' | 'deny';
}

export const totpNow = (secret: string, offsetSteps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), digits: 6, period: 30 }).generate({ timestamp: Date.now() + offsetSteps * 30_000 });

/**
 * Follows an authorization URL like a browser: sign-in page, second step, consent, until the
 * issuer sends the browser away from itself. Returns the URL it was sent to.
 */
export async function followSignIn(browser: Browser, authorizationUrl: string, steps?: SignInSteps): Promise<URL> {
  let res = await browser.get(authorizationUrl);
  let url = authorizationUrl;
  for (let hop = 0; hop < 12; hop++) {
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location')!, url);
      if (next.origin !== new URL(browser.base).origin) return next;
      url = next.toString();
      res = await browser.get(url);
      continue;
    }
    if (res.status !== 200) throw new Error(`unexpected ${res.status} at ${url}: ${(await res.text()).slice(0, 300)}`);
    const html = await res.text();
    const form = parseForms(html)[0];
    if (!form || !steps) throw new Error(`stuck at ${url}: ${html.slice(0, 400)}`);
    if (form.inputs.includes('password')) res = await browser.submit(html, { email: steps.email, password: steps.password }, url);
    else if (form.inputs.includes('otp')) res = await browser.submit(html, { otp: totpNow(steps.totpSecret!, steps.totpOffset ?? 0) }, url);
    else if (form.buttons.some((b) => b.name === 'decision')) res = await browser.submit(html, { decision: steps.consent ?? 'approve' }, url);
    else throw new Error(`unknown form at ${url}`);
  }
  throw new Error('too many redirects');
}

export interface Fixture {
  server: TestServer;
  issuer: string;
  redirectUri: string;
  /** a confidential web application (secret, refresh tokens, first party) */
  web: { client_id: string; client_secret: string };
  /** a public SPA (PKCE, no secret) */
  spa: { client_id: string };
  user: { id: string; email: string; password: string };
  /** a person with TOTP */
  mfaUser: { id: string; email: string; password: string; totp: string };
}

export const TOTP_SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

let counter = 0;
/** Creates an application through the management API; returns its client_id and secret. */
export async function createApp(server: TestServer, body: Record<string, unknown>): Promise<{ client_id: string; client_secret?: string }> {
  const r = await server.admin('POST', '/applications', { name: `app-${++counter}`, ...body });
  if (r.status !== 201) throw new Error(`create application: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function createUser(server: TestServer, body: Record<string, unknown>): Promise<{ id: string }> {
  const r = await server.admin('POST', '/users', body);
  if (r.status !== 201) throw new Error(`create user: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function assign(server: TestServer, clientId: string, userId: string): Promise<void> {
  const r = await server.admin('PUT', `/applications/${encodeURIComponent(clientId)}/assignments/${userId}`);
  if (r.status !== 204) throw new Error(`assign: ${r.status} ${JSON.stringify(r.body)}`);
}

/** A server with a web app, a SPA and two assigned people. */
export async function startFixture(): Promise<Fixture> {
  const server = await startTestServer();
  const issuer = server.ctx.urls.issuer;
  const redirectUri = 'http://localhost:9/callback';
  const web = await createApp(server, {
    type: 'web',
    redirect_uris: [redirectUri],
    post_logout_redirect_uris: ['http://localhost:9/bye'],
  });
  const spa = await createApp(server, { type: 'spa', redirect_uris: [redirectUri] });
  const password = 'correct horse battery staple';
  const user = await createUser(server, {
    email: 'ada@example.com', password, name: 'Ada Lovelace', email_verified: true,
    groups: ['eng'], roles: ['admin'], picture: 'https://example.com/ada.png', locale: 'en-GB',
  });
  const mfaUser = await createUser(server, { email: 'grace@example.com', password, name: 'Grace Hopper', totp_secret: TOTP_SECRET });
  for (const app of [web, spa]) for (const u of [user, mfaUser]) await assign(server, app.client_id, u.id);
  return {
    server,
    issuer,
    redirectUri,
    web: { client_id: web.client_id, client_secret: web.client_secret! },
    spa: { client_id: spa.client_id },
    user: { id: user.id, email: 'ada@example.com', password },
    mfaUser: { id: mfaUser.id, email: 'grace@example.com', password, totp: TOTP_SECRET },
  };
}

/** openid-client configuration by discovery (http allowed: the test issuer is http). */
export async function discover(f: Fixture, app: { client_id: string; client_secret?: string }, auth?: client.ClientAuth) {
  return client.discovery(
    new URL(f.issuer),
    app.client_id,
    app.client_secret,
    auth ?? (app.client_secret ? client.ClientSecretBasic(app.client_secret) : client.None()),
    { execute: [client.allowInsecureRequests] },
  );
}

export interface StartedFlow {
  url: string;
  verifier: string;
  state: string;
  nonce: string;
}

/** An authorization URL with PKCE, state and nonce, built by openid-client. */
export async function authorizationUrl(config: client.Configuration, f: Fixture, extra: Record<string, string> = {}): Promise<StartedFlow> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: f.redirectUri,
    scope: 'openid profile email',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url: url.toString(), verifier, state, nonce };
}

/** Signs in through the pages and exchanges the code with openid-client (which checks iss, state, nonce, ID token). */
export async function signInAndExchange(
  config: client.Configuration,
  f: Fixture,
  steps: SignInSteps,
  extra: Record<string, string> = {},
  browser = new Browser(f.issuer),
) {
  const flow = await authorizationUrl(config, f, extra);
  const callback = await followSignIn(browser, flow.url, steps);
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: flow.verifier,
    expectedState: flow.state,
    expectedNonce: flow.nonce,
    idTokenExpected: (extra.scope ?? 'openid').includes('openid'),
  });
  return { tokens, callback, browser, flow };
}

/** A raw form POST (for error rows openid-client would refuse to send). */
export async function postForm(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form),
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : '';
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, headers: res.headers };
}

export const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
