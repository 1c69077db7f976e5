import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { bind, createRule, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { startUpstream, type TestUpstream } from '../mcp/upstream.js';
import { ask, autonomousToken, decisionsOf, delegatedToken, said, TestClock } from './clocked-agents.js';

// The policy language's second edition through the real interface: agents that sign in with
// their keys, people and entities made through the management API, policy files in the policy
// directory, and the decision endpoint's answers, reasons and audit records.

const POLICY = `policy "language" version 1

rule "order-over-budget" {
  effect deny
  subjects "agent:*"
  relation "create:orders"
  object "order:*"
  when context.order.total > subject.budget.max
}

rule "vip-needs-vip-support" {
  effect deny
  subjects "agent:*"
  relation "read:customers"
  object "customer:*"
  when resource.tags contains "vip" and not (subject.roles contains "vip-support")
}

rule "mail-stays-inside" {
  effect deny
  subjects "agent:*"
  relation "send:emails"
  object "email:*"
  when to not like "*@example.com" or context.to like "noreply*"
}

rule "clearance-for-labelled-documents" {
  effect deny
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
  when resource.labels contains any ["secret", "top-secret"] and not (subject.clearances contains all resource.labels)
}

rule "own-team-projects" {
  effect deny
  subjects "agent:*"
  relation "edit:projects"
  object "project:*"
  when resource.unit.team != subject.team
}

rule "public-files-only" {
  effect deny
  subjects "agent:*"
  relation "read:files"
  object "file:*"
  when not (resource.id like "public-*") or resource.type != "file" or "quarantined" in resource.flags
}

rule "interns-never-delete" {
  effect deny
  subjects "role:intern"
  relation "delete:records"
  object "record:*"
}

rule "contractors-export-nothing" {
  effect deny
  subjects "group:contractors"
  relation "export:reports"
  object "report:*"
}

rule "payroll-stays-in-region" {
  effect deny
  subjects "agent:*"
  relation "read:payroll"
  object "payroll:*"
  when person.region.name != resource.region
}

rule "refunds-over-the-persons-limit" {
  effect require_approval
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > person.refund_limit
}

rule "owners-edit-their-todos" {
  effect permit
  subjects "role:editor"
  relation "update:todos"
  object "todo:*"
  when resource.owner == person.id
}

rule "finance-approves-its-cost-centers" {
  effect permit
  subjects "group:finance"
  relation "approve:expenses"
  object "expense:*"
  when context.cost_center in person.cost_centers
}

rule "named-autonomous-agents-run-jobs" {
  effect deny
  subjects "agent:*"
  relation "run:jobs"
  object "job:*"
  when not (subject.name like "alpha*") or subject.mode != "autonomous" or subject.type != "agent" or subject.id != context.runner
}

rule "share-own-folders" {
  effect deny
  subjects "agent:*"
  relation "share:folders"
  object "folder:*"
  when resource.owner_email != person.email or not (person.groups contains "finance") or person.roles contains "intern"
}

rule "open-accounts-only" {
  effect deny
  subjects "agent:*"
  relation "close:accounts"
  object "account:*"
  when resource.locked != false or subject.team != "eu"
}
`;

/** Actions some role grants; update:todos, approve:expenses and read:invoices only a permit rule can. */
const OPERATOR = [
  'create:orders', 'read:customers', 'send:emails', 'read:documents', 'edit:projects', 'read:files', 'delete:records',
  'export:reports', 'read:payroll', 'create:refunds', 'close:accounts', 'run:jobs', 'share:folders',
];
const ACTIONS = [...OPERATOR, 'update:todos', 'approve:expenses', 'read:invoices'];
const CAPABILITIES = ACTIONS.map((name) => ({ name }));

const ALPHA_ATTRIBUTES = { budget: { max: 100 }, team: 'eu', clearances: ['secret', 'hr'] };
const PAT = { id: 'u-pat', email: 'pat@example.com', roles: ['operator', 'editor'], groups: ['finance'] };
const PAT_ATTRIBUTES = { refund_limit: 100, cost_centers: ['cc-1', 'cc-2'], region: { name: 'eu' } };
const QUINN = { id: 'u-quinn', email: 'quinn@example.com', roles: ['operator'], groups: ['contractors'] };

// A Wednesday; ahead of the wall clock, so tokens signed at it are good whichever way they are checked.
const clock = new TestClock('2030-01-09T10:00:00Z');
let s: TestServer;
/** autonomous, roles operator; budget 100, team eu, clearances secret and hr */
let alpha: TestAgent;
/** autonomous, roles operator, intern and vip-support; no attributes */
let beta: TestAgent;
/** delegated, roles operator and editor */
let helper: TestAgent;
let alphaToken: string;
let betaToken: string;
let forPat: string;
let forQuinn: string;

async function putEntity(type: string, id: string, attributes: Record<string, unknown>): Promise<void> {
  const res = await s.admin('PUT', `/entities/${type}/${encodeURIComponent(id)}`, { attributes });
  expect([200, 201], JSON.stringify(res.body)).toContain(res.status);
}

async function patchAgent(agent: TestAgent, body: Record<string, unknown>): Promise<void> {
  const res = await s.admin('PATCH', `/agents/${encodeURIComponent(agent.id)}`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

async function patchUser(id: string, body: Record<string, unknown>): Promise<void> {
  const res = await s.admin('PATCH', `/users/${id}`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

const asAlpha = (action: string, resource: string, context: Record<string, unknown> = {}) => ask(s, alpha, alphaToken, action, resource, context).then(said);
const asBeta = (action: string, resource: string, context: Record<string, unknown> = {}) => ask(s, beta, betaToken, action, resource, context).then(said);
const forPerson = (token: string) => (action: string, resource: string, context: Record<string, unknown> = {}) =>
  ask(s, helper, token, action, resource, context).then(said);

beforeAll(async () => {
  s = await startTestServer({ clock: clock.clock, policies: { 'language.policy': POLICY } });
  await putRole(s, 'operator', OPERATOR);
  await putRole(s, 'editor', ['read:todos']);
  await putRole(s, 'intern', ['read:todos']);
  await putRole(s, 'vip-support', ['read:customers']);
  alpha = await registerAgent(s, { name: 'alpha', mode: 'autonomous', roles: ['operator'], capabilities: CAPABILITIES });
  await patchAgent(alpha, { attributes: ALPHA_ATTRIBUTES });
  beta = await registerAgent(s, { name: 'beta', mode: 'autonomous', roles: ['operator', 'intern', 'vip-support'], capabilities: CAPABILITIES });
  helper = await registerAgent(s, { name: 'helper', mode: 'delegated', roles: ['operator', 'editor'], capabilities: CAPABILITIES });

  for (const [person, attributes] of [[PAT, PAT_ATTRIBUTES], [QUINN, { region: { name: 'us' } }]] as const) {
    const res = await s.admin('POST', '/users', { ...person, password: 'correct horse battery', name: person.email, attributes });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ id: person.id, attributes });
  }

  await putEntity('customer', 'c-vip', { tags: ['vip'] });
  await putEntity('customer', 'c-basic', { tags: ['basic'] });
  await putEntity('customer', 'c-odd', { tags: 'vip' });
  await putEntity('document', 'd-hr', { labels: ['secret', 'hr'] });
  await putEntity('document', 'd-top', { labels: ['top-secret'] });
  await putEntity('document', 'd-pub', { labels: ['public'] });
  await putEntity('project', 'p-eu', { unit: { team: 'eu', lead: 'u-pat' } });
  await putEntity('project', 'p-us', { unit: { team: 'us' } });
  await putEntity('payroll', 'p-eu', { region: 'eu' });
  await putEntity('payroll', 'p-us', { region: 'us' });
  await putEntity('todo', 't-pat', { owner: 'u-pat' });
  await putEntity('folder', 'f-pat', { owner_email: 'pat@example.com' });
  await putEntity('folder', 'f-quinn', { owner_email: 'quinn@example.com' });
  await putEntity('todo', 't-quinn', { owner: 'u-quinn' });

  alphaToken = await autonomousToken(s, clock, alpha);
  betaToken = await autonomousToken(s, clock, beta);
  forPat = await delegatedToken(s, clock, helper, 'pat@example.com', ACTIONS);
  forQuinn = await delegatedToken(s, clock, helper, 'u-quinn', ACTIONS);
}, 60_000);
afterAll(() => s?.stop());

describe('paths into context and the subject, compared with each other', () => {
  it('a nested context field against a nested attribute of the agent', async () => {
    expect(await asAlpha('create:orders', 'order:1', { order: { total: 50 } })).toBe('allow allowed');
    expect(await asAlpha('create:orders', 'order:1', { order: { total: 100 } })).toBe('allow allowed');
    expect(await asAlpha('create:orders', 'order:1', { order: { total: 150 } })).toBe('deny rule_denied: order-over-budget');
  });

  it('fails closed on a missing context field, a missing attribute and a wrong type', async () => {
    expect(await asAlpha('create:orders', 'order:1', {})).toBe('deny rule_denied: order-over-budget');
    expect(await asAlpha('create:orders', 'order:1', { order: 50 })).toBe('deny rule_denied: order-over-budget');
    expect(await asAlpha('create:orders', 'order:1', { order: { total: '50' } })).toBe('deny rule_denied: order-over-budget');
    expect(await asBeta('create:orders', 'order:1', { order: { total: 1 } })).toBe('deny rule_denied: order-over-budget');
  });

  it("a change to the agent's attributes applies to the next decision, and each is recorded", async () => {
    expect(await asAlpha('create:orders', 'order:2', { order: { total: 150 } })).toBe('deny rule_denied: order-over-budget');
    await patchAgent(alpha, { attributes: { ...ALPHA_ATTRIBUTES, budget: { max: 200 } } });
    expect(await asAlpha('create:orders', 'order:2', { order: { total: 150 } })).toBe('allow allowed');
    await patchAgent(alpha, { attributes: { ...ALPHA_ATTRIBUTES, budget: { max: '200' } } });
    expect(await asAlpha('create:orders', 'order:2', { order: { total: 150 } })).toBe('deny rule_denied: order-over-budget');
    await patchAgent(alpha, { attributes: ALPHA_ATTRIBUTES });

    const [denied, allowed] = await decisionsOf(s, alpha.id, 2);
    expect(denied).toMatchObject({
      kind: 'decision', agent_id: alpha.id, user_id: null, action: 'create:orders', resource: 'order:2',
      context: { order: { total: 150 } }, decision: 'deny', reason: 'rule_denied: order-over-budget', time: clock.iso,
    });
    expect(allowed).toMatchObject({ resource: 'order:2', decision: 'allow', reason: 'allowed' });
    expect(denied!.policy_version).toMatch(/\S/);
  });
});

describe('the built-in facts of the subject', () => {
  it('id, name, mode and type of the acting agent', async () => {
    expect(await asAlpha('run:jobs', 'job:1', { runner: alpha.id })).toBe('allow allowed');
    expect(await asAlpha('run:jobs', 'job:1', { runner: beta.id })).toBe('deny rule_denied: named-autonomous-agents-run-jobs');
    expect(await asBeta('run:jobs', 'job:1', { runner: beta.id })).toBe('deny rule_denied: named-autonomous-agents-run-jobs');
    expect(await forPerson(forPat)('run:jobs', 'job:1', { runner: helper.id })).toBe('deny rule_denied: named-autonomous-agents-run-jobs');
  });
});

describe('resource attributes from stored entities', () => {
  it('contains on a list attribute, and the subject’s roles', async () => {
    expect(await asAlpha('read:customers', 'customer:c-basic')).toBe('allow allowed');
    expect(await asAlpha('read:customers', 'customer:c-vip')).toBe('deny rule_denied: vip-needs-vip-support');
    expect(await asBeta('read:customers', 'customer:c-vip')).toBe('allow allowed');
  });

  it('fails closed on a resource with no entity and on an attribute of the wrong type', async () => {
    expect(await asAlpha('read:customers', 'customer:c-unknown')).toBe('deny rule_denied: vip-needs-vip-support');
    expect(await asAlpha('read:customers', 'customer:c-odd')).toBe('deny rule_denied: vip-needs-vip-support');
  });

  it('a stored, changed and deleted entity applies to the very next decision', async () => {
    await putEntity('customer', 'c-new', { tags: ['vip', 'eu'] });
    expect(await asAlpha('read:customers', 'customer:c-new')).toBe('deny rule_denied: vip-needs-vip-support');
    await putEntity('customer', 'c-new', { tags: ['eu'] });
    expect(await asAlpha('read:customers', 'customer:c-new')).toBe('allow allowed');
    expect((await s.admin('DELETE', '/entities/customer/c-new')).status).toBe(204);
    expect(await asAlpha('read:customers', 'customer:c-new')).toBe('deny rule_denied: vip-needs-vip-support');
  });

  it('an object id holding / or : finds its entity, stored with the id encoded or not', async () => {
    expect(await asAlpha('read:customers', 'customer:eu/c-1')).toBe('deny rule_denied: vip-needs-vip-support');
    expect((await s.admin('PUT', '/entities/customer/eu%2Fc-1', { attributes: { tags: ['basic'] } })).status).toBe(201);
    expect(await asAlpha('read:customers', 'customer:eu/c-1')).toBe('allow allowed');
    expect((await s.admin('PUT', '/entities/customer/eu/c-2', { attributes: { tags: ['basic'] } })).status).toBe(201);
    expect(await asAlpha('read:customers', 'customer:eu/c-2')).toBe('allow allowed');
    expect((await s.admin('PUT', '/entities/customer/urn:acme:7', { attributes: { tags: ['basic'] } })).status).toBe(201);
    expect(await asAlpha('read:customers', 'customer:urn:acme:7')).toBe('allow allowed');
    expect((await s.admin('GET', '/entities/customer/eu%2Fc-1')).body).toMatchObject({ type: 'customer', id: 'eu/c-1', attributes: { tags: ['basic'] } });
  });

  it('a nested attribute of the resource against an attribute of the agent', async () => {
    expect(await asAlpha('edit:projects', 'project:p-eu')).toBe('allow allowed');
    expect(await asAlpha('edit:projects', 'project:p-us')).toBe('deny rule_denied: own-team-projects');
    // The agent has no team: fails closed.
    expect(await asBeta('edit:projects', 'project:p-eu')).toBe('deny rule_denied: own-team-projects');
  });

  it('resource.id and resource.type come from the object itself; a constant `in` a list attribute', async () => {
    await putEntity('file', 'public-report', { flags: [] });
    await putEntity('file', 'public-virus', { flags: ['scanned', 'quarantined'] });
    await putEntity('file', 'secret-report', { flags: [] });
    await putEntity('file', 'Public-report', { flags: [] });
    expect(await asAlpha('read:files', 'file:public-report')).toBe('allow allowed');
    expect(await asAlpha('read:files', 'file:public-virus')).toBe('deny rule_denied: public-files-only');
    expect(await asAlpha('read:files', 'file:secret-report')).toBe('deny rule_denied: public-files-only');
    expect(await asAlpha('read:files', 'file:Public-report')).toBe('deny rule_denied: public-files-only');
    // No entity, so no flags: fails closed.
    expect(await asAlpha('read:files', 'file:public-unknown')).toBe('deny rule_denied: public-files-only');
    await putEntity('file', 'public-mixed', { flags: ['scanned', 3] });
    expect(await asAlpha('read:files', 'file:public-mixed')).toBe('deny rule_denied: public-files-only');
  });
});

describe('like and not like', () => {
  it('* is the only wildcard; the rest is literal and case-sensitive', async () => {
    const send = (to: unknown) => asAlpha('send:emails', 'email:1', { to });
    expect(await send('ann@example.com')).toBe('allow allowed');
    expect(await send('ann@evil.com')).toBe('deny rule_denied: mail-stays-inside');
    expect(await send('ANN@EXAMPLE.COM')).toBe('deny rule_denied: mail-stays-inside');
    expect(await send('ann@example.com.evil.org')).toBe('deny rule_denied: mail-stays-inside');
    expect(await send('ann@exampleXcom')).toBe('deny rule_denied: mail-stays-inside');
    expect(await send('noreply@example.com')).toBe('deny rule_denied: mail-stays-inside');
  });

  it('a missing or non-string value fails closed', async () => {
    expect(await asAlpha('send:emails', 'email:1', {})).toBe('deny rule_denied: mail-stays-inside');
    expect(await asAlpha('send:emails', 'email:1', { to: 5 })).toBe('deny rule_denied: mail-stays-inside');
    expect(await asAlpha('send:emails', 'email:1', { to: ['ann@example.com'] })).toBe('deny rule_denied: mail-stays-inside');
  });
});

describe('contains any and contains all, with a path on the right', () => {
  it('labelled documents need every label among the agent’s clearances', async () => {
    expect(await asAlpha('read:documents', 'document:d-hr')).toBe('allow allowed');
    expect(await asAlpha('read:documents', 'document:d-top')).toBe('deny rule_denied: clearance-for-labelled-documents');
    expect(await asAlpha('read:documents', 'document:d-pub')).toBe('allow allowed');
    // No clearances at all: the condition cannot be evaluated, so the deny rule applies.
    expect(await asBeta('read:documents', 'document:d-pub')).toBe('deny rule_denied: clearance-for-labelled-documents');
  });

  it('a new clearance applies to the next decision', async () => {
    await patchAgent(alpha, { attributes: { ...ALPHA_ATTRIBUTES, clearances: ['secret', 'hr', 'top-secret'] } });
    expect(await asAlpha('read:documents', 'document:d-top')).toBe('allow allowed');
    await patchAgent(alpha, { attributes: ALPHA_ATTRIBUTES });
    expect(await asAlpha('read:documents', 'document:d-top')).toBe('deny rule_denied: clearance-for-labelled-documents');
  });
});

describe('role:<name> and group:<name> subjects', () => {
  it('a role matches an agent holding it, and a person holding it behind a delegated agent', async () => {
    expect(await asAlpha('delete:records', 'record:1')).toBe('allow allowed');
    expect(await asBeta('delete:records', 'record:1')).toBe('deny rule_denied: interns-never-delete');
    const quinn = forPerson(forQuinn);
    expect(await quinn('delete:records', 'record:1')).toBe('allow allowed');
    await patchUser(QUINN.id, { roles: ['operator', 'intern'] });
    expect(await quinn('delete:records', 'record:1')).toBe('deny rule_denied: interns-never-delete');
    await patchUser(QUINN.id, { roles: QUINN.roles });
    expect(await quinn('delete:records', 'record:1')).toBe('allow allowed');
  });

  it('a group matches a person in it, and a delegated agent acting for one', async () => {
    expect(await asAlpha('export:reports', 'report:1')).toBe('allow allowed');
    expect(await forPerson(forPat)('export:reports', 'report:1')).toBe('allow allowed');
    expect(await forPerson(forQuinn)('export:reports', 'report:1')).toBe('deny rule_denied: contractors-export-nothing');
    const [record] = await decisionsOf(s, helper.id, 1);
    expect(record).toMatchObject({ agent_id: helper.id, user_id: QUINN.id, decision: 'deny', reason: 'rule_denied: contractors-export-nothing' });
    // Quinn leaves the group, then Pat joins it: the next decisions follow.
    await patchUser(QUINN.id, { groups: [] });
    expect(await forPerson(forQuinn)('export:reports', 'report:1')).toBe('allow allowed');
    await patchUser(PAT.id, { groups: [...PAT.groups, 'contractors'] });
    expect(await forPerson(forPat)('export:reports', 'report:1')).toBe('deny rule_denied: contractors-export-nothing');
    await patchUser(PAT.id, { groups: PAT.groups });
    await patchUser(QUINN.id, { groups: QUINN.groups });
    expect(await forPerson(forQuinn)('export:reports', 'report:1')).toBe('deny rule_denied: contractors-export-nothing');
  });
});

describe('person paths', () => {
  it('a nested attribute of the person the agent acts for; none for an agent acting alone', async () => {
    const pat = forPerson(forPat);
    expect(await pat('read:payroll', 'payroll:p-eu')).toBe('allow allowed');
    expect(await pat('read:payroll', 'payroll:p-us')).toBe('deny rule_denied: payroll-stays-in-region');
    expect(await forPerson(forQuinn)('read:payroll', 'payroll:p-us')).toBe('allow allowed');
    expect(await asAlpha('read:payroll', 'payroll:p-eu')).toBe('deny rule_denied: payroll-stays-in-region');
  });

  it('the built-in facts of the person: email, groups, roles', async () => {
    const pat = forPerson(forPat);
    expect(await pat('share:folders', 'folder:f-pat')).toBe('allow allowed');
    expect(await pat('share:folders', 'folder:f-quinn')).toBe('deny rule_denied: share-own-folders');
    expect(await forPerson(forQuinn)('share:folders', 'folder:f-quinn')).toBe('deny rule_denied: share-own-folders');
    expect(await asAlpha('share:folders', 'folder:f-pat')).toBe('deny rule_denied: share-own-folders');
    await patchUser(PAT.id, { roles: [...PAT.roles, 'intern'] });
    expect(await pat('share:folders', 'folder:f-pat')).toBe('deny rule_denied: share-own-folders');
    await patchUser(PAT.id, { email: 'pat@example.org', roles: PAT.roles });
    expect(await pat('share:folders', 'folder:f-pat')).toBe('deny rule_denied: share-own-folders');
    await putEntity('folder', 'f-pat', { owner_email: 'pat@example.org' });
    expect(await pat('share:folders', 'folder:f-pat')).toBe('allow allowed');
    await patchUser(PAT.id, { email: PAT.email });
    await putEntity('folder', 'f-pat', { owner_email: 'pat@example.com' });
  });

  it("a change to the person's attributes applies to the next decision", async () => {
    const pat = forPerson(forPat);
    await patchUser(PAT.id, { attributes: { ...PAT_ATTRIBUTES, region: { name: 'us' } } });
    expect(await pat('read:payroll', 'payroll:p-us')).toBe('allow allowed');
    expect(await pat('read:payroll', 'payroll:p-eu')).toBe('deny rule_denied: payroll-stays-in-region');
    await patchUser(PAT.id, { attributes: PAT_ATTRIBUTES });
    expect(await pat('read:payroll', 'payroll:p-eu')).toBe('allow allowed');
  });

  it('an approval rule reading a missing value applies (fails closed)', async () => {
    expect(await forPerson(forPat)('create:refunds', 'refund:1', { amount: 50 })).toBe('allow allowed');
    const over = await ask(s, helper, forPat, 'create:refunds', 'refund:2', { amount: 500 });
    expect(over).toMatchObject({ decision: 'approval_required', reason: 'approval_required: refunds-over-the-persons-limit' });
    expect(over.approval_id).toEqual(expect.any(String));
    const alone = await ask(s, alpha, alphaToken, 'create:refunds', 'refund:3', { amount: 5 });
    expect(alone).toMatchObject({ decision: 'approval_required', reason: 'approval_required: refunds-over-the-persons-limit' });
    const [record] = await decisionsOf(s, helper.id, 1);
    expect(record).toMatchObject({ user_id: PAT.id, resource: 'refund:2', decision: 'approval_required', reason: 'approval_required: refunds-over-the-persons-limit' });
  });
});

describe('approvals of a delegated agent are the person’s', () => {
  it('an approval given for one person’s action does not allow the same action for another', async () => {
    const action = ['create:refunds', 'refund:shared', { amount: 500 }] as const;
    const forPatFirst = await ask(s, helper, forPat, ...action);
    expect(forPatFirst).toMatchObject({ decision: 'approval_required', reason: 'approval_required: refunds-over-the-persons-limit' });
    expect([200, 204]).toContain((await s.admin('POST', `/approvals/${forPatFirst.approval_id}/approve`)).status);

    // The same agent, action, resource and context, for Quinn (who has no refund limit: the rule applies).
    const forQuinnToo = await ask(s, helper, forQuinn, ...action);
    expect(forQuinnToo).toMatchObject({ decision: 'approval_required', reason: 'approval_required: refunds-over-the-persons-limit' });
    expect(forQuinnToo.approval_id).toEqual(expect.any(String));
    expect(forQuinnToo.approval_id).not.toBe(forPatFirst.approval_id);
    const [record] = await decisionsOf(s, helper.id, 1);
    expect(record).toMatchObject({ user_id: QUINN.id, decision: 'approval_required' });

    // Pat's approval still holds for Pat, once.
    expect(await ask(s, helper, forPat, ...action)).toMatchObject({ decision: 'allow' });
    expect(await ask(s, helper, forPat, ...action)).toMatchObject({ decision: 'approval_required' });
  });
});

describe('the permit effect', () => {
  it('grants what no role does, to a role holder, when the resource is the person’s own', async () => {
    const pat = forPerson(forPat);
    expect(await pat('update:todos', 'todo:t-pat')).toBe('allow allowed');
    expect(await pat('update:todos', 'todo:t-quinn')).toBe('deny not_granted: update:todos');
    // Nobody is granted where the permit rule cannot be evaluated (no owner stored).
    expect(await pat('update:todos', 'todo:t-nobody')).toBe('deny not_granted: update:todos');
    // Not an editor, and acting for nobody: no role, no permit.
    expect(await asAlpha('update:todos', 'todo:t-pat')).toBe('deny not_granted: update:todos');
  });

  it('a delegated agent needs its own grant and the person’s', async () => {
    const quinn = forPerson(forQuinn);
    // The agent is an editor and the todo is Quinn's; Quinn is no editor.
    expect(await quinn('update:todos', 'todo:t-quinn')).toBe('deny not_granted: update:todos (person)');
    await patchUser(QUINN.id, { roles: ['operator', 'editor'] });
    expect(await quinn('update:todos', 'todo:t-quinn')).toBe('allow allowed');
    // The agent loses its editor role: now the agent is not granted.
    await patchAgent(helper, { roles: ['operator'] });
    expect(await quinn('update:todos', 'todo:t-quinn')).toBe('deny not_granted: update:todos');
    await patchAgent(helper, { roles: ['operator', 'editor'] });
    await patchUser(QUINN.id, { roles: QUINN.roles });
    expect(await quinn('update:todos', 'todo:t-quinn')).toBe('deny not_granted: update:todos (person)');
  });

  it('a group permit with `in` a list attribute of the person', async () => {
    const pat = forPerson(forPat);
    expect(await pat('approve:expenses', 'expense:1', { cost_center: 'cc-2' })).toBe('allow allowed');
    expect(await pat('approve:expenses', 'expense:1', { cost_center: 'cc-9' })).toBe('deny not_granted: approve:expenses');
    expect(await pat('approve:expenses', 'expense:1', { cost_center: 2 })).toBe('deny not_granted: approve:expenses');
    expect(await pat('approve:expenses', 'expense:1', {})).toBe('deny not_granted: approve:expenses');
    // Quinn is not in finance, so neither is the agent acting for Quinn.
    expect(await forPerson(forQuinn)('approve:expenses', 'expense:1', { cost_center: 'cc-2' })).toBe('deny not_granted: approve:expenses');
    // An autonomous agent is in no group.
    expect(await asAlpha('approve:expenses', 'expense:1', { cost_center: 'cc-2' })).toBe('deny not_granted: approve:expenses');
    // The list attribute changes: the next decision reads it.
    await patchUser(PAT.id, { attributes: { ...PAT_ATTRIBUTES, cost_centers: ['cc-9'] } });
    expect(await pat('approve:expenses', 'expense:1', { cost_center: 'cc-9' })).toBe('allow allowed');
    await patchUser(PAT.id, { attributes: PAT_ATTRIBUTES });
    expect(await pat('approve:expenses', 'expense:1', { cost_center: 'cc-9' })).toBe('deny not_granted: approve:expenses');
  });

  it('a permit rule of the management API with a condition in the file syntax', async () => {
    await patchAgent(beta, { attributes: { customer: 'acme' } });
    await putEntity('invoice', 'i-acme', { customer: 'acme' });
    await putEntity('invoice', 'i-other', { customer: 'other' });
    expect(await asBeta('read:invoices', 'invoice:i-acme')).toBe('deny not_granted: read:invoices');
    const id = await createRule(s, {
      name: 'customers-read-their-invoices',
      effect: 'permit',
      subjects: ['agent:*'],
      relation: 'read:invoices',
      object: 'invoice:*',
      condition: { expr: 'resource.customer == subject.customer' },
    });
    expect(await asBeta('read:invoices', 'invoice:i-acme')).toBe('allow allowed');
    expect(await asBeta('read:invoices', 'invoice:i-other')).toBe('deny not_granted: read:invoices');
    expect(await asAlpha('read:invoices', 'invoice:i-acme')).toBe('deny not_granted: read:invoices');
    const [record] = await decisionsOf(s, alpha.id, 1);
    expect(record).toMatchObject({ resource: 'invoice:i-acme', decision: 'deny', reason: 'not_granted: read:invoices' });
    expect((await s.admin('POST', `/rules/${id}/disable`)).status).toBe(200);
    expect(await asBeta('read:invoices', 'invoice:i-acme')).toBe('deny not_granted: read:invoices');
  });
});

describe('the same facts at the other doors', () => {
  it('the transaction-token endpoint binds the person, whose attributes the decision then reads', async () => {
    const context = {};
    const b = await bind(s, forPat, 'read:payroll', 'payroll:p-eu', context);
    expect(b.status).toBe(200);
    const claims = decodeJwt(b.body.data.transaction_token);
    expect(claims).toMatchObject({ sub: PAT.id, req_wl: helper.id, tctx: { action: 'read:payroll', resource: 'payroll:p-eu', context } });
    const [binding] = (await s.admin('GET', `/audit?kind=token&agent_id=${encodeURIComponent(helper.id)}&limit=1`)).body.data;
    expect(binding).toMatchObject({ kind: 'token', user_id: PAT.id, decision: 'issued', resource: 'payroll:p-eu' });

    // Between binding and deciding the person moves region: the decision reads the person as now.
    await patchUser(PAT.id, { attributes: { ...PAT_ATTRIBUTES, region: { name: 'us' } } });
    const d = await fetch(s.ctx.urls.agentAuthorize, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: helper.id, transaction_token: b.body.data.transaction_token, action: 'read:payroll', resource: 'payroll:p-eu', context }),
    });
    expect(((await d.json()) as { data: unknown }).data).toMatchObject({ decision: 'deny', reason: 'rule_denied: payroll-stays-in-region' });
    await patchUser(PAT.id, { attributes: PAT_ATTRIBUTES });
  });

  describe('the MCP gateway', () => {
    let upstream: TestUpstream;
    let client: Client;
    const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

    beforeAll(async () => {
      upstream = await startUpstream();
      const up = await s.admin('POST', '/mcp/upstreams', {
        name: 'crm',
        url: upstream.url,
        tools: [{ name: 'delete_account', action: 'close:accounts', resource_from_argument: { kind: 'account', argument: 'account_id' } }],
      });
      expect(up.status, JSON.stringify(up.body)).toBe(201);
      client = new Client({ name: 'alpha', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${alphaToken}` } } }));
    });
    afterAll(async () => {
      await client?.close();
      await upstream?.close();
    });

    it('judges a tool call on the stored entity and the agent’s attributes, as they are at the call', async () => {
      const close = async (id: string) => (await client.callTool({ name: 'crm.delete_account', arguments: { account_id: id } })) as CallToolResult;

      const unknown = await close('a-1');
      expect(unknown.isError).toBe(true);
      expect(text(unknown)).toContain('rule_denied: open-accounts-only');

      await putEntity('account', 'a-1', { locked: false });
      const done = await close('a-1');
      expect(done.isError, text(done)).toBeFalsy();
      expect(upstream.calls).toEqual([expect.objectContaining({ tool: 'delete_account', args: { account_id: 'a-1' } })]);

      await patchAgent(alpha, { attributes: { ...ALPHA_ATTRIBUTES, team: 'us' } });
      const otherTeam = await close('a-1');
      expect(otherTeam.isError).toBe(true);
      expect(text(otherTeam)).toContain('rule_denied: open-accounts-only');
      await patchAgent(alpha, { attributes: ALPHA_ATTRIBUTES });

      await putEntity('account', 'a-1', { locked: true });
      expect((await close('a-1')).isError).toBe(true);
      expect(upstream.calls).toHaveLength(1);

      const [record] = await decisionsOf(s, alpha.id, 1);
      expect(record).toMatchObject({ kind: 'decision', action: 'close:accounts', resource: 'account:a-1', context: { account_id: 'a-1' }, decision: 'deny', reason: 'rule_denied: open-accounts-only' });
    });
  });
});
