import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A receiver's Authorization header is a credential: the stream configuration shows it masked
 * (creation, reading, listing, updates), while pushes still carry it whole; the masked value sent
 * back in a read-modify-PUT keeps the stored header, and a new header replaces it.
 */

let server: TestServer;
let receiver: Server;
let receiverUrl: string;
const seen: (string | undefined)[] = [];

async function ssf(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}/v1/ssf${path}`, {
    method,
    headers: { authorization: `Bearer ${server.adminToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    seen.push(req.headers.authorization);
    req.resume();
    req.on('end', () => res.writeHead(202).end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/events`;
  server = await startTestServer();
});
afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => receiver.close(() => r()));
});

describe('a stream’s stored Authorization header', () => {
  it('is never shown whole, is sent whole, and survives a read-modify-PUT of its masked form', async () => {
    const created = await ssf('POST', '/streams', { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiverUrl, authorization_header: 'Bearer receiver-secret-123' }, description: 'masked' });
    expect(created.status).toBe(201);
    expect(created.body.delivery.authorization_header).toBe('Bearer ****');
    const id = created.body.stream_id as string;
    for (const read of [await ssf('GET', `/streams?stream_id=${id}`), await ssf('GET', '/streams')]) {
      expect(read.status).toBe(200);
      expect(read.text).not.toContain('receiver-secret-123');
    }
    const listed = (await ssf('GET', '/streams')).body.find((s: { stream_id: string }) => s.stream_id === id);
    expect(listed.delivery.authorization_header).toBe('Bearer ****');

    // Read, change the description, PUT it all back: the stored header stays.
    const { iss: _iss, aud: _aud, events_supported: _s, events_delivered: _d, ...editable } = created.body;
    const put = await ssf('PUT', '/streams', { ...editable, description: 'edited' });
    expect(put.status).toBe(200);
    expect(put.text).not.toContain('receiver-secret-123');
    const verify = await ssf('POST', '/verify', { stream_id: id });
    expect(verify.status).toBe(204);
    await expect.poll(() => seen.length, { timeout: 15_000 }).toBeGreaterThan(0);
    expect(seen.at(-1)).toBe('Bearer receiver-secret-123');

    // A new header replaces it, and is masked in turn.
    const patched = await ssf('PATCH', '/streams', { stream_id: id, delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiverUrl, authorization_header: 'Token other-secret' } });
    expect(patched.body.delivery.authorization_header).toBe('Token ****');
    const before = seen.length;
    expect((await ssf('POST', '/verify', { stream_id: id })).status).toBe(204);
    await expect.poll(() => seen.length, { timeout: 15_000 }).toBeGreaterThan(before);
    expect(seen.at(-1)).toBe('Token other-secret');
  });
});
