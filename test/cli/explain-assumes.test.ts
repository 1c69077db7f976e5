// `policy explain` assumes nothing the server would not: permissions are only those given (for
// the agent and the person it acts for), each thing filled in is named with how to state it,
// and an action or resource of the wrong shape is a usage error, not a decision.
import { describe, expect, it } from 'vitest';
import { gatehouse, workDir } from './helpers.js';

const PERMIT_ONLY = `policy "support" version 1

rule "support-reads-customers" {
  effect permit
  subjects "role:support"
  relation "read:customers"
  object "customer:*"
}
`;

const request = (person: Record<string, unknown>) => JSON.stringify({
  subject: { type: 'agent', id: 'spiffe://h/agent/helpdesk', roles: ['support'] },
  person, action: 'read:customers', resource: 'customer:c1',
});

describe('policy explain assumes nothing the server would not', () => {
  it('a permit-only set: a person it does not cover is denied, and the output says what was assumed', async () => {
    const dir = await workDir({ 'p/support.policy': PERMIT_ONLY });
    const [uncovered, covered, asJson] = await Promise.all([
      gatehouse(['policy', 'explain', 'p', '--request', request({ id: 'alice' })], dir),
      gatehouse(['policy', 'explain', 'p', '--request', request({ id: 'bob', roles: ['support'] })], dir),
      gatehouse(['policy', 'explain', 'p', '--json', '--request', request({ id: 'alice' })], dir),
    ]);
    expect(uncovered.code, uncovered.stderr).toBe(3);
    expect(uncovered.stdout).toContain('reason: not_granted: read:customers (person)');
    expect(uncovered.stdout).toMatch(/^assuming: .*person alice holds no permissions \(none given: state them as "permissions" of the person, or --person-permissions\)/m);
    expect(covered.code, covered.stdout).toBe(0);
    expect(JSON.parse(asJson.stdout).request.person.permissions).toEqual([]);
    expect(JSON.parse(asJson.stdout).assumed).toContain('agent spiffe://h/agent/helpdesk holds no permissions (none given: state them as "permissions" of the subject, or --permissions)');
  });

  it('the flags: no permission unless given; --person-permissions gives the person\'s', async () => {
    const dir = await workDir({ 'p/support.policy': PERMIT_ONLY.replace('"role:support"', '"role:support", "agent:*"') });
    const base = ['policy', 'explain', 'p', '--agent', 'a', '--action', 'read:customers', '--resource', 'customer:c1', '--person', 'alice'];
    const [none, given] = await Promise.all([
      gatehouse(base, dir),
      gatehouse([...base, '--person-permissions', 'read:customers'], dir),
    ]);
    expect(none.code).toBe(3);
    expect(none.stdout).toContain('(person)');
    expect(given.code, given.stdout).toBe(0);
    const lone = await gatehouse(['policy', 'explain', 'p', '--agent', 'a', '--action', 'read:customers', '--resource', 'customer:c1', '--person-permissions', 'x'], dir);
    expect([lone.code, lone.stderr]).toEqual([2, "gatehouse policy explain: --person-permissions needs --person (see 'gatehouse policy explain --help')\n"]);
  });

  it('an action not <verb>:<kind> or a resource not <kind>:<id>: exit 2 with a message', async () => {
    const dir = await workDir({ 'p/support.policy': PERMIT_ONLY });
    const cases: [string, string, RegExp][] = [
      ['read', 'customer:c1', /the action "read" is not <verb>:<kind>/],
      ['read:customers:x', 'customer:c1', /is not <verb>:<kind>/],
      ['read:*', 'customer:c1', /is not <verb>:<kind>/],
      ['read:customers', 'c1', /the resource "c1" is not <kind>:<id>/],
      ['read:customers', 'customer:', /is not <kind>:<id>/],
      ['read:customers', 'customer:*', /is not <kind>:<id>/],
    ];
    const runs = await Promise.all(cases.map(([action, resource]) => gatehouse(['policy', 'explain', 'p', '--agent', 'a', '--action', action, '--resource', resource], dir)));
    runs.forEach((r, i) => {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(cases[i]![2]);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    });
  });
});
