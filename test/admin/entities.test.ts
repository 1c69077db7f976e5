import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATTRIBUTES_MAX_BYTES, ATTRIBUTES_MAX_DEPTH } from '../../src/admin/schemas.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.stop());

const paths = (res: { body: { issues: { path: string }[] } }) => res.body.issues.map((i) => i.path).sort();
const version = (domain: string) => server.ctx.store.settings.version(domain);
const jwk = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
const enc = encodeURIComponent;
const email = () => `p-${randomUUID()}@example.com`;

/** An object nested `levels` deep counting itself: {a: {a: ... {}}}. */
const nested = (levels: number): Record<string, unknown> => {
  let v: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) v = { a: v };
  return v;
};

const rich = {
  max_amount: 250.5,
  tier: 'gold',
  vip: true,
  manager: null,
  regions: ['eu', 'us'],
  team: { name: 'billing', lead: { email: 'lead@example.com' }, tags: [{ k: 'cost-center', v: 42 }] },
  'odd key with spaces': 'kept',
};

describe('attributes on agents', () => {
  it('round-trip on POST, GET, PATCH (replaced whole); an omitted PATCH field keeps them; each change moves the agents counter', async () => {
    const v0 = (await version('agents'));
    const created = await server.admin('POST', '/agents', { name: 'attr-bot', mode: 'autonomous', public_jwk: jwk(), attributes: rich });
    expect(created.status).toBe(201);
    expect(created.body.attributes).toEqual(rich);
    expect((await version('agents'))).toBeGreaterThan(v0);
    const id = enc(created.body.agent_id);
    expect((await server.admin('GET', `/agents/${id}`)).body.attributes).toEqual(rich);

    const v1 = (await version('agents'));
    const patched = await server.admin('PATCH', `/agents/${id}`, { attributes: { max_amount: 10, regions: [] } });
    expect(patched.status).toBe(200);
    expect(patched.body.attributes).toEqual({ max_amount: 10, regions: [] });
    expect((await version('agents'))).toBeGreaterThan(v1);
    // the store reads what the pipeline reads
    expect((await server.ctx.store.agents.get(created.body.agent_id))!.attributes).toEqual({ max_amount: 10, regions: [] });

    const renamed = await server.admin('PATCH', `/agents/${id}`, { roles: ['x'] });
    expect(renamed.body.attributes).toEqual({ max_amount: 10, regions: [] });
    expect((await server.admin('GET', '/agents')).body.data.find((a: { agent_id: string }) => a.agent_id === created.body.agent_id).attributes)
      .toEqual({ max_amount: 10, regions: [] });
  });

  it('default to {}', async () => {
    const created = await server.admin('POST', '/agents', { name: 'plain-bot', mode: 'delegated', public_jwk: jwk() });
    expect(created.body.attributes).toEqual({});
    expect((await server.ctx.store.agents.get(created.body.agent_id))!.attributes).toEqual({});
  });
});

describe('attributes on people, and id on POST /users', () => {
  it('round-trip; a PATCH of attributes moves the agents counter, a PATCH of the name alone does not', async () => {
    const created = await server.admin('POST', '/users', { email: email(), password: 'pw-123456789', name: 'Ann', attributes: rich });
    expect(created.status).toBe(201);
    expect(created.body.attributes).toEqual(rich);
    expect((await server.admin('GET', `/users/${created.body.id}`)).body.attributes).toEqual(rich);

    let v = (await version('agents'));
    const patched = await server.admin('PATCH', `/users/${created.body.id}`, { attributes: { clearance: ['internal', 'secret'] } });
    expect(patched.body.attributes).toEqual({ clearance: ['internal', 'secret'] });
    expect((await version('agents'))).toBeGreaterThan(v);
    expect((await server.ctx.store.users.get(created.body.id))!.attributes).toEqual({ clearance: ['internal', 'secret'] });

    v = (await version('agents'));
    const renamed = await server.admin('PATCH', `/users/${created.body.id}`, { name: 'Ann B' });
    expect(renamed.body.attributes).toEqual({ clearance: ['internal', 'secret'] });
    expect((await version('agents'))).toBe(v);
    v = (await version('agents'));
    await server.admin('PATCH', `/users/${created.body.id}`, { groups: ['eng'] });
    expect((await version('agents'))).toBeGreaterThan(v);

    const plain = await server.admin('POST', '/users', { email: email(), password: 'pw-123456789', name: 'Plain' });
    expect(plain.body.attributes).toEqual({});
  });

  it('POST /users keeps a given id as the sub; a taken id is 409; a bad one is 400 naming id', async () => {
    const id = `emp-${randomUUID()}`;
    const created = await server.admin('POST', '/users', { id, email: email(), password: 'pw-123456789', name: 'Id' });
    expect(created.status).toBe(201);
    expect(created.body.id).toBe(id);
    expect((await server.admin('GET', `/users/${id}`)).body.id).toBe(id);

    const again = await server.admin('POST', '/users', { id, email: email(), password: 'pw-123456789', name: 'Again' });
    expect(again.status).toBe(409);
    expect(again.body.error).toBe('conflict');

    for (const bad of ['', 'has space', 'a/b', 'x'.repeat(201), 42]) {
      const res = await server.admin('POST', '/users', { id: bad, email: email(), password: 'pw-123456789', name: 'Bad' });
      expect(res.status, String(bad)).toBe(400);
      expect(paths(res)).toEqual(['id']);
    }
  });
});

