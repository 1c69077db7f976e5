import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as client from 'openid-client';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startCluster, type Cluster } from '../helpers/cluster.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser, followSignIn, postForm } from './helpers.js';

/**
 * Clients known by the URL of their metadata document, against a gatehouse process that trusts
 * a test CA through NODE_EXTRA_CA_CERTS (Node's standard TLS trust) and runs with
 * NODE_ENV=development (so that GATEHOUSE_OUTBOUND_ALLOW_PRIVATE defaults to true and the documents, served here on 127.0.0.1, may be fetched); and,
 * without it, the same loopback URLs refused.
 */

interface Served {
  status?: number;
  headers?: Record<string, string>;
  body: string;
}

let dir: string;
let cluster: Cluster;
let docs: Server;
let docsBase: string;
const served = new Map<string, Served>();
const fetches = new Map<string, number>();
const PERSON = { email: 'ada@example.com', password: 'correct horse battery staple' };
const REDIRECT = 'http://localhost:9/callback';

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A CA and a certificate for localhost / 127.0.0.1 signed by it. */
function makeCertificates(): { key: Buffer; cert: Buffer; ca: string } {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=gatehouse test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'doc.key', '-out', 'doc.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', 'doc.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'doc.pem', '-days', '2', '-extfile', 'san.ext');
  return { key: readFileSync(join(dir, 'doc.key')), cert: readFileSync(join(dir, 'doc.pem')), ca: join(dir, 'ca.pem') };
}

