// The Search APIs over stored people, agents and entities, with the specification's paging.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putRole, registerAgent } from '../agents/helpers.js';
import { putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

const POLICY = `
policy "records" version 1

rule "bob-may-not-see-103" {
  effect deny
  subjects "user:bob"
  relation "view:records"
  object "record:103"
}

rule "auditors-view-the-ledger" {
  effect permit
  subjects "group:auditors"
  relation "view:documents"
  object "document:ledger"
}
`;

let f: AuthzenFixture;
const RECORDS = Array.from({ length: 12 }, (_, i) => String(101 + i));
let agentId: string;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'records.policy': POLICY } });
  await putRole(f.server, 'viewer', ['view:records']);
  await putRole(f.server, 'editor', ['view:records', 'edit:records']);
  await putUser(f.server, { id: 'alice', email: 'alice@example.com', roles: ['editor'] });
  await putUser(f.server, { id: 'bob', email: 'bob@example.com', roles: ['viewer'] });
  await putUser(f.server, { id: 'carol', email: 'carol@example.com', roles: ['viewer'] });
  await putUser(f.server, { id: 'dan', email: 'dan@example.com' });
  await putUser(f.server, { id: 'erin', email: 'erin@example.com', groups: ['auditors'] });
  for (const id of RECORDS) {
    const res = await f.server.admin('PUT', `/entities/record/${id}`, { attributes: { title: `record ${id}` } });
    expect(res.status).toBeLessThan(300);
  }
  agentId = (await registerAgent(f.server, { name: 'indexer', mode: 'autonomous', roles: ['viewer'], capabilities: [{ name: 'view:records' }] })).id;
}, 30_000);
afterAll(async () => f?.server.stop());

const ids = (body: { results: { id: string }[] }) => body.results.map((r) => r.id);

describe('subject search', () => {
  it('transitively: a person in a group the policy names is found (the specification\'s group example)', async () => {
    const res = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'view' }, resource: { type: 'document', id: 'ledger' } });
    expect(res.body).toEqual({ results: [{ type: 'user', id: 'erin' }] });
    const back = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'erin' }, action: { name: 'view' }, resource: { type: 'document' } });
    expect([back.status, back.body]).toEqual([200, { results: [] }]); // no stored documents to list
    const actions = await f.post('/access/v1/search/action', { subject: { type: 'user', id: 'erin' }, resource: { type: 'document', id: 'ledger' } });
    expect(actions.body).toEqual({ results: [{ name: 'view' }] });
  });

  it('who can view record 103: the people whose roles grant it, less the denied one', async () => {
    const res = await f.post('/access/v1/search/subject', {
      subject: { type: 'user' },
      action: { name: 'view' },
      resource: { type: 'record', id: '103' },
    }, { 'x-request-id': 'search-1' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('search-1');
    expect(res.body).toEqual({ results: [{ type: 'user', id: 'alice' }, { type: 'user', id: 'carol' }] });
  });

  it('who can edit record 101: only the editor; an id on the searched subject is ignored', async () => {
    const res = await f.post('/access/v1/search/subject', {
      subject: { type: 'user', id: 'bob' },
      action: { name: 'edit' },
      resource: { type: 'record', id: '101' },
      context: { time: '2024-10-26T01:22-07:00' },
    });
    expect(res.body).toEqual({ results: [{ type: 'user', id: 'alice' }] });
  });

  it('agents are subjects of type agent', async () => {
    const res = await f.post('/access/v1/search/subject', { subject: { type: 'agent' }, action: { name: 'view' }, resource: { type: 'record', id: '101' } });
    expect(res.body).toEqual({ results: [{ type: 'agent', id: agentId }] });
  });

  it('an unknown subject type or resource: empty results, not an error', async () => {
    const spaceship = await f.post('/access/v1/search/subject', { subject: { type: 'spaceship' }, action: { name: 'view' }, resource: { type: 'record', id: '101' } });
    expect([spaceship.status, spaceship.body]).toEqual([200, { results: [] }]);
  });
});

