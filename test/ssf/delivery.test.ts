import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { EVENT_TYPES, type SecurityEventInput } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Receiver, setVerifier, type VerifiedSet } from './receiver.js';

// Fast retries for the test server (read by the delivery worker's options parser).
process.env.GATEHOUSE_SSF_POLL_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_BASE_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_MAX_MS = '100';
process.env.GATEHOUSE_SSF_MAX_ATTEMPTS = '4';

const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';

let server: TestServer;
let verify: ReturnType<typeof setVerifier>;
const receivers: Receiver[] = [];

async function ssf(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}/v1/ssf${path}`, {
    method,
    headers: { authorization: `Bearer ${server.adminToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function receiverWithStream(streamBody: Record<string, unknown> = {}) {
  const receiver = await new Receiver().start();
  receivers.push(receiver);
  const res = await ssf('POST', '/streams', {
    delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url, ...((streamBody.delivery as object) ?? {}) },
    events_requested: Object.values(EVENT_TYPES),
    ...Object.fromEntries(Object.entries(streamBody).filter(([k]) => k !== 'delivery')),
  });
  expect(res.status).toBe(201);
  return { receiver, stream: res.body as { stream_id: string; aud: string | string[] } };
}

/** Emits as a management operation does: inside a store transaction. */
async function emit(event: SecurityEventInput): Promise<void> {
  await server.ctx.store.transaction(async (tx) => server.ctx.signals.emit(tx, event));
}

