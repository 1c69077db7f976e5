import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { basic, Browser, createApp, createUser, assign, followSignIn, postForm } from '../oauth/helpers.js';
import { CIBA_GRANT, JWT_BEARER, registerAgent, putRole, type TestAgent } from '../agents/helpers.js';
import { assertionAt, TestClock } from '../pipeline/clocked-agents.js';
import { startHousekeeping } from '../../src/store/housekeeping.js';
import { openTestStore } from './helpers.js';

// One clock: a server given a clock far from the system's stamps and judges what it keeps
// (codes, approvals, rate limit windows, audit records, entities) by that clock alone.
const clock = new TestClock('2031-07-14T09:26:53Z');
let server: TestServer;
let agent: TestAgent;
let app: { client_id: string; client_secret?: string };
const PERSON = { email: 'ida@example.com', password: 'correct horse battery staple' };
const REDIRECT_URI = 'http://localhost:9/callback';

beforeAll(async () => {
  server = await startTestServer({ clock: clock.clock });
  await putRole(server, 'reader', ['read:invoices']);
  const person = await createUser(server, { ...PERSON, name: 'Ida', roles: ['reader'] });
  app = await createApp(server, { type: 'web', redirect_uris: [REDIRECT_URI] });
  await assign(server, app.client_id, person.id);
  agent = await registerAgent(server, { name: 'clocked', mode: 'delegated', roles: ['reader'], capabilities: [{ name: 'read:invoices' }] });
});
afterAll(() => server?.stop());

/** A CIBA request by the agent at the clock's time; its approval's id. */
async function askPerson(): Promise<{ id: string; authReqId: string; expiresIn: number }> {
  const asked = await postForm(server.ctx.urls.backchannelAuthorize, {
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertionAt(server, clock, agent, server.ctx.urls.issuer),
    scope: 'read:invoices',
    login_hint: PERSON.email,
  });
  expect(asked.status, JSON.stringify(asked.body)).toBe(200);
  const listed = await server.admin('GET', '/approvals');
  const a = listed.body.data.find((x: { auth_req_id: string | null }) => x.auth_req_id === asked.body.auth_req_id);
  return { id: a.id, authReqId: asked.body.auth_req_id, expiresIn: asked.body.expires_in };
}

/** Follows an authorization request with PKCE like a browser (signing in when `steps` are given): the code and its verifier. */
async function authorizeIn(browser: Browser, steps?: typeof PERSON): Promise<{ code: string; verifier: string }> {
  const verifier = randomBytes(32).toString('base64url');
  const url = `${server.ctx.urls.authorize}?${new URLSearchParams({
    response_type: 'code', client_id: app.client_id, redirect_uri: REDIRECT_URI, scope: 'openid', state: 'st',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256',
  })}`;
  const callback = await followSignIn(browser, url, steps && { ...steps, consent: 'approve' });
  return { code: callback.searchParams.get('code')!, verifier };
}

const approvalState = async (id: string): Promise<string> =>
  (await server.admin('GET', '/approvals')).body.data.find((x: { id: string }) => x.id === id).state;

