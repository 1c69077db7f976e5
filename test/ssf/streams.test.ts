import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES, SUPPORTED_EVENT_TYPES } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The SSF stream management API (SSF 1.0 §8) through HTTP: shapes, status codes, errors. */
let server: TestServer;

async function ssf(method: string, path: string, body?: unknown, token: string | null = server.adminToken) {
  const res = await fetch(`${server.url}/v1/ssf${path}`, {
    method,
    headers: {
      ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const push = (endpoint_url: string, extra: Record<string, unknown> = {}) => ({
  delivery: { method: 'urn:ietf:rfc:8935', endpoint_url, ...extra },
});

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.stop();
});

describe('discovery', () => {
  it('names every stream management endpoint in the SSF configuration', async () => {
    const res = await fetch(`${server.url}/.well-known/ssf-configuration`);
    const doc = (await res.json()) as Record<string, unknown>;
    expect(doc.configuration_endpoint).toBe(`${server.url}/v1/ssf/streams`);
    expect(doc.status_endpoint).toBe(`${server.url}/v1/ssf/status`);
    expect(doc.add_subject_endpoint).toBe(`${server.url}/v1/ssf/subjects:add`);
    expect(doc.remove_subject_endpoint).toBe(`${server.url}/v1/ssf/subjects:remove`);
    expect(doc.verification_endpoint).toBe(`${server.url}/v1/ssf/verify`);
  });
});

describe('authorization', () => {
  const calls: [string, string, unknown?][] = [
    ['POST', '/streams', push('https://r.example/events')],
    ['GET', '/streams'],
    ['PATCH', '/streams', { stream_id: 'x' }],
    ['PUT', '/streams', { stream_id: 'x' }],
    ['DELETE', '/streams?stream_id=x'],
    ['GET', '/status?stream_id=x'],
    ['POST', '/status', { stream_id: 'x', status: 'paused' }],
    ['POST', '/subjects:add', { stream_id: 'x', subject: { format: 'email', email: 'a@b.c' } }],
    ['POST', '/subjects:remove', { stream_id: 'x', subject: { format: 'email', email: 'a@b.c' } }],
    ['POST', '/verify', { stream_id: 'x' }],
  ];
  it.each(calls)('%s %s without a token or with a wrong one is 401 invalid_token', async (method, path, body) => {
    for (const token of [null, 'wrong-token-0123456789abcdef']) {
      const res = await ssf(method, path, body, token);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'invalid_token' });
    }
  });
});

