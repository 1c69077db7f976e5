// The AuthZEN working group's certification scenario for Authorization API 1.0 PDPs, test by
// test: its fixture (alice, bob, record-1, record-2; read, write, delete) as a Gatehouse example
// set, then every request of the Basic, Batch, Search and Discovery levels with the checks
// its harness makes (the status, the shape, and the eight fixture decisions).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pdpPost, serveExample, type AuthzenFixture } from './helpers.js';

// The fixture is policies/examples/authzen-certification, served with its project file.
const EXAMPLE = join(import.meta.dirname, '../../policies/examples/authzen-certification');

let f: AuthzenFixture;

beforeAll(async () => {
  f = await serveExample(EXAMPLE, { client_id: 'certification-pep', client_secret: 'certification-pep-example-secret-change-me-0123456789' });
}, 30_000);
afterAll(async () => f?.server.stop());

const alice = { type: 'user', id: 'alice' };
const bob = { type: 'user', id: 'bob' };
const record1 = { type: 'record', id: 'record-1' };
const read = { name: 'read' };
const write = { name: 'write' };

const evaluation = (body: unknown, headers?: Record<string, string | null>) => f.post('/access/v1/evaluation', body, headers);
const evaluations = (body: unknown) => f.post('/access/v1/evaluations', body);

describe('Basic: Access Evaluation', () => {
  const fixture: [string, unknown, boolean][] = [
    ['permit (rule 1)', { subject: alice, action: read, resource: record1 }, true],
    ['deny (rule 4)', { subject: bob, action: write, resource: record1 }, false],
    ['with the optional context', { subject: alice, action: read, resource: record1, context: { time: '2025-06-27T18:03-07:00', ip: '192.168.1.1' } }, true],
    ['deny on resource properties (rule 5)', { subject: alice, action: write, resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } }, false],
    ['permit on subject properties (rule 6)', { subject: { ...bob, properties: { role: 'admin' } }, action: write, resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } }, true],
    ['permit on action properties (rule 7)', { subject: alice, action: { name: 'delete', properties: { soft: true } }, resource: record1 }, true],
    ['deny on action properties (rule 8)', { subject: alice, action: { name: 'delete', properties: { soft: false } }, resource: record1 }, false],
    [
      'with additional properties',
      {
        subject: { ...alice, properties: { department: 'Sales', role: 'manager' } },
        action: { name: 'read', properties: { method: 'GET' } },
        resource: { ...record1, properties: { status: 'active', owner: 'bob' } },
      },
      true,
    ],
    ['with unknown fields', { subject: alice, action: read, resource: record1, foo: 'bar', futureField: { nested: true } }, true],
  ];
  for (const [name, body, decision] of fixture) {
    it(`${name}: 200, decision ${decision}`, async () => {
      const res = await evaluation(body);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.body.decision).toBe(decision);
      if ('context' in res.body) expect(typeof res.body.context).toBe('object');
    });
  }

  const missing: [string, unknown][] = [
    ['subject', { action: read, resource: record1 }],
    ['action', { subject: alice, resource: record1 }],
    ['resource', { subject: alice, action: read }],
    ['subject.type', { subject: { id: 'alice' }, action: read, resource: record1 }],
    ['subject.id', { subject: { type: 'user' }, action: read, resource: record1 }],
    ['action.name', { subject: alice, action: {}, resource: record1 }],
    ['resource.type', { subject: alice, action: read, resource: { id: 'record-1' } }],
    ['resource.id', { subject: alice, action: read, resource: { type: 'record' } }],
    ['a subject given as a string', { subject: 'alice', action: read, resource: record1 }],
    ['an action name given as a number', { subject: alice, action: { name: 123 }, resource: record1 }],
  ];
  for (const [what, body] of missing) {
    it(`without ${what}: 400`, async () => {
      expect((await evaluation(body)).status).toBe(400);
      expect((await evaluations(body)).status).toBe(400);
    });
  }

  it('another content type, malformed JSON, an empty body: 400', async () => {
    const valid = JSON.stringify({ subject: alice, action: read, resource: record1 });
    expect((await evaluation(valid, { 'content-type': 'text/plain' })).status).toBe(400);
    expect((await evaluation('{"subject": {', {})).status).toBe(400);
    expect((await evaluation('', {})).status).toBe(400);
    expect((await evaluation('', { 'content-type': null })).status).toBe(400);
  });

  it('the X-Request-ID comes back; without one nothing fails', async () => {
    const body = { subject: alice, action: read, resource: record1 };
    const withId = await evaluation(body, { 'x-request-id': 'cert-0001' });
    expect([withId.status, withId.headers.get('x-request-id')]).toEqual([200, 'cert-0001']);
    expect((await evaluation(body)).status).toBe(200);
  });

  it('the same request gives the same decision each time', async () => {
    const body = { subject: alice, action: read, resource: record1 };
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push((await evaluation(body)).body.decision);
    expect(decisions).toEqual([true, true, true, true, true]);
  });
});

