// The AuthZEN working group's Todo interop decisions, written out from the public interop
// pages, against policies/examples/todo served as `npm start` would serve it.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';
import { pdpPost, tokenFor, type PdpResponse } from './helpers.js';
import type { TestServer } from '../helpers/server.js';

const EXAMPLE = join(import.meta.dirname, '../../policies/examples/todo');

// The interop's people: subject ids (the `sub` of their tokens), emails (todo owners), roles.
const RICK = 'CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // admin, evil_genius
const MORTY = 'CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // editor
const SUMMER = 'CiRmZDI2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // editor
const BETH = 'CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // viewer
const JERRY = 'CiRmZDQ2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs'; // viewer
const TODO = '7240d0db-8ff0-41ec-98b2-34a096273b9f';

const readUser = (who: string, user: string) => ({ subject: who, action: 'can_read_user', resource: { type: 'user', id: user } });
const readTodos = (who: string) => ({ subject: who, action: 'can_read_todos', resource: { type: 'todo', id: 'todo-1' } });
const createTodo = (who: string) => ({ subject: who, action: 'can_create_todo', resource: { type: 'todo', id: 'todo-1' } });
const onTodo = (who: string, action: string, owner: string) => ({
  subject: who,
  action,
  resource: { type: 'todo', id: TODO, properties: { ownerID: owner } },
});

/** The interop's evaluation decisions: [request, expected]. */
const DECISIONS: [{ subject: string; action: string; resource: Record<string, unknown> }, boolean][] = [
  [readUser(RICK, 'beth@the-smiths.com'), true],
  [readUser(RICK, 'rick@the-citadel.com'), true],
  [readTodos(RICK), true],
  [createTodo(RICK), true],
  [onTodo(RICK, 'can_update_todo', 'rick@the-citadel.com'), true],
  [onTodo(RICK, 'can_update_todo', 'morty@the-citadel.com'), true],
  [onTodo(RICK, 'can_delete_todo', 'rick@the-citadel.com'), true],
  [onTodo(RICK, 'can_delete_todo', 'morty@the-citadel.com'), true],

  [readUser(MORTY, 'beth@the-smiths.com'), true],
  [readUser(MORTY, 'morty@the-citadel.com'), true],
  [readTodos(MORTY), true],
  [createTodo(MORTY), true],
  [onTodo(MORTY, 'can_update_todo', 'rick@the-citadel.com'), false],
  [onTodo(MORTY, 'can_update_todo', 'morty@the-citadel.com'), true],
  [onTodo(MORTY, 'can_delete_todo', 'rick@the-citadel.com'), false],
  [onTodo(MORTY, 'can_delete_todo', 'morty@the-citadel.com'), true],

  [readUser(SUMMER, 'beth@the-smiths.com'), true],
  [readUser(SUMMER, 'summer@the-smiths.com'), true],
  [readTodos(SUMMER), true],
  [createTodo(SUMMER), true],
  [onTodo(SUMMER, 'can_update_todo', 'rick@the-citadel.com'), false],
  [onTodo(SUMMER, 'can_update_todo', 'summer@the-smiths.com'), true],
  [onTodo(SUMMER, 'can_delete_todo', 'rick@the-citadel.com'), false],
  [onTodo(SUMMER, 'can_delete_todo', 'summer@the-smiths.com'), true],

  [readUser(BETH, 'beth@the-smiths.com'), true],
  [readTodos(BETH), true],
  [createTodo(BETH), false],
  [onTodo(BETH, 'can_update_todo', 'rick@the-citadel.com'), false],
  [onTodo(BETH, 'can_update_todo', 'beth@the-smiths.com'), false],
  [onTodo(BETH, 'can_delete_todo', 'rick@the-citadel.com'), false],
  [onTodo(BETH, 'can_delete_todo', 'beth@the-smiths.com'), false],

  [readUser(JERRY, 'beth@the-smiths.com'), true],
  [readUser(JERRY, 'jerry@the-smiths.com'), true],
  [readTodos(JERRY), true],
  [createTodo(JERRY), false],
  [onTodo(JERRY, 'can_update_todo', 'rick@the-citadel.com'), false],
  [onTodo(JERRY, 'can_update_todo', 'jerry@the-smiths.com'), false],
  [onTodo(JERRY, 'can_delete_todo', 'rick@the-citadel.com'), false],
  [onTodo(JERRY, 'can_delete_todo', 'jerry@the-smiths.com'), false],
];

/** The interop's boxcarred `can_update_todo` decisions (the Todo list's "completable" marks). */
const BATCHES: [string, [string, boolean][]][] = [
  [RICK, [['rick@the-citadel.com', true], ['jerry@the-smiths.com', true]]],
  [MORTY, [['rick@the-citadel.com', false], ['morty@the-citadel.com', true]]],
  [JERRY, [['rick@the-citadel.com', false], ['jerry@the-smiths.com', false]]],
];

let server: TestServer;
let base: string;
let token: string;
const post = (path: string, body: unknown): Promise<PdpResponse> => pdpPost(base, path, body, { authorization: `Bearer ${token}` });