describe('streams', () => {
  it('creates a stream: 201 with the SSF configuration, events_delivered = requested ∩ supported', async () => {
    const res = await ssf('POST', '/streams', {
      ...push('https://receiver-a.example/ssf/events', { authorization_header: 'Bearer receiver-secret' }),
      events_requested: [EVENT_TYPES.sessionRevoked, 'urn:example:unknown-event'],
      description: 'receiver A',
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      iss: server.url,
      aud: 'https://receiver-a.example',
      delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'https://receiver-a.example/ssf/events' },
      events_supported: SUPPORTED_EVENT_TYPES,
      events_requested: [EVENT_TYPES.sessionRevoked, 'urn:example:unknown-event'],
      events_delivered: [EVENT_TYPES.sessionRevoked],
      description: 'receiver A',
    });
    expect(res.body.stream_id).toMatch(/^[\w-]{8,}$/);
    // the header is kept sealed, not in plain text
    const row = (await server.ctx.store.sql.get<{ h: string }>('SELECT authorization_header_enc AS h FROM ssf_streams WHERE stream_id = ?', [res.body.stream_id]))!;
    expect(row.h).not.toContain('receiver-secret');
  });

  it('a stream that names no events gets every supported one', async () => {
    const res = await ssf('POST', '/streams', push('https://receiver-all.example/e'));
    expect(res.status).toBe(201);
    expect(res.body.events_requested).toEqual(SUPPORTED_EVENT_TYPES);
    expect(res.body.events_delivered).toEqual(SUPPORTED_EVENT_TYPES);
  });

  it('takes a receiver-given aud', async () => {
    const res = await ssf('POST', '/streams', { ...push('https://receiver-aud.example/e'), aud: ['urn:rp:web', 'urn:rp:mobile'] });
    expect(res.status).toBe(201);
    expect(res.body.aud).toEqual(['urn:rp:web', 'urn:rp:mobile']);
  });

  it('answers 409 for a second stream on the same endpoint', async () => {
    const first = await ssf('POST', '/streams', push('https://dup.example/events'));
    expect(first.status).toBe(201);
    const second = await ssf('POST', '/streams', { ...push('https://dup.example/events'), description: 'again' });
    expect(second.status).toBe(409);
    expect(second.body.error).toBe('conflict');
  });

  it('answers 400 naming the field for a bad create body', async () => {
    const cases: [unknown, string][] = [
      [{ events_requested: [EVENT_TYPES.accountPurged] }, 'delivery'],
      [{ delivery: { method: 'urn:ietf:rfc:8936', endpoint_url: 'https://x.example/e' } }, 'delivery.method'],
      [push('not a url'), 'delivery.endpoint_url'],
      [push('ftp://x.example/e'), 'delivery.endpoint_url'],
      [{ ...push('https://y.example/e'), events_requested: 'all' }, 'events_requested'],
      [{ ...push('https://y.example/e'), format: 'phone' }, 'format'],
      [push('https://y.example/e', { authorization_header: 'Bearer a\r\nX-Evil: 1' }), 'delivery.authorization_header'],
    ];
    for (const [body, field] of cases) {
      const res = await ssf('POST', '/streams', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toBe('invalid_request');
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(field);
    }
    const notJson = await fetch(`${server.url}/v1/ssf/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: string }).error).toBe('invalid_request');
  });

  it('reads one stream, lists all, updates, replaces and deletes', async () => {
    const created = (await ssf('POST', '/streams', {
      ...push('https://crud.example/events', { authorization_header: 'Bearer one' }),
      events_requested: [EVENT_TYPES.accountPurged, EVENT_TYPES.tokenClaimsChange],
      description: 'crud',
    })).body;
    const id = created.stream_id;

    const one = await ssf('GET', `/streams?stream_id=${id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(created);
    expect(one.headers.get('cache-control')).toBe('no-store');

    const list = await ssf('GET', '/streams');
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body.map((s: { stream_id: string }) => s.stream_id)).toContain(id);

    // PATCH: only what is given changes
    const patched = await ssf('PATCH', '/streams', { stream_id: id, description: 'patched' });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created, description: 'patched' });

    // echoed transmitter-supplied members must match
    const badIss = await ssf('PATCH', '/streams', { stream_id: id, iss: 'https://someone-else.example' });
    expect(badIss.status).toBe(400);
    expect(badIss.body.issues[0].path).toBe('iss');
    const sameEcho = await ssf('PATCH', '/streams', { ...patched.body, events_requested: [EVENT_TYPES.accountPurged] });
    expect(sameEcho.status).toBe(200);
    expect(sameEcho.body.events_delivered).toEqual([EVENT_TYPES.accountPurged]);

    // PUT: absent receiver-supplied members are removed
    const replaced = await ssf('PUT', '/streams', { stream_id: id, ...push('https://crud.example/v2'), events_requested: [] });
    expect(replaced.status).toBe(200);
    expect(replaced.body.delivery).toEqual({ method: 'urn:ietf:rfc:8935', endpoint_url: 'https://crud.example/v2' });
    expect(replaced.body.events_requested).toEqual([]);
    expect(replaced.body.events_delivered).toEqual([]);
    expect(replaced.body.description).toBeUndefined();
    expect(replaced.body.aud).toBe(created.aud);

    const putNoDelivery = await ssf('PUT', '/streams', { stream_id: id, events_requested: [] });
    expect(putNoDelivery.status).toBe(400);
    expect(putNoDelivery.body.issues.map((i: { path: string }) => i.path)).toContain('delivery');

    expect((await ssf('DELETE', `/streams?stream_id=${id}`)).status).toBe(204);
    expect((await ssf('GET', `/streams?stream_id=${id}`)).status).toBe(404);
  });

  it('moving a stream onto another stream\'s endpoint is a 409', async () => {
    await ssf('POST', '/streams', push('https://taken.example/events'));
    const mine = (await ssf('POST', '/streams', push('https://mine.example/events'))).body;
    const res = await ssf('PATCH', '/streams', { stream_id: mine.stream_id, ...push('https://taken.example/events') });
    expect(res.status).toBe(409);
  });

  it('answers 404 not_found for an unknown stream and 400 without stream_id', async () => {
    const unknown = 'no-such-stream';
    for (const [method, path, body] of [
      ['GET', `/streams?stream_id=${unknown}`],
      ['PATCH', '/streams', { stream_id: unknown, description: 'x' }],
      ['PUT', '/streams', { stream_id: unknown, ...push('https://z.example/e') }],
      ['DELETE', `/streams?stream_id=${unknown}`],
      ['GET', `/status?stream_id=${unknown}`],
      ['POST', '/status', { stream_id: unknown, status: 'paused' }],
      ['POST', '/subjects:add', { stream_id: unknown, subject: { format: 'email', email: 'a@b.c' } }],
      ['POST', '/subjects:remove', { stream_id: unknown, subject: { format: 'email', email: 'a@b.c' } }],
      ['POST', '/verify', { stream_id: unknown }],
    ] as [string, string, unknown?][]) {
      const res = await ssf(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error).toBe('not_found');
    }
    for (const [method, path, body] of [
      ['DELETE', '/streams'],
      ['GET', '/status'],
      ['PATCH', '/streams', { description: 'x' }],
      ['POST', '/verify', {}],
    ] as [string, string, unknown?][]) {
      const res = await ssf(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain('stream_id');
    }
  });
});