describe('resource search', () => {
  it('which records can bob view: all stored ones but 103', async () => {
    const res = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'bob' }, action: { name: 'view' }, resource: { type: 'record' } });
    expect(ids(res.body)).toEqual(RECORDS.filter((r) => r !== '103'));
    expect(res.body.results.every((r: { type: string }) => r.type === 'record')).toBe(true);
  });

  it('which records can dan (no role) or an unknown person edit: none', async () => {
    for (const id of ['dan', 'nonexistent-user']) {
      const res = await f.post('/access/v1/search/resource', { subject: { type: 'user', id }, action: { name: 'edit' }, resource: { type: 'record' } });
      expect([res.status, res.body]).toEqual([200, { results: [] }]);
    }
  });

  it('pages: limit, next_token, an empty next_token at the end', async () => {
    const body = { subject: { type: 'user', id: 'alice' }, action: { name: 'view' }, resource: { type: 'record' }, page: { limit: 5 } };
    const first = await f.post('/access/v1/search/resource', body);
    expect(first.body.page).toMatchObject({ count: 5 });
    expect(first.body.page.next_token).not.toBe('');
    expect(ids(first.body)).toEqual(RECORDS.slice(0, 5));
    const second = await f.post('/access/v1/search/resource', { ...body, page: { limit: 5, token: first.body.page.next_token } });
    expect(ids(second.body)).toEqual(RECORDS.slice(5, 10));
    const third = await f.post('/access/v1/search/resource', { ...body, page: { limit: 5, token: second.body.page.next_token } });
    expect(ids(third.body)).toEqual(RECORDS.slice(10));
    expect(third.body.page).toEqual({ next_token: '', count: 2 });
  });

  it("the specification's paging example: the follow-up request sends the token alone, and keeps the first page's limit", async () => {
    const body = { subject: { type: 'user', id: 'alice' }, action: { name: 'view' }, resource: { type: 'record' } };
    const first = await f.post('/access/v1/search/resource', { ...body, page: { limit: 5 } });
    expect(ids(first.body)).toEqual(RECORDS.slice(0, 5));
    const second = await f.post('/access/v1/search/resource', { ...body, page: { token: first.body.page.next_token } });
    expect(second.status).toBe(200);
    expect(ids(second.body)).toEqual(RECORDS.slice(5, 10));
    expect(second.body.page).toMatchObject({ count: 5 });
    expect(second.body.page.next_token).not.toBe('');
    const third = await f.post('/access/v1/search/resource', { ...body, page: { token: second.body.page.next_token } });
    expect(third.body).toEqual({ page: { next_token: '', count: 2 }, results: RECORDS.slice(10).map((id) => ({ type: 'record', id })) });
    // A limit that changes mid-pagination is refused, as a changed entity is.
    const resized = await f.post('/access/v1/search/resource', { ...body, page: { limit: 6, token: first.body.page.next_token } });
    expect([resized.status, resized.body.error_description]).toEqual([400, 'page.token: belongs to another request: only page.token may change between pages']);
  });

  it('a limit of 0: no results, and a token to resume at the same place only when there are any', async () => {
    const body = { subject: { type: 'user', id: 'alice' }, action: { name: 'view' }, resource: { type: 'record' } };
    const none = await f.post('/access/v1/search/resource', { ...body, page: { limit: 0 } });
    expect(none.status).toBe(200);
    expect(none.body.results).toEqual([]);
    expect(none.body.page.count).toBe(0);
    expect(none.body.page.next_token).not.toBe('');
    const empty = await f.post('/access/v1/search/resource', { ...body, subject: { type: 'user', id: 'dan' }, page: { limit: 0 } });
    expect(empty.body).toEqual({ page: { next_token: '', count: 0 }, results: [] });
  });

  it('a page object without a limit is accepted; the whole answer fits', async () => {
    const res = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'alice' }, action: { name: 'view' }, resource: { type: 'record' }, page: {} });
    expect(res.body.page).toEqual({ next_token: '', count: 12 });
  });

  it('a token replayed with another request, or not ours: 400', async () => {
    const body = { subject: { type: 'user', id: 'alice' }, action: { name: 'view' }, resource: { type: 'record' }, page: { limit: 2 } };
    const first = await f.post('/access/v1/search/resource', body);
    const changed = await f.post('/access/v1/search/resource', { ...body, action: { name: 'edit' }, page: { limit: 2, token: first.body.page.next_token } });
    expect([changed.status, changed.body.error_description]).toEqual([400, 'page.token: belongs to another request: only page.token may change between pages']);
    const foreign = await f.post('/access/v1/search/resource', { ...body, page: { token: 'abc' } });
    expect(foreign.status).toBe(400);
    const badLimit = await f.post('/access/v1/search/resource', { ...body, page: { limit: -1 } });
    expect([badLimit.status, badLimit.body.error_description]).toEqual([400, 'page.limit: must be a non-negative integer']);
  });
});

