import * as client from 'openid-client';
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assign, authorizationUrl, Browser, createApp, createUser, discover, followSignIn, postForm, type Fixture } from '../oauth/helpers.js';
import { accessTokenFor, putRole, registerAgent } from '../agents/helpers.js';
import { proof, readJson, type DpopKey } from '../dpop/helpers.js';

// What real clients (openid-client, jose) do against the DPoP, PAR and metadata-document rules
// that the other suites' own requests may not: a fresh DPoP handle meeting a nonce at a resource,
// a DPoP proof sent with a pushed request (binding the code), a refused token under the DPoP
// scheme, client_id URLs whose dot segments are percent-encoded or whose scheme is http.
// The server requires DPoP nonces, as a deployment may.

let server: TestServer;
let fx: Fixture;

beforeAll(async () => {
  server = await startTestServer({ env: { GATEHOUSE_DPOP_NONCE: 'required' } });
  const redirectUri = 'http://localhost:9/callback';
  const spa = await createApp(server, { type: 'spa', redirect_uris: [redirectUri] });
  const password = 'correct horse battery staple';
  const user = await createUser(server, { email: 'ada@example.com', password, name: 'Ada' });
  await assign(server, spa.client_id, user.id);
  fx = {
    server, issuer: server.ctx.urls.issuer, redirectUri, spa,
    web: undefined as never, mfaUser: undefined as never,
    user: { id: user.id, email: 'ada@example.com', password },
  };
});
afterAll(() => server?.stop());

/** An ES256 key pair made with jose: openid-client's DPoP handle and the hand-made proofs share it. */
async function sharedKey(): Promise<{ pair: client.CryptoKeyPair; key: DpopKey }> {
  const pair = await generateKeyPair('ES256');
  const publicJwk = await exportJWK(pair.publicKey);
  return { pair, key: { alg: 'ES256', privateKey: pair.privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk) } };
}

describe('DPoP server nonces with openid-client', () => {
  it('a DPoP handle that has no nonce yet meets 401 use_dpop_nonce at userinfo and retries with the DPoP-Nonce it is sent', async () => {
    const { pair, key } = await sharedKey();
    // The code is exchanged by hand (so openid-client holds no nonce for this server yet).
    const config = await discover(fx, fx.spa);
    const flow = await authorizationUrl(config, fx);
    const callback = await followSignIn(new Browser(fx.issuer), flow.url, { email: fx.user.email, password: fx.user.password });
    const form = { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: fx.redirectUri, code_verifier: flow.verifier, client_id: fx.spa.client_id };
    const exchange = async (nonce?: string) =>
      readJson(await fetch(server.ctx.urls.token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(key, { htm: 'POST', htu: server.ctx.urls.token, ...(nonce ? { nonce } : {}) }) },
        body: new URLSearchParams(form),
      }));
    const asked = await exchange();
    expect([asked.status, asked.body.error]).toEqual([400, 'use_dpop_nonce']);
    const tokens = await exchange(asked.headers.get('dpop-nonce')!);
    expect([tokens.status, tokens.body.token_type]).toEqual([200, 'DPoP']);

    const seen: [number, string | null][] = [];
    const fresh = await discover(fx, fx.spa);
    fresh[client.customFetch] = async (url, init) => {
      const res = await fetch(url, init as RequestInit);
      seen.push([res.status, res.headers.get('www-authenticate')]);
      return res;
    };
    const info = await client.fetchUserInfo(fresh, tokens.body.access_token, fx.user.id, { DPoP: client.getDPoPHandle(fresh, pair) });
    expect(info.sub).toBe(fx.user.id);
    expect(seen.map(([status]) => status)).toEqual([401, 200]);
    expect(seen[0]![1]).toMatch(/^DPoP error="use_dpop_nonce"/);
  });
});

