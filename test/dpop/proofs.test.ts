import { randomUUID } from 'node:crypto';
import { decodeJwt, exportJWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bind, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { agentTokenRequest, dpopKey, proof, readJson, type DpopKey } from './helpers.js';

let gh: TestServer;
let m2m: { client_id: string; client_secret: string };
let agent: TestAgent;

beforeAll(async () => {
  gh = await startTestServer();
  const r = await gh.admin('POST', '/applications', { name: 'svc', type: 'm2m' });
  m2m = r.body;
  await putRole(gh, 'reader', ['read:docs']);
  agent = await registerAgent(gh, { name: 'proof-bot', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
});
afterAll(() => gh.stop());

/** client_credentials at /oauth/token with `dpop` as the DPoP header (none when undefined). */
async function serviceToken(dpop: string | undefined) {
  return readJson(
    await fetch(gh.ctx.urls.token, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${m2m.client_id}:${m2m.client_secret}`).toString('base64')}`,
        ...(dpop !== undefined ? { dpop } : {}),
      },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }),
  );
}

const tokenProof = (key: DpopKey, over: Partial<Parameters<typeof proof>[1]> = {}) => proof(key, { htm: 'POST', htu: gh.ctx.urls.token, ...over });

describe('proofs at the token endpoint', () => {
  it('binds the token to the proof key: cnf.jkt and token_type DPoP', async () => {
    const key = await dpopKey('EdDSA');
    const res = await serviceToken(await tokenProof(key));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
    expect(decodeJwt(res.body.access_token).cnf).toEqual({ jkt: key.jkt });
  });

  it('a replayed proof (same jti) is refused', async () => {
    const key = await dpopKey();
    const p = await tokenProof(key);
    expect((await serviceToken(p)).status).toBe(200);
    const again = await serviceToken(p);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_dpop_proof');
    expect(again.body.error_description).toMatch(/already used/);
  });

  it('the same proof sent many times at once gets one token; fresh proofs of one key sent at once all get theirs', async () => {
    const key = await dpopKey();
    const p = await tokenProof(key);
    const same = await Promise.all(Array.from({ length: 8 }, () => serviceToken(p)));
    expect(same.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400, 400, 400, 400]);
    for (const r of same.filter((r) => r.status === 400)) expect(r.body.error_description).toMatch(/already used/);
    const fresh = await Promise.all(Array.from({ length: 8 }, async () => serviceToken(await tokenProof(key))));
    expect(fresh.map((r) => r.status)).toEqual(Array(8).fill(200));
  });

  it('a header seen before does not spare the signature: a proof naming a known key but signed by another is refused', async () => {
    const key = await dpopKey();
    expect((await serviceToken(await tokenProof(key))).status).toBe(200);
    const thief = await dpopKey();
    const forged = await proof(thief, { htm: 'POST', htu: gh.ctx.urls.token, header: { jwk: key.publicJwk } });
    expect(forged.split('.')[0]).toBe((await tokenProof(key)).split('.')[0]);
    const res = await serviceToken(forged);
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/signature/);
  });

  it('refuses a wrong htu, a wrong htm, a stale or future iat; the htu query and fragment are ignored', async () => {
    const key = await dpopKey();
    const cases: [Partial<Parameters<typeof proof>[1]>, RegExp][] = [
      [{ htu: `${gh.ctx.urls.issuer}/oauth/other` }, /htu/],
      [{ htu: 'https://elsewhere.example/oauth/token' }, /htu/],
      [{ htm: 'GET' }, /htm/],
      [{ iat: Math.floor(Date.now() / 1000) - 120 }, /too old/],
      [{ iat: Math.floor(Date.now() / 1000) + 120 }, /future/],
    ];
    for (const [over, why] of cases) {
      const res = await serviceToken(await tokenProof(key, over));
      expect(res.status, JSON.stringify(over)).toBe(400);
      expect(res.body.error).toBe('invalid_dpop_proof');
      expect(res.body.error_description).toMatch(why);
    }
    const withQuery = await serviceToken(await tokenProof(key, { htu: `${gh.ctx.urls.token}?x=1#frag` }));
    expect(withQuery.status).toBe(200);
    // the same URL spelt otherwise (host in capitals, the scheme's default port written out) is the endpoint
    const u = new URL(gh.ctx.urls.token);
    const respelt = `${u.protocol}//${u.hostname.toUpperCase()}:${u.port || (u.protocol === 'https:' ? '443' : '80')}${u.pathname}`;
    expect(respelt).not.toBe(gh.ctx.urls.token);
    expect((await serviceToken(await tokenProof(key, { htu: respelt }))).status).toBe(200);
    const notAString = await serviceToken(await tokenProof(key, { htu: 42 as unknown as string }));
    expect(notAString.status).toBe(400);
    expect(notAString.body.error_description).toMatch(/htu/);
  });

  it('refuses a proof that is not a dpop+jwt, a symmetric or unknown alg, a private jwk, a bad signature, two headers', async () => {
    const key = await dpopKey();
    const other = await dpopKey();
    const now = Math.floor(Date.now() / 1000);
    const claims = { htm: 'POST', htu: gh.ctx.urls.token, iat: now, jti: randomUUID() };
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } } as never).sign(new TextEncoder().encode('secret-secret-secret-secret-1234'));
    const privateJwk = await exportJWK(key.privateKey);
    const refused = [
      await tokenProof(key, { header: { typ: 'JWT' } }),
      hs,
      await tokenProof(key, { header: { jwk: privateJwk } }),
      await tokenProof(key, { header: { jwk: other.publicJwk } }),
      `${await tokenProof(key)}, ${await tokenProof(key)}`,
      'not-a-jwt',
    ];
    for (const p of refused) {
      const res = await serviceToken(p);
      expect(res.status, p.slice(0, 40)).toBe(400);
      expect(res.body.error).toBe('invalid_dpop_proof');
    }
  });
});

