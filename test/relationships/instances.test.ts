import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { testServerUrl } from '../helpers/database.js';
import { registerAgent, type TestAgent } from '../agents/helpers.js';
import { autonomousToken, bindAt, decideAt, TestClock } from '../pipeline/clocked-agents.js';
import { relationshipGraph } from '../../src/authz/relationships.js';
import { MODEL, rel } from './fixtures.js';

// The relationship graph of each process follows the store's change log: a relationship
// written through one process is in force on every other sharing the database. With
// GATEHOUSE_TEST_DATABASE_URL: three servers on one PostgreSQL database, within a second.

const ISSUER = 'http://gatehouse.test';
/** One clock for every process (the issuer's URLs name a host only the tokens know). */
const clock = new TestClock(new Date().toISOString());

/** A decision of an autonomous agent, asked of one server. */
async function decideOn(server: TestServer, agent: TestAgent, token: string, resource: string): Promise<string> {
  const b = await bindAt(server, token, 'viewer:documents', resource, {});
  expect(b.status, JSON.stringify(b.body)).toBe(200);
  const d = await decideAt(server, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action: 'viewer:documents', resource, context: {} });
  expect(d.status, JSON.stringify(d.body)).toBe(200);
  return `${d.body.data.decision} ${d.body.data.reason}`;
}

describe('two processes on one database', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startTestServer({ policies: { 'drive.policy': MODEL }, env: { GATEHOUSE_ISSUER: ISSUER } });
    b = await startTestServer({ dir: a.dir, role: 'worker', env: { GATEHOUSE_ISSUER: ISSUER } });
  });
  afterAll(async () => {
    await b?.close();
    await a?.stop();
  });

  const check = (s: TestServer, object: string, subject: string) =>
    s.admin('POST', '/relationships/check', { object, relation: 'viewer', subject }).then((r) => r.body.allowed as boolean);

  it('a write through one is in the other’s next answer, deletes too', async () => {
    expect(await check(b, 'document:x', 'user:xena')).toBe(false);
    expect((await a.admin('POST', '/relationships', { writes: [rel('document:x#viewer@user:xena')] })).status).toBe(200);
    await eventually(() => check(b, 'document:x', 'user:xena'), true);
    expect((await a.admin('POST', '/relationships', { deletes: [rel('document:x#viewer@user:xena')] })).status).toBe(200);
    await eventually(() => check(b, 'document:x', 'user:xena'), false);
  });

  it('reads everything again when the change log was pruned past where it stood', async () => {
    const graph = relationshipGraph(b.ctx);
    await graph.current();
    const loads = graph.loads;
    // Two writes b does not look at, then housekeeping prunes all but the newest change.
    expect((await a.admin('POST', '/relationships', { writes: [rel('document:p1#viewer@user:pia')] })).status).toBe(200);
    expect((await a.admin('POST', '/relationships', { writes: [rel('document:p2#viewer@user:pia')] })).status).toBe(200);
    expect(await a.ctx.store.relationships.purgeChangesBefore(Math.floor(Date.now() / 1000) + 3600)).toBeGreaterThan(0);
    await eventually(() => check(b, 'document:p2', 'user:pia'), true);
    expect(await check(b, 'document:p1', 'user:pia')).toBe(true);
    expect(graph.loads).toBe(loads + 1);
    // Following resumes from the log after the reload.
    expect((await a.admin('POST', '/relationships', { writes: [rel('document:p3#viewer@user:pia')] })).status).toBe(200);
    await eventually(() => check(b, 'document:p3', 'user:pia'), true);
    expect(graph.loads).toBe(loads + 1);
  });
});

/** Asks until the answer is `want`, for at most a second (the bound a change takes to reach every instance). */
async function eventually(ask: () => Promise<boolean>, want: boolean): Promise<void> {
  const deadline = Date.now() + 1000;
  for (;;) {
    const got = await ask();
    if (got === want) return;
    if (Date.now() > deadline) throw new Error(`still ${got} after a second`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.skipIf(!testServerUrl())('three instances on one PostgreSQL database', () => {
  let servers: TestServer[] = [];
  let agent: TestAgent;
  const tokens: string[] = [];
  beforeAll(async () => {
    const first = await startTestServer({ clock: clock.clock, policies: { 'drive.policy': MODEL }, env: { GATEHOUSE_ISSUER: ISSUER } });
    servers = [first];
    for (let i = 0; i < 2; i++) servers.push(await startTestServer({ clock: clock.clock, dir: first.dir, role: 'worker', env: { GATEHOUSE_ISSUER: ISSUER } }));
    agent = await registerAgent(first, { name: 'walker', mode: 'autonomous', capabilities: [{ name: 'viewer:documents' }] });
    for (const s of servers) tokens.push(await autonomousToken(s, clock, agent));
  });
  afterAll(async () => {
    for (const s of servers.slice(1).reverse()) await s.close();
    await servers[0]?.stop();
  });

  it('a relationship written on one is in force for decisions on the others within a second', async () => {
    const [writer, ...others] = servers as [TestServer, TestServer, TestServer];
    for (const [i, s] of others.entries()) expect(await decideOn(s, agent, tokens[i + 1]!, 'document:shared')).toMatch(/^deny not_granted/);
    const written = await writer.admin('POST', '/relationships', {
      writes: [rel('folder:team#viewer@agent:' + agent.id), rel('document:shared#parent@folder:team')],
    });
    expect(written.status).toBe(200);
    await Promise.all(others.map((s, i) => eventually(async () => (await decideOn(s, agent, tokens[i + 1]!, 'document:shared')) === 'allow allowed', true)));
    // And back: a delete reaches them the same way.
    expect((await writer.admin('POST', '/relationships', { deletes: [rel('document:shared#parent@folder:team')] })).status).toBe(200);
    await Promise.all(others.map((s, i) => eventually(async () => (await decideOn(s, agent, tokens[i + 1]!, 'document:shared')).startsWith('deny'), true)));
  });
});
