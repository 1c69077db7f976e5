// Action search where a wildcard grants the action: `*:documents`, `*:*` and permit rules on
// `*:<kinds>` allow every action on a kind, and the search lists the concrete action names
// Gatehouse knows (rules, limits blocks, roles' permissions, agents' capabilities), each
// decided as an evaluation would decide it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putRole, registerAgent } from '../agents/helpers.js';
import { putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

const POLICY = `
policy "office" version 1

rule "approvers-approve-invoices" {
  effect permit
  subjects "role:approver"
  relation "approve:invoices"
  object "invoice:*"
}

rule "archivists-do-anything-to-archives" {
  effect permit
  subjects "group:archivists"
  relation "*:archives"
  object "archive:*"
}

rule "the-locked-document-stays" {
  effect deny
  subjects "user:*"
  relation "delete:documents"
  object "document:locked"
}

rule "publishing-waits-for-approval" {
  effect require_approval
  subjects "user:*"
  relation "publish:documents"
  object "document:*"
}

limits "export:reports" for "spiffe://localhost/agent/*" {
  rows max 1000
}
`;

/** Every concrete action name above, in the roles below, or an agent's capability. */
const KNOWN = ['approve', 'comment', 'delete', 'edit', 'export', 'publish', 'read', 'summarize'];

let f: AuthzenFixture;
let agentId: string;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'office.policy': POLICY } });
  await putRole(f.server, 'owner', ['*:documents']);
  await putRole(f.server, 'superuser', ['*:*']);
  await putRole(f.server, 'editor', ['edit:documents', 'comment:*']);
  await putRole(f.server, 'viewer', ['read:documents']);
  await putUser(f.server, { id: 'olga', email: 'olga@example.com', roles: ['owner'] });
  await putUser(f.server, { id: 'sam', email: 'sam@example.com', roles: ['superuser'] });
  await putUser(f.server, { id: 'ed', email: 'ed@example.com', roles: ['editor'] });
  await putUser(f.server, { id: 'ana', email: 'ana@example.com', groups: ['archivists'] });
  await putUser(f.server, { id: 'nobody', email: 'nobody@example.com' });
  agentId = (await registerAgent(f.server, { name: 'summarizer', mode: 'autonomous', roles: ['owner'], capabilities: [{ name: 'summarize:documents' }] })).id;
}, 30_000);
afterAll(async () => f?.server.stop());

async function actions(subject: { type: string; id: string }, resource: { type: string; id: string }): Promise<string[]> {
  const res = await f.post('/access/v1/search/action', { subject, resource });
  expect(res.status).toBe(200);
  return res.body.results.map((r: { name: string }) => r.name);
}

async function allowed(subject: { type: string; id: string }, name: string, resource: { type: string; id: string }): Promise<boolean> {
  const res = await f.post('/access/v1/evaluation', { subject, action: { name }, resource });
  expect(res.status).toBe(200);
  return res.body.decision;
}

/** The search answers exactly the known names an evaluation allows. */
async function expectConsistent(subject: { type: string; id: string }, resource: { type: string; id: string }): Promise<string[]> {
  const found = await actions(subject, resource);
  const expected: string[] = [];
  for (const name of KNOWN) if (await allowed(subject, name, resource)) expected.push(name);
  expect(found).toEqual(expected);
  return found;
}

const user = (id: string) => ({ type: 'user', id });

