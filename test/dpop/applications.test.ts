import * as client from 'openid-client';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { assign, authorizationUrl, Browser, createApp, createUser, discover, followSignIn, startFixture, type Fixture } from '../oauth/helpers.js';
import { dpopKey, proof, readJson } from './helpers.js';

let f: Fixture;

beforeAll(async () => {
  f = await startFixture();
});
afterAll(() => f.server.stop());

const thumbprintOf = async (pair: client.CryptoKeyPair) => calculateJwkThumbprint(await exportJWK(pair.publicKey), 'sha256');

/** The code flow through the sign-in pages, the code exchanged by openid-client with its DPoP handle. */
async function signInWithDpop(fx: Fixture, config: client.Configuration, dpop: client.DPoPHandle) {
  const flow = await authorizationUrl(config, fx);
  const callback = await followSignIn(new Browser(fx.issuer), flow.url, { email: fx.user.email, password: fx.user.password });
  return client.authorizationCodeGrant(
    config,
    callback,
    { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce },
    undefined,
    { DPoP: dpop },
  );
}

const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    return err as { error?: string; status?: number; cause?: unknown };
  }
  throw new Error('expected a refusal');
};

describe('DPoP with openid-client: a public application', () => {
  it('binds the code flow, the refresh and userinfo to the key; a stolen token or refresh token is refused', async () => {
    const config = await discover(f, f.spa);
    const keys = await client.randomDPoPKeyPair('ES256');
    const dpop = client.getDPoPHandle(config, keys);
    const tokens = await signInWithDpop(f, config, dpop);
    expect(tokens.token_type).toBe('dpop');
    const jkt = await thumbprintOf(keys);
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });

    // userinfo with a proof (openid-client makes one per request, with ath)
    const info = await client.fetchUserInfo(config, tokens.access_token, f.user.id, { DPoP: dpop });
    expect(info.sub).toBe(f.user.id);

    // the same token as a bearer token: refused with a DPoP challenge
    const asBearer = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(asBearer.status).toBe(401);
    expect(asBearer.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
    // as a DPoP token with a proof by another key
    const thief = await dpopKey('ES256');
    const stolen = await fetch(`${f.issuer}/oauth/userinfo`, {
      headers: {
        authorization: `DPoP ${tokens.access_token}`,
        dpop: await proof(thief, { htm: 'GET', htu: `${f.issuer}/oauth/userinfo`, accessToken: tokens.access_token }),
      },
    });
    expect(stolen.status).toBe(401);
    expect(stolen.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_dpop_proof"/);

    // the refresh token is bound too: without a proof, with another key: refused, and still good after
    const noProof = await refusal(client.refreshTokenGrant(config, tokens.refresh_token!));
    expect(noProof.error).toBe('invalid_dpop_proof');
    const otherKey = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const wrongKey = await refusal(client.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP: otherKey }));
    expect(wrongKey.error).toBe('invalid_grant');
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP: dpop });
    expect(refreshed.token_type).toBe('dpop');
    expect(decodeJwt(refreshed.access_token).cnf).toEqual({ jkt });
    expect((await client.fetchUserInfo(config, refreshed.access_token, f.user.id, { DPoP: dpop })).sub).toBe(f.user.id);
  });

  it('without a proof the same application gets bearer tokens as before', async () => {
    const config = await discover(f, f.spa);
    const flow = await authorizationUrl(config, f);
    const callback = await followSignIn(new Browser(f.issuer), flow.url, { email: f.user.email, password: f.user.password });
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
    expect(tokens.token_type).toBe('bearer');
    expect(decodeJwt(tokens.access_token).cnf).toBeUndefined();
    // an unbound token under the DPoP scheme claims a binding it does not have
    const res = await fetch(`${f.issuer}/oauth/userinfo`, { headers: { authorization: `DPoP ${tokens.access_token}` } });
    expect(res.status).toBe(401);
  });

  it('a confidential application with EdDSA proofs: its refresh token is not key-bound (its secret binds it), its access tokens are', async () => {
    const config = await discover(f, f.web);
    const keys = await client.randomDPoPKeyPair('EdDSA');
    const dpop = client.getDPoPHandle(config, keys);
    const tokens = await signInWithDpop(f, config, dpop);
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt: await thumbprintOf(keys) });
    const otherKeys = await client.randomDPoPKeyPair('ES256');
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP: client.getDPoPHandle(config, otherKeys) });
    expect(decodeJwt(refreshed.access_token).cnf).toEqual({ jkt: await thumbprintOf(otherKeys) });
  });
});