beforeAll(async () => {
  server = await startTestServer({
    env: { GATEHOUSE_POLICY_DIR: EXAMPLE, GATEHOUSE_PROJECT_FILE: join(EXAMPLE, 'project.json') },
  });
  base = server.ctx.urls.issuer;
  // The example's PEP application, granted as docs/authzen.md shows.
  const api = `${base}/access/v1`;
  expect((await server.admin('PUT', `/applications/todo-pep/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
  token = await tokenFor(base, { client_id: 'todo-pep', client_secret: 'todo-pep-example-secret-change-me-0123456789' }, api);
}, 30_000);
afterAll(async () => server?.stop());

describe('the Todo interop scenario', () => {
  it.each(DECISIONS.map(([r, expected], i) => [i, r.action, r.subject.slice(0, 8), r.resource, expected, r] as const))(
    '#%i %s by %s on %o: %s',
    async (_i, _a, _s, _r, expected, r) => {
      // As the working group's runner sends it (no context) and reads it (`data.decision || false`).
      const res = await post('/access/v1/evaluation', { subject: { type: 'user', id: r.subject }, action: { name: r.action }, resource: r.resource });
      expect(res.status).toBe(200);
      expect(res.body.decision || false).toBe(expected);
      expect(typeof res.body.decision).toBe('boolean');
    },
  );

  it.each(BATCHES)('boxcarred can_update_todo for %s', async (who, items) => {
    const res = await post('/access/v1/evaluations', {
      subject: { type: 'user', id: who },
      action: { name: 'can_update_todo' },
      resource: {},
      context: {},
      evaluations: items.map(([owner], i) => ({ resource: { type: 'todo', id: `${TODO}-${i}`, properties: { ownerID: owner } } })),
    });
    expect(res.status).toBe(200);
    expect(res.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual(items.map(([, d]) => d));
  });

  it('every decision in one batch, in order', async () => {
    const res = await post('/access/v1/evaluations', {
      evaluations: DECISIONS.map(([r]) => ({ subject: { type: 'user', id: r.subject }, action: { name: r.action }, resource: r.resource })),
    });
    expect(res.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual(DECISIONS.map(([, d]) => d));
  });

  it("the Todo backend's own can_read_user payload (its extra identity and userID members ignored): true for everyone", async () => {
    for (const who of [RICK, MORTY, SUMMER, BETH, JERRY]) {
      for (const user of ['beth@the-smiths.com', who]) {
        const res = await post('/access/v1/evaluation', {
          subject: { type: 'user', id: who, identity: who },
          action: { name: 'can_read_user' },
          resource: { type: 'user', id: user, userID: user },
          context: {},
        });
        expect([res.status, res.body.decision]).toEqual([200, true]);
      }
    }
  });

  it('the denials say why', async () => {
    const res = await post('/access/v1/evaluation', { subject: { type: 'user', id: BETH }, action: { name: 'can_create_todo' }, resource: { type: 'todo', id: 'todo-1' } });
    expect(res.body).toEqual({ decision: false, context: { reason: 'not_granted: can_create_todo:todos' } });
  });
});

describe('searches over the Todo scenario', () => {
  it('who may update a todo Summer owns: Rick (evil genius) and Summer', async () => {
    const res = await post('/access/v1/search/subject', {
      subject: { type: 'user' },
      action: { name: 'can_update_todo' },
      resource: { type: 'todo', id: 'todo-9', properties: { ownerID: 'summer@the-smiths.com' } },
    });
    expect(res.body).toEqual({ results: [{ type: 'user', id: RICK }, { type: 'user', id: SUMMER }] });
  });

  it('who may create todos: the editors, the admin', async () => {
    const res = await post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'can_create_todo' }, resource: { type: 'todo', id: 'todo-1' } });
    expect(res.body.results.map((r: { id: string }) => r.id)).toEqual([RICK, MORTY, SUMMER]);
  });

  it('which stored todos may Morty delete: his own', async () => {
    for (const [id, owner] of [['t-1', 'morty@the-citadel.com'], ['t-2', 'rick@the-citadel.com'], ['t-3', 'morty@the-citadel.com']]) {
      expect((await server.admin('PUT', `/entities/todo/${id}`, { attributes: { ownerID: owner } })).status).toBeLessThan(300);
    }
    const res = await post('/access/v1/search/resource', { subject: { type: 'user', id: MORTY }, action: { name: 'can_delete_todo' }, resource: { type: 'todo' } });
    expect(res.body).toEqual({ results: [{ type: 'todo', id: 't-1' }, { type: 'todo', id: 't-3' }] });
    const rick = await post('/access/v1/search/resource', { subject: { type: 'user', id: RICK }, action: { name: 'can_delete_todo' }, resource: { type: 'todo' } });
    expect(rick.body.results.map((r: { id: string }) => r.id)).toEqual(['t-1', 't-2', 't-3']);
  });

  it('what may Morty do to his own todo, and to Rick\'s', async () => {
    const own = await post('/access/v1/search/action', { subject: { type: 'user', id: MORTY }, resource: { type: 'todo', id: 't-1' } });
    expect(own.body).toEqual({ results: [{ name: 'can_create_todo' }, { name: 'can_delete_todo' }, { name: 'can_read_todos' }, { name: 'can_update_todo' }] });
    const ricks = await post('/access/v1/search/action', { subject: { type: 'user', id: MORTY }, resource: { type: 'todo', id: 't-2' } });
    expect(ricks.body).toEqual({ results: [{ name: 'can_create_todo' }, { name: 'can_read_todos' }] });
  });
});