describe('action search with wildcard permissions', () => {
  it('*:documents: every known action on a document, less the approval-bound and the denied ones', async () => {
    const doc = { type: 'document', id: 'd-1' };
    expect(await expectConsistent(user('olga'), doc)).toEqual(['approve', 'comment', 'delete', 'edit', 'export', 'read', 'summarize']);
    const locked = { type: 'document', id: 'locked' };
    expect(await expectConsistent(user('olga'), locked)).toEqual(['approve', 'comment', 'edit', 'export', 'read', 'summarize']);
    // The wildcard is for documents only.
    expect(await expectConsistent(user('olga'), { type: 'invoice', id: 'i-1' })).toEqual([]);
  });

  it('*:* : every known action on any kind', async () => {
    expect(await expectConsistent(user('sam'), { type: 'invoice', id: 'i-1' })).toEqual(KNOWN);
    expect(await expectConsistent(user('sam'), { type: 'document', id: 'd-1' })).toEqual(KNOWN.filter((n) => n !== 'publish'));
  });

  it('a permit rule on *:archives grants its group every known action on archives, nothing elsewhere', async () => {
    expect(await expectConsistent(user('ana'), { type: 'archive', id: 'a-1' })).toEqual(KNOWN);
    expect(await expectConsistent(user('ana'), { type: 'document', id: 'd-1' })).toEqual([]);
  });

  it('without a wildcard: the actions the roles name (comment:* on any kind)', async () => {
    expect(await expectConsistent(user('ed'), { type: 'document', id: 'd-1' })).toEqual(['comment', 'edit']);
    expect(await expectConsistent(user('ed'), { type: 'invoice', id: 'i-1' })).toEqual(['comment']);
    expect(await expectConsistent(user('nobody'), { type: 'document', id: 'd-1' })).toEqual([]);
  });

  it('an agent with a wildcard role is allowed only its capabilities', async () => {
    expect(await expectConsistent({ type: 'agent', id: agentId }, { type: 'document', id: 'd-1' })).toEqual(['summarize']);
  });

  it("a live management API rule's action is a known name too", async () => {
    const rule = { name: 'nobody-stamps-forms', effect: 'deny', subjects: ['user:nobody'], relation: 'stamp:forms', object: 'form:*' };
    const created = await f.server.admin('POST', '/rules', rule);
    expect(created.status).toBe(201);
    expect((await f.server.admin('POST', `/rules/${created.body.id}/validate`)).body.valid).toBe(true);
    expect((await f.server.admin('POST', `/rules/${created.body.id}/enable`)).body.state).toBe('live');
    const doc = { type: 'document', id: 'd-1' };
    expect(await actions(user('olga'), doc)).toContain('stamp');
    expect(await allowed(user('olga'), 'stamp', doc)).toBe(true);
    expect((await f.server.admin('DELETE', `/rules/${created.body.id}`)).status).toBe(204);
    expect(await actions(user('olga'), doc)).not.toContain('stamp');
  });

  it('a name Gatehouse does not know is allowed when asked, but not listed', async () => {
    expect(await allowed(user('olga'), 'frobnicate', { type: 'document', id: 'd-1' })).toBe(true);
    expect(await actions(user('olga'), { type: 'document', id: 'd-1' })).not.toContain('frobnicate');
  });

  it('a role or an agent that starts or stops naming an action changes the search at once; paging walks the known names in order', async () => {
    await putRole(f.server, 'archiver', ['archive:records']);
    expect(await actions(user('olga'), { type: 'document', id: 'd-1' })).toContain('archive');
    await registerAgent(f.server, { name: 'translator', mode: 'autonomous', capabilities: [{ name: 'translate:letters' }] });
    expect(await actions(user('olga'), { type: 'document', id: 'd-1' })).toContain('translate');
    expect(await allowed(user('olga'), 'translate', { type: 'document', id: 'd-1' })).toBe(true);
    await putRole(f.server, 'archiver', []);
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const res = await f.post('/access/v1/search/action', { subject: user('sam'), resource: { type: 'invoice', id: 'i-1' }, page: token ? { token } : { limit: 3 } });
      expect(res.status).toBe(200);
      expect(res.body.results.length).toBeLessThanOrEqual(3);
      seen.push(...res.body.results.map((r: { name: string }) => r.name));
      token = res.body.page.next_token || undefined;
    } while (token);
    // The emptied role no longer names archive; the new agent's capability names translate.
    expect(seen).toEqual([...KNOWN, 'translate']);
  });
});
