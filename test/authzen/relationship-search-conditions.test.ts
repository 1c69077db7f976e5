import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthzen, type AuthzenFixture } from './helpers.js';

// A search answers what evaluations would allow. A relationship whose condition the request's
// context cannot evaluate denies the evaluations that need it, and nothing else: the other
// objects and subjects the relationships grant are still listed, as their evaluations allow them.

const MODEL = `policy "hours" version 1

type user

type document {
  relation editor: [user with office_hours]
  relation viewer: [user, user:*] or editor
}

condition office_hours(hour: int, start: int, end: int) {
  hour >= start and hour < end
}
`;

let f: AuthzenFixture;

const rel = (object: string, relation: string, subject: string, condition?: { name: string; context: Record<string, unknown> }) => ({ object, relation, subject, ...(condition ? { condition } : {}) });
const hours = { name: 'office_hours', context: { start: 9, end: 17 } };

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'hours.policy': MODEL } });
  const w = await f.server.admin('POST', '/relationships', {
    writes: [
      rel('document:plans', 'editor', 'user:carl', hours),
      rel('document:plans', 'viewer', 'user:dana'),
      rel('document:public', 'viewer', 'user:*'),
      rel('document:notes', 'viewer', 'user:carl'),
    ],
  });
  expect(w.status, JSON.stringify(w.body)).toBe(200);
});
afterAll(async () => {
  await f?.server.stop();
});

const evaluate = async (user: string, id: string, context?: Record<string, unknown>) => {
  const r = await f.post('/access/v1/evaluation', { subject: { type: 'user', id: user }, action: { name: 'viewer' }, resource: { type: 'document', id }, ...(context ? { context } : {}) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.decision as boolean;
};

describe('searches beside a condition the context cannot evaluate', () => {
  it('lists the resources the evaluations allow, without the one whose condition lacks its parameter', async () => {
    // The management API's listing is the error (its parameter named); the evaluations are not.
    const listing = await f.server.admin('POST', '/relationships/list-objects', { subject: 'user:carl', relation: 'viewer', type: 'document' });
    expect(listing.status).toBe(400);
    expect(listing.body.error_description).toContain('hour');
    expect(await evaluate('carl', 'plans')).toBe(false);
    expect(await evaluate('carl', 'notes')).toBe(true);
    expect(await evaluate('carl', 'public')).toBe(true);
    const r = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'carl' }, action: { name: 'viewer' }, resource: { type: 'document' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.results).toEqual([{ type: 'document', id: 'notes' }, { type: 'document', id: 'public' }]);
    // With the parameter, the conditional grant is listed too.
    const within = await f.post('/access/v1/search/resource', { subject: { type: 'user', id: 'carl' }, action: { name: 'viewer' }, resource: { type: 'document' }, context: { hour: 10 } });
    expect(within.body.results.map((x: { id: string }) => x.id)).toEqual(['notes', 'plans', 'public']);
  });

  it('lists the subjects the evaluations allow, without the one whose condition lacks its parameter', async () => {
    const listing = await f.server.admin('POST', '/relationships/list-subjects', { object: 'document:plans', relation: 'viewer', subject_type: 'user' });
    expect(listing.status).toBe(400);
    expect(await evaluate('dana', 'plans')).toBe(true);
    const r = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'plans' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.results).toEqual([{ type: 'user', id: 'dana' }]);
    const within = await f.post('/access/v1/search/subject', { subject: { type: 'user' }, action: { name: 'viewer' }, resource: { type: 'document', id: 'plans' }, context: { hour: 10 } });
    expect(within.body.results).toEqual([{ type: 'user', id: 'carl' }, { type: 'user', id: 'dana' }]);
  });
});
