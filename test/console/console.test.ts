import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleReturnPath } from '../../src/console/sign-in.js';
import { parseMultipart } from '../../src/console/multipart.js';
import { startTestServer, verifyAuditTrail, type TestServer } from '../helpers/server.js';
import { Browser } from '../oauth/helpers.js';
import { accessTokenFor, bindAndDecide, putRole, registerAgent } from '../agents/helpers.js';
import { consoleSignIn, csrfOf, makePerson } from './helpers.js';

const CONSOLE = 'gatehouse-console';

describe('the console application', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('exists from the first start: public, first party, one redirect URI on the issuer', async () => {
    const app = (await server.admin('GET', `/applications/${CONSOLE}`)).body;
    expect(app).toMatchObject({
      client_id: CONSOLE,
      type: 'web',
      confidential: false,
      has_secret: false,
      first_party: true,
      refresh_tokens: false,
      redirect_uris: [`${server.ctx.urls.issuer}/console/callback`],
      post_logout_redirect_uris: [`${server.ctx.urls.issuer}/console/signed-out`],
    });
  });

  it('cannot be edited into something unsafe or deleted through the management API; a rename is fine', async () => {
    const attempts: [Record<string, unknown>, string][] = [
      [{ redirect_uris: ['https://evil.example/cb'] }, 'redirect_uris'],
      [{ redirect_uris: [`${server.ctx.urls.issuer}/console/callback`, 'https://evil.example/cb'] }, 'redirect_uris'],
      [{ post_logout_redirect_uris: ['https://evil.example/'] }, 'post_logout_redirect_uris'],
      [{ confidential: true }, 'confidential'],
      [{ first_party: false }, 'first_party'],
      [{ refresh_tokens: true }, 'refresh_tokens'],
      [{ dpop_bound_access_tokens: true }, 'dpop_bound_access_tokens'],
      [{ type: 'spa' }, 'type'],
      [{ rotate_secret: true }, 'rotate_secret'],
    ];
    for (const [patch, field] of attempts) {
      const res = await server.admin('PATCH', `/applications/${CONSOLE}`, patch);
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(field);
    }
    expect((await server.admin('DELETE', `/applications/${CONSOLE}`)).status).toBe(409);
    expect((await server.admin('POST', '/applications', { name: 'x', type: 'spa', client_id: CONSOLE, redirect_uris: ['https://evil.example/cb'] })).status).toBe(409);
    const renamed = await server.admin('PATCH', `/applications/${CONSOLE}`, { name: 'Our console' });
    expect(renamed.status).toBe(200);
    expect(renamed.body.redirect_uris).toEqual([`${server.ctx.urls.issuer}/console/callback`]);
  });

  it('follows the issuer across restarts, idempotently', async () => {
    const dir = server.dir;
    const first = await startTestServer({ dir: `${dir}-restart`, env: { GATEHOUSE_ISSUER: 'https://id.example.com' } });
    try {
      expect((await first.admin('GET', `/applications/${CONSOLE}`)).body.redirect_uris).toEqual(['https://id.example.com/console/callback']);
    } finally {
      await first.stop();
    }
    const again = await startTestServer({ dir: `${dir}-restart`, env: { GATEHOUSE_ISSUER: 'https://login.example.org' } });
    try {
      const apps = (await again.admin('GET', '/applications')).body.data.filter((a: { client_id: string }) => a.client_id === CONSOLE);
      expect(apps).toHaveLength(1);
      expect(apps[0].redirect_uris).toEqual(['https://login.example.org/console/callback']);
    } finally {
      await again.stop();
    }
  });
});