describe('attribute bounds', () => {
  const deepOk = nested(ATTRIBUTES_MAX_DEPTH);
  const tooDeep = nested(ATTRIBUTES_MAX_DEPTH + 1);
  const tooBig = { blob: 'x'.repeat(ATTRIBUTES_MAX_BYTES) };
  const deepList = { l: [[[[[[[[[[1]]]]]]]]]] };

  it.each([
    ['not an object', 'gold'],
    ['a list', ['a']],
    ['null', null],
    ['too deep', tooDeep],
    ['lists too deep', deepList],
    ['too big', tooBig],
    ['a __proto__ member', JSON.parse('{"ok": 1, "__proto__": {"x": 1}}')],
  ])('%s is a 400 naming attributes, on every operation that takes them', async (_what, value) => {
    const agent = await server.admin('POST', '/agents', { name: `b-${randomUUID().slice(0, 8)}`, mode: 'autonomous', public_jwk: jwk(), attributes: value });
    const user = await server.admin('POST', '/users', { email: email(), password: 'pw-123456789', name: 'B', attributes: value });
    const entity = await server.admin('PUT', '/entities/doc/bounds-1', { attributes: value });
    for (const res of [agent, user, entity]) {
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_request');
      expect(paths(res)).toEqual(['attributes']);
      expect(res.body.error_description).toMatch(/^attributes: /);
    }
    const patch = await server.admin('PATCH', `/users/${(await server.admin('POST', '/users', { email: email(), password: 'pw-123456789', name: 'P' })).body.id}`, { attributes: value });
    expect(paths(patch)).toEqual(['attributes']);
  });

  it('name the bound that was passed', async () => {
    const deep = await server.admin('PUT', '/entities/doc/bounds-2', { attributes: tooDeep });
    expect(deep.body.error_description).toContain(`${ATTRIBUTES_MAX_DEPTH} levels`);
    const big = await server.admin('PUT', '/entities/doc/bounds-2', { attributes: tooBig });
    expect(big.body.error_description).toContain(`${ATTRIBUTES_MAX_BYTES} bytes`);
  });

  it('the bounds themselves are accepted', async () => {
    const atDepth = await server.admin('PUT', '/entities/doc/bounds-3', { attributes: deepOk });
    expect(atDepth.status).toBe(201);
    expect(atDepth.body.attributes).toEqual(deepOk);
    const justFits = { blob: 'x'.repeat(ATTRIBUTES_MAX_BYTES - JSON.stringify({ blob: '' }).length) };
    expect((await server.admin('PUT', '/entities/doc/bounds-3', { attributes: justFits })).status).toBe(200);
  });
});

