import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatehouse, workDir } from '../cli/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bindAndDecide, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

/**
 * Names that every JavaScript object inherits (`constructor`, `toString`, `valueOf`,
 * `hasOwnProperty`) or that reach its prototype (`__proto__`), written in rules as attributes of
 * the subject, the person, the resource or the context: they are names like any other. Checked,
 * tested, validated and decided on, through the CLI and the management API; never a crash or a 500.
 */

const NAMES = ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty'];
const slug = (n: string) => n.replace(/_/g, '').toLowerCase();

/** Reads the name on every root (another relation: with facts missing, a deny rule holds, and these are for the checker). */
const everywhere = (n: string) => `subject.${n} == "x" or person.${n} == "x" or resource.${n} == "x" or ${n} == "x" or context.nested.${n} == 2`;

function policyFile(): string {
  const rules = NAMES.map(
    (n) => `rule "deny-${slug(n)}" {
  effect deny
  subjects "agent:*"
  relation "read:docs"
  object "doc:*"
  when context.${n} == "x"
}

rule "read-${slug(n)}" {
  effect deny
  subjects "agent:*"
  relation "write:docs"
  object "doc:*"
  when ${everywhere(n)}
}
`,
  );
  return `policy "names" version 1\n\n${rules.join('\n')}`;
}

function testsFile(): string {
  return NAMES.map((n) =>
    ['x', 'y']
      .map(
        (v) => `test "${n} is ${v}" {
  agent "spiffe://localhost/agent/a" autonomous
  permissions "read:docs"
  capability "read:docs"
  action "read:docs"
  resource "doc:1"
  context { ${NAMES.map((m) => `"${m}": "${m === n ? v : 'y'}"`).join(', ')} }
  expect ${v === 'x' ? `deny "rule_denied: deny-${slug(n)}"` : 'allow'}
}
`,
      )
      .join('\n'),
  ).join('\n');
}

describe('names an object inherits, in rules', () => {
  it('policy check and policy test through the CLI', { timeout: 120_000 }, async () => {
    const dir = await workDir({ 'policies/names.policy': policyFile(), 'policies/names.tests': testsFile() });
    try {
      const check = await gatehouse(['policy', 'check', 'policies'], dir);
      // The bare names are context fields read once and declared by no schema: warnings, never a crash.
      expect(check.stderr.split('\n').filter((l) => /: (warning|error): /.test(l) && !/is read only here and no schema declares it/.test(l))).toEqual([]);
      expect([check.code, check.stdout]).toEqual([0, expect.stringMatching(/^ok: 2 files, 10 rules, 10 tests/)]);
      const test = await gatehouse(['policy', 'test', 'policies'], dir);
      expect(test.stderr).toBe('');
      expect(test.code).toBe(0);
      expect(test.stdout).toMatch(/10 passed, 0 failed/);
      // A condition comparing one of them with two types is an error named at its place, not a crash.
      const bad = await workDir({ 'policies/bad.policy': `policy "bad" version 1\nrule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "read:docs"\n  object "doc:*"\n  when subject.constructor == "x" or subject.constructor > 2\n}\n` });
      try {
        const badCheck = await gatehouse(['policy', 'check', 'policies'], bad);
        expect(badCheck.code).toBe(1);
        expect(badCheck.stdout + badCheck.stderr).toMatch(/subject\.constructor is compared with a string and with a number/);
      } finally {
        await rm(bad, { recursive: true, force: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe('through the management API', () => {
    let server: TestServer;
    let agent: TestAgent;
    let token: string;
    beforeAll(async () => {
      server = await startTestServer();
      await putRole(server, 'reader', ['read:docs']);
      agent = await registerAgent(server, { name: 'names-agent', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
      token = await accessTokenFor(server, agent);
    });
    afterAll(async () => {
      await server?.stop();
    });

    it.each(NAMES)('%s: a rule reading it validates, goes live and decides on the value the request carries', async (n) => {
      const reads = await server.admin('POST', '/rules', { name: `reads-${slug(n)}`, effect: 'deny', subjects: ['agent:*'], relation: 'write:docs', object: 'doc:*', condition: { expr: everywhere(n) } });
      expect(reads.status).toBe(201);
      const checked = await server.admin('POST', `/rules/${reads.body.id}/validate`);
      expect([checked.status, checked.body.valid, checked.body.errors]).toEqual([200, true, []]);

      const mixed = await server.admin('POST', '/rules', { name: `mixed-${slug(n)}`, effect: 'deny', subjects: ['agent:*'], relation: 'write:docs', object: 'doc:*', condition: { expr: `person.${n} == "x" or person.${n} > 1` } });
      const refused = await server.admin('POST', `/rules/${mixed.body.id}/validate`);
      expect([refused.status, refused.body.valid]).toEqual([200, false]);
      expect(refused.body.errors[0]).toMatch(new RegExp(`person\\.${n} is compared with a string and with a number`));

      const deny = await server.admin('POST', '/rules', { name: `deny-${slug(n)}`, effect: 'deny', subjects: ['agent:*'], relation: 'read:docs', object: 'doc:*', condition: { field: n, op: 'eq', value: 'x' } });
      expect(deny.status).toBe(201);
      expect((await server.admin('POST', `/rules/${deny.body.id}/validate`)).body).toMatchObject({ valid: true });
      expect((await server.admin('POST', `/rules/${deny.body.id}/enable`)).status).toBe(200);

      // The context names every one of them (a deny rule also holds when its field is missing).
      const context = (v: string) => JSON.parse(`{${NAMES.map((m) => `"${m}": "${m === n ? v : 'y'}"`).join(', ')}}`) as Record<string, unknown>;
      const denied = await bindAndDecide(server, agent, token, 'read:docs', `doc:${slug(n)}`, context('x'));
      expect(denied.decision).toMatchObject({ decision: 'deny', reason: `rule_denied: deny-${slug(n)}` });
      const allowed = await bindAndDecide(server, agent, token, 'read:docs', `doc:${slug(n)}`, context('y'));
      expect(allowed.decision).toMatchObject({ decision: 'allow' });
      expect(({} as Record<string, unknown>).x, 'no prototype was touched').toBeUndefined();
      expect((await server.admin('DELETE', `/rules/${deny.body.id}`)).status).toBeLessThan(300);
    });
  });
});
