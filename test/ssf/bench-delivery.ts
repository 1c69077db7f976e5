/**
 * A rough benchmark (not a test): the cost of recording events inside a transaction, and
 * push throughput to a local receiver. Run: `npx tsx test/ssf/bench-delivery.ts [events] [streams]`.
 */
import { EVENT_TYPES } from '../../src/signals.js';
import { startTestServer } from '../helpers/server.js';
import { Receiver } from './receiver.js';

process.env.GATEHOUSE_SSF_POLL_MS = '10';

const events = Number(process.argv[2] ?? 2000);
const streams = Number(process.argv[3] ?? 2);

const server = await startTestServer();
const receivers: Receiver[] = [];
try {
  for (let i = 0; i < streams; i++) {
    const r = await new Receiver().start();
    receivers.push(r);
    await fetch(`${server.url}/v1/ssf/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: r.url } }),
    });
  }
  // record with the worker unable to deliver yet: pause every stream first
  const ids = (await server.ctx.store.ssf.listStreams()).map((s) => s.stream_id);
  for (const id of ids) await server.ctx.store.ssf.setStatus(id, 'paused', null);
  const t0 = performance.now();
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
  const recordMs = performance.now() - t0;
  const t1 = performance.now();
  for (const id of ids) await server.ctx.store.ssf.setStatus(id, 'enabled', null);
  await Promise.all(receivers.map((r) => r.waitFor((x) => x.accepted.length >= events, 600_000)));
  const deliverMs = performance.now() - t1;
  const total = events * streams;
  console.log(
    JSON.stringify({
      events,
      streams,
      record_per_event_us: Math.round((recordMs / events) * 1000),
      delivered_sets: total,
      delivery_sets_per_s: Math.round(total / (deliverMs / 1000)),
    }),
  );
} finally {
  await server.stop();
  await Promise.all(receivers.map((r) => r.stop()));
}
