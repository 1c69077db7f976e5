import { createHash, randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { basic, Browser, createApp, createUser, assign, followSignIn, postForm } from '../oauth/helpers.js';
import { registerAgent, putRole, type TestAgent } from '../agents/helpers.js';
import { autonomousToken, TestClock } from './clocked-agents.js';
import { signInResponse } from '../../src/saml/response.js';
import { NAME_ID_FORMATS } from '../../src/saml/xml.js';

// One clock: a server whose clock stands years away from the system's issues every token, ID
// token, SAML assertion and security event, keeps every session and writes every audit record
// at that clock's time, never at the machine's.
const clock = new TestClock('2041-03-09T17:45:12Z');
const YEAR_SECONDS = 365 * 24 * 60 * 60;
let server: TestServer;
let agent: TestAgent;
let personId: string;
let app: { client_id: string; client_secret?: string };
const PERSON = { email: 'ines@example.com', password: 'correct horse battery staple', name: 'Ines', roles: ['reader'] };
const REDIRECT_URI = 'http://localhost:9/callback';

beforeAll(async () => {
  server = await startTestServer({ clock: clock.clock });
  await putRole(server, 'reader', ['read:invoices']);
  personId = (await createUser(server, PERSON)).id;
  app = await createApp(server, { type: 'web', redirect_uris: [REDIRECT_URI] });
  await assign(server, app.client_id, personId);
  agent = await registerAgent(server, { name: 'far-off', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:invoices' }] });
});
afterAll(() => server?.stop());

/** Within a few seconds of the clock (a request takes real time, the clock does not move). */
const atClock = (seconds: unknown) => {
  expect(typeof seconds).toBe('number');
  expect(Math.abs((seconds as number) - clock.seconds)).toBeLessThanOrEqual(1);
  // and nowhere near the machine's time
  expect(Math.abs((seconds as number) - Math.floor(Date.now() / 1000))).toBeGreaterThan(YEAR_SECONDS);
};

describe('every business time is the service clock', () => {
  it('an ID token, an access token and the session behind them carry the clock', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const url = `${server.ctx.urls.authorize}?${new URLSearchParams({
      response_type: 'code', client_id: app.client_id, redirect_uri: REDIRECT_URI, scope: 'openid', state: 'st',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256',
    })}`;
    const callback = await followSignIn(new Browser(server.ctx.urls.issuer), url, { ...PERSON, consent: 'approve' });
    const res = await postForm(
      server.ctx.urls.token,
      { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, code_verifier: verifier, redirect_uri: REDIRECT_URI },
      { authorization: basic(app.client_id, app.client_secret!) },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const id = decodeJwt(res.body.id_token);
    atClock(id.iat);
    atClock(id.auth_time);
    expect(id.exp! - id.iat!).toBe(3600);
    const access = decodeJwt(res.body.access_token);
    atClock(access.iat);
    expect(access.exp! - access.iat!).toBe(900);

    const sessions = await server.ctx.store.sessions.activeForUser(personId);
    expect(sessions.length).toBeGreaterThan(0);
    for (const s of sessions) {
      atClock(s.auth_time);
      atClock(s.created_at);
      expect(s.expires_at).toBeGreaterThan(clock.seconds);
      expect(s.expires_at - clock.seconds).toBeLessThan(YEAR_SECONDS);
    }
  });

  it("an agent's access token carries the clock, and is accepted at the clock's time", async () => {
    const token = await autonomousToken(server, clock, agent);
    atClock(decodeJwt(token).iat);
  });

  it('a SAML assertion is issued at the clock time', async () => {
    const user = (await server.ctx.store.users.get(personId))!;
    const [session] = await server.ctx.store.sessions.activeForUser(personId);
    const xml = await signInResponse(server.ctx, { acsUrl: 'https://sp.example/acs', audience: 'https://sp.example/metadata', nameIdFormat: NAME_ID_FORMATS.persistent, user, session: session! });
    const instants = [...xml.matchAll(/(?:IssueInstant|NotBefore|AuthnInstant)="([^"]+)"/g)].map((m) => Math.floor(Date.parse(m[1]!) / 1000));
    expect(instants.length).toBeGreaterThan(1);
    for (const t of instants) expect(Math.abs(t - clock.seconds)).toBeLessThanOrEqual(300);
    expect(Math.abs(instants[0]! - clock.seconds)).toBeLessThanOrEqual(1);
  });

  it('a security event is stamped with the clock', async () => {
    const created = await fetch(`${server.url}/v1/ssf/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'https://receiver.example/events' }, events_requested: ['https://schemas.openid.net/secevent/caep/event-type/token-claims-change'] }),
    });
    expect(created.status).toBe(201);
    expect((await server.admin('PATCH', `/users/${personId}`, { groups: ['finance'] })).status).toBe(200);
    const rows = await server.ctx.store.sql.all<{ event_type: string; claims: string }>('SELECT event_type, claims FROM ssf_outbox');
    const change = rows.map((r) => ({ type: r.event_type, claims: JSON.parse(r.claims) as Record<string, any> })).find((r) => r.type.endsWith('token-claims-change'));
    expect(change).toBeDefined();
    atClock(change!.claims.iat);
    const event = Object.values(change!.claims.events as Record<string, Record<string, unknown>>)[0]!;
    atClock(event.event_timestamp);
  });

  it('audit records are written at the clock time', async () => {
    const audit = await server.admin('GET', '/audit?kind=all&limit=50');
    expect(audit.status).toBe(200);
    expect(audit.body.data.length).toBeGreaterThan(0);
    for (const r of audit.body.data as { time: string }[]) atClock(Math.floor(Date.parse(r.time) / 1000));
  });

  it('the policy history keeps the version in force, first seen at the clock time', async () => {
    const inForce = await server.admin('GET', '/policy');
    expect(inForce.status).toBe(200);
    // (the history is written beside the decision, never failing one: read it from the store)
    const kept = (await server.ctx.store.policyVersions.list()).find((v) => v.version === inForce.body.version);
    expect(kept, 'the version in force is in the history').toBeDefined();
    atClock(Number(kept!.first_seen));
  });
});