describe('proofs at a resource (the transaction-token endpoint)', () => {
  const action = { action: 'read:docs', resource: 'doc:1', context: {} };
  const txnUrl = () => gh.ctx.urls.transactionToken;
  const call = async (authorization: string, dpop?: string) =>
    readJson(
      await fetch(txnUrl(), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization, ...(dpop ? { dpop } : {}) },
        body: JSON.stringify(action),
      }),
    );

  async function boundAgentToken(key: DpopKey): Promise<string> {
    const res = await agentTokenRequest(gh, agent, await proof(key, { htm: 'POST', htu: gh.ctx.urls.agentToken }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
    return res.body.access_token;
  }

  it('a bound token works with a proof by its key, and is refused without ath, as Bearer, with another key, replayed, or for another URL', async () => {
    const key = await dpopKey();
    const token = await boundAgentToken(key);
    expect(decodeJwt(token).cnf).toEqual({ jkt: key.jkt });

    const good = await proof(key, { htm: 'POST', htu: txnUrl(), accessToken: token });
    const ok = await call(`DPoP ${token}`, good);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.data.transaction_token).toBeTruthy();

    const expectRefused = async (res: Awaited<ReturnType<typeof call>>, error: string, why?: RegExp) => {
      expect(res.status).toBe(401);
      expect(res.body.error).toBe(error);
      expect(res.headers.get('www-authenticate')).toMatch(new RegExp(`^DPoP error="${error}"`));
      if (why) expect(res.body.error_description).toMatch(why);
    };
    await expectRefused(await call(`DPoP ${token}`, good), 'invalid_dpop_proof', /already used/);
    await expectRefused(await call(`DPoP ${token}`, await proof(key, { htm: 'POST', htu: txnUrl() })), 'invalid_dpop_proof', /ath/);
    await expectRefused(await call(`DPoP ${token}`), 'invalid_dpop_proof', /required/);
    await expectRefused(await call(`Bearer ${token}`), 'invalid_token', /DPoP-bound/);
    await expectRefused(await call(`Bearer ${token}`, await proof(key, { htm: 'POST', htu: txnUrl(), accessToken: token })), 'invalid_token');
    const thief = await dpopKey();
    await expectRefused(await call(`DPoP ${token}`, await proof(thief, { htm: 'POST', htu: txnUrl(), accessToken: token })), 'invalid_dpop_proof', /bound to/);
    await expectRefused(await call(`DPoP ${token}`, await proof(key, { htm: 'POST', htu: gh.ctx.urls.mcp, accessToken: token })), 'invalid_dpop_proof', /htu/);
    // the proof of another token
    await expectRefused(await call(`DPoP ${token}`, await proof(key, { htm: 'POST', htu: txnUrl(), accessToken: `${token}x` })), 'invalid_dpop_proof', /ath/);
  });

  it('an unbound token goes on as Bearer, and is refused under the DPoP scheme', async () => {
    const token = await accessTokenFor(gh, agent);
    expect((await bind(gh, token, action.action, action.resource, action.context)).status).toBe(200);
    const key = await dpopKey();
    const res = await call(`DPoP ${token}`, await proof(key, { htm: 'POST', htu: txnUrl(), accessToken: token }));
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_token');
  });
});
