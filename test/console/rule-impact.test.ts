// The Impact button of a saved rule's page (a rule saved without the form's Impact, here through
// the management API), over HTTP: the server refuses Enable until the Impact of the rule's current
// content on the last 7 days of recorded decisions has been shown, again after the content
// changes, and still refuses a rule that breaks an invariant once its impact is seen. The form's
// own Impact before Save is tested in rule-form-impact.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import type { Browser } from '../oauth/helpers.js';
import { consoleSignIn, csrfOf, makePerson } from './helpers.js';

let server: TestServer;
let browser: Browser;

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
  const admin = await makePerson(server, 'ada@example.com', ['admin']);
  browser = (await consoleSignIn(server, admin.email, admin.password)).browser;
}, 60_000);
afterAll(async () => server?.stop());

const rule = (name: string, value: number) => ({
  name, effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*',
  condition: { field: 'amount', op: 'gt', value },
});

async function page(path: string): Promise<{ status: number; html: string }> {
  const res = await browser.get(path);
  return { status: res.status, html: await res.text() };
}

/** A POST of one of the rule page's forms (with its CSRF token). */
async function press(id: string, step: 'impact' | 'enable'): Promise<{ status: number; html: string }> {
  const { html } = await page(`/console/rules/${id}`);
  const res = await browser.post(`/console/rules/${id}/${step}`, { csrf: csrfOf(html) });
  return { status: res.status, html: res.status >= 300 && res.status < 400 ? '' : await res.text() };
}

const state = async (id: string) => (await server.admin('GET', `/rules/${id}`)).body.state;

describe('console: Impact before Enable', () => {
  it('refuses Enable until the impact of this exact content has been shown, and again after an edit', async () => {
    const created = (await server.admin('POST', '/rules', rule('wait-above-500', 500))).body;
    expect((await server.admin('POST', `/rules/${created.id}/validate`)).body.valid).toBe(true);

    // Validated and saved, but its impact not shown: the button is disabled and the server refuses.
    const before = await page(`/console/rules/${created.id}`);
    expect(before.html).toMatch(/<button type="submit" id="rule-enable" class="btn primary" disabled>/);
    expect(before.html).not.toContain('id="rule-impact"');
    const refused = await press(created.id, 'enable');
    expect(refused.status).toBe(409);
    expect(refused.html).toContain('see the Impact of this rule');
    expect(await state(created.id)).toBe('draft');

    // Impact: the recorded decisions of 7 days decided again with the rule live.
    const impact = await press(created.id, 'impact');
    expect(impact.status).toBe(200);
    expect(impact.html).toMatch(/<p id="rule-impact">\d+ recorded decisions replayed with this rule live: \d+ would change\.<\/p>/);
    expect(impact.html).toMatch(/<button type="submit" id="rule-enable" class="btn primary">/);

    // The content changes (and validates again): its impact has not been shown.
    expect((await server.admin('PATCH', `/rules/${created.id}`, { condition: { field: 'amount', op: 'gt', value: 1000 } })).status).toBe(200);
    expect((await server.admin('POST', `/rules/${created.id}/validate`)).body.valid).toBe(true);
    expect((await press(created.id, 'enable')).status).toBe(409);
    expect(await state(created.id)).toBe('draft');

    expect((await press(created.id, 'impact')).status).toBe(200);
    const enabled = await press(created.id, 'enable');
    expect(enabled.status).toBe(303);
    expect(await state(created.id)).toBe('live');
  }, 60_000);

  it('a rule that breaks an invariant stays refused after its impact is shown', async () => {
    const created = (await server.admin('POST', '/rules', rule('wait-above-10', 10))).body;
    expect((await server.admin('POST', `/rules/${created.id}/validate`)).body.valid).toBe(false);
    const shown = await page(`/console/rules/${created.id}`);
    expect(shown.html).not.toContain('id="rule-enable"');
    expect((await press(created.id, 'impact')).status).toBe(200);
    const refused = await press(created.id, 'enable');
    expect(refused.status).toBe(409);
    expect(await state(created.id)).toBe('draft');
  }, 60_000);
});
