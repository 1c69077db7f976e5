import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { clientAddress } from '../../src/agents/request-limits.js';

/**
 * The agent endpoints admit a bounded number of requests per second per client address and per
 * agent ID (here 8 and 5), the address read from X-Forwarded-For only behind a trusted proxy.
 */

let server: TestServer;
let agent: TestAgent;
beforeAll(async () => {
  server = await startTestServer({ env: { GATEHOUSE_AGENT_RATE_LIMIT: '5', GATEHOUSE_ADDRESS_RATE_LIMIT: '8', GATEHOUSE_TRUSTED_PROXIES: '127.0.0.1, ::1' } });
  await putRole(server, 'reader', ['read:docs']);
  agent = await registerAgent(server, { name: 'limited-agent', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
});
afterAll(async () => {
  await server?.stop();
});

const decide = (agentId: string, from: string) =>
  fetch(`${server.url}/apis/regional/v1/agents/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
    body: JSON.stringify({ agent_id: agentId, action: 'read:docs', resource: 'doc:1', context: {} }),
  });

describe('request limits of the agent endpoints', () => {
  it('per agent: past the limit a 429 with Retry-After, whatever address asks', async () => {
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => decide(agent.id, `198.51.100.${i + 1}`)));
    const statuses = answers.map((a) => a.status);
    const limited = answers.filter((a) => a.status === 429);
    // one burst spans at most two one-second windows
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(10);
    expect(limited.length).toBeGreaterThanOrEqual(20);
    expect(limited[0]!.headers.get('retry-after')).toBe('1');
    expect(((await limited[0]!.json()) as { error: string }).error).toBe('rate_limited');
  });

  it('per address (behind a trusted proxy, the forwarded one): past the limit a 429, other addresses still served', async () => {
    await new Promise((r) => setTimeout(r, 1100));
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => decide(`spiffe://localhost/agent/nobody-${i}`, '203.0.113.7')));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 429).length).toBeLessThanOrEqual(16);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(14);
    // unknown agents are otherwise a 401
    expect(statuses.filter((s) => s !== 429).every((s) => s === 401)).toBe(true);
    expect((await decide('spiffe://localhost/agent/someone', '192.0.2.44')).status).toBe(401);
  });

  it('reads X-Forwarded-For only from a trusted proxy, and then the hop nearest to it', () => {
    const req = (peer: string, xff?: string) => ({ socket: { remoteAddress: peer }, get: (n: string) => (n === 'x-forwarded-for' ? xff : undefined) });
    expect(clientAddress(req('198.51.100.1', '203.0.113.7'), [])).toBe('198.51.100.1');
    expect(clientAddress(req('198.51.100.1', '203.0.113.7'), ['10.0.0.1'])).toBe('198.51.100.1');
    expect(clientAddress(req('::ffff:10.0.0.1', '203.0.113.7'), ['10.0.0.1'])).toBe('203.0.113.7');
    // what the client wrote itself (further left) does not count
    expect(clientAddress(req('10.0.0.1', '1.2.3.4, 203.0.113.7, 10.0.0.2'), ['10.0.0.1', '10.0.0.2'])).toBe('203.0.113.7');
    expect(clientAddress(req('10.0.0.1', 'not-an-address'), ['10.0.0.1'])).toBe('10.0.0.1');
  });

  it('a trusted proxy that is not an IP address is refused at start', async () => {
    await expect(startTestServer({ env: { GATEHOUSE_TRUSTED_PROXIES: 'proxy.internal' } })).rejects.toThrow(/^GATEHOUSE_TRUSTED_PROXIES: must be a comma-separated list of IP addresses/);
  });
});