describe('who gets in', () => {
  let server: TestServer;
  let admin: { id: string; email: string; password: string };
  beforeAll(async () => {
    server = await startTestServer();
    admin = await makePerson(server, 'ada@example.com', ['admin']);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('an admin signs in without an assignment; the exemption is the console’s alone', async () => {
    const { last } = await consoleSignIn(server, admin.email, admin.password);
    expect(last.status).toBe(200);
    expect(await last.text()).toContain('<h1>Overview</h1>');
    expect((await server.admin('GET', `/applications/${CONSOLE}`)).body.assignments).toEqual([]);

    // Another application still needs the assignment, admin or not.
    const app = (await server.admin('POST', '/applications', { name: 'Portal', type: 'spa', redirect_uris: ['https://portal.example/cb'] })).body;
    const { browser } = await consoleSignIn(server, admin.email, admin.password);
    const res = await browser.get(
      `/oauth/authorize?client_id=${app.client_id}&redirect_uri=${encodeURIComponent('https://portal.example/cb')}&response_type=code&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s`,
    );
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get('location')!).searchParams.get('error')).toBe('access_denied');
  });

  it('a person without admin is refused with 403, assigned or not', async () => {
    const pat = await makePerson(server, 'pat@example.com', ['support']);
    const notAssigned = await consoleSignIn(server, pat.email, pat.password);
    expect(notAssigned.last.status).toBe(403);
    expect(notAssigned.statuses.some((s) => s.url.includes('/console/callback?error=access_denied'))).toBe(true);
    expect(notAssigned.browser.jar.cookies.has('gatehouse_console')).toBe(false);

    // Assigned by hand: Gatehouse issues the tokens, the console still checks the role.
    expect((await server.admin('PUT', `/applications/${CONSOLE}/assignments/${pat.id}`)).status).toBe(204);
    const assigned = await consoleSignIn(server, pat.email, pat.password);
    expect(assigned.last.status).toBe(403);
    expect(await assigned.last.text()).toContain('pat@example.com does not hold it');
    expect(assigned.browser.jar.cookies.has('gatehouse_console')).toBe(false);
  });

  it('losing the role, or the Gatehouse session, ends access at the next request', async () => {
    const eve = await makePerson(server, 'eve@example.com', ['admin']);
    const { browser } = await consoleSignIn(server, eve.email, eve.password);
    expect((await browser.get('/console/agents')).status).toBe(200);
    await server.admin('PATCH', `/users/${eve.id}`, { roles: [] });
    expect((await browser.get('/console/agents')).status).toBe(403);
    await server.admin('PATCH', `/users/${eve.id}`, { roles: ['admin'] });
    expect((await browser.get('/console/agents')).status).toBe(200);
    expect((await server.admin('POST', `/users/${eve.id}/sessions/revoke`)).status).toBe(204);
    const after = await browser.get('/console/agents');
    expect(after.status).toBe(302);
    expect(after.headers.get('location')).toBe('/console/login?return_to=%2Fconsole%2Fagents');
  });

  it('a forged or stale callback makes no session', async () => {
    const b = new Browser(server.url);
    const noFlow = await b.get('/console/callback?code=abc&state=xyz');
    expect(noFlow.status).toBe(400);
    // A real flow, answered with another state.
    const start = await b.get('/console/login');
    expect(start.status).toBe(302);
    const wrong = await b.get('/console/callback?code=abc&state=not-the-state');
    expect(wrong.status).toBe(400);
    expect(b.jar.cookies.has('gatehouse_console')).toBe(false);
    // A session cookie from elsewhere (not sealed by this server) is no session.
    const forged = new Browser(server.url);
    forged.jar.cookies.set('gatehouse_console', 'v1.AAAA.BBBB.CCCC');
    expect((await forged.get('/console/agents')).status).toBe(302);
  });

  it('returns only to console paths after sign-in', async () => {
    expect(consoleReturnPath('/console/agents?x=1')).toBe('/console/agents?x=1');
    for (const bad of ['https://evil.example/', '//evil.example/console', '/console//evil.example', '/consolex', '/approvals', '/console/\\evil', 42, undefined]) {
      expect(consoleReturnPath(bad)).toBe('/console');
    }
    const { statuses, last } = await consoleSignIn(server, admin.email, admin.password, '/console/login?return_to=https%3A%2F%2Fevil.example%2F');
    expect(last.status).toBe(200);
    expect(statuses.at(-1)!.url).toBe(`${server.url}/console`);
  });
});

