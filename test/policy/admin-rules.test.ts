// Rules of the management API in the second edition: `effect: "permit"` and conditions in the
// file syntax (`condition: {"expr": "..."}`), through the real HTTP API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.stop());

const own = {
  name: 'owners-update-their-todos',
  effect: 'permit',
  subjects: ['role:editor'],
  relation: 'update:todos',
  object: 'todo:*',
  condition: { expr: 'resource.owner == person.email' },
};

describe('management API rules: permit and expr conditions', () => {
  it('a permit rule with an expr condition: created, validated, live, and in the policy in force', async () => {
    const created = await server.admin('POST', '/rules', own);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ ...own, state: 'draft' });
    const id = created.body.id;
    expect(await server.admin('POST', `/rules/${id}/validate`)).toMatchObject({ status: 200, body: { valid: true, errors: [] } });
    expect((await server.admin('POST', `/rules/${id}/enable`)).body.state).toBe('live');
    const policy = (await server.admin('GET', '/policy')).body;
    expect(policy.sources.map((s: { path: string }) => s.path)).toContain(`api:rule/${id}`);
    expect((await server.admin('GET', `/rules/${id}`)).body.condition).toEqual({ expr: 'resource.owner == person.email' });
    // the old shape still works beside it
    const old = await server.admin('POST', '/rules', { ...own, name: 'big', effect: 'deny', subjects: ['agent:*'], condition: { field: 'amount', op: 'gt', value: 5 } });
    expect(old.status).toBe(201);
    expect((await server.admin('POST', `/rules/${old.body.id}/validate`)).body.valid).toBe(true);
  });

  it('an expr that does not parse or does not type is invalid, named at its column', async () => {
    const bad = await server.admin('POST', '/rules', { ...own, name: 'bad-expr', condition: { expr: 'resource.owner = = person.email' } });
    expect(bad.status).toBe(201);
    const check = await server.admin('POST', `/rules/${bad.body.id}/validate`);
    expect(check.body.valid).toBe(false);
    expect(check.body.errors[0]).toMatch(new RegExp(`^api:rule/${bad.body.id}:1:\\d+: condition\\.expr: expected `));
    const typed = await server.admin('POST', '/rules', { ...own, name: 'bad-type', condition: { expr: 'time.hour == "eight"' } });
    expect((await server.admin('POST', `/rules/${typed.body.id}/validate`)).body.errors).toEqual([`api:rule/${typed.body.id}:1:1: time.hour is a number; it cannot be compared with a string`]);
    expect((await server.admin('POST', `/rules/${typed.body.id}/enable`)).status).toBe(409);
  });

  it('names each bad member of a condition (400)', async () => {
    const both = await server.admin('POST', '/rules', { ...own, name: 'both', condition: { expr: 'a == 1', field: 'a' } });
    expect(both.status).toBe(400);
    expect(both.body.issues.map((i: { path: string }) => i.path)).toEqual(['condition.field']);
    const half = await server.admin('POST', '/rules', { ...own, name: 'half', condition: { field: 'a' } });
    expect(half.status).toBe(400);
    expect(half.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(['condition.op', 'condition.value']);
    const empty = await server.admin('POST', '/rules', { ...own, name: 'empty', condition: { expr: '' } });
    expect(empty.body.issues.map((i: { path: string }) => i.path)).toEqual(['condition.expr']);
    const effect = await server.admin('POST', '/rules', { ...own, name: 'eff', effect: 'allow' });
    expect(effect.body.issues.map((i: { path: string }) => i.path)).toEqual(['effect']);
  });

  it('the OpenAPI document names the permit effect and both condition shapes', async () => {
    const doc = await server.admin('GET', '/openapi.json');
    const text = JSON.stringify(doc.body);
    expect(text).toContain('"permit"');
    expect(text).toContain('"expr"');
  });
});