describe('the store reads the server clock', () => {
  it('an entity is stamped with the clock time when created and when replaced', async () => {
    const created = await server.admin('PUT', '/entities/invoice/inv-1', { attributes: { amount: 10 } });
    expect(created.status).toBe(201);
    expect([created.body.created_at, created.body.updated_at]).toEqual([clock.iso, clock.iso]);
    const first = clock.iso;
    clock.advance(90_000);
    const replaced = await server.admin('PUT', '/entities/invoice/inv-1', { attributes: { amount: 11 } });
    expect([replaced.body.created_at, replaced.body.updated_at]).toEqual([first, clock.iso]);
  });

  it('a CIBA request expires exactly when the clock reaches its expiry, not before', async () => {
    const { id, expiresIn } = await askPerson();
    clock.advance((expiresIn - 1) * 1000);
    expect(await approvalState(id)).toBe('pending');
    clock.advance(1000);
    expect(await approvalState(id)).toBe('expired');
    expect((await server.admin('GET', '/approvals?state=expired')).body.data.map((x: { id: string }) => x.id)).toContain(id);
    const late = await server.admin('POST', `/approvals/${id}/approve`);
    expect(late.status).toBe(409);
  });

  it('an approval one second before expiry is recorded, and audited, at the clock time', async () => {
    const { id, expiresIn } = await askPerson();
    clock.advance((expiresIn - 1) * 1000);
    const answered = await server.admin('POST', `/approvals/${id}/approve`);
    expect(answered.status).toBe(200);
    expect(answered.body.data[0]).toMatchObject({ state: 'approved', decided_at: clock.iso });
    const audit = await server.admin('GET', '/audit?kind=approval&limit=1');
    expect(audit.body.data[0]).toMatchObject({ kind: 'approval', decision: 'approved', time: clock.iso });
  });

  it('a CIBA poll sooner than the interval on the clock is told to slow down', async () => {
    const { authReqId } = await askPerson();
    const poll = async () =>
      postForm(server.ctx.urls.agentToken, {
        grant_type: CIBA_GRANT,
        auth_req_id: authReqId,
        client_assertion_type: JWT_BEARER,
        client_assertion: await assertionAt(server, clock, agent),
      });
    // The request itself counts as the first poll, at the clock's time.
    expect((await poll()).body.error).toBe('slow_down');
    clock.advance(6000);
    expect((await poll()).body.error).toBe('authorization_pending');
  });

  it('an authorization code expires when the clock says, five minutes after it was issued', async () => {
    const redeem = (c: { code: string; verifier: string }) =>
      postForm(server.ctx.urls.token, { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: REDIRECT_URI }, {
        authorization: basic(app.client_id, app.client_secret!),
      });
    const inTime = await authorizeIn(new Browser(server.ctx.urls.issuer), PERSON);
    clock.advance(299_000);
    const ok = await redeem(inTime);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);

    const late = await authorizeIn(new Browser(server.ctx.urls.issuer), PERSON);
    clock.advance(300_000);
    const refused = await redeem(late);
    expect([refused.status, refused.body.error]).toEqual([400, 'invalid_grant']);
  });

  it('a sign-in session ends twelve hours later on the clock', async () => {
    const browser = new Browser(server.ctx.urls.issuer);
    await authorizeIn(browser, PERSON);
    clock.advance(12 * 3600_000 - 1000);
    expect((await authorizeIn(browser)).code).toBeTruthy();
    clock.advance(1000);
    // The session is over: the sign-in page again.
    await expect(authorizeIn(browser)).rejects.toThrow(/stuck at/);
  });

  it('failed client authentications are counted in a window on the clock: it closes after five minutes', async () => {
    const m2m = await createApp(server, { type: 'm2m', redirect_uris: [] });
    const token = (secret: string) => postForm(server.ctx.urls.token, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, secret) });
    for (let i = 0; i < 10; i++) expect((await token('wrong')).status).toBe(401);
    expect((await token(m2m.client_secret!)).status).toBe(429);
    clock.advance(299_000);
    expect((await token(m2m.client_secret!)).status).toBe(429);
    clock.advance(1000);
    expect((await token(m2m.client_secret!)).status).toBe(200);
  });

  it('the store and the context share the one clock', () => {
    expect(server.ctx.store.clock).toBe(server.ctx.clock);
  });
});

describe('a store on a set clock', () => {
  it('housekeeping purges by the store clock: a rate limit window goes once it is a day old on that clock', async () => {
    const held = new TestClock('2031-07-14T09:26:53Z');
    const t = await openTestStore(held.clock);
    const rows = async () => (await t.store.sql.all('SELECT key FROM rate_limits')).length;
    let waiting: ((removed: Record<string, number>) => void) | undefined;
    const nextPass = () => new Promise<Record<string, number>>((resolve) => (waiting = resolve));
    const errors: unknown[] = [];
    const stop = startHousekeeping(t.store, {
      everyMs: 100,
      onError: (e) => errors.push(e),
      onDone: (removed) => waiting?.(removed),
    });
    try {
      expect(await t.store.rateLimits.hit('clocked', 60)).toBe(1);
      for (let i = 0; i < 2; i++) expect((await nextPass()).rate_limits).toBe(0);
      expect(await rows()).toBe(1);
      held.advance(24 * 3600_000);
      // a pass that began before the clock moved may still answer 0; the next one purges
      let purged = 0;
      for (let i = 0; i < 3 && !purged; i++) purged = (await nextPass()).rate_limits!;
      expect(purged).toBe(1);
      expect(await rows()).toBe(0);
    } finally {
      await stop();
      await t.close();
    }
    expect(errors).toEqual([]);
  });
});
