import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putUser, startAuthzen, type AuthzenFixture } from '../authzen/helpers.js';
import { MODEL, rel } from './fixtures.js';

// The AuthZEN evaluation is the same decision pipeline: a stored person holding a relation is
// granted its action (`viewer` on a `document`), and the record says through which.

let f: AuthzenFixture;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'drive.policy': MODEL } });
  await putUser(f.server, { id: 'u-anne', email: 'anne@example.com' });
  await putUser(f.server, { id: 'u-bob', email: 'bob@example.com' });
  const w = await f.server.admin('POST', '/relationships', {
    writes: [rel('group:eng#member@user:u-anne'), rel('folder:root#viewer@group:eng#member'), rel('document:1#parent@folder:root')],
  });
  expect(w.status).toBe(200);
});
afterAll(async () => {
  await f?.server.stop();
});

const evaluate = (user: string, id: string) =>
  f.post('/access/v1/evaluation', { subject: { type: 'user', id: user }, action: { name: 'viewer' }, resource: { type: 'document', id } });

describe('AuthZEN evaluation through relations', () => {
  it('grants a person the relation they hold, and only that', async () => {
    const yes = await evaluate('u-anne', '1');
    expect(yes.status, JSON.stringify(yes.body)).toBe(200);
    expect(yes.body.decision).toBe(true);
    expect((await evaluate('u-bob', '1')).body.decision).toBe(false);
    expect((await evaluate('u-anne', '2')).body.decision).toBe(false);
    const audit = await f.server.admin('GET', '/audit?user_id=u-anne&limit=5');
    const allowed = audit.body.data.find((r: { decision: string; resource: string }) => r.decision === 'allow' && r.resource === 'document:1');
    expect(allowed.reason).toContain('granted through relations: user:u-anne holds relation viewer on document:1 (document:1#parent@folder:root, folder:root#viewer@group:eng#member, group:eng#member@user:u-anne)');
  });
});
