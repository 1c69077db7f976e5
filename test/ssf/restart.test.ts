import { afterAll, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EVENT_TYPES } from '../../src/signals.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Receiver, setVerifier } from './receiver.js';

// Fast retries, and enough of them that the event is still pending when the server stops.
process.env.GATEHOUSE_SSF_POLL_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_BASE_MS = '20';
process.env.GATEHOUSE_SSF_RETRY_MAX_MS = '100';
process.env.GATEHOUSE_SSF_MAX_ATTEMPTS = '100';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-ssf-restart-'));
// the port changes on restart; the issuer (the SETs' iss) must not
const ISSUER = 'http://gatehouse.test';
let server: TestServer | undefined;
let receiver: Receiver | undefined;

afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('an event pending when the server stops (receiver down) is delivered after a restart on the same database', async () => {
  // a port with nobody listening: the receiver is down
  const probe = await new Receiver().start();
  const port = probe.port;
  await probe.stop();

  server = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: ISSUER } });
  const created = await fetch(`${server.url}/v1/ssf/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: `http://127.0.0.1:${port}/events` },
      events_requested: [EVENT_TYPES.accountPurged],
    }),
  });
  expect(created.status).toBe(201);
  const stream = (await created.json()) as { stream_id: string; aud: string };

  await server.ctx.store.transaction(async (tx) =>
    server!.ctx.signals.emit(tx, { type: EVENT_TYPES.accountPurged, subject: { user_id: 'gone', email: 'gone@example.com' }, payload: {} }),
  );
  // wait until the worker has tried and failed at least once
  for (let i = 0; i < 500; i++) {
    const [row] = await server.ctx.store.ssf.events(stream.stream_id, null, 1);
    if (row && row.attempts > 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const [pending] = await server.ctx.store.ssf.events(stream.stream_id, null, 1);
  expect(pending).toMatchObject({ state: 'pending' });
  expect(pending!.attempts).toBeGreaterThan(0);
  expect(pending!.last_error).toMatch(/^network error/);
  await server.stop();
  server = undefined;

  // the receiver comes up, then the server starts again on the same directory
  receiver = await new Receiver(port).start();
  server = await startTestServer({ dir, env: { GATEHOUSE_ISSUER: ISSUER } });
  await receiver.waitFor((r) => r.accepted.length === 1);
  const set = await setVerifier(server.url, ISSUER)(receiver.accepted[0]!.body, stream.aud);
  expect(set.claims.jti).toBe(pending!.jti);
  expect(set.type).toBe(EVENT_TYPES.accountPurged);
});