const json = (body: unknown, headers: Record<string, string> = {}): Served => ({
  body: JSON.stringify(body),
  headers: { 'content-type': 'application/json', 'cache-control': 'max-age=300', ...headers },
});
const urlOf = (path: string) => `${docsBase}${path}`;
function serve(path: string, document: (url: string) => Served): string {
  const url = urlOf(path);
  served.set(path, document(url));
  return url;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-cimd-'));
  const tls = makeCertificates();
  docs = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const path = req.url ?? '/';
    fetches.set(path, (fetches.get(path) ?? 0) + 1);
    const s = served.get(path);
    if (!s) return void res.writeHead(404).end();
    res.writeHead(s.status ?? 200, s.headers ?? {}).end(s.body);
  });
  await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
  docsBase = `https://localhost:${(docs.address() as AddressInfo).port}`;
  cluster = await startCluster(dir, 1, { NODE_EXTRA_CA_CERTS: tls.ca, NODE_ENV: 'development' });
  const user = await admin(cluster.base, 'POST', '/users', { ...PERSON, name: 'Ada' });
  expect(user.status).toBe(201);
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  await new Promise((resolve) => docs?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function startAuthorization(clientId: string, redirectUri = REDIRECT) {
  const verifier = client.randomPKCECodeVerifier();
  const params = new URLSearchParams({
    client_id: clientId, redirect_uri: redirectUri, response_type: 'code', scope: 'openid',
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'st',
  });
  return { url: `${cluster.base}/oauth/authorize?${params}`, verifier };
}

/** The page the issuer shows for a refused client (never a redirect). */
async function refusal(clientId: string, redirectUri = REDIRECT): Promise<{ status: number; text: string }> {
  const res = await fetch((await startAuthorization(clientId, redirectUri)).url, { redirect: 'manual' });
  return { status: res.status, text: await res.text() };
}

describe('a client known by its metadata document', () => {
  it('signs in with openid-client (public, PKCE): the consent page names the client and its host; the document is fetched once', async () => {
    const clientId = serve('/apps/notes.json', (url) => json({
      client_id: url, client_name: 'Notes <app>', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code'],
    }));
    const config = await client.discovery(new URL(cluster.base), clientId, undefined, client.None(), { execute: [client.allowInsecureRequests] });
    expect(config.serverMetadata().client_id_metadata_document_supported).toBe(true);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state,
    });

    const pages: string[] = [];
    const browser = new (class extends Browser {
      override async get(u: string) {
        const res = await super.get(u);
        if (res.status === 200) pages.push(await res.clone().text());
        return res;
      }
    })(cluster.base);
    const callback = await followSignIn(browser, url.toString(), { ...PERSON, consent: 'approve' });
    const consent = pages.find((p) => p.includes('name="decision"'))!;
    expect(consent).toContain('Notes &lt;app&gt;');
    expect(consent).toContain(new URL(clientId).host);

    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.claims()!.aud).toBe(clientId);
    expect(fetches.get('/apps/notes.json')).toBe(1);
  });

  it('a private_key_jwt client authenticates at the token endpoint with a key from its jwks_uri', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    served.set('/apps/keys.jwks', json({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] }));
    const clientId = serve('/apps/server.json', (url) => json({
      client_id: url, client_name: 'Server app', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: urlOf('/apps/keys.jwks'),
    }));
    const config = await client.discovery(new URL(cluster.base), clientId, undefined, client.PrivateKeyJwt({ key: privateKey, kid: 'k1' }), { execute: [client.allowInsecureRequests] });
    const verifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 's2' });
    const callback = await followSignIn(new Browser(cluster.base), url.toString(), { ...PERSON, consent: 'approve' });
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: 's2' });
    expect(tokens.claims()!.aud).toBe(clientId);

    // Without its assertion (client_id alone) the same client is refused.
    const bare = await postForm(`${cluster.base}/oauth/token`, { grant_type: 'authorization_code', client_id: clientId, code: 'x', redirect_uri: REDIRECT, code_verifier: verifier });
    expect([bare.status, bare.body.error]).toEqual([401, 'invalid_client']);
  });

  it('pushes its request to /oauth/par like any public client', async () => {
    const clientId = serve('/apps/pushed.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const config = await client.discovery(new URL(cluster.base), clientId, undefined, client.None(), { execute: [client.allowInsecureRequests] });
    const verifier = client.randomPKCECodeVerifier();
    const url = await client.buildAuthorizationUrlWithPAR(config, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'p1' });
    const callback = await followSignIn(new Browser(cluster.base), url.toString(), { ...PERSON, consent: 'approve' });
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: 'p1' });
    expect(tokens.claims()!.aud).toBe(clientId);
  });

  it('a private_key_jwt client pushes its request authenticated by its assertion; its client_id alone or a replayed assertion is refused', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    served.set('/apps/pushing-keys.jwks', json({ keys: [{ ...(await exportJWK(publicKey)), kid: 'p1', alg: 'ES256', use: 'sig' }] }));
    const clientId = serve('/apps/pushing-server.json', (url) => json({
      client_id: url, client_name: 'Pushing server', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: urlOf('/apps/pushing-keys.jwks'),
    }));
    const assertions: string[] = [];
    const config = await client.discovery(new URL(cluster.base), clientId, undefined, client.PrivateKeyJwt({ key: privateKey, kid: 'p1' }), { execute: [client.allowInsecureRequests] });
    config[client.customFetch] = (url, init) => {
      const sent = new URLSearchParams(String(init.body ?? ''));
      if (sent.has('client_assertion')) assertions.push(sent.get('client_assertion')!);
      return fetch(url, init as RequestInit);
    };
    const verifier = client.randomPKCECodeVerifier();
    const url = await client.buildAuthorizationUrlWithPAR(config, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'pk' });
    expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    const callback = await followSignIn(new Browser(cluster.base), url.toString(), { ...PERSON, consent: 'approve' });
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: 'pk' });
    expect(tokens.claims()!.aud).toBe(clientId);

    const form = { client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' };
    const bare = await postForm(`${cluster.base}/oauth/par`, form);
    expect([bare.status, bare.body.error]).toEqual([401, 'invalid_client']);
    const replayed = await postForm(`${cluster.base}/oauth/par`, { ...form, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertions[0]! });
    expect([replayed.status, replayed.body.error, replayed.body.error_description]).toEqual([401, 'invalid_client', 'the client assertion was already used']);
  });

  it('takes a client_id URL with a query string (the draft allows one) as the exact URL', async () => {
    const clientId = serve('/apps/query.json?v=2', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const pushed = await postForm(`${cluster.base}/oauth/par`, {
      client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
    });
    expect(pushed.status).toBe(201);
    expect(fetches.get('/apps/query.json?v=2')).toBe(1);
  });

  it('does not follow a redirect to a document elsewhere', async () => {
    const target = serve('/apps/moved-to.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const clientId = serve('/apps/moved.json', () => ({ status: 302, headers: { location: target }, body: '' }));
    const page = await refusal(clientId);
    expect(page.status).toBe(401);
    expect(page.text).toContain('answered 302 (redirects are not followed)');
    expect(fetches.get('/apps/moved-to.json') ?? 0).toBe(0);
  });

  it('refuses a document whose client_id is not its URL', async () => {
    const clientId = serve('/apps/liar.json', () => json({ client_id: 'https://elsewhere.example/app.json', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const page = await refusal(clientId);
    expect(page.status).toBe(401);
    expect(page.text).toContain('invalid_client');
    expect(page.text).toContain('client_id must equal the URL');
  });

  it('refuses a document larger than 5 KB', async () => {
    const clientId = serve('/apps/big.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', logo: 'x'.repeat(6000) }));
    const page = await refusal(clientId);
    expect(page.status).toBe(401);
    expect(page.text).toContain('larger than 5120 bytes');
  });

  it('refuses a redirect URI the document does not list, without redirecting there', async () => {
    const clientId = serve('/apps/listed.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const page = await refusal(clientId, 'https://attacker.example/cb');
    expect(page.status).toBe(400);
    expect(page.text).toContain('redirect_uri is not registered');
  });

  it('refuses shared-secret methods, private_key_jwt without jwks_uri, a URL without a path, and an answer that is not 200 JSON', async () => {
    const secret = serve('/apps/secret.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' }));
    expect((await refusal(secret)).text).toContain('token_endpoint_auth_method must be none or private_key_jwt');
    const keyless = serve('/apps/keyless.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt' }));
    expect((await refusal(keyless)).text).toContain('needs a jwks_uri');
    const root = await refusal(`${docsBase}/`);
    expect([root.status, root.text.includes('must contain a path')]).toEqual([400, true]);
    expect((await refusal(urlOf('/apps/missing.json'))).text).toContain('answered 404');
    const html = serve('/apps/page.json', (url) => ({ body: JSON.stringify({ client_id: url }), headers: { 'content-type': 'text/html' } }));
    expect((await refusal(html)).text).toContain('application/json');
  });
});

describe('outside development', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.stop());

  it('a document on a loopback or private address is refused before any connection', async () => {
    const before = fetches.get('/apps/prod.json') ?? 0;
    serve('/apps/prod.json', (url) => json({ client_id: url, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }));
    const port = new URL(docsBase).port;
    for (const clientId of [`https://127.0.0.1:${port}/apps/prod.json`, `https://localhost:${port}/apps/prod.json`, 'https://10.1.2.3/app.json', 'https://[::1]/app.json']) {
      const res = await fetch(`${server.url}/oauth/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' })}`, { redirect: 'manual' });
      expect(res.status).toBe(401);
      const text = await res.text();
      expect(text).toContain('invalid_client');
      expect(text).toContain('not a public address');
    }
    expect(fetches.get('/apps/prod.json') ?? 0).toBe(before);
  });
});