describe('authorization codes bound to a DPoP key (dpop_jkt)', () => {
  const signIn = async (url: URL | string) => followSignIn(new Browser(fx.issuer), url.toString(), { email: fx.user.email, password: fx.user.password });
  const refusal = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (err) {
      return err as { error?: string; error_description?: string };
    }
    throw new Error('expected a refusal');
  };

  it('openid-client pushes its request with a DPoP proof (retrying on the nonce): the code is then redeemed only with a proof by that key', async () => {
    const config = await discover(fx, fx.spa);
    const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const pushedFlow = async () => {
      const verifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const url = await client.buildAuthorizationUrlWithPAR(
        config,
        { redirect_uri: fx.redirectUri, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state },
        { DPoP: dpop },
      );
      return { callback: await signIn(url), verifier, state };
    };

    const withoutProof = await pushedFlow();
    const bare = await refusal(client.authorizationCodeGrant(config, withoutProof.callback, { pkceCodeVerifier: withoutProof.verifier, expectedState: withoutProof.state }));
    expect([bare.error, bare.error_description]).toEqual(['invalid_grant', 'the code is bound to a DPoP key (dpop_jkt): send a DPoP proof by that key']);

    const otherKey = await pushedFlow();
    const other = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const wrong = await refusal(client.authorizationCodeGrant(config, otherKey.callback, { pkceCodeVerifier: otherKey.verifier, expectedState: otherKey.state }, undefined, { DPoP: other }));
    expect(wrong.error).toBe('invalid_grant');
    expect(wrong.error_description).toMatch(/another key than the one the code is bound to/);

    const sameKey = await pushedFlow();
    const tokens = await client.authorizationCodeGrant(config, sameKey.callback, { pkceCodeVerifier: sameKey.verifier, expectedState: sameKey.state }, undefined, { DPoP: dpop });
    expect(tokens.token_type).toBe('dpop');
  });

  it('dpop_jkt on a front-channel request binds the code; a malformed one is invalid_request at the redirect URI', async () => {
    const { key } = await sharedKey();
    const config = await discover(fx, fx.spa);
    const flow = await authorizationUrl(config, fx, { dpop_jkt: key.jkt });
    const callback = await signIn(flow.url);
    const form = { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: fx.redirectUri, code_verifier: flow.verifier, client_id: fx.spa.client_id };
    const tokenRequest = async (k: DpopKey, nonce?: string) =>
      readJson(await fetch(server.ctx.urls.token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(k, { htm: 'POST', htu: server.ctx.urls.token, ...(nonce ? { nonce } : {}) }) },
        body: new URLSearchParams(form),
      }));
    const nonce = (await tokenRequest(key)).headers.get('dpop-nonce')!;
    const good = await tokenRequest(key, nonce);
    expect([good.status, good.body.token_type]).toEqual([200, 'DPoP']);

    const flow2 = await authorizationUrl(config, fx, { dpop_jkt: key.jkt });
    const callback2 = await signIn(flow2.url);
    const thief = (await sharedKey()).key;
    const stolen = await readJson(await fetch(server.ctx.urls.token, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(thief, { htm: 'POST', htu: server.ctx.urls.token, nonce }) },
      body: new URLSearchParams({ ...form, code: callback2.searchParams.get('code')!, code_verifier: flow2.verifier }),
    }));
    expect([stolen.status, stolen.body.error]).toEqual([400, 'invalid_grant']);

    const malformed = await authorizationUrl(config, fx, { dpop_jkt: 'not a thumbprint' });
    const res = await fetch(malformed.url, { redirect: 'manual' });
    const location = new URL(res.headers.get('location')!);
    expect([location.searchParams.get('error'), location.searchParams.get('state')]).toEqual(['invalid_request', malformed.state]);
    expect(location.searchParams.get('error_description')).toMatch(/^dpop_jkt must be/);
  });

  it('PAR refuses a dpop_jkt that is not the key of the proof sent with it', async () => {
    const { key } = await sharedKey();
    const other = (await sharedKey()).key;
    const form = {
      client_id: fx.spa.client_id, redirect_uri: fx.redirectUri, response_type: 'code', scope: 'openid',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', dpop_jkt: other.jkt,
    };
    const push = async (nonce?: string) => postForm(`${fx.issuer}/oauth/par`, form, { dpop: await proof(key, { htm: 'POST', htu: `${fx.issuer}/oauth/par`, ...(nonce ? { nonce } : {}) }) });
    const asked = await push();
    expect([asked.status, asked.body.error]).toEqual([400, 'use_dpop_nonce']);
    const refused = await push(asked.headers.get('dpop-nonce')!);
    expect([refused.status, refused.body.error, refused.body.error_description]).toEqual([400, 'invalid_request', "dpop_jkt is not the thumbprint of the DPoP proof's key"]);
  });
});