describe('Batch: Access Evaluations', () => {
  const batches: [string, unknown, boolean[]][] = [
    ['subject and action defaults', { subject: alice, action: read, evaluations: [{ resource: record1 }, { resource: { type: 'record', id: 'record-2' } }] }, [true, true]],
    ['fixture decisions, in order', { subject: bob, resource: record1, evaluations: [{ action: read }, { action: write }] }, [true, false]],
    [
      'resource properties per item',
      {
        subject: alice,
        action: write,
        evaluations: [
          { resource: { ...record1, properties: { status: 'active' } } },
          { resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } },
        ],
      },
      [true, false],
    ],
    [
      'subject properties per item',
      { action: write, resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } }, evaluations: [{ subject: alice }, { subject: { ...bob, properties: { role: 'admin' } } }] },
      [false, true],
    ],
    ['no defaults', { evaluations: [{ subject: alice, action: read, resource: record1 }, { subject: bob, action: write, resource: record1 }] }, [true, false]],
    [
      'context inherited and overridden',
      {
        subject: alice,
        action: read,
        context: { time: '2025-06-27T18:03-07:00' },
        evaluations: [{ resource: record1 }, { resource: { type: 'record', id: 'record-2' }, context: { time: '2025-06-27T19:00-07:00', source: 'batch-override' } }],
      },
      [true, true],
    ],
    [
      'an item falls back to the default resource type',
      {
        subject: alice,
        action: write,
        resource: { type: 'record' },
        evaluations: [{ resource: { id: 'record-1', properties: { status: 'active' } } }, { resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } }],
      },
      [true, false],
    ],
  ];
  for (const [name, body, decisions] of batches) {
    it(`${name}: one decision per item, in order`, async () => {
      const res = await evaluations(body);
      expect(res.status).toBe(200);
      expect(res.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual(decisions);
      expect(res.body).not.toHaveProperty('decision');
    });
  }

  it('an item that cannot be asked is a deny in its place, the batch still 200', async () => {
    const res = await evaluations({ subject: alice, action: read, evaluations: [{ resource: record1 }, {}] });
    expect(res.status).toBe(200);
    expect(res.body.evaluations).toHaveLength(2);
    expect(res.body.evaluations[0]).toEqual({ decision: true });
    expect(res.body.evaluations[1].decision).toBe(false);
    expect(typeof res.body.evaluations[1].context).toBe('object');
  });

  it('without evaluations, or with an empty array: a single evaluation', async () => {
    const body = { subject: alice, action: read, resource: record1 };
    expect(await evaluations(body)).toMatchObject({ status: 200, body: { decision: true } });
    expect(await evaluations({ ...body, evaluations: [] })).toMatchObject({ status: 200, body: { decision: true } });
  });
});

