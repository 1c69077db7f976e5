import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropTestDatabase, testServerUrl } from '../helpers/database.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

process.env.GATEHOUSE_SSF_POLL_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_BASE_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_MAX_MS = '40';
process.env.GATEHOUSE_SSF_MAX_ATTEMPTS = '1';

/**
 * Shared Signals receivers and MCP upstreams are outbound destinations: outside development a
 * loopback (or private, link-local) address is refused, when configured and again when reached,
 * unless allowed everywhere (GATEHOUSE_OUTBOUND_ALLOW_PRIVATE) or for that host (GATEHOUSE_OUTBOUND_ALLOW_HOSTS).
 */

let receiver: Server;
let pushes = 0;
let receiverUrl = '';
beforeAll(async () => {
  receiver = createServer((req, res) => {
    pushes++;
    req.resume();
    req.on('end', () => res.writeHead(202).end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/events`;
});
afterAll(async () => {
  await new Promise<void>((r) => receiver.close(() => r()));
});

const STRICT = { GATEHOUSE_OUTBOUND_ALLOW_HOSTS: '', GATEHOUSE_OUTBOUND_ALLOW_PRIVATE: 'false' };

async function createStream(server: TestServer, url: string): Promise<Response> {
  const headers = { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' };
  return fetch(`${server.url}/v1/ssf/streams`, { method: 'POST', headers, body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: url } }) });
}

async function verify(server: TestServer, streamId: string): Promise<void> {
  const headers = { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' };
  expect((await fetch(`${server.url}/v1/ssf/verify`, { method: 'POST', headers, body: JSON.stringify({ stream_id: streamId }) })).status).toBe(204);
}

describe('outbound destinations outside development', () => {
  it('refuses a receiver and an upstream on 127.0.0.1, naming the field', async () => {
    const server = await startTestServer({ env: STRICT });
    try {
      const stream = await createStream(server, receiverUrl);
      expect(stream.status).toBe(400);
      const body = (await stream.json()) as { error: string; error_description: string };
      expect(body.error).toBe('invalid_request');
      expect(body.error_description).toMatch(/^delivery\.endpoint_url: .*not a public address/);
      const link = await createStream(server, 'http://169.254.169.254/latest');
      expect(link.status).toBe(400);
      const upstream = await server.admin('POST', '/mcp/upstreams', { name: 'local', url: 'http://127.0.0.1:9/mcp' });
      expect(upstream.status).toBe(400);
      expect(upstream.body.error_description).toMatch(/^url: .*not a public address/);
    } finally {
      await server.stop();
    }
  });

  it('allows them with GATEHOUSE_OUTBOUND_ALLOW_PRIVATE, and delivers', async () => {
    const server = await startTestServer({ env: { ...STRICT, GATEHOUSE_OUTBOUND_ALLOW_PRIVATE: 'true' } });
    try {
      const before = pushes;
      const stream = await createStream(server, receiverUrl);
      expect(stream.status).toBe(201);
      const { stream_id } = (await stream.json()) as { stream_id: string };
      await verify(server, stream_id);
      await expect.poll(async () => (await server.ctx.store.ssf.events(stream_id, 'delivered', 10)).length, { timeout: 15_000 }).toBe(1);
      expect(pushes).toBe(before + 1);
      expect((await server.admin('POST', '/mcp/upstreams', { name: 'local', url: 'http://127.0.0.1:9/mcp' })).status).toBe(201);
    } finally {
      await server.stop();
    }
  });

  it('allows one named destination (GATEHOUSE_OUTBOUND_ALLOW_HOSTS) and no other', async () => {
    const port = (receiver.address() as { port: number }).port;
    const server = await startTestServer({ env: { ...STRICT, GATEHOUSE_OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}` } });
    try {
      expect((await createStream(server, receiverUrl)).status).toBe(201);
      expect((await createStream(server, `http://127.0.0.1:${port + 1}/events`)).status).toBe(400);
    } finally {
      await server.stop();
    }
  });

  it('refuses at push time a receiver stored before the rules changed, keeping no body', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-outbound-'));
    const open = await startTestServer({ env: { ...STRICT, GATEHOUSE_OUTBOUND_ALLOW_PRIVATE: 'true' }, dir });
    const stream = await createStream(open, receiverUrl.replace('/events', '/later'));
    const { stream_id } = (await stream.json()) as { stream_id: string };
    await open.stop();
    const strict = await startTestServer({ env: STRICT, dir });
    try {
      const before = pushes;
      await verify(strict, stream_id);
      await expect.poll(async () => (await strict.ctx.store.ssf.events(stream_id, 'failed', 10)).length, { timeout: 15_000 }).toBe(1);
      const [failed] = await strict.ctx.store.ssf.events(stream_id, 'failed', 10);
      expect(failed!.last_error).toMatch(/^refused: .*not a public address/);
      expect(pushes).toBe(before);
    } finally {
      await strict.stop();
      rmSync(dir, { recursive: true, force: true });
      if (testServerUrl()) await dropTestDatabase(dir);
    }
  });
});