describe('a token refused under the DPoP scheme', () => {
  it('userinfo answers with a DPoP challenge (a Bearer one for a bearer token)', async () => {
    const asDpop = await fetch(server.ctx.urls.userinfo, { headers: { authorization: 'DPoP not-a-token' } });
    expect(asDpop.status).toBe(401);
    expect(asDpop.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
    expect(((await asDpop.json()) as { error: string }).error).toBe('invalid_token');
    const asBearer = await fetch(server.ctx.urls.userinfo, { headers: { authorization: 'Bearer not-a-token' } });
    expect(asBearer.status).toBe(401);
    expect(asBearer.headers.get('www-authenticate')).toMatch(/^Bearer realm="gatehouse", error="invalid_token"/);
  });

  it('the transaction-token endpoint answers with a DPoP challenge too', async () => {
    const post = (authorization: string) =>
      fetch(server.ctx.urls.transactionToken, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'read:docs', resource: 'doc:1' }),
      });
    const asDpop = await post('DPoP not-a-token');
    expect(asDpop.status).toBe(401);
    expect(asDpop.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
    expect((await post('Bearer not-a-token')).headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    // A good bearer token under the DPoP scheme claims a binding it does not have: DPoP challenge as before.
    await putRole(server, 'docs', ['read:docs']);
    const agent = await registerAgent(server, { name: 'reader', mode: 'autonomous', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    const token = await accessTokenFor(server, agent);
    expect((await post(`DPoP ${token}`)).headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
  });
});

describe('client_id URLs (Client ID Metadata Documents)', () => {
  const base = () => ({
    redirect_uri: fx.redirectUri, response_type: 'code', scope: 'openid',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
  });

  it('refuses dot segments however they are written, before any fetch', async () => {
    for (const clientId of [
      'https://client.example/apps/../client.json',
      'https://client.example/apps/%2e%2e/client.json',
      'https://client.example/apps/%2E./client.json',
      'https://client.example/./client.json',
      'https://client.example/apps\\..\\client.json',
    ]) {
      const pushed = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: clientId });
      expect([pushed.status, pushed.body.error, pushed.body.error_description], clientId).toEqual([400, 'invalid_request', 'a client_id URL must not contain . or .. path segments']);
      const page = await fetch(`${fx.issuer}/oauth/authorize?${new URLSearchParams({ ...base(), client_id: clientId })}`, { redirect: 'manual' });
      expect(page.status, clientId).toBe(400);
      expect(await page.text(), clientId).toContain('must not contain . or .. path segments');
    }
  });

  it('refuses a plain http client_id URL as a URL, not as an unknown client', async () => {
    const clientId = 'http://client.example/client.json';
    const pushed = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: clientId });
    expect([pushed.status, pushed.body.error]).toEqual([400, 'invalid_request']);
    expect(pushed.body.error_description).toMatch(/^a client_id URL must use https/);
    const token = await postForm(`${fx.issuer}/oauth/token`, { grant_type: 'authorization_code', code: 'x', redirect_uri: fx.redirectUri, code_verifier: 'x'.repeat(43), client_id: clientId });
    expect([token.status, token.body.error]).toEqual([400, 'invalid_request']);
    const page = await fetch(`${fx.issuer}/oauth/authorize?${new URLSearchParams({ ...base(), client_id: clientId })}`, { redirect: 'manual' });
    expect(page.status).toBe(400);
    expect(await page.text()).toContain('a client_id URL must use https');
    // An unknown client_id that is no URL stays an unknown client.
    const unknown = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: 'no-such-client' });
    expect([unknown.status, unknown.body.error]).toEqual([401, 'invalid_client']);
  });

  it('refuses a fragment and credentials, and takes a path with dots inside a segment as a path', async () => {
    const fragment = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: 'https://client.example/client.json#x' });
    expect([fragment.status, fragment.body.error_description]).toEqual([400, 'a client_id URL must not contain a fragment']);
    const credentials = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: 'https://u:p@client.example/client.json' });
    expect([credentials.status, credentials.body.error_description]).toEqual([400, 'a client_id URL must not contain credentials']);
    // `..` inside a name is no dot segment: the URL passes its shape check and is fetched
    // (here refused by the outbound rules, a test server's addresses being unresolvable or private).
    const dotted = await postForm(`${fx.issuer}/oauth/par`, { ...base(), client_id: 'https://client.invalid/apps..v2/client.json' });
    expect([dotted.status, dotted.body.error]).toEqual([401, 'invalid_client']);
  });
});
