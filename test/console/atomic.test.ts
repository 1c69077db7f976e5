import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, verifyAuditTrail, type TestServer } from '../helpers/server.js';
import { accessTokenFor, bindAndDecide, createRule, newKeyPair, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import type { Browser } from '../oauth/helpers.js';
import { consoleSignIn, csrfOf, makePerson } from './helpers.js';

/**
 * Every kind of console write, twice: once while the database refuses the console's audit
 * records (a trigger on the audit table, so the refusal comes from the database itself, in
 * the write's own transaction), and once when it accepts them. Refused, nothing of the change
 * may remain and the page says why; accepted, the change and its record are both there.
 */

const REFUSED = 'could not be written to the audit trail, so it was not made';

async function refuseConsoleRecords(server: TestServer, on: boolean): Promise<void> {
  const sql = server.ctx.store.sql;
  if (sql.dialect === 'sqlite') {
    await sql.exec(
      on
        ? `CREATE TRIGGER refuse_console_records BEFORE INSERT ON audit_log WHEN NEW.action LIKE 'console.%' BEGIN SELECT RAISE(ABORT, 'console records refused'); END`
        : 'DROP TRIGGER refuse_console_records',
    );
  } else {
    await sql.exec(
      on
        ? `CREATE OR REPLACE FUNCTION refuse_console_records() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'console records refused'; END $$ LANGUAGE plpgsql;
           CREATE TRIGGER refuse_console_records BEFORE INSERT ON audit_log FOR EACH ROW WHEN (NEW.action LIKE 'console.%') EXECUTE FUNCTION refuse_console_records()`
        : 'DROP TRIGGER refuse_console_records ON audit_log',
    );
  }
}

interface Write {
  /** the record's action, without `console.` */
  action: string;
  path: string;
  fields: Record<string, string>;
  /** whether the change is in the database */
  landed: () => Promise<boolean>;
  /** the answer when accepted (a 303 to the next page, or a page that shows a secret once) */
  accepted?: number;
}

describe('a console write and its audit record', () => {
  let server: TestServer;
  let browser: Browser;
  let csrf: string;
  let admin: { id: string };
  let agent: TestAgent;
  let token: string;
  const store = () => server.ctx.store;

  beforeAll(async () => {
    server = await startTestServer({ policies: { 'a.policy': 'policy "a" version 1\n' } });
    const person = await makePerson(server, 'ada@example.com', ['admin']);
    admin = person;
    ({ browser } = await consoleSignIn(server, person.email, person.password));
    csrf = csrfOf(await (await browser.get('/console')).text());
    await putRole(server, 'refunder', ['create:refunds']);
    agent = await registerAgent(server, { name: 'refund-bot', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds' }] });
    token = await accessTokenFor(server, agent);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const records = async (action: string) =>
    (await server.admin('GET', '/audit?kind=admin&limit=200')).body.data.filter((r: { action: string; actor: string }) => r.action === `console.${action}` && r.actor === admin.id);

  /** The write refused (nothing changed, a page that says so), then accepted (change and record together). */
  async function both(w: Write): Promise<void> {
    const before = (await records(w.action)).length;
    const landedBefore = await w.landed();
    await refuseConsoleRecords(server, true);
    let refused: Response;
    try {
      refused = await browser.post(w.path, { csrf, ...w.fields });
    } finally {
      await refuseConsoleRecords(server, false);
    }
    const html = await refused.text();
    expect(refused.status, w.action).toBe(503);
    expect(html, w.action).toContain(REFUSED);
    expect(html, w.action).not.toMatch(/\bat [\w.<>]+ \(|Error:/);
    expect(await w.landed(), `${w.action} refused`).toBe(landedBefore);
    expect((await records(w.action)).length, w.action).toBe(before);

    const ok = await browser.post(w.path, { csrf, ...w.fields });
    expect(ok.status, `${w.action}: ${ok.status === 200 || ok.status >= 400 ? await ok.text() : ''}`).toBe(w.accepted ?? 303);
    expect(await w.landed(), `${w.action} accepted`).toBe(!landedBefore);
    expect((await records(w.action)).length, w.action).toBe(before + 1);
  }

  it('applications: create, edit, rotate the secret, assign, unassign, delete', async () => {
    const app = async (name: string) => (await store().applications.list()).find((a) => a.name === name);
    await both({ action: 'applications.create', path: '/console/applications', fields: { name: 'shop', type: 'spa', redirect_uris: 'https://shop.example/cb', first_party: 'on' }, landed: async () => !!(await app('shop')) });
    const shop = (await app('shop'))!;
    const base = `/console/applications/${shop.client_id}`;
    await both({ action: 'applications.update', path: base, fields: { name: 'shop two', redirect_uris: 'https://shop.example/cb' }, landed: async () => !!(await app('shop two')) });
    const m2m = await server.admin('POST', '/applications', { name: 'batch', type: 'm2m' });
    const hash = async () => (await server.ctx.store.sql.get<{ secret_hash: string }>('SELECT secret_hash FROM applications WHERE client_id = ?', [m2m.body.client_id]))!.secret_hash;
    const first = await hash();
    await both({ action: 'applications.rotate_secret', path: `/console/applications/${m2m.body.client_id}/rotate-secret`, fields: {}, landed: async () => (await hash()) !== first, accepted: 200 });
    const bob = await makePerson(server, 'bob@example.com', []);
    const assigned = async () => (await store().applications.listAssignments(shop.client_id)).includes(bob.id);
    await both({ action: 'applications.assign', path: `${base}/assign`, fields: { person: bob.email }, landed: assigned });
    await both({ action: 'applications.unassign', path: `${base}/unassign`, fields: { user_id: bob.id }, landed: async () => !(await assigned()) });
    await both({ action: 'applications.delete', path: `${base}/delete`, fields: { confirm: 'yes' }, landed: async () => !(await store().applications.get(shop.client_id)) });
  });

  it('people: create, edit, password, compromised, sessions, application assignments, delete', async () => {
    await both({ action: 'people.create', path: '/console/people', fields: { email: 'cy@example.com', name: 'Cy', password: 'a long enough password' }, landed: async () => !!(await store().users.getByEmail('cy@example.com')) });
    const cy = (await store().users.getByEmail('cy@example.com'))!;
    const base = `/console/people/${cy.id}`;
    await both({ action: 'people.update', path: base, fields: { email: 'cy@example.com', name: 'Cy', groups: 'finance' }, landed: async () => (await store().users.get(cy.id))!.groups.includes('finance') });
    const pwHash = async () => (await server.ctx.store.sql.get<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = ?', [cy.id]))!.password_hash;
    const firstHash = await pwHash();
    await both({ action: 'people.set_password', path: `${base}/password`, fields: { password: 'another long password' }, landed: async () => (await pwHash()) !== firstHash });
    await both({ action: 'people.credential_compromise', path: `${base}/compromised`, fields: {}, landed: async () => (await store().users.get(cy.id))!.password_compromised });
    // A Gatehouse session of Cy's (the console refuses Cy, but the sign-in happened).
    await server.admin('PATCH', `/users/${cy.id}`, { password: 'a third long password' });
    await consoleSignIn(server, 'cy@example.com', 'a third long password');
    const live = async () => (await store().sessions.activeForUser(cy.id)).filter((s) => s.ended_at === null).length;
    expect(await live()).toBe(1);
    await both({ action: 'people.revoke_sessions', path: `${base}/revoke-sessions`, fields: {}, landed: async () => (await live()) === 0 });
    const web = await server.admin('POST', '/applications', { name: 'portal', type: 'web', redirect_uris: ['https://portal.example/cb'] });
    const assigned = async () => (await store().applications.listAssignments(web.body.client_id)).includes(cy.id);
    await both({ action: 'applications.assign', path: `${base}/assign`, fields: { client_id: web.body.client_id }, landed: assigned });
    await both({ action: 'applications.unassign', path: `${base}/unassign`, fields: { client_id: web.body.client_id }, landed: async () => !(await assigned()) });
    await both({ action: 'people.delete', path: `${base}/delete`, fields: { confirm: 'yes' }, landed: async () => !(await store().users.get(cy.id)) });
  });

  it('roles: create, save, delete; a refused role change leaves decisions as they were', async () => {
    const ask = async () => (await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-1', { amount: 5 })).decision?.decision;
    expect(await ask()).toBe('allow');
    await both({ action: 'roles.create', path: '/console/roles', fields: { name: 'reader', permissions: 'read:things' }, landed: async () => !!(await store().roles.get('reader')) });
    // Taking the permission from the agent's role: refused, the next decision still allows; accepted, it denies.
    const held = async () => (await store().roles.get('refunder'))!.permissions.includes('create:refunds');
    await refuseConsoleRecords(server, true);
    const refused = await browser.post('/console/roles/save', { csrf, name: 'refunder', permissions: 'read:refunds' });
    await refuseConsoleRecords(server, false);
    expect(refused.status).toBe(503);
    expect(await ask()).toBe('allow');
    await both({ action: 'roles.update', path: '/console/roles/save', fields: { name: 'refunder', permissions: 'read:refunds' }, landed: async () => !(await held()) });
    expect(await ask()).toBe('deny');
    await both({ action: 'roles.delete', path: '/console/roles/delete', fields: { name: 'reader', confirm: 'yes' }, landed: async () => !(await store().roles.get('reader')) });
    await putRole(server, 'refunder', ['create:refunds']);
  });

  it('agents: register, edit, replace the key, add and remove a capability, revoke, delete', async () => {
    const { publicJwk } = await newKeyPair();
    const agents = async () => (await store().agents.list()).filter((a) => a.name === 'helper');
    await both({ action: 'agents.create', path: '/console/agents', fields: { name: 'helper', mode: 'autonomous', public_jwk: JSON.stringify(publicJwk) }, landed: async () => (await agents()).length === 1 });
    const id = (await agents())[0]!.agent_id;
    const base = `/console/agents/${encodeURIComponent(id)}`;
    const get = async () => (await store().agents.get(id))!;
    await both({ action: 'agents.update', path: base, fields: { name: 'helper', mode: 'autonomous', roles: 'refunder' }, landed: async () => (await get()).roles.includes('refunder') });
    const other = await newKeyPair();
    await both({ action: 'agents.rotate_key', path: `${base}/key`, fields: { public_jwk: JSON.stringify(other.publicJwk) }, landed: async () => (await get()).public_jwk.x === other.publicJwk.x });
    const holds = async () => (await get()).capabilities.some((c) => c.name === 'read:invoices');
    await both({ action: 'agents.add_capability', path: `${base}/capabilities`, fields: { capability: 'read:invoices', limits: '' }, landed: holds });
    const limited = async () => JSON.stringify((await get()).capabilities.find((c) => c.name === 'read:invoices')?.limits ?? {}).includes('"max":3');
    await both({ action: 'agents.update_capability', path: `${base}/capabilities`, fields: { capability: 'read:invoices', limits: '{"count": [{"max": 3, "per": "1h"}]}' }, landed: limited });
    await both({ action: 'agents.remove_capability', path: `${base}/capabilities/remove`, fields: { capability: 'read:invoices' }, landed: async () => !(await holds()) });
    await both({ action: 'agents.revoke', path: `${base}/revoke`, fields: { confirm: 'yes' }, landed: async () => (await get()).revoked });
    await both({ action: 'agents.delete', path: `${base}/delete`, fields: { confirm: 'yes' }, landed: async () => !(await store().agents.get(id)) });
  });

  it('rules: save (validated in the same transaction), edit, enable, disable, delete', async () => {
    const rule = { effect: 'deny', subjects: 'agent:*', relation: 'create:refunds', object: 'refund:*', cond_field: 'amount', cond_op: 'gt', cond_value: '1000', cond_type: 'number' };
    const byName = (name: string) => store().rules.getByName(name);
    await both({ action: 'rules.create', path: '/console/rules/new', fields: { name: 'no-large-refunds', ...rule }, landed: async () => !!(await byName('no-large-refunds')) });
    const created = (await byName('no-large-refunds'))!;
    expect(created.validated_hash).not.toBeNull();
    expect((await records('rules.create')).at(0)?.context).toMatchObject({ name: 'no-large-refunds', valid: true });
    const base = `/console/rules/${created.id}`;
    await both({ action: 'rules.update', path: base, fields: { name: 'no-larger-refunds', ...rule }, landed: async () => !!(await byName('no-larger-refunds')) });
    const state = async () => (await store().rules.get(created.id))!.state;
    const ask = async () => (await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-2', { amount: 5000 })).decision?.decision;
    expect(await ask()).toBe('allow');
    // Enable follows the Impact step for this content.
    const impact = await browser.post(`${base}/impact`, { csrf });
    expect(impact.status).toBe(200);
    expect(await impact.text()).toContain('rule-impact');
    await both({ action: 'rules.enable', path: `${base}/enable`, fields: {}, landed: async () => (await state()) === 'live' });
    expect(await ask()).toBe('deny');
    await both({ action: 'rules.disable', path: `${base}/disable`, fields: {}, landed: async () => (await state()) === 'disabled' });
    expect(await ask()).toBe('allow');
    await both({ action: 'rules.delete', path: `${base}/delete`, fields: { confirm: 'yes' }, landed: async () => !(await store().rules.get(created.id)) });
  });

  it('approvals, streams, keys and the policy reload', async () => {
    const ruleId = await createRule(server, { name: 'approve-refunds', effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*' });
    const asked = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-3', { amount: 10 });
    const approvalId = asked.decision!.approval_id!;
    const answered = async () => (await store().agentAuth.get(approvalId))!.state === 'approved';
    await both({ action: 'approvals.approve', path: '/console/approvals/answer', fields: { id: approvalId, decision: 'approve' }, landed: answered });
    await server.admin('DELETE', `/rules/${ruleId}`);

    const stream = async () => (await store().ssf.listStreams()).find((s) => s.endpoint_url === 'https://receiver.example/events');
    await both({ action: 'streams.create', path: '/console/streams', fields: { endpoint_url: 'https://receiver.example/events', format: 'iss_sub', events: 'https://schemas.openid.net/secevent/caep/event-type/session-revoked' }, landed: async () => !!(await stream()) });
    const streamId = (await stream())!.stream_id;
    await both({ action: 'streams.delete', path: '/console/streams/delete', fields: { stream_id: streamId, confirm: 'yes' }, landed: async () => !(await stream()) });

    const kids = async () => (await store().keys.active()).map((k) => k.kid).sort().join(' ');
    const keysBefore = await kids();
    await both({ action: 'keys.rotate', path: '/console/keys/rotate', fields: { alg: 'EdDSA' }, landed: async () => (await kids()) !== keysBefore });

    writeFileSync(join(server.policyDir, 'a.policy'), 'policy "a" version 2\n');
    const version = async () => (await server.admin('GET', '/policy')).body.version as string;
    const versionBefore = await version();
    await both({ action: 'policy.reload', path: '/console/policy/reload', fields: {}, landed: async () => (await version()) !== versionBefore });
  });

  it('leaves an audit trail whose chain still verifies after the refused records', async () => {
    const { code, stdout } = await verifyAuditTrail(server);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ok: \d+ records\n$/);
  });
});
