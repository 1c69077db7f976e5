import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { randomToken, sha256 } from '../../src/crypto/hash.js';
import { EVENT_TYPES } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Receiver, setVerifier, type VerifiedSet } from './receiver.js';

process.env.GATEHOUSE_SSF_POLL_MS = '20';

/** Each management operation → its event, end to end through the admin API. */
let server: TestServer;
let receiver: Receiver;
let emailReceiver: Receiver;
let stream: { stream_id: string; aud: string };
let emailStream: { stream_id: string; aud: string };
let verify: ReturnType<typeof setVerifier>;

async function createStream(r: Receiver, body: Record<string, unknown>) {
  const res = await fetch(`${server.url}/v1/ssf/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: r.url }, ...body }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { stream_id: string; aud: string };
}

/** The SETs the receiver accepted after `from`, verified. */
async function setsSince(r: Receiver, from: number, aud: string): Promise<VerifiedSet[]> {
  return Promise.all(r.accepted.slice(from).map((p) => verify(p.body, aud)));
}

async function createUser(email: string): Promise<string> {
  const res = await server.admin('POST', '/users', { email, password: 'correct horse battery', name: 'Pat' });
  expect(res.status).toBe(201);
  return res.body.id;
}

beforeAll(async () => {
  server = await startTestServer();
  verify = setVerifier(server.url);
  receiver = await new Receiver().start();
  emailReceiver = await new Receiver().start();
  stream = await createStream(receiver, { events_requested: Object.values(EVENT_TYPES) });
  emailStream = await createStream(emailReceiver, { events_requested: [EVENT_TYPES.accountPurged], format: 'email' });
});
afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
  await emailReceiver?.stop();
});

it('PATCH of roles, groups or email → token-claims-change with the new values; other fields → nothing', async () => {
  const id = await createUser(`claims-${randomUUID()}@example.com`);
  const from = receiver.accepted.length;
  expect((await server.admin('PATCH', `/users/${id}`, { name: 'Not a claim change' })).status).toBe(200);
  expect((await server.admin('PATCH', `/users/${id}`, { roles: ['auditor'], groups: ['finance'] })).status).toBe(200);
  await receiver.waitFor((r) => r.accepted.length >= from + 1);
  const sets = await setsSince(receiver, from, stream.aud);
  expect(sets).toHaveLength(1);
  expect(sets[0]!.type).toBe(EVENT_TYPES.tokenClaimsChange);
  expect(sets[0]!.claims.sub_id).toEqual({ format: 'iss_sub', iss: server.url, sub: id });
  expect(sets[0]!.event).toMatchObject({ claims: { roles: ['auditor'], groups: ['finance'] }, initiating_entity: 'admin' });
  expect(typeof sets[0]!.event.event_timestamp).toBe('number');
});

it('sessions revoke → one session-revoked per live session', async () => {
  const id = await createUser(`sessions-${randomUUID()}@example.com`);
  const sids = [randomUUID(), randomUUID()];
  for (const sid of sids) {
    await server.ctx.store.sessions.create({ sid, user_id: id, token_hash: sha256(randomToken()), auth_time: 0, amr: ['pwd'], acr: '1', ttl: 3600 });
  }
  const from = receiver.accepted.length;
  expect((await server.admin('POST', `/users/${id}/sessions/revoke`)).status).toBe(204);
  await receiver.waitFor((r) => r.accepted.length >= from + 2);
  const sets = await setsSince(receiver, from, stream.aud);
  expect(sets.map((s) => s.type)).toEqual([EVENT_TYPES.sessionRevoked, EVENT_TYPES.sessionRevoked]);
  expect(new Set(sets.map((s) => s.event.sid))).toEqual(new Set(sids));
  for (const s of sets) expect(s.claims.sub_id).toEqual({ format: 'iss_sub', iss: server.url, sub: id });
});

it('credential-compromise → credential-compromise with credential_type', async () => {
  const id = await createUser(`cred-${randomUUID()}@example.com`);
  const from = receiver.accepted.length;
  const res = await server.admin('POST', `/users/${id}/credential-compromise`, { credential_type: 'password', reason: 'found in a breach' });
  expect(res.status).toBe(204);
  await receiver.waitFor((r) => r.accepted.length >= from + 1);
  const [set] = await setsSince(receiver, from, stream.aud);
  expect(set!.type).toBe(EVENT_TYPES.credentialCompromise);
  expect(set!.event).toMatchObject({ credential_type: 'password' });
  expect(set!.claims.sub_id).toEqual({ format: 'iss_sub', iss: server.url, sub: id });
});

it('DELETE of a person → account-purged (by email on the stream that asked for email)', async () => {
  const email = `purged-${randomUUID()}@example.com`;
  const id = await createUser(email);
  const from = receiver.accepted.length;
  const fromEmail = emailReceiver.accepted.length;
  expect((await server.admin('DELETE', `/users/${id}`)).status).toBe(204);
  await receiver.waitFor((r) => r.accepted.length >= from + 1);
  await emailReceiver.waitFor((r) => r.accepted.length >= fromEmail + 1);
  const [set] = await setsSince(receiver, from, stream.aud);
  expect(set!.type).toBe(EVENT_TYPES.accountPurged);
  expect(set!.claims.sub_id).toEqual({ format: 'iss_sub', iss: server.url, sub: id });
  const [byEmail] = await setsSince(emailReceiver, fromEmail, emailStream.aud);
  expect(byEmail!.type).toBe(EVENT_TYPES.accountPurged);
  expect(byEmail!.claims.sub_id).toEqual({ format: 'email', email });
  // the email stream asked for account-purged only: nothing else was recorded for it
  expect((await server.ctx.store.ssf.events(emailStream.stream_id, null, 100)).map((e) => e.event_type)).toEqual([EVENT_TYPES.accountPurged]);
});