describe('Search', () => {
  const search = (kind: string, body: unknown) => f.post(`/access/v1/search/${kind}`, body);
  const names = (body: { results: { type?: string; id?: string; name?: string }[] }) => body.results.map((r) => r.id ?? r.name);

  it('subject search: alice and bob read record-1; with context too', async () => {
    for (const extra of [{}, { context: { time: '2025-06-27T18:03-07:00' } }]) {
      const res = await search('subject', { subject: { type: 'user' }, action: read, resource: record1, ...extra });
      expect(res.status).toBe(200);
      expect(res.body.results.every((r: { type: string; id: string }) => r.type === 'user' && typeof r.id === 'string')).toBe(true);
      expect(names(res.body)).toEqual(expect.arrayContaining(['alice', 'bob']));
    }
  });

  it('subject search on resource properties: bob writes archived record-2', async () => {
    const res = await search('subject', { subject: { type: 'user' }, action: write, resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } });
    expect(names(res.body)).toContain('bob');
  });

  it('resource search: alice reads record-1; bob, an admin, writes record-2', async () => {
    const aliceReads = await search('resource', { subject: alice, action: read, resource: { type: 'record' } });
    expect(aliceReads.status).toBe(200);
    expect(aliceReads.body.results.every((r: { type: string }) => r.type === 'record')).toBe(true);
    expect(names(aliceReads.body)).toContain('record-1');
    const bobWrites = await search('resource', { subject: { ...bob, properties: { role: 'admin' } }, action: write, resource: { type: 'record' } });
    expect(names(bobWrites.body)).toContain('record-2');
  });

  it('action search: alice reads and writes record-1; bob, an admin, writes archived record-2', async () => {
    for (const extra of [{}, { context: { time: '2024-10-26T01:22-07:00' } }]) {
      const res = await search('action', { subject: alice, resource: record1, ...extra });
      expect(res.status).toBe(200);
      expect(res.body.results.every((r: { name: string }) => typeof r.name === 'string')).toBe(true);
      expect(names(res.body)).toEqual(expect.arrayContaining(['read', 'write']));
    }
    const bobs = await search('action', { subject: { ...bob, properties: { role: 'admin' } }, resource: { type: 'record', id: 'record-2', properties: { status: 'archived' } } });
    expect(names(bobs.body)).toContain('write');
  });

  it('paging: a limit, then the token alone, to an empty next_token', async () => {
    const body = { subject: { type: 'user' }, action: read, resource: record1 };
    const first = await search('subject', { ...body, page: { limit: 1 } });
    expect(first.status).toBe(200);
    expect(first.body.results).toHaveLength(1);
    expect(typeof first.body.page.next_token).toBe('string');
    expect(first.body.page.next_token).not.toBe('');
    const seen = [...names(first.body)];
    let token = first.body.page.next_token;
    while (token) {
      const next = await search('subject', { ...body, page: { token } });
      expect(next.status).toBe(200);
      expect(typeof next.body.page).toBe('object');
      expect(typeof next.body.page.next_token).toBe('string');
      seen.push(...names(next.body));
      token = next.body.page.next_token;
    }
    expect(seen).toEqual(['alice', 'bob']);
  });

  it('no match, an unknown subject, an unknown type: an empty results array', async () => {
    expect(await search('action', { subject: { type: 'user', id: 'nonexistent-user' }, resource: record1 })).toMatchObject({ status: 200, body: { results: [] } });
    expect(await search('subject', { subject: { type: 'spaceship' }, action: read, resource: record1 })).toMatchObject({ status: 200, body: { results: [] } });
  });

  it('a missing entity or identifier: 400', async () => {
    const bad: [string, unknown][] = [
      ['subject', { subject: { type: 'user' }, resource: record1 }],
      ['resource', { action: read, resource: { type: 'record' } }],
      ['action', { subject: alice }],
      ['subject', { subject: { type: 'user' }, action: read, resource: { type: 'record' } }],
      ['resource', { subject: { type: 'user' }, action: read, resource: { type: 'record' } }],
    ];
    for (const [kind, body] of bad) expect((await search(kind, body)).status).toBe(400);
  });
});

describe('Discovery: PDP metadata', () => {
  it('200 JSON at the well-known path: the base URL, the required endpoint, every optional one as a URL', async () => {
    const res = await fetch(`${f.base}/.well-known/authzen-configuration`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const md = (await res.json()) as Record<string, unknown>;
    expect(md.policy_decision_point).toBe(f.base);
    for (const key of ['access_evaluation_endpoint', 'access_evaluations_endpoint', 'search_subject_endpoint', 'search_resource_endpoint', 'search_action_endpoint']) {
      expect(new URL(md[key] as string).origin).toBe(new URL(f.base).origin);
    }
    // Every advertised endpoint answers there.
    const body = { subject: alice, action: read, resource: record1 };
    const direct = await pdpPost('', md.access_evaluation_endpoint as string, body, { authorization: `Bearer ${f.token}` });
    expect([direct.status, direct.body]).toEqual([200, { decision: true }]);
  });
});
