import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { MODEL, rel } from './fixtures.js';

// The management API of relationships, through HTTP: atomic writes checked against the
// model, paged listing, and the three questions with context and contextual relationships.

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ policies: { 'drive.policy': MODEL } });
});
afterAll(async () => {
  await server?.stop();
});

const write = (writes: unknown[], deletes: unknown[] = []) => server.admin('POST', '/relationships', { writes, deletes });
const check = (body: Record<string, unknown>) => server.admin('POST', '/relationships/check', body);

describe('writes', () => {
  it('writes and deletes, and says how many', async () => {
    const r = await write([rel('group:eng#member@user:anne'), rel('folder:root#viewer@group:eng#member'), rel('document:1#parent@folder:root')]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ written: 3, deleted: 0 });
    // Writing one that exists, or deleting one that does not, is no error.
    const again = await write([rel('group:eng#member@user:anne')], [rel('group:eng#member@user:nobody')]);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ written: 1, deleted: 1 });
  });

  it('refuses a relationship the model does not allow, naming its index and why, and writes nothing', async () => {
    const bad = [
      [rel('document:9#viewer@user:zed'), rel('document:9#owner@user:zed')],
      [rel('document:9#viewer@user:zed'), rel('spaceship:1#viewer@user:zed')],
      [rel('document:9#viewer@user:zed'), rel('document:9#parent@user:zed')],
      [rel('document:9#viewer@user:zed'), rel('folder:9#viewer@user:zed', { name: 'office_hours' })],
      [rel('document:9#viewer@user:zed'), rel('folder:9#viewer@group:eng#member', { name: 'no_such_condition' })],
      [rel('document:9#viewer@user:zed'), rel('folder:9#viewer@group:eng#member', { name: 'office_hours', context: { start: 9, finish: 17 } })],
      [rel('document:9#viewer@user:zed'), rel('folder:9#viewer@group:eng#member', { name: 'office_hours', context: { start: 'nine' } })],
    ];
    const why = [
      /writes\.1: type document has no relation owner/,
      /writes\.1: unknown type spaceship/,
      /writes\.1: document#parent does not allow user/,
      /writes\.1: folder#viewer does not allow user with office_hours/,
      /writes\.1: unknown condition no_such_condition/,
      /writes\.1: condition office_hours has no parameter finish/,
      /writes\.1: condition\.context\.start must be an int/,
    ];
    for (const [i, list] of bad.entries()) {
      const r = await write(list);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.error_description).toMatch(why[i]!);
      expect(r.body.issues[0].path).toBe('writes.1');
    }
    const listed = await server.admin('GET', '/relationships?object=document:9');
    expect(listed.body.data).toEqual([]);
  });

  it('refuses a malformed relationship, naming its index', async () => {
    for (const [body, path] of [
      [{ writes: [rel('document:1#viewer@user:anne'), { object: 'document', relation: 'viewer', subject: 'user:anne' }] }, 'writes.1.object'],
      [{ deletes: [{ object: 'document:1', relation: 'viewer', subject: 'user anne' }] }, 'deletes.0.subject'],
      [{ writes: [{ object: 'document:1', relation: 'viewer', subject: 'user:anne', extra: 1 }] }, 'writes.0'],
      [{ writes: 'document:1#viewer@user:anne' }, 'writes'],
      // A NUL no store can hold (PostgreSQL's text refuses it): a 400, on either store.
      [{ writes: [{ object: 'document:a\u0000b', relation: 'viewer', subject: 'user:anne' }] }, 'writes.0.object'],
      [{ writes: [{ object: 'document:1', relation: 'viewer', subject: 'user:an\u0000ne' }] }, 'writes.0.subject'],
      [{ deletes: [{ object: 'document:1', relation: 'viewer', subject: 'group:e\u0000g#member' }] }, 'deletes.0.subject'],
      // An object or subject past 1024 bytes in UTF-8 (409 characters here) would not fit PostgreSQL's index entry.
      [{ writes: [{ object: `document:${'日'.repeat(400)}`, relation: 'viewer', subject: 'user:anne' }] }, 'writes.0.object'],
      [{ writes: [{ object: 'document:1', relation: 'viewer', subject: `user:${'日'.repeat(400)}` }] }, 'writes.0.subject'],
    ] as const) {
      const r = await server.admin('POST', '/relationships', body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
  });

  it('takes an object and a subject of 1024 bytes each, however little they compress', async () => {
    let seed = 7;
    const noise = (n: number) => Array.from({ length: n }, () => ((seed = (seed * 1103515245 + 12345) % 2147483648), String.fromCharCode(33 + (seed % 90)).replace(/[#@*:]/, 'x'))).join('');
    const long = { object: `document:${noise(1024 - 'document:'.length)}`, relation: 'viewer', subject: `user:${noise(1024 - 'user:'.length)}` };
    const r = await write([long]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await check({ object: long.object, relation: 'viewer', subject: long.subject })).body.allowed).toBe(true);
    expect((await write([], [long])).status).toBe(200);
  });

  it('refuses more than 1000 writes in one request, and a body that is not an object', async () => {
    const many = Array.from({ length: 1001 }, (_, i) => rel(`document:bulk${i}#viewer@user:zed`));
    const r = await write(many);
    expect(r.status).toBe(400);
    expect(r.body.issues[0].path).toBe('writes');
    expect((await server.admin('GET', '/relationships?object=document:bulk0')).body.data).toEqual([]);
    for (const body of [[], 'writes', null]) expect((await server.admin('POST', '/relationships', body)).status).toBe(400);
    const q = await check({ object: 'document:1', relation: 'viewer', subject: 'user:anne', contextual_relationships: many });
    expect(q.status).toBe(400);
    expect(q.body.issues[0].path).toBe('contextual_relationships');
  });

  it('deletes a relationship the model no longer allows (it stays stored until then)', async () => {
    // Stored behind the model's back, as one written under an earlier model would be.
    await server.ctx.store.relationships.apply([rel('document:old#owner@user:anne')], []);
    const r = await write([], [rel('document:old#owner@user:anne')]);
    expect(r.status).toBe(200);
    expect((await server.admin('GET', '/relationships?object=document:old')).body.data).toEqual([]);
  });
});

describe('listing', () => {
  it('filters by object, type, relation and subject, a page at a time', async () => {
    const docs = Array.from({ length: 7 }, (_, i) => rel(`document:p${i}#viewer@user:pat`));
    expect((await write(docs)).status).toBe(200);
    const seen: unknown[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const r = await server.admin('GET', `/relationships?subject=user:pat&relation=viewer&limit=3${token ? `&page_token=${encodeURIComponent(token)}` : ''}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      seen.push(...r.body.data);
      token = r.body.next_page_token;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(seen).toEqual(docs);

    const byObject = await server.admin('GET', '/relationships?object=document:p3');
    expect(byObject.body.data).toEqual([rel('document:p3#viewer@user:pat')]);
    const byType = await server.admin('GET', '/relationships?object=folder:');
    expect(byType.body.data).toEqual([rel('folder:root#viewer@group:eng#member')]);
    const byUserset = await server.admin('GET', '/relationships?subject=group:eng%23member');
    expect(byUserset.body.data).toEqual([rel('folder:root#viewer@group:eng#member')]);
  });

  it('takes an empty parameter as one not given, as a form or URLSearchParams sends it', async () => {
    const all = await server.admin('GET', '/relationships?limit=1000');
    expect(all.status).toBe(200);
    const empty = await server.admin('GET', '/relationships?object=&relation=&subject=&limit=&page_token=');
    expect(empty.status, JSON.stringify(empty.body)).toBe(200);
    expect(empty.body.data).toEqual(all.body.data.slice(0, 100));
    const some = await server.admin('GET', '/relationships?object=document:p3&relation=&subject=&page_token=');
    expect(some.body).toEqual({ data: [rel('document:p3#viewer@user:pat')], next_page_token: null });
  });

  it('refuses a bad filter or page token', async () => {
    for (const [q, path] of [['object=document', 'object'], ['page_token=nonsense', 'page_token'], ['limit=0', 'limit'], ['relation=a%20b', 'relation'], ['object=document:a%00b', 'object'], ['subject=user:a%00b', 'subject'],
      ['page_token=' + Buffer.from(JSON.stringify(['document', 'a\u0000', 'viewer', 'user', 'x', ''])).toString('base64url'), 'page_token']]) {
      const r = await server.admin('GET', `/relationships?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.issues[0].path).toBe(path);
    }
  });
});

describe('check', () => {
  it('answers with the path that granted it', async () => {
    const r = await check({ object: 'document:1', relation: 'viewer', subject: 'user:anne' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({
      allowed: true,
      path: [rel('document:1#parent@folder:root'), rel('folder:root#viewer@group:eng#member'), rel('group:eng#member@user:anne')],
    });
    const no = await check({ object: 'document:1', relation: 'viewer', subject: 'user:bob' });
    expect(no.body).toEqual({ allowed: false, path: [] });
  });

  it('asks about usersets and wildcards too', async () => {
    expect((await check({ object: 'folder:root', relation: 'viewer', subject: 'group:eng#member' })).body.allowed).toBe(true);
    expect((await check({ object: 'document:1', relation: 'viewer', subject: 'user:*' })).body.allowed).toBe(false);
  });

  it('takes contextual relationships for this question only', async () => {
    const extra = [rel('group:eng#member@user:bob')];
    const r = await check({ object: 'document:1', relation: 'viewer', subject: 'user:bob', contextual_relationships: extra });
    expect(r.body.allowed).toBe(true);
    expect(r.body.path).toContainEqual(rel('group:eng#member@user:bob'));
    expect((await check({ object: 'document:1', relation: 'viewer', subject: 'user:bob' })).body.allowed).toBe(false);
    const blocked = await check({ object: 'document:1', relation: 'viewer', subject: 'user:anne', contextual_relationships: [rel('document:1#blocked@user:anne')] });
    expect(blocked.body).toEqual({ allowed: false, path: [] });
    const bad = await check({ object: 'document:1', relation: 'viewer', subject: 'user:bob', contextual_relationships: [rel('document:1#owner@user:bob')] });
    expect(bad.status).toBe(400);
    expect(bad.body.error_description).toMatch(/contextual_relationships\.0: type document has no relation owner/);
  });

  it('evaluates conditions with the request context; a missing parameter is a 400 naming it', async () => {
    expect((await write([rel('folder:ops#viewer@group:ops#member', { name: 'office_hours', context: { start: 9, end: 17 } }), rel('group:ops#member@user:olga'), rel('document:ops1#parent@folder:ops')])).status).toBe(200);
    const at = (hour: number) => check({ object: 'document:ops1', relation: 'viewer', subject: 'user:olga', context: { hour } });
    expect((await at(10)).body.allowed).toBe(true);
    expect((await at(20)).body.allowed).toBe(false);
    const missing = await check({ object: 'document:ops1', relation: 'viewer', subject: 'user:olga' });
    expect(missing.status, JSON.stringify(missing.body)).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    expect(missing.body.error_description).toMatch(/hour/);
    expect(missing.body.issues).toEqual([{ path: 'context.hour', message: 'condition office_hours: parameter hour is missing from the context', code: 'custom' }]);
    for (const [path, body] of [
      ['/relationships/list-objects', { subject: 'user:olga', relation: 'viewer', type: 'document' }],
      ['/relationships/list-subjects', { object: 'document:ops1', relation: 'viewer', subject_type: 'user' }],
    ] as const) {
      const r = await server.admin('POST', path, body);
      expect(r.status, path).toBe(400);
      expect(r.body.issues.map((i: { path: string }) => i.path), path).toEqual(['context.hour']);
    }
    // The stored context wins over the request's.
    expect((await check({ object: 'document:ops1', relation: 'viewer', subject: 'user:olga', context: { hour: 10, start: 11 } })).body.allowed).toBe(true);
    // A numeric parameter takes a decimal string too, as OpenFGA converts one; anything else is a 400 naming it.
    const asText = (hour: unknown) => check({ object: 'document:ops1', relation: 'viewer', subject: 'user:olga', context: { hour } });
    expect((await asText('10')).body).toMatchObject({ allowed: true });
    expect((await asText('2e1')).body).toMatchObject({ allowed: false });
    for (const bad of ['ten', '10.5', '', true]) {
      const r = await asText(bad);
      expect(r.status, String(bad)).toBe(400);
      expect(r.body.error_description).toMatch(/hour must be an int/);
    }
    expect((await write([rel('folder:ops2#viewer@group:ops#member', { name: 'office_hours', context: { start: '9', end: '17' } })])).status).toBe(200);
  });

  it('refuses an unknown type or relation, and a question beyond 25 hops', async () => {
    const unknownType = await check({ object: 'spaceship:1', relation: 'viewer', subject: 'user:anne' });
    expect(unknownType.status).toBe(400);
    expect(unknownType.body.error_description).toMatch(/unknown type spaceship/);
    const unknownRelation = await check({ object: 'document:1', relation: 'owner', subject: 'user:anne' });
    expect(unknownRelation.status).toBe(400);
    expect(unknownRelation.body.error_description).toMatch(/no relation owner/);

    const chain = Array.from({ length: 30 }, (_, i) => rel(`folder:f${i + 1}#parent@folder:f${i}`));
    chain.push(rel('folder:f0#viewer@user:deep'), rel('document:deep#parent@folder:f30'));
    expect((await write(chain)).status).toBe(200);
    const deep = await check({ object: 'document:deep', relation: 'viewer', subject: 'user:deep' });
    expect(deep.status, JSON.stringify(deep.body)).toBe(400);
    expect(deep.body.error).toBe('resolution_too_complex');
    // Twenty hops are fine.
    const near = await check({ object: 'folder:f20', relation: 'viewer', subject: 'user:deep' });
    expect(near.body.allowed).toBe(true);
  });
});

describe('list-objects and list-subjects', () => {
  it('lists the objects a subject holds a relation on, each once', async () => {
    expect((await write([rel('document:2#parent@folder:root'), rel('document:3#viewer@user:anne'), rel('document:3#parent@folder:root')])).status).toBe(200);
    const r = await server.admin('POST', '/relationships/list-objects', { subject: 'user:anne', relation: 'viewer', type: 'document' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ objects: ['document:1', 'document:2', 'document:3'] });
    const withExtra = await server.admin('POST', '/relationships/list-objects', {
      subject: 'user:anne', relation: 'viewer', type: 'document',
      contextual_relationships: [rel('document:4#viewer@user:anne'), rel('document:2#blocked@user:anne')],
    });
    expect(withExtra.body).toEqual({ objects: ['document:1', 'document:3', 'document:4'] });
    const bad = await server.admin('POST', '/relationships/list-objects', { subject: 'user:anne', relation: 'viewer', type: 'spaceship' });
    expect(bad.status).toBe(400);
  });

  it('lists the subjects that hold a relation on an object, and usersets for a userset filter', async () => {
    expect((await write([rel('group:eng#member@user:bea')])).status).toBe(200);
    const users = await server.admin('POST', '/relationships/list-subjects', { object: 'document:1', relation: 'viewer', subject_type: 'user' });
    expect(users.status, JSON.stringify(users.body)).toBe(200);
    expect(users.body).toEqual({ subjects: ['user:anne', 'user:bea'] });
    const groups = await server.admin('POST', '/relationships/list-subjects', { object: 'document:1', relation: 'viewer', subject_type: 'group#member' });
    expect(groups.body).toEqual({ subjects: ['group:eng#member'] });
    const extra = await server.admin('POST', '/relationships/list-subjects', {
      object: 'document:1', relation: 'viewer', subject_type: 'user', contextual_relationships: [rel('document:1#viewer@user:*')],
    });
    expect(extra.body.subjects).toEqual(['user:*', 'user:anne', 'user:bea']);
    const bad = await server.admin('POST', '/relationships/list-subjects', { object: 'document:1', relation: 'viewer', subject_type: 'group#boss' });
    expect(bad.status).toBe(400);
    expect(bad.body.error_description).toMatch(/no relation boss/);
  });
});

describe('the project file', () => {
  it('applies relationships at start, idempotently, and refuses one the model does not allow', async () => {
    const file = join(server.dir, 'project.json');
    writeFileSync(file, JSON.stringify({ relationships: [rel('document:proj#viewer@user:paula'), rel('group:proj#member@user:paula')] }));
    const a = await startTestServer({ policies: { 'drive.policy': MODEL }, env: { GATEHOUSE_PROJECT_FILE: file } });
    try {
      const listed = await a.admin('GET', '/relationships?subject=user:paula');
      expect(listed.body.data).toEqual([rel('document:proj#viewer@user:paula'), rel('group:proj#member@user:paula')]);
      const changes = await a.ctx.store.relationships.latestChange();
      const { applyProjectFile } = await import('../../src/project-file.js');
      await applyProjectFile(a.ctx, file);
      expect(await a.ctx.store.relationships.latestChange()).toBe(changes);
      writeFileSync(file, JSON.stringify({ relationships: [rel('document:proj#owner@user:paula')] }));
      await expect(applyProjectFile(a.ctx, file)).rejects.toThrow(/relationships\.0 \(document:proj#owner@user:paula\): type document has no relation owner/);
    } finally {
      await a.stop();
    }
  });
});

describe('a model change', () => {
  it('ignores the relationships the new model no longer allows, keeps them stored, and honours them again when it does', async () => {
    expect((await write([rel('document:m1#viewer@user:rita')])).status).toBe(200);
    const asked = () => check({ object: 'document:m1', relation: 'viewer', subject: 'user:rita' });
    expect((await asked()).body.allowed).toBe(true);
    const reload = async (text: string) => {
      writeFileSync(join(server.policyDir, 'drive.policy'), text);
      const r = await server.admin('POST', '/policy/reload');
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    };
    // People may no longer be given a document's viewer directly.
    const narrower = MODEL.replace('relation viewer: ([user, agent, user:*, group#member] or viewer from parent) but not blocked', 'relation viewer: ([agent, user:*, group#member] or viewer from parent) but not blocked');
    expect(narrower).not.toBe(MODEL);
    try {
      await reload(narrower);
      expect((await asked()).body).toEqual({ allowed: false, path: [] });
      expect((await server.admin('GET', '/relationships?object=document:m1')).body.data).toEqual([rel('document:m1#viewer@user:rita')]);
      const refused = await write([rel('document:m2#viewer@user:rita')]);
      expect(refused.status).toBe(400);
      expect(refused.body.error_description).toMatch(/writes\.0: document#viewer does not allow user/);
    } finally {
      await reload(MODEL);
    }
    expect((await asked()).body.allowed).toBe(true);
  });
});

describe('the OpenAPI document', () => {
  it('describes every relationship operation with its body', async () => {
    const doc = (await (await fetch(`${server.url}/admin/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, any>> };
    expect(Object.keys(doc.paths['/relationships'] ?? {}).sort()).toEqual(['get', 'post']);
    for (const q of ['check', 'list-objects', 'list-subjects']) {
      const op = doc.paths[`/relationships/${q}`]?.post;
      expect(op?.requestBody?.content['application/json'].schema.properties, q).toHaveProperty('contextual_relationships');
    }
  });
});
