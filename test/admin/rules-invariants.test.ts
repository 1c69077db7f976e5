// A rule that would break an invariant of the policy files is refused at validate and at enable,
// through the management API and the console alike (both go through the same check).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({
    policies: {
      'refunds.policy': `policy "refunds" version 1

invariant "small refunds never wait" {
  never approval_required "create:refunds" on "refund:*" when amount <= 100
}
`,
    },
  });
});
afterAll(async () => server.stop());

const rule = (value: number) => ({
  name: `wait-above-${value}`, effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*',
  condition: { field: 'amount', op: 'gt', value },
});

describe('rules and invariants', () => {
  it('a rule that keeps the invariant goes live; one that breaks it validates as invalid and cannot be enabled', async () => {
    const good = await server.admin('POST', '/rules', rule(100));
    expect(await server.admin('POST', `/rules/${good.body.id}/validate`)).toMatchObject({ status: 200, body: { valid: true } });
    expect((await server.admin('POST', `/rules/${good.body.id}/enable`)).body.state).toBe('live');

    const bad = await server.admin('POST', '/rules', rule(10));
    const check = await server.admin('POST', `/rules/${bad.body.id}/validate`);
    expect(check.body.valid).toBe(false);
    expect(check.body.errors.join('\n')).toMatch(/invariant "small refunds never wait" does not hold/);
    const enable = await server.admin('POST', `/rules/${bad.body.id}/enable`);
    expect(enable.status).toBe(409);
    expect((await server.admin('GET', `/rules/${bad.body.id}`)).body.state).not.toBe('live');
  }, 60_000);
});
