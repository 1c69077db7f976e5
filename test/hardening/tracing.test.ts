import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';

/**
 * OpenTelemetry: with an exporter configured, one span per request, the decision and its
 * steps and the database statements as its descendants, all in one trace.
 */

const exporter = new InMemorySpanExporter();
let server: RunningServer;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-trace-'));
  mkdirSync(join(dir, 'policies'));
  const config = loadConfig({
    PORT: '0',
    GATEHOUSE_DB: join(dir, 'gatehouse.db'),
    GATEHOUSE_POLICY_DIR: join(dir, 'policies'),
    GATEHOUSE_ADMIN_TOKEN: 'test-admin-token-0123456789abcdef',
    GATEHOUSE_SECRET: 'test-secret-0123456789abcdef-0123456789',
    LOG_LEVEL: 'silent',
  });
  server = await startServer(config, { logger: createLogger('silent'), spanExporter: exporter });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const byTrace = (spans: ReadableSpan[], traceId: string) => spans.filter((s) => s.spanContext().traceId === traceId);
const parentOf = (s: ReadableSpan): string | undefined => (s as unknown as { parentSpanContext?: { spanId: string } }).parentSpanContext?.spanId;

describe('traces', () => {
  it('one span per request, with the decision, its steps and database statements beneath', async () => {
    const { publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const made = await fetch(`${server.url}/admin/v1/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer test-admin-token-0123456789abcdef' },
      body: JSON.stringify({ name: 'traced', mode: 'autonomous', public_jwk: await exportJWK(publicKey), roles: [], capabilities: [] }),
    });
    const agentId = ((await made.json()) as { agent_id: string }).agent_id;
    exporter.reset();
    const res = await fetch(`${server.url}/apis/regional/v1/agents/authorize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: agentId, action: 'read:doc', resource: 'doc:1' }),
    });
    await res.text();
    await expect.poll(() => exporter.getFinishedSpans().some((s) => s.name.startsWith('POST '))).toBe(true);
    const spans = exporter.getFinishedSpans();
    const request = spans.find((s) => s.name === 'POST /apis/regional/v1/agents/authorize')!;
    expect(request, spans.map((s) => s.name).join(', ')).toBeDefined();
    expect(request.attributes['http.response.status_code']).toBe(res.status);
    const trace = byTrace(spans, request.spanContext().traceId);
    const decision = trace.find((s) => s.name === 'gatehouse.decision')!;
    expect(decision, `${res.status}: ` + spans.map((s) => `${s.name}@${s.spanContext().traceId.slice(0, 6)}`).join(', ')).toBeDefined();
    expect(parentOf(decision)).toBe(request.spanContext().spanId);
    expect(decision.attributes['gatehouse.outcome']).toBe('deny');
    // the decision's audit record carries the trace id
    const [record] = await server.ctx.store.audit.list({ agent_id: agentId, limit: 1 });
    expect(record!.trace_id).toBe(request.spanContext().traceId);
    const steps = trace.filter((s) => s.name.startsWith('gatehouse.step.'));
    expect(steps.length).toBeGreaterThan(0);
    const db = trace.filter((s) => s.name.startsWith('db '));
    expect(db.length).toBeGreaterThan(0);
    // every database span sits under the request (through the decision)
    const ids = new Map(trace.map((s) => [s.spanContext().spanId, s]));
    for (const d of db) {
      let p = parentOf(d);
      while (p && p !== request.spanContext().spanId) p = parentOf(ids.get(p)!);
      expect(p).toBe(request.spanContext().spanId);
      expect(d.attributes['db.system']).toBe('sqlite');
    }
  });

  it('separate requests are separate traces', async () => {
    exporter.reset();
    await (await fetch(`${server.url}/healthz`)).text();
    await (await fetch(`${server.url}/healthz`)).text();
    await expect.poll(() => exporter.getFinishedSpans().filter((s) => s.name.startsWith('GET ')).length).toBe(2);
    const reqs = exporter.getFinishedSpans().filter((s) => s.name.startsWith('GET '));
    expect(reqs[0]!.spanContext().traceId).not.toBe(reqs[1]!.spanContext().traceId);
  });
});