describe('action search', () => {
  it('what can alice do on record 101: edit and view; bob: view; on 103 bob nothing', async () => {
    const search = (id: string, rec: string) =>
      f.post('/access/v1/search/action', { subject: { type: 'user', id }, resource: { type: 'record', id: rec }, context: { time: '2024-10-26T01:22-07:00' } });
    expect((await search('alice', '101')).body).toEqual({ results: [{ name: 'edit' }, { name: 'view' }] });
    expect((await search('bob', '101')).body).toEqual({ results: [{ name: 'view' }] });
    expect((await search('bob', '103')).body).toEqual({ results: [] });
    expect((await search('nonexistent-user', '101')).body).toEqual({ results: [] });
  });

  it('pages too', async () => {
    const first = await f.post('/access/v1/search/action', { subject: { type: 'user', id: 'alice' }, resource: { type: 'record', id: '101' }, page: { limit: 1 } });
    expect(first.body.results).toEqual([{ name: 'edit' }]);
    const next = await f.post('/access/v1/search/action', { subject: { type: 'user', id: 'alice' }, resource: { type: 'record', id: '101' }, page: { limit: 1, token: first.body.page.next_token } });
    expect(next.body).toEqual({ page: { next_token: '', count: 1 }, results: [{ name: 'view' }] });
  });
});

describe("the searched entity's id is ignored, whatever it holds", () => {
  it('an empty, numeric or object id on the searched subject or resource changes nothing', async () => {
    const subjectSearch = { action: { name: 'view' }, resource: { type: 'record', id: '103' } };
    const plain = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, ...subjectSearch });
    const resourceSearch = { subject: { type: 'user', id: 'bob' }, action: { name: 'view' } };
    const plainResources = await f.post('/access/v1/search/resource', { ...resourceSearch, resource: { type: 'record' } });
    for (const id of ['', 42, { x: 1 }, 'carol']) {
      const subjects = await f.post('/access/v1/search/subject', { subject: { type: 'user', id }, ...subjectSearch });
      expect([subjects.status, subjects.body], JSON.stringify(id)).toEqual([200, plain.body]);
      const resources = await f.post('/access/v1/search/resource', { ...resourceSearch, resource: { type: 'record', id } });
      expect([resources.status, resources.body], JSON.stringify(id)).toEqual([200, plainResources.body]);
    }
    // A page token carries on whether or not the id is sent.
    const first = await f.post('/access/v1/search/resource', { ...resourceSearch, resource: { type: 'record', id: 7 }, page: { limit: 5 } });
    const next = await f.post('/access/v1/search/resource', { ...resourceSearch, resource: { type: 'record' }, page: { token: first.body.page.next_token } });
    expect(next.status).toBe(200);
    expect([...first.body.results, ...next.body.results].slice(0, 10)).toEqual(plainResources.body.results.slice(0, 10));
  });
});

describe('search errors', () => {
  const cases: [string, string, unknown, string][] = [
    ['subject search without action', '/access/v1/search/subject', { subject: { type: 'user' }, resource: { type: 'record', id: '101' } }, 'action: is required'],
    ['subject search without resource.id', '/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'view' }, resource: { type: 'record' } }, 'resource.id: is required'],
    ['resource search without subject', '/access/v1/search/resource', { action: { name: 'view' }, resource: { type: 'record' } }, 'subject: is required'],
    ['resource search without subject.id', '/access/v1/search/resource', { subject: { type: 'user' }, action: { name: 'view' }, resource: { type: 'record' } }, 'subject.id: is required'],
    ['action search without resource', '/access/v1/search/action', { subject: { type: 'user', id: 'alice' } }, 'resource: is required'],
    ['subject search without subject.type', '/access/v1/search/subject', { subject: {}, action: { name: 'view' }, resource: { type: 'record', id: '101' } }, 'subject.type: is required'],
  ];
  for (const [what, path, body, message] of cases) {
    it(what, async () => {
      const res = await f.post(path, body);
      expect(res.status).toBe(400);
      expect(res.body.error_description).toContain(message);
    });
  }
});