describe('dpop_bound_access_tokens and introspection', () => {
  it('an m2m application that requires DPoP gets no token without a proof; introspection reports cnf', async () => {
    const m2m = await createApp(f.server, { type: 'm2m', dpop_bound_access_tokens: true });
    const shown = await f.server.admin('GET', `/applications/${m2m.client_id}`);
    expect(shown.body.dpop_bound_access_tokens).toBe(true);
    const config = await discover(f, m2m as { client_id: string; client_secret: string });
    const without = await refusal(client.clientCredentialsGrant(config, {}));
    expect(without.error).toBe('invalid_dpop_proof');

    const keys = await client.randomDPoPKeyPair('ES256');
    const tokens = await client.clientCredentialsGrant(config, {}, { DPoP: client.getDPoPHandle(config, keys) });
    expect(tokens.token_type).toBe('dpop');
    const jkt = await thumbprintOf(keys);
    const intro = await client.tokenIntrospection(config, tokens.access_token);
    expect(intro).toMatchObject({ active: true, token_type: 'DPoP', cnf: { jkt } });

    // the setting can be turned off again
    const patched = await f.server.admin('PATCH', `/applications/${m2m.client_id}`, { dpop_bound_access_tokens: false });
    expect(patched.body.dpop_bound_access_tokens).toBe(false);
    const bearer = await client.clientCredentialsGrant(config, {});
    expect(bearer.token_type).toBe('bearer');
    expect(await client.tokenIntrospection(config, bearer.access_token)).toMatchObject({ active: true, token_type: 'Bearer' });
  });

  it('both metadata documents list the proof algorithms', async () => {
    for (const doc of ['openid-configuration', 'oauth-authorization-server']) {
      const d = (await (await fetch(`${f.issuer}/.well-known/${doc}`)).json()) as Record<string, unknown>;
      expect(d.dpop_signing_alg_values_supported).toEqual(['ES256', 'EdDSA']);
    }
  });
});

describe('server nonces (GATEHOUSE_DPOP_NONCE=required)', () => {
  let server: TestServer;
  let spa: { client_id: string };
  let fx: Fixture;

  beforeAll(async () => {
    server = await startTestServer({ env: { GATEHOUSE_DPOP_NONCE: 'required' } });
    spa = await createApp(server, { type: 'spa', redirect_uris: [f.redirectUri] });
    const password = 'correct horse battery staple';
    const user = await createUser(server, { email: 'nonce@example.com', password, name: 'N' });
    await assign(server, spa.client_id, user.id);
    fx = { ...f, server, issuer: server.ctx.urls.issuer, spa, user: { id: user.id, email: 'nonce@example.com', password } };
  });
  afterAll(() => server?.stop());

  it('a proof without the nonce is refused with use_dpop_nonce and a DPoP-Nonce header; openid-client retries with it', async () => {
    const key = await dpopKey();
    const first = await readJson(
      await fetch(server.ctx.urls.token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(key, { htm: 'POST', htu: server.ctx.urls.token }) },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'x', client_id: spa.client_id }),
      }),
    );
    expect(first.status).toBe(400);
    expect(first.body.error).toBe('use_dpop_nonce');
    const nonce = first.headers.get('dpop-nonce');
    expect(nonce).toBeTruthy();
    // with the nonce the proof passes and the request goes on to the grant (an unknown refresh token)
    const second = await readJson(
      await fetch(server.ctx.urls.token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(key, { htm: 'POST', htu: server.ctx.urls.token, nonce: nonce! }) },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'x', client_id: spa.client_id }),
      }),
    );
    expect(second.body.error).toBe('invalid_grant');
    // a nonce that is not ours is refused like a missing one
    const forged = await readJson(
      await fetch(server.ctx.urls.token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await proof(key, { htm: 'POST', htu: server.ctx.urls.token, nonce: 'made-up' }) },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'x', client_id: spa.client_id }),
      }),
    );
    expect(forged.body.error).toBe('use_dpop_nonce');

    const config = await discover(fx, spa);
    const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const tokens = await signInWithDpop(fx, config, dpop);
    expect(tokens.token_type).toBe('dpop');
    expect((await client.fetchUserInfo(config, tokens.access_token, fx.user.id, { DPoP: dpop })).sub).toBe(fx.user.id);
    // at the resource the nonce is asked for with a 401 and a DPoP challenge
    const key2 = await dpopKey();
    const res = await fetch(server.ctx.urls.userinfo, {
      headers: { authorization: `DPoP ${tokens.access_token}`, dpop: await proof(key2, { htm: 'GET', htu: server.ctx.urls.userinfo, accessToken: tokens.access_token }) },
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^DPoP error="use_dpop_nonce"/);
    expect(res.headers.get('dpop-nonce')).toBeTruthy();
  });
});