/** Polls until `fn` returns a value (the worker marks a row after the receiver answered). */
async function eventually<T>(fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function verifiedSets(receiver: Receiver, aud: string | string[]): Promise<VerifiedSet[]> {
  return Promise.all(receiver.accepted.map((p) => verify(p.body, aud)));
}

beforeAll(async () => {
  server = await startTestServer();
  verify = setVerifier(server.url);
});
afterAll(async () => {
  await server?.stop();
  await Promise.all(receivers.map((r) => r.stop()));
});

describe('Security Event Tokens', () => {
  it('verification: 204, then a verification SET with the state, signed with the JWK Set, pushed as RFC 8935', async () => {
    const { receiver, stream } = await receiverWithStream({
      delivery: { authorization_header: 'Bearer receiver-token-123' },
    });
    const res = await ssf('POST', '/verify', { stream_id: stream.stream_id, state: 'state-abc' });
    expect(res.status).toBe(204);
    await receiver.waitFor((r) => r.accepted.length === 1);

    const pushed = receiver.accepted[0]!;
    expect(pushed.contentType).toBe('application/secevent+jwt');
    expect(pushed.authorization).toBe('Bearer receiver-token-123');
    const set = await verify(pushed.body, stream.aud);
    expect(set.header.typ).toBe('secevent+jwt');
    expect(set.header.alg).toBe('RS256');
    expect(set.type).toBe(VERIFICATION);
    expect(set.event).toEqual({ state: 'state-abc' });
    expect(set.claims.sub_id).toEqual({ format: 'opaque', id: stream.stream_id });
    expect(set.claims).toMatchObject({ iss: server.url, aud: stream.aud });
    expect(typeof set.claims.iat).toBe('number');
    expect(typeof set.claims.jti).toBe('string');
    expect(typeof set.claims.txn).toBe('string');
    expect(set.claims.sub).toBeUndefined();
    expect(set.claims.exp).toBeUndefined();
    expect(Object.keys(set.claims.events!)).toHaveLength(1);
  });

  it('the sink: CAEP/RISC payloads, iss_sub subjects, one SET per event with a shared txn across streams', async () => {
    const a = await receiverWithStream();
    const b = await receiverWithStream({ events_requested: [EVENT_TYPES.tokenClaimsChange] });
    const userId = randomUUID();
    const subject = { user_id: userId, email: `${userId}@example.com` };
    await emit({ type: EVENT_TYPES.tokenClaimsChange, subject, payload: { claims: { roles: ['admin'] } }, initiatingEntity: 'admin' });
    await emit({ type: EVENT_TYPES.sessionRevoked, subject: { ...subject, session_id: 'sid-1' }, payload: {} });
    await emit({ type: EVENT_TYPES.credentialCompromise, subject, payload: { credential_type: 'password', reason_admin: 'leaked' } });
    await emit({ type: EVENT_TYPES.accountPurged, subject, payload: {} });

    await a.receiver.waitFor((r) => r.accepted.length === 4);
    await b.receiver.waitFor((r) => r.accepted.length === 1);
    const sets = await verifiedSets(a.receiver, a.stream.aud);
    const byType = new Map(sets.map((s) => [s.type, s]));
    expect(new Set(byType.keys())).toEqual(new Set(Object.values(EVENT_TYPES)));
    for (const s of sets) {
      expect(s.claims.sub_id).toEqual({ format: 'iss_sub', iss: server.url, sub: userId });
      expect(typeof s.event.event_timestamp).toBe('number');
    }
    expect(byType.get(EVENT_TYPES.tokenClaimsChange)!.event).toMatchObject({ claims: { roles: ['admin'] }, initiating_entity: 'admin' });
    expect(byType.get(EVENT_TYPES.sessionRevoked)!.event).toMatchObject({ initiating_entity: 'admin', sid: 'sid-1' });
    expect(byType.get(EVENT_TYPES.credentialCompromise)!.event).toMatchObject({ credential_type: 'password', reason_admin: { en: 'leaked' } });

    // the other stream asked only for token-claims-change; same change, same txn, its own jti
    const [onB] = await verifiedSets(b.receiver, b.stream.aud);
    expect(onB!.type).toBe(EVENT_TYPES.tokenClaimsChange);
    expect(onB!.claims.txn).toBe(byType.get(EVENT_TYPES.tokenClaimsChange)!.claims.txn);
    expect(onB!.claims.jti).not.toBe(byType.get(EVENT_TYPES.tokenClaimsChange)!.claims.jti);
  });

  it('an event emitted in a transaction that rolls back is never recorded', async () => {
    const { receiver, stream } = await receiverWithStream();
    await expect(
      server.ctx.store.transaction(async (tx) => {
        await server.ctx.signals.emit(tx, { type: EVENT_TYPES.accountPurged, subject: { user_id: 'rolled-back', email: 'rb@example.com' }, payload: {} });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect(await server.ctx.store.ssf.events(stream.stream_id, null, 10)).toEqual([]);
    expect(receiver.pushes).toEqual([]);
  });
});

describe('filtering', () => {
  it('by subject (only added subjects) and by subject format (email where asked)', async () => {
    const { receiver, stream } = await receiverWithStream({ events_requested: [EVENT_TYPES.accountPurged], format: 'email' });
    const wanted = { user_id: randomUUID(), email: 'Wanted@Example.com' };
    const other = { user_id: randomUUID(), email: 'other@example.com' };
    // the receiver names the person by email, in another case
    expect((await ssf('POST', '/subjects:add', { stream_id: stream.stream_id, subject: { format: 'email', email: 'wanted@example.com' } })).status).toBe(200);

    await emit({ type: EVENT_TYPES.accountPurged, subject: other, payload: {} });
    await emit({ type: EVENT_TYPES.tokenClaimsChange, subject: wanted, payload: { claims: { groups: [] } } });
    await emit({ type: EVENT_TYPES.accountPurged, subject: wanted, payload: {} });
    await receiver.waitFor((r) => r.accepted.length >= 1);

    // only one row was ever recorded for this stream: the wanted person's purge
    const rows = await server.ctx.store.ssf.events(stream.stream_id, null, 10);
    expect(rows.map((r) => r.event_type)).toEqual([EVENT_TYPES.accountPurged]);
    const [set] = await verifiedSets(receiver, stream.aud);
    expect(set!.type).toBe(EVENT_TYPES.accountPurged);
    expect(set!.claims.sub_id).toEqual({ format: 'email', email: 'Wanted@Example.com' });
  });

  it('a paused stream holds its events and sends them once enabled; a disabled one drops them', async () => {
    const held = await receiverWithStream({ events_requested: [EVENT_TYPES.accountPurged] });
    const control = await receiverWithStream({ events_requested: [EVENT_TYPES.accountPurged] });
    await ssf('POST', '/status', { stream_id: held.stream.stream_id, status: 'paused' });

    await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: 'paused-1', email: 'p1@example.com' }, payload: {} });
    await control.receiver.waitFor((r) => r.accepted.length === 1);
    // the same pass delivered the control stream's copy; the paused stream's is still untouched
    const [heldRow] = await server.ctx.store.ssf.events(held.stream.stream_id, null, 10);
    expect(heldRow).toMatchObject({ state: 'pending', attempts: 0 });
    expect(held.receiver.pushes).toEqual([]);

    await ssf('POST', '/status', { stream_id: held.stream.stream_id, status: 'enabled' });
    await held.receiver.waitFor((r) => r.accepted.length === 1);
    expect((await verify(held.receiver.accepted[0]!.body, held.stream.aud)).claims.jti).toBe(heldRow!.jti);
    await eventually(async () => (await server.ctx.store.ssf.events(held.stream.stream_id, 'delivered', 10))[0]);

    await ssf('POST', '/status', { stream_id: held.stream.stream_id, status: 'paused' });
    await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: 'paused-2', email: 'p2@example.com' }, payload: {} });
    await ssf('POST', '/status', { stream_id: held.stream.stream_id, status: 'disabled' });
    expect(await server.ctx.store.ssf.events(held.stream.stream_id, 'dropped', 10)).toHaveLength(1);
    // a disabled stream records nothing new
    await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: 'disabled-1', email: 'd1@example.com' }, payload: {} });
    expect(await server.ctx.store.ssf.events(held.stream.stream_id, null, 10)).toHaveLength(2);
  });
});

