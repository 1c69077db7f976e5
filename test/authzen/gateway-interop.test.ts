// The AuthZEN working group's API gateway interop scenario: its 25 evaluation decisions
// (subjects of type `identity`, HTTP methods as actions, route templates as resources), as its
// gateway test harness expects them, against policies/examples/authzen-gateway served as
// `npm start` would serve it.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';
import { pdpPost, tokenFor, type PdpResponse } from './helpers.js';
import type { TestServer } from '../helpers/server.js';

const EXAMPLE = join(import.meta.dirname, '../../policies/examples/authzen-gateway');

// The interop's identities (the `sub` of their tokens) and their roles in the scenario.
const RICK = 'CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // admin
const MORTY = 'CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // editor
const SUMMER = 'CiRmZDI2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // editor
const BETH = 'CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // viewer
const JERRY = 'CiRmZDQ2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // viewer

/** The five route checks the harness makes per identity, in its order. */
const ROUTES: [method: string, route: string][] = [
  ['GET', '/users/{userId}'],
  ['GET', '/todos'],
  ['POST', '/todos'],
  ['PUT', '/todos/{todoId}'],
  ['DELETE', '/todos/{todoId}'],
];

/** The interop's expected answers, identity by identity, in ROUTES order. */
const EXPECTED: [string, boolean[]][] = [
  [RICK, [true, true, true, true, true]],
  [MORTY, [true, true, true, true, true]],
  [SUMMER, [true, true, true, true, true]],
  [BETH, [true, true, false, false, false]],
  [JERRY, [true, true, false, false, false]],
];

const DECISIONS = EXPECTED.flatMap(([id, answers]) =>
  ROUTES.map(([method, route], i) => ({
    request: { subject: { type: 'identity', id }, action: { name: method }, resource: { type: 'route', id: route } },
    expected: answers[i]!,
  })),
);

let server: TestServer;
let base: string;
let token: string;
const post = (path: string, body: unknown): Promise<PdpResponse> => pdpPost(base, path, body, { authorization: `Bearer ${token}` });

beforeAll(async () => {
  server = await startTestServer({
    env: { GATEHOUSE_POLICY_DIR: EXAMPLE, GATEHOUSE_PROJECT_FILE: join(EXAMPLE, 'project.json') },
  });
  base = server.ctx.urls.issuer;
  const api = `${base}/access/v1`;
  expect((await server.admin('PUT', `/applications/gateway-pep/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
  token = await tokenFor(base, { client_id: 'gateway-pep', client_secret: 'gateway-pep-example-secret-change-me-0123456789' }, api);
}, 30_000);
afterAll(async () => server?.stop());

describe('the API gateway interop scenario', () => {
  it('holds 25 decisions', () => expect(DECISIONS.length).toBe(25));

  it.each(DECISIONS.map((d, i) => [i, d.request.action.name, d.request.resource.id, d.request.subject.id.slice(0, 8), d.expected, d] as const))(
    '#%i %s %s by %s: %s',
    async (_i, _m, _r, _s, expected, d) => {
      const res = await post('/access/v1/evaluation', d.request);
      expect(res.status).toBe(200);
      expect(typeof res.body.decision).toBe('boolean');
      expect(res.body.decision).toBe(expected);
    },
  );

  it('every decision in one batch, in order', async () => {
    const res = await post('/access/v1/evaluations', { evaluations: DECISIONS.map((d) => d.request) });
    expect(res.status).toBe(200);
    expect(res.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual(DECISIONS.map((d) => d.expected));
  });

  it('records an identity as the subject of its decisions', async () => {
    const audit = await server.admin('GET', '/audit?limit=200');
    const mine = audit.body.data.filter((r: { agent_id: string | null }) => r.agent_id === `identity:${BETH}`);
    expect(mine.some((r: { resource: string; decision: string }) => r.resource === 'route:/todos' && r.decision === 'deny')).toBe(true);
  });

  it('answers a subject search from the relationships: who may POST to /todos', async () => {
    const res = await post('/access/v1/search/subject', { subject: { type: 'identity' }, action: { name: 'POST' }, resource: { type: 'route', id: '/todos' } });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([RICK, MORTY, SUMMER].sort().map((id) => ({ type: 'identity', id })));
  });

  it('answers a resource search from the relationships: the routes a viewer may GET', async () => {
    const res = await post('/access/v1/search/resource', { subject: { type: 'identity', id: BETH }, action: { name: 'GET' }, resource: { type: 'route' } });
    expect(res.body.results).toEqual([{ type: 'route', id: '/todos' }, { type: 'route', id: '/users/{userId}' }]);
  });

  it("the example's deny rule: a suspended identity may use no route, whatever its memberships give it", async () => {
    const ask = () => post('/access/v1/evaluation', { subject: { type: 'identity', id: 'sam' }, action: { name: 'POST' }, resource: { type: 'route', id: '/todos' } });
    expect((await server.admin('POST', '/relationships', { writes: [{ object: 'role:editor', relation: 'member', subject: 'identity:sam' }] })).status).toBe(200);
    expect((await ask()).body.decision).toBe(true);
    expect((await server.admin('PUT', '/entities/identity/sam', { attributes: { roles: ['suspended'] } })).status).toBeLessThan(300);
    expect((await ask()).body).toEqual({ decision: false, context: { reason: 'rule_denied: suspended-identities-use-no-route' } });
    const search = await post('/access/v1/search/subject', { subject: { type: 'identity' }, action: { name: 'POST' }, resource: { type: 'route', id: '/todos' } });
    expect(search.body.results.map((r: { id: string }) => r.id)).not.toContain('sam');
  });

  it('an identity with attributes stored as an entity reads its roles from them', async () => {
    // Beyond the scenario: an identity stored as an entity with roles gets those roles' permissions.
    expect((await server.admin('POST', '/roles', { name: 'auditor', permissions: ['PUT:routes'] })).status).toBeLessThan(300);
    expect((await server.admin('PUT', '/entities/identity/ivy', { attributes: { roles: ['auditor'] } })).status).toBeLessThan(300);
    const put = await post('/access/v1/evaluation', { subject: { type: 'identity', id: 'ivy' }, action: { name: 'PUT' }, resource: { type: 'route', id: '/todos/{todoId}' } });
    expect(put.body.decision).toBe(true);
    const del = await post('/access/v1/evaluation', { subject: { type: 'identity', id: 'ivy' }, action: { name: 'DELETE' }, resource: { type: 'route', id: '/todos/{todoId}' } });
    expect(del.body.decision).toBe(false);
    // A subject search finds her through her stored roles, beside the members the relationships give (not sam: suspended).
    const search = await post('/access/v1/search/subject', { subject: { type: 'identity' }, action: { name: 'PUT' }, resource: { type: 'route', id: '/todos/{todoId}' } });
    expect(search.body.results.map((r: { id: string }) => r.id)).toEqual([RICK, MORTY, SUMMER, 'ivy'].sort());
  });
});
