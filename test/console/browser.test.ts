import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { accessTokenFor, bind, bindAndDecide, createRule, newKeyPair, type TestAgent } from '../agents/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { makePerson } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
// Screenshots land in docs/screenshots when CONSOLE_SCREENSHOTS=1 (to refresh the documentation), else in a scratch folder.
const SHOTS = process.env.CONSOLE_SCREENSHOTS ? join(projectRoot, 'docs', 'screenshots') : mkdtempSync(join(tmpdir(), 'console-shots-'));

const POLICY_V1 = `policy "refunds" version 1

rule "block-huge-refunds" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when amount > 10000
}
`;
const LIMITS = { amount: { max: 1000, sum: { max: 2000, per: '24h' } }, currency: { in: ['USD', 'EUR'] }, count: [{ max: 20, per: '1h' }] };
const POLICY_V2 = POLICY_V1.replace('version 1', 'version 2').replace('amount > 10000', 'amount > 5000');

describe.skipIf(!existsSync(CHROMIUM))('the console in headless Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  let admin: { id: string; email: string; password: string };
  let context: BrowserContext;
  let page: Page;
  let agent: TestAgent;
  let token: string;
  const dialogs: string[] = [];

  const shot = async (name: string, p: Page = page) => {
    mkdirSync(SHOTS, { recursive: true });
    await p.screenshot({ path: join(SHOTS, `console-${name}.png`), fullPage: true });
  };
  const go = (path: string) => page.goto(`${server.url}${path}`);
  /** Opens a collapsible panel (a <details>) whatever its state. */
  const open = (id: string) => page.evaluate(`document.getElementById(${JSON.stringify(id)}).open = true`);
  const pageWidth = () => page.evaluate('document.documentElement.scrollWidth') as Promise<number>;
  /** Submits by clicking and waits for the page the POST answers with (a 303 onward, or the form again). */
  const submit = async (selector: string) => {
    await Promise.all([page.waitForEvent('load'), page.click(selector)]);
  };

  beforeAll(async () => {
    server = await startTestServer({ policies: { 'refunds.policy': POLICY_V1 } });
    admin = await makePerson(server, 'ada@example.com', ['admin'], 'Ada Admin');
    await makePerson(server, 'pat@example.com', [], 'Pat Plain');
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
    context = await browser.newContext({ viewport: LAPTOP });
    page = await context.newPage();
    page.setDefaultTimeout(10_000);
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('an admin signs in through the real sign-in page (authorization code + PKCE)', async () => {
    const answers: { url: string; status: number; headers: Record<string, string> }[] = [];
    page.on('response', (r) => answers.push({ url: r.url(), status: r.status(), headers: r.headers() }));
    await go('/console/agents');
    expect(new URL(page.url()).pathname).toBe('/login');
    const authorize = answers.find((a) => a.url.includes('/oauth/authorize'))!;
    const q = new URL(authorize.url).searchParams;
    expect(q.get('client_id')).toBe('gatehouse-console');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('redirect_uri')).toBe(`${server.ctx.urls.issuer}/console/callback`);

    await page.fill('input[name="email"]', admin.email);
    await page.fill('input[name="password"]', admin.password);
    await Promise.all([page.waitForURL(`${server.url}/console/agents`), page.click('button[type="submit"]')]);
    const callback = answers.find((a) => a.url.includes('/console/callback'))!;
    expect(callback.status).toBe(303);
    expect(await page.textContent('h1')).toBe('Agents');

    // The console's session cookie: HttpOnly, SameSite=Lax, path /console.
    const session = (await context.cookies()).find((c) => c.name === 'gatehouse_console')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/console' });
    // The flow cookie (verifier, state) was single use.
    expect((await context.cookies()).find((c) => c.name === 'gatehouse_console_flow')).toBeUndefined();

    // A strict policy: scripts and styles only from the console's own files.
    const csp = answers.filter((a) => a.url.endsWith('/console/agents')).pop()!.headers['content-security-policy']!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
  });

  it('makes a role and registers an agent with a limit', async () => {
    await go('/console/roles');
    await open('create');
    await page.fill('#f-name', 'refunder');
    await page.fill('#new-permissions', 'create:refunds');
    await submit('form[action="/console/roles"] button[type="submit"]');
    expect(await page.textContent('.notice.info')).toContain('Role refunder created.');
    await shot('roles');

    const keys = await newKeyPair();
    await go('/console/agents');
    await open('create');
    // A key that is not JSON is named next to its field, and what was typed stays.
    await page.fill('#f-name', 'billing');
    await page.fill('#f-public_jwk', '{"kty": "OKP", ');
    await page.fill('#f-roles', 'refunder');
    await page.fill('#f-capability', 'create:refunds');
    // A limit on each action, and limits over time: a budget (the amounts in any 24 hours) and a rate.
    await page.fill('#f-limits', JSON.stringify(LIMITS));
    await submit('form[action="/console/agents"] button[type="submit"]');
    expect(await page.textContent('#f-public_jwk-error')).toContain('is not JSON');
    expect(await page.inputValue('#f-capability')).toBe('create:refunds');

    await page.fill('#f-public_jwk', JSON.stringify(keys.publicJwk));
    await submit('form[action="/console/agents"] button[type="submit"]');
    expect(await page.textContent('h1')).toBe('billing');
    const agentId = 'spiffe://localhost/agent/billing';
    expect(await page.textContent('.lead')).toContain(agentId);
    expect(await page.inputValue('#limits-0')).toContain('"max": 1000');
    // Nothing used yet: each of the agent's own counters is listed at zero, with nothing to reset.
    expect(await page.locator('table.usage tbody tr').allTextContents()).toEqual([
      expect.stringMatching(/amount sum per 24h.*0 of 2000/s),
      expect.stringMatching(/count per 1h.*0 of 20/s),
    ]);
    expect(await page.locator('table.usage form').count()).toBe(0);

    // The same agent through the management API, and it works for a real decision.
    const viaApi = await server.admin('GET', `/agents/${encodeURIComponent(agentId)}`);
    expect(viaApi.body.capabilities).toEqual([{ name: 'create:refunds', limits: LIMITS }]);
    agent = { id: agentId, ...keys };
    token = await accessTokenFor(server, agent);
    const before = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-1', { amount: 300, currency: 'USD' });
    expect(before.decision).toMatchObject({ decision: 'allow', reason: 'allowed' });
    // The limit is in force: over it, nothing is bound.
    expect((await bind(server, token, 'create:refunds', 'refund:r-2', { amount: 5000, currency: 'USD' })).status).toBe(403);
    await go('/console/agents');
    await shot('agents');
  });

  it('writes a rule: Validate (errors next to the field), Validate, Impact, Save, Enable', async () => {
    await go('/console/rules/new');
    // Impact is offered once the form's content validated.
    expect(await page.isDisabled('#rule-impact-form')).toBe(true);
    await page.fill('#f-name', 'block-medium-refunds');
    await page.selectOption('#f-effect', 'deny');
    await page.fill('#f-subjects', 'agent:*');
    await page.fill('#f-relation', 'create:refunds');
    await page.fill('#f-object', 'refund');
    await page.fill('#f-cond_field', 'amount');
    await page.selectOption('#f-cond_op', 'gt');
    await page.fill('#f-cond_value', '200');
    await submit('#rule-validate');
    expect(await page.textContent('#f-object-error')).toContain('object "refund" is not a pattern');
    expect(await page.getAttribute('#f-object', 'aria-invalid')).toBe('true');
    expect(await page.inputValue('#f-cond_value')).toBe('200');
    // Validate saves nothing.
    expect((await server.admin('GET', '/rules')).body.data).toEqual([]);
    await shot('rule-invalid');

    await page.fill('#f-object', 'refund:*');
    await submit('#rule-validate');
    expect(await page.textContent('.notice.ok')).toContain('Valid');
    expect(await page.isDisabled('#rule-impact-form')).toBe(false);
    await shot('rule-valid');

    // Impact of the unsaved form: the last 7 days of decisions replayed with the rule live (one
    // decision above, allowed at 300, would now be denied); nothing is saved, the form stays filled in.
    await submit('#rule-impact-form');
    expect(await page.textContent('#rule-impact')).toMatch(/^\d+ recorded decisions replayed with this rule live: [1-9]\d* would change\.$/);
    expect(await page.textContent('.rule-form-impact table')).toContain('allow → deny');
    expect(await page.inputValue('#f-cond_value')).toBe('200');
    expect((await server.admin('GET', '/rules')).body.data).toEqual([]);
    await shot('rule-impact');

    await submit('#rule-save');
    expect(await page.textContent('.notice.info')).toContain('saved as a draft. Its impact was shown');
    const [draft] = (await server.admin('GET', '/rules')).body.data;
    expect(draft).toMatchObject({ name: 'block-medium-refunds', state: 'draft', validated: true, condition: { field: 'amount', op: 'gt', value: 200 } });
    // Saved with the content whose impact was shown: Enable follows without another Impact.
    expect(await page.isDisabled('#rule-enable')).toBe(false);

    await submit('#rule-enable');
    expect(await page.textContent('.notice.info')).toContain('is live');
    expect((await server.admin('GET', `/rules/${draft.id}`)).body.state).toBe('live');
    await shot('rule-live');
    await go('/console/rules');
    await shot('rules');
    await go('/console');
    await shot('overview');
  });

  it('sees the decision change in the audit trail, filtered by agent, decision, reason code and time, and verifies the chain', async () => {
    const after = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-3', { amount: 300, currency: 'USD' });
    expect(after.decision).toMatchObject({ decision: 'deny', reason: 'rule_denied: block-medium-refunds' });

    await go('/console/audit');
    await page.selectOption('#filter-agent', agent.id);
    await page.selectOption('#f-decision', 'deny');
    await submit('#audit-filter');
    let rows = await page.locator('table.audit tbody tr').allTextContents();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('rule_denied: block-medium-refunds');
    expect(rows[0]).toContain('refund:r-3');

    // By reason code, with a time window around now: the allowed decision from before the rule.
    const since = new Date(Date.now() - 3600_000).toISOString().slice(0, 16);
    const until = new Date(Date.now() + 3600_000).toISOString().slice(0, 16);
    await go(`/console/audit?agent_id=${encodeURIComponent(agent.id)}&reason=allowed&since=${since}&until=${until}`);
    rows = await page.locator('table.audit tbody tr').allTextContents();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('refund:r-1');
    await go(`/console/audit?agent_id=${encodeURIComponent(agent.id)}&until=2001-01-01T00:00`);
    expect(await page.textContent('.empty')).toContain('No records match');

    // The console's own changes, each naming the person.
    await go('/console/audit?kind=admin');
    const changes = await page.locator('table.audit tbody tr').allTextContents();
    expect(changes.some((r) => r.includes('console.rules.enable') && r.includes(admin.email))).toBe(true);
    expect(changes.some((r) => r.includes('console.agents.create') && r.includes(admin.email))).toBe(true);

    await go(`/console/audit?agent_id=${encodeURIComponent(agent.id)}`);
    await submit('#audit-verify');
    expect(await page.textContent('#verify .notice')).toMatch(/The chain holds: \d+ records/);
    await shot('audit');
  });

  it("shows the agent's usage of its rates and budgets, as the management API counts it, and resets a counter", async () => {
    const usageUrl = `/agents/${encodeURIComponent(agent.id)}/usage`;
    const counters = (await server.admin('GET', usageUrl)).body.data as { id: string; kind: string; used: number; max: number }[];
    const sum = counters.find((c) => c.kind === 'sum')!;
    const count = counters.find((c) => c.kind === 'count')!;
    // The allowed refund of 300 was counted; the one the rule denied was not.
    expect(sum).toMatchObject({ used: 300, max: 2000, remaining: 1700 });
    expect(count.used).toBeGreaterThan(0);

    await go(`/console/agents/${encodeURIComponent(agent.id)}`);
    const rows = page.locator('table.usage tbody tr');
    expect(await rows.nth(0).textContent()).toMatch(/amount sum per 24h.*300 of 2000.*1700/s);
    expect(await rows.nth(1).textContent()).toContain(`${count.used} of 20`);
    expect(await rows.nth(0).locator('meter').getAttribute('value')).toBe('300');
    await shot('agent');

    // Reset the budget: a CSRF-protected form, through the management API's own reset.
    await submit(`table.usage form:has(input[value="${sum.id}"]) button`);
    expect(await page.textContent('.notice.info')).toContain('The counter was reset.');
    expect(await rows.nth(0).textContent()).toMatch(/0 of 2000/);
    const after = (await server.admin('GET', usageUrl)).body.data as { id: string; used: number }[];
    expect(after.find((c) => c.id === sum.id)!.used).toBe(0);
    expect(after.find((c) => c.id === count.id)!.used).toBe(count.used);

    // A counter that is not there (reset twice, from a stale page) is said so, and nothing changes.
    const csrf = (await page.getAttribute('input[name="csrf"]', 'value'))!;
    const stale = await context.request.post(`${server.url}/console/agents/${encodeURIComponent(agent.id)}/usage/reset`, { form: { csrf, counter: 'no-such-counter' }, maxRedirects: 0 });
    expect(stale.status()).toBe(404);
    expect(await stale.text()).toContain('No such counter now');
    // Without the CSRF token, refused.
    const forged = await context.request.post(`${server.url}/console/agents/${encodeURIComponent(agent.id)}/usage/reset`, { form: { counter: count.id }, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect((await server.admin('GET', usageUrl)).body.data.find((c: { id: string }) => c.id === count.id).used).toBe(count.used);

    // The reset is in the audit trail, naming the person who made it.
    await go('/console/audit?kind=usage');
    const records = await page.locator('table.audit tbody tr').allTextContents();
    expect(records).toHaveLength(1);
    expect(records[0]).toContain(admin.email);
    expect(records[0]).toContain('reset');
    expect(records[0]).toContain('usage reset: amount sum per 24h (used 300)');
    const [viaApi] = (await server.admin('GET', '/audit?kind=usage')).body.data;
    expect(viaApi).toMatchObject({ actor: admin.id, agent_id: agent.id, decision: 'reset' });
  });

  it('reviews a policy diff: two versions in force, and the files in force against an uploaded draft', async () => {
    await go('/console/policy');
    expect(await page.textContent('main')).toContain('refunds.policy');
    await shot('policy');
    // The version before the rule went live against the one after.
    await submit('#compare-versions');
    expect(await page.textContent('h1')).toBe('Policy diff');
    const cards = page.locator('article.change');
    expect(await cards.count()).toBeGreaterThan(0);
    const first = (await cards.first().textContent())!;
    expect(first).toContain('create:refunds');
    expect(first).toMatch(/allow\s*→\s*(becomes\s*)?deny/);
    expect(first).toContain('amount > 200');
    expect(first).toContain('"action": "create:refunds"');

    await go('/console/policy');
    await page.setInputFiles('#draft-files', { name: 'refunds.policy', mimeType: 'text/plain', buffer: Buffer.from(POLICY_V2) });
    await submit('#diff-draft');
    const text = (await page.textContent('main'))!;
    expect(text).toContain('the draft (refunds.policy)');
    // The live rule denies above 200 either way: the draft moves nothing the rule already denies.
    expect(text).toContain('No request changes decision');

    // Without the rule in force, the same draft changes 5000 < amount <= 10000 from allow to deny.
    const id = (await server.admin('GET', '/rules')).body.data[0].id;
    await go(`/console/rules/${id}`);
    await submit('#rule-disable');
    expect(await page.textContent('.notice.info')).toContain('is disabled');
    await go('/console/policy');
    await page.setInputFiles('#draft-files', { name: 'refunds.policy', mimeType: 'text/plain', buffer: Buffer.from(POLICY_V2) });
    await submit('#diff-draft');
    const change = (await page.locator('article.change').first().textContent())!;
    expect(change).toContain('amount > 5000');
    expect(change).toContain('amount <= 10000');
    expect(change).toMatch(/allow\s*→\s*(becomes\s*)?deny/);
    const example = JSON.parse((await page.locator('article.change pre.example').first().textContent())!);
    expect(example).toMatchObject({ action: 'create:refunds' });
    expect(example.context.amount).toBeGreaterThan(5000);
    expect(example.context.amount).toBeLessThanOrEqual(10000);
    await shot('policy-diff');
  });

  it('answers an approval', async () => {
    await createRule(server, { name: 'approve-large-refunds', effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'gte', value: 900 } });
    const asked = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-9', { amount: 950, currency: 'EUR' });
    expect(asked.decision?.decision).toBe('approval_required');
    await go('/console/approvals');
    expect(await page.textContent('table.list')).toContain('refund:r-9');
    await shot('approvals');
    await submit('form.answer button[value="approve"]');
    expect(await page.textContent('.notice.info')).toContain('Approved.');
    const retried = await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-9', { amount: 950, currency: 'EUR' });
    expect(retried.decision?.decision).toBe('allow');
  });

  it('a permit rule with a condition in the file syntax grants what no role does, once live', async () => {
    // The agent holds the capability, but none of its roles grants the action.
    await go(`/console/agents/${encodeURIComponent(agent.id)}`);
    await open('add-capability');
    await page.fill('#new-capability', 'read:invoices');
    await submit('#add-capability button[type="submit"]');
    expect(await page.textContent('.notice.info')).toContain('Capability read:invoices saved.');
    token = await accessTokenFor(server, agent);
    const ask = async (region: string) => (await bindAndDecide(server, agent, token, 'read:invoices', 'invoice:i-1', { region })).decision ?? { decision: 'deny' };
    expect(await ask('eu')).toMatchObject({ decision: 'deny' });

    await go('/console/rules/new');
    await page.fill('#f-name', 'eu-invoices');
    await page.selectOption('#f-effect', 'permit');
    await page.fill('#f-subjects', 'agent:*');
    await page.fill('#f-relation', 'read:invoices');
    await page.fill('#f-object', 'invoice:*');
    await page.fill('#f-cond_expr', 'region ==');
    await submit('#rule-validate');
    expect(await page.textContent('#f-cond_expr-error')).toBeTruthy();
    expect(await page.getAttribute('#f-cond_expr', 'aria-invalid')).toBe('true');
    await page.fill('#f-cond_expr', 'region == "eu"');
    await submit('#rule-validate');
    expect(await page.textContent('.notice.ok')).toContain('Valid');
    await submit('#rule-save');
    const rule = (await server.admin('GET', '/rules')).body.data.find((r: { name: string }) => r.name === 'eu-invoices');
    expect(rule).toMatchObject({ effect: 'permit', condition: { expr: 'region == "eu"' }, state: 'draft', validated: true });
    expect(await page.textContent('pre.policy-text')).toContain('effect permit');
    await submit('#rule-impact-run');
    await submit('#rule-enable');
    expect(await page.textContent('.notice.info')).toContain('is live');

    expect(await ask('eu')).toMatchObject({ decision: 'allow' });
    expect(await ask('us')).toMatchObject({ decision: 'deny' });
    await go('/console/rules');
    expect(await page.textContent('table.list')).toContain('eu-invoices');
    await shot('rules');
    await go('/console');
    await shot('overview');
  });

  it('applications: create (the secret shown once), edit redirect URIs, delete; the console application stays', async () => {
    await go('/console/applications');
    await open('create');
    await page.fill('#f-name', 'Portal');
    await page.selectOption('#f-type', 'web');
    await page.fill('#f-redirect_uris', 'https://portal.example/cb\njavascript:alert(1)');
    await submit('form[action="/console/applications"] button[type="submit"]');
    expect(await page.textContent('#f-redirect_uris-error')).toContain('javascript: is not allowed');
    await page.fill('#f-redirect_uris', 'https://portal.example/cb');
    await submit('form[action="/console/applications"] button[type="submit"]');
    const secret = (await page.textContent('#client-secret'))!;
    expect(secret.length).toBeGreaterThanOrEqual(32);
    await shot('application-secret');
    await page.click('text=Continue to the application');
    expect(await page.content()).not.toContain(secret);
    await page.fill('#f-redirect_uris', 'https://portal.example/cb\nhttps://portal.example/cb2');
    await submit('form[action^="/console/applications/"] button:has-text("Save changes")');
    expect(await page.textContent('.notice.info')).toContain('saved');
    const apps = (await server.admin('GET', '/applications')).body.data;
    const portal = apps.find((a: { name: string }) => a.name === 'Portal');
    expect(portal.redirect_uris).toEqual(['https://portal.example/cb', 'https://portal.example/cb2']);
    await shot('application');

    await submit('form.danger-zone button');
    expect(await page.textContent('.notice.info')).toContain('deleted');
    expect((await server.admin('GET', `/applications/${portal.client_id}`)).status).toBe(404);
    await go('/console/applications/gatehouse-console');
    expect(await page.locator('form.danger-zone').count()).toBe(0);
    await go('/console/applications');
    await shot('applications');
  });

  it('people: create, assign to an application, roles and groups, revoke sessions', async () => {
    const app = await server.admin('POST', '/applications', { name: 'Helpdesk', type: 'spa', redirect_uris: ['https://help.example/cb'] });
    await go('/console/people');
    await open('create');
    await page.fill('#f-email', 'sam@example.com');
    await page.fill('#f-name', 'Sam <b>Support</b>');
    await page.fill('#f-password', 'sam long password 1');
    await page.fill('#f-roles', 'support, auditor');
    await page.fill('#f-groups', 'eu');
    await submit('#create button[type="submit"]');
    expect(await page.textContent('h1')).toBe('Sam <b>Support</b>');
    await page.selectOption('#assign-app', app.body.client_id);
    await submit('form[action$="/assign"] button');
    expect(await page.textContent('main')).toContain('Helpdesk');
    const sam = (await server.admin('GET', '/users?email=sam@example.com')).body.data[0];
    expect(sam).toMatchObject({ roles: ['support', 'auditor'], groups: ['eu'] });
    expect((await server.admin('GET', `/applications/${app.body.client_id}`)).body.assignments).toEqual([sam.id]);
    await submit('button:has-text("Revoke every session")');
    expect(await page.textContent('.notice.info')).toContain('0 sessions ended');
    await shot('person');
    await go('/console/people');
    await shot('people');
  });

  it('keys: rotate; Shared Signals streams: create and delete', async () => {
    const jwksNow = async () => ((await (await fetch(server.ctx.urls.jwks)).json()) as { keys: { kid: string }[] }).keys;
    const before = await jwksNow();
    await go('/console/keys');
    await page.selectOption('#f-alg', 'EdDSA');
    await submit('#keys-rotate');
    expect(await page.textContent('.notice.info')).toContain('New signing keys: EdDSA');
    expect((await jwksNow()).length).toBe(before.length + 1);
    await shot('keys');

    await go('/console/streams');
    await open('create');
    await page.fill('#f-endpoint_url', 'https://receiver.example/events');
    await page.fill('#f-description', 'SIEM');
    await submit('form[action="/console/streams"] button[type="submit"]');
    expect(await page.textContent('.notice.info')).toContain('created');
    const streams = await (await fetch(server.ctx.urls.ssfStreams, { headers: { authorization: `Bearer ${server.adminToken}` } })).json();
    expect(streams).toHaveLength(1);
    await shot('streams');
    await submit('form.danger-zone button');
    expect(await page.textContent('.notice.info')).toContain('deleted');
    expect(dialogs.length).toBeGreaterThan(0);
  });

  it('a POST without, or with a wrong, CSRF token (or from another origin) is refused and changes nothing', async () => {
    await go('/console/roles');
    const csrf = (await page.getAttribute('input[name="csrf"]', 'value'))!;
    const post = (form: Record<string, string>, headers: Record<string, string> = {}) =>
      context.request.post(`${server.url}/console/roles`, { form, headers, maxRedirects: 0 });
    expect((await post({ name: 'probe', permissions: 'read:things' })).status()).toBe(403);
    expect((await post({ name: 'probe', permissions: 'read:things', csrf: `${csrf}x` })).status()).toBe(403);
    expect((await post({ name: 'probe', permissions: 'read:things', csrf }, { origin: 'https://evil.example' })).status()).toBe(403);
    expect((await server.admin('GET', '/roles/probe')).status).toBe(404);
    // The same form with the session's token goes through (so the refusals above are the token's doing).
    expect((await post({ name: 'probe', permissions: 'read:things', csrf })).status()).toBe(303);
    expect((await server.admin('GET', '/roles/probe')).status).toBe(200);
    await go('/console/roles'); // shows (and spends) the message the last POST left
    expect(await page.textContent('.notice.info')).toContain('Role probe created.');
  });

  it('a person without the role admin is refused with a 403 page', async () => {
    const other = await browser.newContext({ viewport: LAPTOP });
    const p = await other.newPage();
    let callback = 0;
    p.on('response', (r) => {
      if (r.url().includes('/console/callback')) callback = r.status();
    });
    await p.goto(`${server.url}/console`);
    await p.fill('input[name="email"]', 'pat@example.com');
    await p.fill('input[name="password"]', 'pat@example.com long password');
    await Promise.all([p.waitForURL(/\/console\/callback/), p.click('button[type="submit"]')]);
    expect(callback).toBe(403);
    expect(await p.textContent('h1')).toBe('No access to the console');
    expect((await other.cookies()).find((c) => c.name === 'gatehouse_console')).toBeUndefined();
    await shot('refused', p);
    await other.close();
  });

  it('works without JavaScript: sign in, reset a counter, delete a rule behind its "I am sure" box', async () => {
    const plain = await browser.newContext({ viewport: LAPTOP, javaScriptEnabled: false });
    const p = await plain.newPage();
    p.setDefaultTimeout(10_000);
    const send = async (selector: string) => {
      await Promise.all([p.waitForEvent('load'), p.click(selector)]);
    };
    await p.goto(`${server.url}/console/rules`);
    await p.fill('input[name="email"]', admin.email);
    await p.fill('input[name="password"]', admin.password);
    await Promise.all([p.waitForURL(`${server.url}/console/rules`), p.click('button[type="submit"]')]);

    // A counter with usage: the rate counted the allowed decisions since the reset of the budget.
    const usageUrl = `/agents/${encodeURIComponent(agent.id)}/usage`;
    const count = ((await server.admin('GET', usageUrl)).body.data as { id: string; kind: string; capability: string; used: number }[]).find((c) => c.kind === 'count' && c.capability === 'create:refunds')!;
    expect(count.used).toBeGreaterThan(0);
    await p.goto(`${server.url}/console/agents/${encodeURIComponent(agent.id)}`);
    await send(`table.usage form:has(input[value="${count.id}"]) button`);
    expect(await p.textContent('.notice.info')).toContain('The counter was reset.');
    expect((await server.admin('GET', usageUrl)).body.data.find((c: { id: string }) => c.id === count.id).used).toBe(0);

    const rule = (await server.admin('GET', '/rules')).body.data.find((r: { name: string }) => r.name === 'eu-invoices');
    await p.goto(`${server.url}/console/rules/${rule.id}`);
    // The browser will not send the form until the box is ticked.
    await p.click('form.danger-zone button');
    expect(new URL(p.url()).pathname).toBe(`/console/rules/${rule.id}`);
    expect((await server.admin('GET', `/rules/${rule.id}`)).status).toBe(200);
    await p.check('#delete-rule-confirm');
    await send('form.danger-zone button');
    expect(await p.textContent('.notice.info')).toContain('Rule eu-invoices deleted.');
    expect((await server.admin('GET', `/rules/${rule.id}`)).status).toBe(404);
    await plain.close();
  });

  it('reads on a phone', async () => {
    await page.setViewportSize(PHONE);
    const id = (await server.admin('GET', '/rules')).body.data.find((r: { name: string }) => r.name === 'block-medium-refunds').id;
    await go(`/console/rules/${id}`);
    // Nothing wider than the screen.
    expect(await pageWidth()).toBeLessThanOrEqual(PHONE.width);
    await shot('phone-rule');
    await go(`/console/audit?agent_id=${encodeURIComponent(agent.id)}`);
    expect(await pageWidth()).toBeLessThanOrEqual(PHONE.width);
    await shot('phone-audit');
    await go(`/console/agents/${encodeURIComponent(agent.id)}`);
    expect(await pageWidth()).toBeLessThanOrEqual(PHONE.width);
    await shot('phone-agent');
    // Every section's page fits the phone's width.
    const sections = await page.locator('nav.sections a').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''));
    expect(sections).toHaveLength(12);
    for (const path of [...sections, '/console', '/console/rules/new', `/console/people/${admin.id}`, '/console/applications/gatehouse-console']) {
      await go(path);
      expect({ path, width: await pageWidth() }).toEqual({ path, width: expect.toSatisfy((w: number) => w <= PHONE.width) });
    }
    await page.setViewportSize(LAPTOP);
  });
});
