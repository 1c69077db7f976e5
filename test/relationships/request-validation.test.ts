import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { MODEL, rel } from './fixtures.js';

// Through HTTP, the engine's own validation of a question: a subject the model does not know is
// a 400 naming it, and list-subjects is a 400 when a condition on any path it reads cannot be
// evaluated (the engine checks these itself, so every door answers alike).

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ policies: { 'drive.policy': MODEL } });
});
afterAll(async () => {
  await server?.stop();
});

const ask = (path: string, body: Record<string, unknown>) => server.admin('POST', `/relationships/${path}`, body);

describe('questions the model cannot answer', () => {
  it('a subject of an undeclared type, or a userset of a relation its type lacks, is a 400 naming it; a declared type the relation never takes is not allowed', async () => {
    expect((await server.admin('POST', '/relationships', { writes: [rel('document:v1#viewer@user:anne')], deletes: [] })).status).toBe(200);
    for (const [subject, why] of [['spaceship:1', 'unknown type spaceship'], ['group:eng#owner', 'type group has no relation owner'], ['a:b:c', 'unknown type a']] as const) {
      const c = await ask('check', { object: 'document:v1', relation: 'viewer', subject });
      expect(c.status, JSON.stringify(c.body)).toBe(400);
      expect(c.body.error).toBe('invalid_request');
      expect(c.body.error_description).toContain(`subject ${subject}: ${why}`);
      const l = await ask('list-objects', { subject, relation: 'viewer', type: 'document' });
      expect(l.status, JSON.stringify(l.body)).toBe(400);
      expect(l.body.error_description).toContain(`subject ${subject}: ${why}`);
    }
    const folder = await ask('check', { object: 'document:v1', relation: 'viewer', subject: 'folder:x' });
    expect(folder.status).toBe(200);
    expect(folder.body).toEqual({ allowed: false, path: [] });
  });

  it('list-subjects is a 400 when a condition it reads cannot be evaluated, though check grants through another path', async () => {
    expect((await server.admin('POST', '/relationships', {
      writes: [
        rel('folder:v2#viewer@user:olga'),
        rel('folder:v2#viewer@group:v2#member', { name: 'office_hours', context: { start: 9, end: 17 } }),
        rel('group:v2#member@user:olga'),
      ],
      deletes: [],
    })).status).toBe(200);
    expect((await ask('check', { object: 'folder:v2', relation: 'viewer', subject: 'user:olga' })).body.allowed).toBe(true);
    const listed = await ask('list-subjects', { object: 'folder:v2', relation: 'viewer', subject_type: 'user' });
    expect(listed.status, JSON.stringify(listed.body)).toBe(400);
    expect(listed.body.error_description).toMatch(/hour/);
    const atTen = await ask('list-subjects', { object: 'folder:v2', relation: 'viewer', subject_type: 'user', context: { hour: 10 } });
    expect(atTen.body).toEqual({ subjects: ['user:olga'] });
  });
});
