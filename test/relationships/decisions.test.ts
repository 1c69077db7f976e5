import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { registerAgent, type TestAgent } from '../agents/helpers.js';
import { ask, autonomousToken, decisionsOf, delegatedToken, said, TestClock } from '../pipeline/clocked-agents.js';
import { MODEL, rel } from './fixtures.js';

// Decisions through relations, with real agents and people over HTTP: a relation `viewer` on
// `document` grants the action `viewer:documents` on `document:<id>`; a delegated agent needs
// both itself and its person to hold it; deny rules and limits over time apply as to any
// action; what the graph cannot resolve denies.

const POLICY = `${MODEL}
rule "agents-keep-out-of-drafts" {
  effect deny
  subjects "agent:*"
  relation "viewer:documents"
  object "document:drafts/*"
}
`;

const clock = new TestClock('2030-03-04T10:00:00Z');
let server: TestServer;
let reader: TestAgent;
let stranger: TestAgent;
let metered: TestAgent;
let forAnne: string;
let forBob: string;
let strangerForAnne: string;

const write = async (writes: unknown[], deletes: unknown[] = []) => {
  const r = await server.admin('POST', '/relationships', { writes, deletes });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
};

beforeAll(async () => {
  server = await startTestServer({ clock: clock.clock, policies: { 'drive.policy': POLICY } });
  for (const [id, email] of [['u-anne', 'anne@example.com'], ['u-bob', 'bob@example.com']]) {
    const r = await server.admin('POST', '/users', { id, email, password: 'correct horse battery', name: id });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  // No roles anywhere: every grant below comes through relations.
  reader = await registerAgent(server, { name: 'reader', mode: 'delegated', capabilities: [{ name: 'viewer:documents' }] });
  stranger = await registerAgent(server, { name: 'stranger', mode: 'delegated', capabilities: [{ name: 'viewer:documents' }] });
  metered = await registerAgent(server, { name: 'metered', mode: 'autonomous', capabilities: [{ name: 'viewer:documents', limits: { count: [{ max: 2, per: '1h' }] } }] });
  await write([
    // root ⊃ eng ⊃ spec, draft-1; root ⊃ hr ⊃ salaries
    rel('folder:eng#parent@folder:root'),
    rel('folder:hr#parent@folder:root'),
    rel('document:spec#parent@folder:eng'),
    rel('document:drafts/1#parent@folder:eng'),
    rel('document:salaries#parent@folder:hr'),
    // the reader agent may see the whole tree, through its group
    rel('group:bots#member@agent:' + reader.id),
    rel('folder:root#viewer@group:bots#member'),
    // Anne only engineering's folder, through her group; Bob nothing
    rel('group:eng#member@user:u-anne'),
    rel('folder:eng#viewer@group:eng#member'),
    rel('document:public-note#viewer@agent:' + metered.id),
  ]);
  forAnne = await delegatedToken(server, clock, reader, 'u-anne', ['viewer:documents']);
  forBob = await delegatedToken(server, clock, reader, 'u-bob', ['viewer:documents']);
  strangerForAnne = await delegatedToken(server, clock, stranger, 'u-anne', ['viewer:documents']);
});
afterAll(async () => {
  await server?.stop();
});

describe('a delegated agent through relations', () => {
  it('reads a document only when both it and its person may', async () => {
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:spec'))).toBe('allow allowed');
    // The agent may (root), Anne may not (hr is not engineering's).
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:salaries'))).toMatch(/^deny not_granted: viewer:documents .*person/);
    // Bob holds nothing.
    expect(said(await ask(server, reader, forBob, 'viewer:documents', 'document:spec'))).toMatch(/^deny not_granted: viewer:documents .*person/);
    // Anne may, the agent holds nothing.
    expect(said(await ask(server, stranger, strangerForAnne, 'viewer:documents', 'document:spec'))).toMatch(/^deny not_granted: viewer:documents/);
    expect(said(await ask(server, stranger, strangerForAnne, 'viewer:documents', 'document:spec'))).not.toMatch(/person/);
  });

  it('records that the grant came through relations, and through which', async () => {
    await ask(server, reader, forAnne, 'viewer:documents', 'document:spec');
    const [latest] = await decisionsOf(server, reader.id, 1);
    expect(latest).toMatchObject({ decision: 'allow', action: 'viewer:documents', resource: 'document:spec', user_id: 'u-anne' });
    expect(latest!.reason).toContain(`agent:${reader.id} holds relation viewer on document:spec (document:spec#parent@folder:eng, folder:eng#parent@folder:root, folder:root#viewer@group:bots#member, group:bots#member@agent:${reader.id})`);
    expect(latest!.reason).toContain('user:u-anne holds relation viewer on document:spec (document:spec#parent@folder:eng, folder:eng#viewer@group:eng#member, group:eng#member@user:u-anne)');
  });

  it('follows a change at the next decision', async () => {
    await write([], [rel('group:eng#member@user:u-anne')]);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:spec'))).toMatch(/^deny not_granted/);
    await write([rel('document:spec#viewer@user:u-anne')]);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:spec'))).toBe('allow allowed');
    await write([rel('document:spec#blocked@user:u-anne')]);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:spec'))).toMatch(/^deny not_granted/);
    await write([rel('group:eng#member@user:u-anne')], [rel('document:spec#blocked@user:u-anne'), rel('document:spec#viewer@user:u-anne')]);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:spec'))).toBe('allow allowed');
  });
});

describe('rules and limits apply to an action granted by a relation', () => {
  it('a deny rule still denies', async () => {
    // Both hold the relation on the draft (it is in engineering's folder).
    const c = await server.admin('POST', '/relationships/check', { object: 'document:drafts/1', relation: 'viewer', subject: 'user:u-anne' });
    expect(c.body.allowed).toBe(true);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:drafts/1'))).toBe('deny rule_denied: agents-keep-out-of-drafts');
  });

  it('a budget counts the allows', async () => {
    const token = await autonomousToken(server, clock, metered);
    expect(said(await ask(server, metered, token, 'viewer:documents', 'document:public-note'))).toBe('allow allowed');
    expect(said(await ask(server, metered, token, 'viewer:documents', 'document:public-note'))).toBe('allow allowed');
    expect((await ask(server, metered, token, 'viewer:documents', 'document:public-note')).reason).toMatch(/constraint_violated: count/);
    // A denied one does not count: an object it holds nothing on is not_granted, not over the budget.
    clock.advance(3600_000 + 1000);
    const fresh = await autonomousToken(server, clock, metered);
    expect(said(await ask(server, metered, fresh, 'viewer:documents', 'document:spec'))).toMatch(/^deny not_granted/);
    expect(said(await ask(server, metered, fresh, 'viewer:documents', 'document:public-note'))).toBe('allow allowed');
  });
});

describe('what the graph cannot resolve denies', () => {
  beforeAll(async () => {
    // The clock moved past the tokens' lifetime above.
    forAnne = await delegatedToken(server, clock, reader, 'u-anne', ['viewer:documents']);
  });

  it('more than 25 hops', async () => {
    const chain = Array.from({ length: 30 }, (_, i) => rel(`folder:d${i + 1}#parent@folder:d${i}`));
    await write([...chain, rel('folder:d0#viewer@group:eng#member'), rel('folder:d0#viewer@group:bots#member'), rel('document:deep#parent@folder:d30')]);
    const a = await ask(server, reader, forAnne, 'viewer:documents', 'document:deep');
    expect(a.decision).toBe('deny');
    expect(a.reason).toMatch(/^not_granted: viewer:documents/);
    expect(a.reason).toMatch(/could not be resolved: .*more than 25 hops/);
  });

  it('a condition without its parameter, until the request supplies it', async () => {
    await write([
      rel('folder:ops#viewer@group:ops#member', { name: 'office_hours', context: { start: 9, end: 17 } }),
      rel('folder:ops#viewer@group:bots#member'),
      rel('group:ops#member@user:u-anne'),
      rel('document:runbook#parent@folder:ops'),
    ]);
    const missing = await ask(server, reader, forAnne, 'viewer:documents', 'document:runbook');
    expect(missing.decision).toBe('deny');
    expect(missing.reason).toMatch(/could not be resolved: .*hour/);
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:runbook', { hour: 10 }))).toBe('allow allowed');
    expect(said(await ask(server, reader, forAnne, 'viewer:documents', 'document:runbook', { hour: 20 }))).toMatch(/^deny not_granted/);
  });
});