describe('console pages and actions', () => {
  let server: TestServer;
  let admin: { id: string; email: string; password: string };
  let browser: Browser;
  beforeAll(async () => {
    server = await startTestServer({ policies: { 'a.policy': 'policy "a" version 1\n' } });
    admin = await makePerson(server, 'ada@example.com', ['admin']);
    ({ browser } = await consoleSignIn(server, admin.email, admin.password));
  });
  afterAll(async () => {
    await server?.stop();
  });

  const page = async (path: string) => {
    const res = await browser.get(path);
    return { status: res.status, html: await res.text(), headers: res.headers };
  };

  it('escapes what it shows, and has no inline script or style anywhere', async () => {
    await makePerson(server, 'mallory@example.com', [], '<script>alert(1)</script><img src=x onerror=alert(2)>');
    const people = await page('/console/people');
    expect(people.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;');
    expect(people.html).not.toContain('<script>alert');
    for (const path of ['/console', '/console/applications', '/console/people', '/console/roles', '/console/agents', '/console/rules', '/console/rules/new', '/console/policy', '/console/approvals', '/console/audit', '/console/keys', '/console/streams']) {
      const p = await page(path);
      expect(p.status, path).toBe(200);
      // Text is escaped, so every `<` left is a real tag: look at the tags alone.
      const tags = p.html.match(/<[a-z][^>]*>/gi) ?? [];
      expect(tags.filter((t) => /^<script\b/i.test(t) && !/\ssrc="\/console\/static\//.test(t)), path).toEqual([]);
      expect(tags.filter((t) => /^<style\b|\sstyle=|\son[a-z]+=/i.test(t)), path).toEqual([]);
      expect(p.headers.get('content-security-policy')).toBe(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
      );
      expect(p.headers.get('cache-control')).toBe('no-store');
    }
    const css = await browser.get('/console/static/console.css');
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect((await browser.get('/console/static/../../server.ts')).status).toBe(404);
  });

  it('writes each change to the audit trail naming the person, and the chain still verifies with the CLI', async () => {
    const roles = await page('/console/roles');
    const res = await browser.post('/console/roles', { csrf: csrfOf(roles.html), name: 'auditor', permissions: 'read:audit' });
    expect(res.status).toBe(303);
    const trail = await server.admin('GET', '/audit?kind=admin');
    const change = trail.body.data.find((r: { action: string }) => r.action === 'console.roles.create');
    expect(change).toMatchObject({ kind: 'admin', actor: admin.id, resource: 'role:auditor', context: { permissions: ['read:audit'] } });
    const { code, stdout } = await verifyAuditTrail(server);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ok: \d+ records\n$/);
  });

  it('answers bad addresses with a page, never a 500', async () => {
    expect((await page('/console/agents/%E0%A4%A')).status).toBe(400);
    expect((await page('/console/agents/nope')).status).toBe(404);
    expect((await page('/console/rules/nope')).status).toBe(404);
    expect((await page('/console/nowhere')).status).toBe(404);
    expect((await page('/console/audit?since=never')).status).toBe(400);
  });

  it('a POST without a console session changes nothing', async () => {
    const stranger = new Browser(server.url);
    const res = await stranger.post('/console/roles', { name: 'sneaky', permissions: 'read:x' });
    expect(res.status).toBe(403);
    expect((await server.admin('GET', '/roles/sneaky')).status).toBe(404);
  });

  it('refused input is shown next to its field with what was typed', async () => {
    const agents = await page('/console/agents');
    const res = await browser.post('/console/agents', {
      csrf: csrfOf(agents.html),
      name: 'bad name!',
      mode: 'autonomous',
      public_jwk: '{"kty":"RSA"}',
      capability: 'refunds',
      limits: '{"amount": {"most": 5}}',
    });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toMatch(/id="f-name-error">must be 1 to 100 characters/);
    expect(html).toMatch(/id="f-public_jwk-error">kty must be &quot;OKP&quot;/);
    expect(html).toMatch(/id="f-capability-error">must be a permission key/);
    expect(html).toContain('value="bad name!"');
  });

  it('a destructive form without its "I am sure" box is shown again with the reason, and nothing is deleted', async () => {
    await server.admin('PUT', '/roles/keeper', { permissions: ['read:things'] });
    const roles = await page('/console/roles');
    const res = await browser.post('/console/roles/delete', { csrf: csrfOf(roles.html), name: 'keeper' });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain('tick the box to confirm');
    expect(html).toContain('<h1>Roles</h1>');
    expect((await server.admin('GET', '/roles/keeper')).status).toBe(200);
    // A secret typed into a refused stream form is not shown again.
    const streams = await page('/console/streams');
    const refused = await browser.post('/console/streams', { csrf: csrfOf(streams.html), endpoint_url: 'not a url', authorization_header: 'Bearer s3cret-value' });
    expect(refused.status).toBe(400);
    expect(await refused.text()).not.toContain('s3cret-value');
  });

  it('sets a person’s attributes (replaced whole), naming a bad value at its field', async () => {
    const kim = await makePerson(server, 'kim@example.com', []);
    const path = `/console/people/${encodeURIComponent(kim.id)}`;
    const form = await page(path);
    const fields = { csrf: csrfOf(form.html), email: kim.email, name: 'Kim', roles: 'support', groups: 'eu, night' };
    const bad = await browser.post(path, { ...fields, attributes: '{"clearance": ' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/id="f-attributes-error">is not JSON/);
    const good = await browser.post(path, { ...fields, attributes: '{"department": "finance", "limits": {"daily": 3}}' });
    expect(good.status).toBe(303);
    expect((await server.admin('GET', `/users/${kim.id}`)).body).toMatchObject({
      roles: ['support'],
      groups: ['eu', 'night'],
      attributes: { department: 'finance', limits: { daily: 3 } },
    });
    expect((await page(path)).html).toContain('&quot;department&quot;: &quot;finance&quot;');
  });

  it('keeps every policy version in force, and compares any two', async () => {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(`${server.policyDir}/a.policy`, 'policy "a" version 2\n\nrule "no-exports" {\n  effect deny\n  subjects "agent:*"\n  relation "create:exports"\n  object "export:*"\n}\n');
    const policy = await page('/console/policy');
    const reload = await browser.post('/console/policy/reload', { csrf: csrfOf(policy.html) });
    expect(reload.status).toBe(303);
    const versions = await server.ctx.store.policyVersions.list();
    expect(versions.map((v) => v.version.split('#')[0])).toEqual(['a@2', 'a@1']);
    const diff = await page(`/console/policy/diff?from=${encodeURIComponent(versions[1]!.version)}&to=${encodeURIComponent(versions[0]!.version)}`);
    expect(diff.status).toBe(200);
    expect(diff.html).toContain('1 region of the request space change decision.');
    expect(diff.html).toContain('<code>create:exports</code> on <code>export:*</code>');
    expect((await page('/console/policy/diff?from=nope&to=nope')).status).toBe(404);

    // A reload with errors keeps the policy in force and lists the errors.
    writeFileSync(`${server.policyDir}/a.policy`, 'policy "a" version 3\nrule "x" { effect maybe }\n');
    const broken = await browser.post('/console/policy/reload', { csrf: csrfOf(policy.html) });
    expect(broken.status).toBe(400);
    expect(await broken.text()).toMatch(/a\.policy:\d+:\d+: /);
    expect((await server.ctx.policy.current()).version.startsWith('a@2#')).toBe(true);
  });

  it('a draft too large to compare exactly: 400 with the reason, and the policy in force untouched', async () => {
    const { readFileSync, writeFileSync, unlinkSync } = await import('node:fs');
    const text = readFileSync(new URL('../cli/diff.test.ts', import.meta.url), 'utf8');
    const fixture = (name: string) => text.split(`const ${name} = \``)[1]!.split('`;')[0]!;
    writeFileSync(`${server.policyDir}/a.policy`, 'policy "a" version 4\n');
    writeFileSync(`${server.policyDir}/wide.policy`, fixture('WIDE_BEFORE'));
    const policy = await page('/console/policy');
    expect((await browser.post('/console/policy/reload', { csrf: csrfOf(policy.html) })).status).toBe(303);
    const inForce = (await server.ctx.policy.current()).version;
    const res = await browser.post('/console/policy/diff', { csrf: csrfOf(policy.html), draft_name: 'wide.policy', draft_text: fixture('WIDE_AFTER') });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/the two versions are too large to compare exactly: the conditions and limits read too many combinations of values \(more than \d+ steps\), on /);
    expect((await server.ctx.policy.current()).version).toBe(inForce);
    unlinkSync(`${server.policyDir}/wide.policy`);
    expect((await browser.post('/console/policy/reload', { csrf: csrfOf(policy.html) })).status).toBe(303);
  });
});

describe("an agent's rates and budgets from the policy files", () => {
  let server: TestServer;
  let browser: Browser;
  const FILE = `policy "budgets" version 1

limits "create:refunds" for "spiffe://localhost/agent/payer" {
  amount sum max 700 per 24h
  count max 3 per 10m per resource
}
`;
  beforeAll(async () => {
    server = await startTestServer({ policies: { 'budgets.policy': FILE } });
    const admin = await makePerson(server, 'ada@example.com', ['admin']);
    ({ browser } = await consoleSignIn(server, admin.email, admin.password));
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("are listed beside the capability's own, with what decisions used, and reset the same way", async () => {
    await putRole(server, 'refunder', ['create:refunds']);
    const agent = await registerAgent(server, { name: 'payer', mode: 'autonomous', roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { count: [{ max: 10, per: '1h' }] } }] });
    const token = await accessTokenFor(server, agent);
    expect((await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-1', { amount: 300 })).decision).toMatchObject({ decision: 'allow' });
    // Over the file's budget: nothing is bound.
    expect((await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-2', { amount: 500 })).bindStatus).toBe(403);

    const usageUrl = `/agents/${encodeURIComponent(agent.id)}/usage`;
    const counters = (await server.admin('GET', usageUrl)).body.data as { id: string; kind: string; per: string; scope: string; key?: string; used: number; max: number }[];
    expect(counters.map(({ kind, per, scope, key, used, max }) => ({ kind, per, scope, key, used, max }))).toEqual([
      { kind: 'count', per: '1h', scope: 'agent', key: undefined, used: 1, max: 10 },
      { kind: 'sum', per: '24h', scope: 'agent', key: undefined, used: 300, max: 700 },
      { kind: 'count', per: '10m', scope: 'resource', key: 'refund:r-1', used: 1, max: 3 },
    ]);

    const res = await browser.get(`/console/agents/${encodeURIComponent(agent.id)}`);
    const html = await res.text();
    expect(html).toContain('amount sum per 24h');
    expect(html).toContain('300 of 700');
    expect(html).toContain('count per 10m per resource');
    expect(html).toContain('refund:r-1');

    const sum = counters.find((c) => c.kind === 'sum')!;
    const reset = await browser.post(`/console/agents/${encodeURIComponent(agent.id)}/usage/reset`, { csrf: csrfOf(html), counter: sum.id });
    expect(reset.status).toBe(303);
    expect((await server.admin('GET', usageUrl)).body.data.find((c: { id: string }) => c.id === sum.id).used).toBe(0);
    // With the budget reset, the refund it refused goes through.
    expect((await bindAndDecide(server, agent, token, 'create:refunds', 'refund:r-2', { amount: 500 })).decision).toMatchObject({ decision: 'allow' });
  });
});

describe('the audit query of the management API', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('filters by reason code and time, and names a bad value', async () => {
    const audit = server.ctx.store.audit;
    await audit.append({ kind: 'decision', time: 1_700_000_000, agent_id: 'a', decision: 'deny', reason: 'rule_denied: r1' });
    await audit.append({ kind: 'decision', time: 1_700_000_100, agent_id: 'a', decision: 'deny', reason: 'constraint_violated: amount max' });
    await audit.append({ kind: 'decision', time: 1_700_000_200, agent_id: 'a', decision: 'allow', reason: 'allowed' });
    await audit.append({ kind: 'decision', time: 1_700_000_300, agent_id: 'a', decision: 'deny', reason: 'rule_deniedX: lookalike' });
    const reasons = async (q: string) => (await server.admin('GET', `/audit?${q}`)).body.data.map((r: { reason: string }) => r.reason);
    expect(await reasons('reason=rule_denied')).toEqual(['rule_denied: r1']);
    expect(await reasons('reason=allowed')).toEqual(['allowed']);
    expect(await reasons('since=1700000100&until=1700000200')).toEqual(['allowed', 'constraint_violated: amount max']);
    expect(await reasons(`since=${encodeURIComponent(new Date(1_700_000_150_000).toISOString())}`)).toEqual(['rule_deniedX: lookalike', 'allowed']);
    const bad = await server.admin('GET', '/audit?since=yesterday&reason=Rule%20Denied');
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(['reason', 'since']);
  });

  // Times are 64-bit on both databases: past 2038 (2^31 seconds) a time is a number like any other.
  it('finds records past 2038 by time, in seconds or ISO 8601', async () => {
    const audit = server.ctx.store.audit;
    await audit.append({ kind: 'decision', time: 2 ** 32, agent_id: 'far', decision: 'allow', reason: 'allowed' });
    const times = async (q: string) => {
      const r = await server.admin('GET', `/audit?agent_id=far&${q}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.data.map((x: { time: string }) => x.time);
    };
    expect(await times(`since=${2 ** 32}`)).toEqual(['2106-02-07T06:28:16.000Z']);
    expect(await times(`since=2100-01-01T00:00:00Z&until=2200-01-01T00:00:00Z`)).toEqual(['2106-02-07T06:28:16.000Z']);
    expect(await times(`until=${2 ** 32 - 1}`)).toEqual([]);
  });
});

describe('multipart forms', () => {
  const body = (parts: string[], boundary = 'XyZ') => Buffer.from(`--${boundary}\r\n${parts.join(`\r\n--${boundary}\r\n`)}\r\n--${boundary}--\r\n`);

  it('reads fields and files', () => {
    const parts = parseMultipart(
      body(['Content-Disposition: form-data; name="csrf"\r\n\r\ntok', 'Content-Disposition: form-data; name="files"; filename="a.policy"\r\nContent-Type: text/plain\r\n\r\nline 1\r\nline 2']),
      'multipart/form-data; boundary=XyZ',
    );
    expect(parts).toEqual([
      { name: 'csrf', data: Buffer.from('tok') },
      { name: 'files', filename: 'a.policy', data: Buffer.from('line 1\r\nline 2') },
    ]);
    expect(parseMultipart(body(['Content-Disposition: form-data; name="x"\r\n\r\n1'], 'a b'), 'multipart/form-data; boundary="a b"')).toHaveLength(1);
  });

  it('refuses what is not well formed', () => {
    expect(parseMultipart(Buffer.from('no boundary here'), 'multipart/form-data')).toBeNull();
    expect(parseMultipart(Buffer.from('--XyZ\r\nContent-Disposition: form-data; name="x"\r\n\r\nunterminated'), 'multipart/form-data; boundary=XyZ')).toBeNull();
    expect(parseMultipart(body(['Content-Type: text/plain\r\n\r\nnameless']), 'multipart/form-data; boundary=XyZ')).toBeNull();
    expect(parseMultipart(body(Array.from({ length: 70 }, (_, i) => `Content-Disposition: form-data; name="f${i}"\r\n\r\nv`)), 'multipart/form-data; boundary=XyZ')).toBeNull();
  });
});