describe('status and subjects', () => {
  it('reads and changes the status', async () => {
    const id = (await ssf('POST', '/streams', push('https://status.example/events'))).body.stream_id;
    expect((await ssf('GET', `/status?stream_id=${id}`)).body).toEqual({ stream_id: id, status: 'enabled' });

    const paused = await ssf('POST', '/status', { stream_id: id, status: 'paused', reason: 'maintenance' });
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({ stream_id: id, status: 'paused', reason: 'maintenance' });
    expect((await ssf('GET', `/status?stream_id=${id}`)).body).toEqual({ stream_id: id, status: 'paused', reason: 'maintenance' });

    const bad = await ssf('POST', '/status', { stream_id: id, status: 'sleeping' });
    expect(bad.status).toBe(400);
    expect(bad.body.issues[0].path).toBe('status');

    expect((await ssf('POST', '/status', { stream_id: id, status: 'enabled' })).body).toEqual({ stream_id: id, status: 'enabled' });
  });

  it('adds (200) and removes (204) subjects; a malformed subject is a 400', async () => {
    const id = (await ssf('POST', '/streams', push('https://subjects.example/events'))).body.stream_id;
    const subject = { format: 'iss_sub', iss: server.url, sub: 'user-1' };
    const added = await ssf('POST', '/subjects:add', { stream_id: id, subject, verified: true });
    expect(added.status).toBe(200);
    expect(await server.ctx.store.ssf.subjects(id)).toEqual([{ subject, verified: true }]);
    // the same subject with its members in another order is the same subject
    const removed = await ssf('POST', '/subjects:remove', { stream_id: id, subject: { sub: 'user-1', iss: server.url, format: 'iss_sub' } });
    expect(removed.status).toBe(204);
    expect(await server.ctx.store.ssf.subjects(id)).toEqual([]);

    for (const subjectBad of [undefined, 'user-1', { email: 'a@b.c' }, { format: 'iss_sub', iss: server.url }, { format: 'email' }]) {
      const res = await ssf('POST', '/subjects:add', { stream_id: id, subject: subjectBad });
      expect(res.status, JSON.stringify(subjectBad)).toBe(400);
      expect(res.body.issues[0].path).toMatch(/^subject/);
    }

    // The canonical form is the stored row's key: one too large for an index entry (a long
    // member, or each member at its limit in multi-byte characters) is a 400 naming the subject,
    // on either database, and the largest accepted one is kept.
    const tooLarge = [
      { format: 'email', email: 'a@b.c', extra: Array.from({ length: 1000 }, (_, i) => i) },
      { format: 'iss_sub', iss: 'é'.repeat(1024), sub: 'ü'.repeat(1024) },
    ];
    for (const subjectBad of tooLarge) {
      const res = await ssf('POST', '/subjects:add', { stream_id: id, subject: subjectBad });
      expect(res.status).toBe(400);
      expect(res.body.issues[0]).toMatchObject({ path: 'subject', message: expect.stringMatching(/too large/) });
    }
    const largest = { format: 'opaque', id: 'x'.repeat(1000), note: 'y'.repeat(2000 - 1000 - '{"format":"opaque","id":"","note":""}'.length) };
    expect((await ssf('POST', '/subjects:add', { stream_id: id, subject: largest })).status).toBe(200);
    expect(await server.ctx.store.ssf.subjects(id)).toEqual([{ subject: largest, verified: true }]);
  });
});
