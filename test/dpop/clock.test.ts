import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { dpopKey, proof, readJson } from './helpers.js';

// The server reads a clock the test moves: proofs are dated on it, nonces and used jtis age on it.
let offsetMs = 0;
const clock: Clock = { now: () => Date.now() + offsetMs };
const serverSeconds = () => Math.floor(clock.now() / 1000);

let server: TestServer;
let m2m: { client_id: string; client_secret: string };
beforeAll(async () => {
  server = await startTestServer({ clock, env: { GATEHOUSE_DPOP_NONCE: 'required' } });
  m2m = (await server.admin('POST', '/applications', { name: 'svc', type: 'm2m' })).body;
});
afterAll(() => server?.stop());

const tokenWith = async (dpop: string) =>
  readJson(
    await fetch(server.ctx.urls.token, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${m2m.client_id}:${m2m.client_secret}`).toString('base64')}`,
        dpop,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }),
  );

describe('DPoP over time', () => {
  it('a nonce is good for five minutes; a used jti is refused while its proof could be accepted, and purged after', async () => {
    const key = await dpopKey();
    const htu = server.ctx.urls.token;
    const asked = await tokenWith(await proof(key, { htm: 'POST', htu, iat: serverSeconds() }));
    expect(asked.body.error).toBe('use_dpop_nonce');
    const nonce = asked.headers.get('dpop-nonce')!;

    const used = await proof(key, { htm: 'POST', htu, iat: serverSeconds(), nonce, jti: 'fixed-jti' });
    expect((await tokenWith(used)).status).toBe(200);
    // a purge now keeps it: a replay is still refused
    await server.ctx.store.dpop.purgeExpired(serverSeconds());
    expect((await tokenWith(used)).body.error_description).toMatch(/already used/);

    offsetMs += 4 * 60_000;
    // Past its window the proof could not be accepted anyway: its jti may come again in a new
    // proof, whether or not housekeeping has run; that new proof is single use in turn.
    const renewed = await proof(key, { htm: 'POST', htu, iat: serverSeconds(), nonce, jti: 'fixed-jti' });
    expect((await tokenWith(renewed)).status).toBe(200);
    expect((await tokenWith(renewed)).body.error_description).toMatch(/already used/);
    // housekeeping drops what is past the window
    offsetMs += 2 * 60_000;
    expect(await server.ctx.store.dpop.purgeExpired(serverSeconds())).toBeGreaterThanOrEqual(1);

    const stale = await tokenWith(await proof(key, { htm: 'POST', htu, iat: serverSeconds(), nonce }));
    expect(stale.body.error).toBe('use_dpop_nonce');
    expect(stale.headers.get('dpop-nonce')).not.toBe(nonce);
    const fresh = await tokenWith(await proof(key, { htm: 'POST', htu, iat: serverSeconds(), nonce: stale.headers.get('dpop-nonce')! }));
    expect(fresh.status).toBe(200);
  });
});
