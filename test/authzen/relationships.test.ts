import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

// AuthZEN answered through relationships: a relation of the resource's type is an action name,
// for people whether or not they are stored, and both searches come from the relationships,
// page by page, filtered through the decision order (a deny rule hides what it denies).

const MODEL = `policy "azrel" version 1

type user

type agent

type team {
  relation member: [user, team#member]
}

type folder {
  relation parent: [folder]
  relation viewer: [user, team#member] or viewer from parent
}

type document {
  relation parent: [folder]
  relation viewer: [user, user:*, team#member] or viewer from parent
}

rule "no-secret-documents" {
  effect deny
  subjects "user:*"
  relation "viewer:documents"
  object "document:secret/*"
}
`;

const DOCS = ['d-01', 'd-02', 'd-03', 'd-04', 'd-05'];

let f: AuthzenFixture;

const rel = (object: string, relation: string, subject: string) => ({ object, relation, subject });

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'azrel.policy': MODEL } });
  await putUser(f.server, { id: 'u-bob', email: 'bob@example.com' });
  const w = await f.server.admin('POST', '/relationships', {
    writes: [
      ...['anne', 'dave', 'erin'].map((u) => rel('team:eng', 'member', `user:${u}`)),
      rel('folder:root', 'viewer', 'team:eng#member'),
      ...DOCS.map((d) => rel(`document:${d}`, 'parent', 'folder:root')),
      rel('document:secret/plan', 'parent', 'folder:root'),
      rel('document:public', 'viewer', 'user:*'),
      rel('document:bob-only', 'viewer', 'user:u-bob'),
    ],
  });
  expect(w.status, JSON.stringify(w.body)).toBe(200);
});
afterAll(async () => {
  await f?.server.stop();
});

const evaluation = (user: string, id: string) => ({ subject: { type: 'user', id: user }, action: { name: 'viewer' }, resource: { type: 'document', id } });
const decide = async (user: string, id: string) => {
  const r = await f.post('/access/v1/evaluation', evaluation(user, id));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { decision: boolean; context?: { reason?: string } };
};

/** Every page of a search, following next_token. */
async function allPages(path: string, body: Record<string, unknown>, limit: number): Promise<{ pages: number; results: { type: string; id: string }[] }> {
  const results: { type: string; id: string }[] = [];
  let token: string | undefined;
  let pages = 0;
  for (;;) {
    const r = await f.post(path, { ...body, page: token === undefined ? { limit } : { token } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    pages++;
    expect(r.body.results.length).toBeLessThanOrEqual(limit);
    results.push(...r.body.results);
    token = r.body.page.next_token;
    if (!token) return { pages, results };
    expect(pages).toBeLessThan(20);
  }
}

describe('relations as AuthZEN action names', () => {
  it('grants a person who is not stored what the relationships give user:<id>', async () => {
    expect((await decide('anne', 'd-01')).decision).toBe(true);
    expect((await decide('anne', 'bob-only')).decision).toBe(false);
    expect((await decide('zed', 'd-01')).decision).toBe(false);
  });

  it('grants everyone a wildcard grants, stored or not', async () => {
    expect((await decide('zed', 'public')).decision).toBe(true);
    expect((await decide('u-bob', 'public')).decision).toBe(true);
    expect((await decide('u-bob', 'bob-only')).decision).toBe(true);
  });

  it('applies deny rules to a relation granted through relationships', async () => {
    const d = await decide('anne', 'secret/plan');
    expect(d.decision).toBe(false);
    expect(d.context?.reason).toBe('rule_denied: no-secret-documents');
  });

  it('a subject type the model does not declare is an unknown subject', async () => {
    const r = await f.post('/access/v1/evaluation', { subject: { type: 'robot', id: 'r1' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'public' } });
    expect(r.body.decision).toBe(false);
    expect(r.body.context.reason).toContain('unknown_subject');
  });

  it('answers batches, and records each evaluation', async () => {
    const r = await f.post('/access/v1/evaluations', {
      subject: { type: 'user', id: 'dave' },
      action: { name: 'viewer' },
      evaluations: [{ resource: { type: 'document', id: 'd-02' } }, { resource: { type: 'document', id: 'secret/plan' } }, { resource: { type: 'document', id: 'bob-only' } }],
    });
    expect(r.status).toBe(200);
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false, false]);
    const audit = await f.server.admin('GET', '/audit?user_id=dave&limit=10');
    expect(audit.body.data.some((a: { resource: string; decision: string }) => a.resource === 'document:d-02' && a.decision === 'allow')).toBe(true);
  });
});

describe('searches from the relationships', () => {
  it('lists the resources a person may view, page by page, without what a deny rule denies', async () => {
    const { pages, results } = await allPages('/access/v1/search/resource', { subject: { type: 'user', id: 'anne' }, action: { name: 'viewer' }, resource: { type: 'document' } }, 2);
    expect(results.map((r) => r.id)).toEqual([...DOCS, 'public']);
    expect(pages).toBe(3);
    // The relationships alone give secret/plan; the deny rule is what leaves it out.
    const listed = await f.server.admin('POST', '/relationships/list-objects', { subject: 'user:anne', relation: 'viewer', type: 'document' });
    expect(listed.body.objects).toContain('document:secret/plan');
  });

  it('agrees with evaluation: every listed resource is allowed, the unlisted are not', async () => {
    const { results } = await allPages('/access/v1/search/resource', { subject: { type: 'user', id: 'erin' }, action: { name: 'viewer' }, resource: { type: 'document' } }, 4);
    const listed = new Set(results.map((r) => r.id));
    for (const id of listed) expect((await decide('erin', id)).decision, id).toBe(true);
    for (const id of ['secret/plan', 'bob-only', 'nowhere']) {
      expect(listed.has(id)).toBe(false);
      expect((await decide('erin', id)).decision, id).toBe(false);
    }
  });

  it('lists the subjects that hold the relation, page by page', async () => {
    const { pages, results } = await allPages('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'd-03' } }, 2);
    expect(results).toEqual(['anne', 'dave', 'erin'].map((id) => ({ type: 'user', id })));
    expect(pages).toBe(2);
  });

  it('lists user * when a wildcard grants the relation', async () => {
    const r = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'public' } });
    expect(r.body.results).toEqual([{ type: 'user', id: '*' }]);
  });

  it('a deny rule empties a subject search as it denies every evaluation', async () => {
    const r = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'secret/plan' } });
    expect(r.body.results).toEqual([]);
  });

  it('a relationship written between pages is in the next search', async () => {
    const body = { subject: { type: 'user', id: 'u-bob' }, action: { name: 'viewer' }, resource: { type: 'document' } };
    const before = await f.post('/access/v1/search/resource', body);
    expect(before.body.results.map((r: { id: string }) => r.id)).toEqual(['bob-only', 'public']);
    const w = await f.server.admin('POST', '/relationships', { writes: [rel('document:d-04', 'viewer', 'user:u-bob')] });
    expect(w.status).toBe(200);
    const after = await f.post('/access/v1/search/resource', body);
    expect(after.body.results.map((r: { id: string }) => r.id)).toEqual(['bob-only', 'd-04', 'public']);
  });

  it('lists the relations of the type among the actions', async () => {
    const r = await f.post('/access/v1/search/action', { subject: { type: 'user', id: 'anne' }, resource: { type: 'document', id: 'd-01' } });
    expect(r.body.results).toContainEqual({ name: 'viewer' });
  });
});
