/**
 * Shared Signals drain speed with the default delivery settings (on demand:
 * `npx tsx bench/ssf-delivery.ts [events]`): records a backlog of events for one receiver while
 * its stream is paused, enables the stream, and prints how long the backlog took to arrive.
 * Prints times only; nothing is asserted.
 */
import { EVENT_TYPES } from '../src/signals.js';
import { startTestServer } from '../test/helpers/server.js';
import { Receiver } from '../test/ssf/receiver.js';

const events = Number(process.argv[2] ?? 300);

const server = await startTestServer();
const receiver = await new Receiver().start();
try {
  const res = await fetch(`${server.url}/v1/ssf/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url }, events_requested: [EVENT_TYPES.tokenClaimsChange] }),
  });
  const { stream_id: streamId } = (await res.json()) as { stream_id: string };
  const status = (s: string) =>
    fetch(`${server.url}/v1/ssf/status`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stream_id: streamId, status: s }),
    });
  await status('paused');
  for (let i = 0; i < events; i++) {
    await server.ctx.store.transaction(async (tx) =>
      server.ctx.signals.emit(tx, {
        type: EVENT_TYPES.tokenClaimsChange,
        subject: { user_id: `u${i}`, email: `u${i}@example.com` },
        payload: { claims: { roles: ['r'] } },
        initiatingEntity: 'admin',
      }),
    );
  }
  const t0 = performance.now();
  await status('enabled');
  await receiver.waitFor((r) => r.accepted.length >= events, 600_000);
  const ms = performance.now() - t0;
  console.log(JSON.stringify({ events, receivers: 1, ms: Math.round(ms), events_per_s: Math.round(events / (ms / 1000)) }));
} finally {
  await server.stop();
  await receiver.stop();
}