describe('entities', () => {
  it('PUT creates (201) then replaces (200); GET reads; DELETE is 204 then 404; each write moves the entities counter', async () => {
    let v = (await version('entities'));
    const created = await server.admin('PUT', '/entities/todo/t-1', { attributes: { owner: 'ann@example.com', tags: ['vip'] } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ type: 'todo', id: 't-1', attributes: { owner: 'ann@example.com', tags: ['vip'] } });
    expect(typeof created.body.created_at).toBe('string');
    expect((await version('entities'))).toBeGreaterThan(v);
    expect((await server.ctx.store.entities.get('todo', 't-1'))!.attributes).toEqual({ owner: 'ann@example.com', tags: ['vip'] });

    v = (await version('entities'));
    const replaced = await server.admin('PUT', '/entities/todo/t-1', { attributes: { owner: 'bob@example.com' } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.attributes).toEqual({ owner: 'bob@example.com' });
    expect(replaced.body.created_at).toBe(created.body.created_at);
    expect((await version('entities'))).toBeGreaterThan(v);

    const got = await server.admin('GET', '/entities/todo/t-1');
    expect(got.status).toBe(200);
    expect(got.body).toEqual(replaced.body);
    // the same id under another type is another entity
    expect((await server.admin('GET', '/entities/note/t-1')).status).toBe(404);

    v = (await version('entities'));
    expect((await server.admin('DELETE', '/entities/todo/t-1')).status).toBe(204);
    expect((await version('entities'))).toBeGreaterThan(v);
    expect((await server.ctx.store.entities.get('todo', 't-1'))).toBeUndefined();
    for (const method of ['GET', 'DELETE']) {
      const gone = await server.admin(method, '/entities/todo/t-1');
      expect(gone.status).toBe(404);
      expect(gone.body.error).toBe('not_found');
    }
  });

  it('ids may hold : / @ and other visible characters (URL-encoded or not)', async () => {
    for (const id of ['urn:x:1', 'ann@example.com', 'folder/sub/file.txt', "q?a=1&b=%20#f'"]) {
      const put = await server.admin('PUT', `/entities/file/${enc(id)}`, { attributes: { id } });
      expect(put.status, id).toBe(201);
      expect(put.body.id).toBe(id);
      expect((await server.admin('GET', `/entities/file/${enc(id)}`)).body.attributes).toEqual({ id });
    }
    expect((await server.admin('GET', '/entities/file/folder/sub/file.txt')).body.id).toBe('folder/sub/file.txt');
  });

  it('lists a type a page at a time, ordered by id', async () => {
    for (const n of [3, 1, 2, 5, 4]) await server.admin('PUT', `/entities/ticket/k${n}`, { attributes: { n } });
    await server.admin('PUT', '/entities/other-kind/k0', { attributes: {} });
    const all = await server.admin('GET', '/entities/ticket');
    expect(all.status).toBe(200);
    expect(all.body.data.map((e: { id: string }) => e.id)).toEqual(['k1', 'k2', 'k3', 'k4', 'k5']);
    expect(all.body.data[0]).toMatchObject({ type: 'ticket', attributes: { n: 1 } });
    expect(all.body.next_offset).toBeNull();

    const first = await server.admin('GET', '/entities/ticket?limit=2');
    expect(first.body.data.map((e: { id: string }) => e.id)).toEqual(['k1', 'k2']);
    expect(first.body.next_offset).toBe(2);
    const last = await server.admin('GET', '/entities/ticket?limit=2&offset=4');
    expect(last.body.data.map((e: { id: string }) => e.id)).toEqual(['k5']);
    expect(last.body.next_offset).toBeNull();
    expect((await server.admin('GET', '/entities/unheard-of')).body).toEqual({ data: [], next_offset: null });

    const bad = await server.admin('GET', '/entities/ticket?limit=0&offset=-1');
    expect(bad.status).toBe(400);
    expect(paths(bad)).toEqual(['limit', 'offset']);
  });

  it('a bad type, id or body is a 400 naming the field', async () => {
    for (const type of ['has space', 'to:do', 'x'.repeat(101), 'a*']) {
      const res = await server.admin('PUT', `/entities/${enc(type)}/1`, { attributes: {} });
      expect(res.status, type).toBe(400);
      expect(paths(res)).toEqual(['type']);
      expect(paths(await server.admin('GET', `/entities/${enc(type)}/1`))).toEqual(['type']);
      expect(paths(await server.admin('DELETE', `/entities/${enc(type)}/1`))).toEqual(['type']);
      expect(paths(await server.admin('GET', `/entities/${enc(type)}`))).toEqual(['type']);
    }
    for (const id of ['has space', 'star*', 'x'.repeat(257), 'tab\there', 'é']) {
      const res = await server.admin('PUT', `/entities/todo/${enc(id)}`, { attributes: {} });
      expect(res.status, id).toBe(400);
      expect(paths(res)).toEqual(['id']);
    }
    const both = await server.admin('PUT', `/entities/${enc('a b')}/${enc('c d')}`, { attributes: {} });
    expect(paths(both)).toEqual(['id', 'type']);

    expect(paths(await server.admin('PUT', '/entities/todo/1', {}))).toEqual(['attributes']);
    expect(paths(await server.admin('PUT', '/entities/todo/1', { attributes: 'x' }))).toEqual(['attributes']);
    const notJson = await fetch(`${server.url}/admin/v1/entities/todo/1`, {
      method: 'PUT', headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' }, body: '{"attributes": {',
    });
    expect(notJson.status).toBe(400);
    expect((await server.ctx.store.entities.get('todo', '1'))).toBeUndefined();
  });

  it('401 without the admin token', async () => {
    await server.admin('PUT', '/entities/secret/s1', { attributes: { a: 1 } });
    for (const [method, path] of [['GET', '/entities/secret'], ['GET', '/entities/secret/s1'], ['PUT', '/entities/secret/s1'], ['DELETE', '/entities/secret/s1']] as const) {
      for (const auth of [undefined, 'Bearer wrong-token']) {
        const res = await fetch(`${server.url}/admin/v1${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
          ...(method === 'PUT' ? { body: JSON.stringify({ attributes: { a: 2 } }) } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(await res.json()).toEqual({ error: 'invalid_token' });
      }
    }
    expect((await server.ctx.store.entities.get('secret', 's1'))!.attributes).toEqual({ a: 1 });
  });
});

describe('OpenAPI', () => {
  it('documents the entity operations and the attributes fields', async () => {
    const doc = (await (await fetch(`${server.url}/admin/v1/openapi.json`)).json()) as any;
    const one = doc.paths['/entities/{type}/{id}'];
    expect(Object.keys(one).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(one.put.responses)).toEqual(expect.arrayContaining(['200', '201', '400', '401', '404']));
    expect(one.put.requestBody.content['application/json'].schema.required).toEqual(['attributes']);
    const typeParam = one.get.parameters.find((p: { name: string }) => p.name === 'type');
    expect(typeParam.schema.pattern).toBeTruthy();
    const list = doc.paths['/entities/{type}'].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(['type', 'limit', 'offset']);

    const props = (path: string, method: string) => doc.paths[path][method].requestBody.content['application/json'].schema.properties;
    for (const [path, method] of [['/agents', 'post'], ['/agents/{agent_id}', 'patch'], ['/users', 'post'], ['/users/{id}', 'patch']]) {
      expect(props(path, method).attributes.type, `${method} ${path}`).toBe('object');
    }
    expect(props('/users', 'post').id).toBeTruthy();
    const userView = doc.paths['/users/{id}'].get.responses['200'].content['application/json'].schema;
    expect(userView.properties.attributes).toBeTruthy();
  });
});

describe('the project file', () => {
  it('applies entities, attributes and user ids; applied twice it changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-entities-'));
    const file = join(dir, 'project.json');
    const project = (owner: string) => ({
      users: [{ id: 'emp-7', email: 'ann@example.com', password: 'correct horse battery', name: 'Ann', attributes: { clearance: ['internal'], team: { name: 'eng' } } }],
      agents: [{ name: 'helper', mode: 'delegated', public_jwk: jwk(), attributes: { max_amount: 100 } }],
      entities: [
        { type: 'todo', id: 't-1', attributes: { owner, tags: ['vip'] } },
        { type: 'customer', id: 'c/42', attributes: { tier: 'gold' } },
      ],
    });
    writeFileSync(file, JSON.stringify(project('ann@example.com')));
    const env = { GATEHOUSE_PROJECT_FILE: file };

    let s = await startTestServer({ dir, env });
    let before: { entities: number; todo: unknown };
    try {
      expect((await s.admin('GET', '/users/emp-7')).body.attributes).toEqual({ clearance: ['internal'], team: { name: 'eng' } });
      expect((await s.admin('GET', `/agents/${enc('spiffe://localhost/agent/helper')}`)).body.attributes).toEqual({ max_amount: 100 });
      expect((await s.admin('GET', '/entities/todo/t-1')).body.attributes).toEqual({ owner: 'ann@example.com', tags: ['vip'] });
      expect((await s.admin('GET', `/entities/customer/${enc('c/42')}`)).body.attributes).toEqual({ tier: 'gold' });
      before = { entities: (await s.ctx.store.settings.version('entities')), todo: (await s.admin('GET', '/entities/todo/t-1')).body };
    } finally {
      await s.stop();
    }

    // The same file again: one copy of each, nothing rewritten.
    s = await startTestServer({ dir, env });
    try {
      expect((await s.admin('GET', '/entities/todo')).body.data).toHaveLength(1);
      expect((await s.admin('GET', '/entities/customer')).body.data).toHaveLength(1);
      expect((await s.admin('GET', '/users')).body.data).toHaveLength(1);
      expect((await s.ctx.store.settings.version('entities'))).toBe(before.entities);
      expect((await s.admin('GET', '/entities/todo/t-1')).body).toEqual(before.todo);
    } finally {
      await s.stop();
    }

    // A changed value is updated in place.
    writeFileSync(file, JSON.stringify(project('bob@example.com')));
    s = await startTestServer({ dir, env });
    try {
      expect((await s.admin('GET', '/entities/todo')).body.data).toHaveLength(1);
      expect((await s.admin('GET', '/entities/todo/t-1')).body.attributes).toEqual({ owner: 'bob@example.com', tags: ['vip'] });
      expect((await s.ctx.store.settings.version('entities'))).toBeGreaterThan(before.entities);
    } finally {
      await s.stop();
    }
  });

  it('a bad entity stops start-up naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-entities-'));
    const file = join(dir, 'project.json');
    writeFileSync(file, JSON.stringify({ entities: [{ type: 'to do', id: 'x', attributes: {} }] }));
    await expect(startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } })).rejects.toThrow(/GATEHOUSE_PROJECT_FILE.*entities\.0\.type/);
  });
});