describe('push delivery', () => {
  it('a receiver that fails three times (500) and then accepts (202) gets the event exactly once', async () => {
    const { receiver, stream } = await receiverWithStream({ events_requested: [EVENT_TYPES.credentialCompromise] });
    receiver.respond = (n) => (n < 3 ? 500 : 202);
    await emit({ type: EVENT_TYPES.credentialCompromise, subject: { user_id: 'retry-1', email: 'r1@example.com' }, payload: { credential_type: 'password' } });

    await receiver.waitFor((r) => r.accepted.length === 1);
    const row = await eventually(async () => (await server.ctx.store.ssf.events(stream.stream_id, 'delivered', 10))[0]);
    expect(row).toMatchObject({ state: 'delivered', attempts: 4, last_error: null });
    expect(receiver.pushes.map((p) => p.status)).toEqual([500, 500, 500, 202]);
    // every attempt carried the same SET identity
    const jtis = await Promise.all(receiver.pushes.map(async (p) => (await verify(p.body, stream.aud)).claims.jti));
    expect(new Set(jtis)).toEqual(new Set([row!.jti]));
  });

  it('after the last attempt the event is failed and visible in the management API; a retry sends it', async () => {
    const { receiver, stream } = await receiverWithStream({ events_requested: [EVENT_TYPES.accountPurged] });
    receiver.respond = () => 503;
    await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: 'fail-1', email: 'f1@example.com' }, payload: {} });

    await receiver.waitFor(() => receiver.pushes.length >= 4);
    await eventually(async () => (await server.ctx.store.ssf.events(stream.stream_id, 'failed', 10))[0]);
    const failed = (await ssf('GET', `/events?stream_id=${stream.stream_id}&state=failed`)).body;
    expect(failed.data).toHaveLength(1);
    expect(failed.data[0]).toMatchObject({ state: 'failed', attempts: 4, event_type: EVENT_TYPES.accountPurged });
    expect(failed.data[0]!.last_error).toMatch(/^HTTP 503/);
    expect(receiver.pushes).toHaveLength(4);

    receiver.respond = () => 202;
    const retried = await ssf('POST', '/events:retry', { stream_id: stream.stream_id });
    expect(retried.body).toEqual({ stream_id: stream.stream_id, requeued: 1 });
    await receiver.waitFor((r) => r.accepted.length === 1);
    expect((await verify(receiver.accepted[0]!.body, stream.aud)).claims.jti).toBe(failed.data[0]!.jti);
  });

  it('while a push is being retried the stream\'s later events wait, so they arrive in order', async () => {
    const { receiver, stream } = await receiverWithStream({ events_requested: [EVENT_TYPES.accountPurged] });
    await ssf('POST', '/status', { stream_id: stream.stream_id, status: 'paused' });
    for (const n of [1, 2, 3]) {
      await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: `order-${n}`, email: `o${n}@example.com` }, payload: {} });
    }
    receiver.respond = (n) => (n === 0 ? 500 : 202);
    await ssf('POST', '/status', { stream_id: stream.stream_id, status: 'enabled' });
    await receiver.waitFor((r) => r.accepted.length === 3);
    const subs = await Promise.all(receiver.pushes.map(async (p) => (await verify(p.body, stream.aud)).claims.sub_id?.sub));
    expect(subs).toEqual(['order-1', 'order-1', 'order-2', 'order-3']);
  });

  it('a deleted stream takes its undelivered events with it', async () => {
    const { stream } = await receiverWithStream();
    await ssf('POST', '/status', { stream_id: stream.stream_id, status: 'paused' });
    await emit({ type: EVENT_TYPES.accountPurged, subject: { user_id: 'del-1', email: 'del1@example.com' }, payload: {} });
    expect(await server.ctx.store.ssf.events(stream.stream_id, 'pending', 10)).toHaveLength(1);
    expect((await ssf('DELETE', `/streams?stream_id=${stream.stream_id}`)).status).toBe(204);
    expect(await server.ctx.store.ssf.events(stream.stream_id, null, 10)).toEqual([]);
  });
});
