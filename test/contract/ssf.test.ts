import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Receiver, setVerifier } from '../ssf/receiver.js';

/** Shared Signals events, as a receiver sees them. */
const T = {
  sessionRevoked: 'https://schemas.openid.net/secevent/caep/event-type/session-revoked',
  claimsChange: 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change',
  purged: 'https://schemas.openid.net/secevent/risc/event-type/account-purged',
  compromise: 'https://schemas.openid.net/secevent/risc/event-type/credential-compromise',
};

let s: TestServer;
let receiver: Receiver;
let verify: ReturnType<typeof setVerifier>;

async function ssf(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}/v1/ssf${path}`, {
    method,
    headers: { authorization: `Bearer ${s.adminToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

beforeAll(async () => {
  s = await startTestServer();
  receiver = await new Receiver().start();
  verify = setVerifier(s.url);
});
afterAll(async () => {
  await s.stop();
  await receiver.stop();
});

describe('Shared Signals: stream management (SSF 1.0)', () => {
  let streamId: string;
  let aud: string | string[];

  it('POST /v1/ssf/streams: 201 with stream_id, iss, aud, events_supported/requested/delivered', async () => {
    const r = await ssf('POST', '/streams', {
      delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url, authorization_header: 'Bearer rx-secret' },
      events_requested: Object.values(T),
      description: 'contract receiver',
    });
    expect(r.status).toBe(201);
    expect(typeof r.body.stream_id).toBe('string');
    expect(r.body.iss).toBe(s.url);
    expect(r.body.aud).toBeDefined();
    expect([...r.body.events_supported].sort()).toEqual(Object.values(T).sort());
    expect([...r.body.events_requested].sort()).toEqual(Object.values(T).sort());
    expect([...r.body.events_delivered].sort()).toEqual(Object.values(T).sort());
    expect(r.body.delivery).toMatchObject({ method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url });
    streamId = r.body.stream_id;
    aud = r.body.aud;
  });

  it('GET by stream_id and as a list; unknown stream is 404', async () => {
    const one = await ssf('GET', `/streams?stream_id=${encodeURIComponent(streamId)}`);
    expect(one.status).toBe(200);
    expect(one.body.stream_id).toBe(streamId);
    const list = await ssf('GET', '/streams');
    expect(list.status).toBe(200);
    const arr = Array.isArray(list.body) ? list.body : list.body.streams ?? list.body.data;
    expect(arr.some((x: { stream_id: string }) => x.stream_id === streamId)).toBe(true);
    expect((await ssf('GET', '/streams?stream_id=nope')).status).toBe(404);
  });

  it('PATCH changes the description; a bad body is 400', async () => {
    const p = await ssf('PATCH', '/streams', { stream_id: streamId, description: 'renamed' });
    expect(p.status).toBe(200);
    expect(p.body.description).toBe('renamed');
    for (const bad of [{ stream_id: streamId, events_requested: 'x' }, { stream_id: 12 }, {}, '{"stream_id":', '[]']) {
      const r = await ssf('PATCH', '/streams', bad);
      expect(r.status, JSON.stringify(bad)).toBeGreaterThanOrEqual(400);
      expect(r.status, JSON.stringify(bad)).toBeLessThan(500);
    }
  });

  it('status endpoint answers the stream status', async () => {
    const r = await ssf('GET', `/status?stream_id=${encodeURIComponent(streamId)}`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ stream_id: streamId, status: 'enabled' });
  });

  it('verification delivers a signed SET with the RFC 8417 shape', async () => {
    const before = receiver.accepted.length;
    const r = await ssf('POST', '/verify', { stream_id: streamId, state: 'st-1' });
    expect(r.status).toBe(204);
    await receiver.waitFor((x) => x.accepted.length > before);
    const push = receiver.accepted[before]!;
    expect(push.contentType).toMatch(/^application\/secevent\+jwt/);
    expect(push.authorization).toBe('Bearer rx-secret');
    const set = await verify(push.body, aud);
    expect(set.header.typ).toBe('secevent+jwt');
    expect(set.claims.iss).toBe(s.url);
    expect(typeof set.claims.jti).toBe('string');
    expect(typeof set.claims.iat).toBe('number');
    expect(set.claims.sub).toBeUndefined();
    expect(set.claims.exp).toBeUndefined();
    expect(Object.keys(set.claims.events!)).toHaveLength(1);
    expect(set.event.state).toBe('st-1');
  });

  it('person events: token-claims-change, credential-compromise, account-purged', async () => {
    const u = await s.admin('POST', '/users', { email: 'ev@example.com', password: 'pw-events-123456', name: 'Ev' });
    const add = await ssf('POST', '/subjects:add', { stream_id: streamId, subject: { format: 'email', email: 'ev@example.com' } });
    expect(add.status).toBe(200);
    const start = receiver.accepted.length;
    expect((await s.admin('PATCH', `/users/${u.body.id}`, { groups: ['new'] })).status).toBe(200);
    expect((await s.admin('POST', `/users/${u.body.id}/credential-compromise`, { credential_type: 'password' })).status).toBe(204);
    expect((await s.admin('DELETE', `/users/${u.body.id}`)).status).toBe(204);
    await receiver.waitFor((x) => x.accepted.length >= start + 3);
    const sets = await Promise.all(receiver.accepted.slice(start).map((p) => verify(p.body, aud)));
    const types = sets.map((x) => x.type);
    expect(types).toEqual(expect.arrayContaining([T.claimsChange, T.compromise, T.purged]));
    for (const set of sets) {
      expect(set.claims.iss).toBe(s.url);
      expect(typeof set.claims.txn).toBe('string');
      expect(set.claims.sub_id).toBeDefined();
      expect(typeof (set.claims.sub_id as { format?: string }).format).toBe('string');
      expect(set.claims.sub).toBeUndefined();
      expect(set.claims.exp).toBeUndefined();
    }
  });

  it('the OAuth endpoints send no events', async () => {
    const before = receiver.pushes.length;
    await fetch(`${s.url}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials&client_id=x' });
    await fetch(`${s.url}/oauth/logout`);
    // a verification afterwards is the next push: nothing was queued before it
    await ssf('POST', '/verify', { stream_id: streamId, state: 'after-oauth' });
    await receiver.waitFor((x) => x.pushes.length > before);
    expect(receiver.pushes.length).toBe(before + 1);
  });

  it('DELETE ?stream_id= 204, then 404', async () => {
    const r = await ssf('DELETE', `/streams?stream_id=${encodeURIComponent(streamId)}`);
    expect(r.status).toBe(204);
    expect((await ssf('GET', `/streams?stream_id=${encodeURIComponent(streamId)}`)).status).toBe(404);
  });

  it('hostile stream bodies are 400, never 500', async () => {
    const bodies: unknown[] = [
      {}, [], 'null', '{"delivery":', { delivery: { method: 'urn:ietf:rfc:8936' } },
      { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'not a url' } },
      { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: ['https://a.example'] } },
      { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: `https://a.example/${'x'.repeat(100000)}` } },
      { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'https://a.example/e' }, events_requested: [1, 2] },
    ];
    for (const b of bodies) {
      const r = await ssf('POST', '/streams', b);
      expect(r.status, JSON.stringify(b).slice(0, 60)).toBeGreaterThanOrEqual(400);
      expect(r.status, JSON.stringify(b).slice(0, 60)).toBeLessThan(500);
    }
  });
});
