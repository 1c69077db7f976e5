import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

process.env.GATEHOUSE_SSF_POLL_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_BASE_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_MAX_MS = '40';
process.env.GATEHOUSE_SSF_MAX_ATTEMPTS = '2';

/** A receiver's error body is neither stored nor shown: the failed event names the status only. */

let server: TestServer;
let receiver: Server;
let pushes = 0;
beforeAll(async () => {
  receiver = createServer((req, res) => {
    pushes++;
    req.resume();
    req.on('end', () => res.writeHead(500, { 'content-type': 'text/plain' }).end('RECEIVER-INTERNAL: stack trace and secrets'));
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  server = await startTestServer();
});
afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => receiver.close(() => r()));
});

describe('a receiver that answers an error', () => {
  it('leaves the status in last_error, never its body', async () => {
    const headers = { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' };
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/events`;
    const created = await fetch(`${server.url}/v1/ssf/streams`, { method: 'POST', headers, body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: url } }) });
    const stream = (await created.json()) as { stream_id: string };
    expect((await fetch(`${server.url}/v1/ssf/verify`, { method: 'POST', headers, body: JSON.stringify({ stream_id: stream.stream_id }) })).status).toBe(204);
    await expect.poll(async () => (await server.ctx.store.ssf.events(stream.stream_id, 'failed', 10)).length, { timeout: 15_000 }).toBe(1);
    expect(pushes).toBe(2);
    const listed = await fetch(`${server.url}/v1/ssf/events?stream_id=${stream.stream_id}&state=failed`, { headers });
    const text = await listed.text();
    expect(text).not.toContain('RECEIVER-INTERNAL');
    expect((JSON.parse(text) as { data: { last_error: string }[] }).data[0]!.last_error).toBe('HTTP 500');
  });
});
