import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { autonomousToken, bindAt, decideAt, delegatedToken, TestClock } from './clocked-agents.js';

// Two processes on one database: attributes and entities written through one are what the
// other's very next decision reads.

const ISSUER = 'http://gatehouse.test';
const POLICY = `policy "instances" version 1

rule "vip-needs-vip-support" {
  effect deny
  subjects "agent:*"
  relation "read:customers"
  object "customer:*"
  when resource.tags contains "vip" and not (subject.skills contains "vip-support")
}

rule "people-read-their-region" {
  effect deny
  subjects "agent:*"
  relation "read:payroll"
  object "payroll:*"
  when person.region != resource.region
}
`;

const clock = new TestClock('2030-01-09T10:00:00Z');
let a: TestServer;
let b: TestServer;
let bot: TestAgent;
let helper: TestAgent;

beforeAll(async () => {
  a = await startTestServer({ clock: clock.clock, env: { GATEHOUSE_ISSUER: ISSUER }, policies: { 'instances.policy': POLICY } });
  b = await startTestServer({ clock: clock.clock, dir: a.dir, role: 'worker', env: { GATEHOUSE_ISSUER: ISSUER } });
  await putRole(a, 'reader', ['read:customers', 'read:payroll']);
  bot = await registerAgent(a, { name: 'bot', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:customers' }] });
  helper = await registerAgent(a, { name: 'helper', mode: 'delegated', roles: ['reader'], capabilities: [{ name: 'read:payroll' }] });
  const user = await a.admin('POST', '/users', { id: 'u-kim', email: 'kim@example.com', password: 'correct horse battery', name: 'Kim', roles: ['reader'], attributes: { region: 'eu' } });
  expect(user.status, JSON.stringify(user.body)).toBe(201);
});
afterAll(async () => {
  await b?.close();
  await a?.stop();
});

/** Binds on the first process, decides on the second. */
async function onWorker(agent: TestAgent, token: string, action: string, resource: string): Promise<string> {
  const bound = await bindAt(a, token, action, resource, {});
  expect(bound.status, JSON.stringify(bound.body)).toBe(200);
  const d = await decideAt(b, { agent_id: agent.id, transaction_token: bound.body.data.transaction_token, action, resource, context: {} });
  expect(d.status, JSON.stringify(d.body)).toBe(200);
  return `${d.body.data.decision} ${d.body.data.reason}`;
}

describe('a change through one process applies to the next decision on another', () => {
  it('an entity and an agent’s attributes', async () => {
    const token = await autonomousToken(a, clock, bot);
    const read = () => onWorker(bot, token, 'read:customers', 'customer:c1');
    expect(await read()).toBe('deny rule_denied: vip-needs-vip-support'); // no entity, no skills: fails closed
    expect((await a.admin('PUT', '/entities/customer/c1', { attributes: { tags: ['basic'] } })).status).toBe(201);
    expect(await read()).toBe('deny rule_denied: vip-needs-vip-support'); // still no skills
    expect((await a.admin('PATCH', `/agents/${encodeURIComponent(bot.id)}`, { attributes: { skills: [] } })).status).toBe(200);
    expect(await read()).toBe('allow allowed');
    expect((await a.admin('PUT', '/entities/customer/c1', { attributes: { tags: ['vip'] } })).status).toBe(200);
    expect(await read()).toBe('deny rule_denied: vip-needs-vip-support');
    expect((await a.admin('PATCH', `/agents/${encodeURIComponent(bot.id)}`, { attributes: { skills: ['vip-support'] } })).status).toBe(200);
    expect(await read()).toBe('allow allowed');
    expect((await a.admin('DELETE', '/entities/customer/c1')).status).toBe(204);
    expect(await read()).toBe('deny rule_denied: vip-needs-vip-support');
  });

  it('a person’s attributes', async () => {
    expect((await a.admin('PUT', '/entities/payroll/p1', { attributes: { region: 'eu' } })).status).toBe(201);
    const token = await delegatedToken(a, clock, helper, 'u-kim', ['read:payroll']);
    const read = () => onWorker(helper, token, 'read:payroll', 'payroll:p1');
    expect(await read()).toBe('allow allowed');
    expect((await a.admin('PATCH', '/users/u-kim', { attributes: { region: 'us' } })).status).toBe(200);
    expect(await read()).toBe('deny rule_denied: people-read-their-region');
    expect((await a.admin('PATCH', '/users/u-kim', { attributes: {} })).status).toBe(200);
    expect(await read()).toBe('deny rule_denied: people-read-their-region');
    expect((await a.admin('PATCH', '/users/u-kim', { attributes: { region: 'eu' } })).status).toBe(200);
    expect(await read()).toBe('allow allowed');
  });
});
