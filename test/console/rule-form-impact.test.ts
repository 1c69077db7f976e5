// The console's rule flow Validate -> Impact -> Save -> Enable, over HTTP, against a recorded
// week of AuthZEN decisions (a set clock moving through it). Impact on the form replays the
// unsaved content (writing nothing), with counts that match the decisions and the management
// API's replay; Save of exactly that content lets Enable follow; Save of other content, or with
// a forged, foreign or garbled proof of Impact, does not. Runs on SQLite, and on PostgreSQL when
// GATEHOUSE_TEST_DATABASE_URL is set (the test servers follow it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, pdpPost, putUser, tokenFor } from '../authzen/helpers.js';
import { testServerUrl } from '../helpers/database.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import type { Browser } from '../oauth/helpers.js';
import { ruleContentHash } from '../../src/admin/rules.js';
import { consoleSignIn, csrfOf, makePerson } from './helpers.js';

const POLICY = `rule "people edit their own documents" {
  effect permit
  subjects "user:*"
  relation "update:documents"
  object "document:*"
  when resource.owner == subject.email
}
`;

const PEOPLE = [
  { id: 'ann', email: 'ann@example.com' },
  { id: 'bob', email: 'bob@example.com' },
];

interface Asked { at: number; subject: string; owner: string; size: number | string; doc: string }

/** A deterministic week: 16 requests, one every 4 to 10 hours, from six and a half days ago. */
function week(): Asked[] {
  let seed = 20261127;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  let at = Date.now() - 6.5 * 86_400_000;
  const sizes = [10, 600, 900, 1500, 'big'] as const;
  return Array.from({ length: 16 }, (_, i) => {
    at += Math.floor((4 + next() * 6) * 3_600_000);
    const p = PEOPLE[Math.floor(next() * PEOPLE.length)]!;
    return { at, subject: p.id, owner: PEOPLE[Math.floor(next() * PEOPLE.length)]!.email, size: sizes[i % sizes.length]!, doc: `document:d${i}` };
  });
}

const clockAt = { t: Date.now() };
const clock = { now: () => clockAt.t };

/** The form of a rule that denies edits of documents above `size`. */
const form = (name: string, size: string) => ({
  name, effect: 'deny', subjects: 'user:*', relation: 'update:documents', object: 'document:*',
  cond_field: 'size', cond_op: 'gt', cond_value: size, cond_type: 'number',
});
const asRule = (name: string, size: number) => ({
  name, effect: 'deny' as const, subjects: ['user:*'], relation: 'update:documents', object: 'document:*',
  condition: { field: 'size', op: 'gt' as const, value: size },
});

let server: TestServer;
let browser: Browser;
let other: Browser;
const asked = week();
let before: string[];

/** The impact sentence and the sealed proof of Impact on an answered form page. */
const impactLine = (html: string) => /<p id="rule-impact">(\d+) recorded decisions replayed with this rule live: (\d+) would change\.<\/p>/.exec(html);
function carryOf(html: string): string {
  const m = /name="impact_seen" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no impact_seen field on the page');
  return m[1]!.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
}

async function page(b: Browser, path: string): Promise<string> {
  return (await b.get(path)).text();
}

/** POSTs a console form (with the session's CSRF token); the page it answers with, or the redirect. */
async function post(path: string, fields: Record<string, string>, b: Browser = browser): Promise<{ status: number; html: string; location: string | null }> {
  const csrf = csrfOf(await page(b, '/console/rules/new'));
  const res = await b.post(path, { csrf, ...fields });
  return { status: res.status, html: res.status >= 300 && res.status < 400 ? '' : await res.text(), location: res.headers.get('location') };
}

const byName = (name: string) => server.ctx.store.rules.getByName(name);

async function enable(id: string): Promise<{ status: number; html: string }> {
  const r = await post(`/console/rules/${id}/enable`, {});
  return { status: r.status, html: r.html };
}

/** Saves the new-rule form; the rule stored under its name. */
async function saveNew(fields: Record<string, string>) {
  const r = await post('/console/rules/new', { ...fields, step: 'save' });
  expect(r.status, r.html).toBe(303);
  return (await byName(fields.name!))!;
}

describe(`console: Impact on the form, then Save, then Enable (${testServerUrl() ? 'PostgreSQL' : 'SQLite'})`, () => {
  beforeAll(async () => {
    server = await startTestServer({ policies: { 'docs.policy': POLICY }, clock });
    for (const p of PEOPLE) await putUser(server, p);
    const base = server.ctx.urls.issuer;
    const api = `${base}/access/v1`;
    clockAt.t = asked[0]!.at - 60_000;
    const app = (await createApp(server, { type: 'm2m' })) as { client_id: string; client_secret: string };
    expect((await server.admin('PUT', `/applications/${app.client_id}/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
    for (const a of asked) {
      clockAt.t = a.at;
      const token = await tokenFor(base, app, api);
      const [type, id] = a.doc.split(':');
      const res = await pdpPost(base, '/access/v1/evaluation', {
        subject: { type: 'user', id: a.subject }, action: { name: 'update' },
        resource: { type, id, properties: { owner: a.owner } }, context: { size: a.size },
      }, { authorization: `Bearer ${token}` });
      expect(res.status).toBe(200);
    }
    before = (await server.ctx.store.audit.list({ kind: 'decision', limit: 1000 })).reverse().map((r) => r.decision!);
    expect(before).toHaveLength(asked.length);
    clockAt.t = asked[asked.length - 1]!.at + 60_000;
    const admin = await makePerson(server, 'ada@example.com', ['admin']);
    browser = (await consoleSignIn(server, admin.email, admin.password)).browser;
    const second = await makePerson(server, 'grace@example.com', ['admin']);
    other = (await consoleSignIn(server, second.email, second.password)).browser;
  }, 240_000);
  afterAll(async () => server?.stop());

  it('Impact of an unsaved new rule shows what it would have changed, and writes nothing', async () => {
    // Before Validate the form's Impact is not offered; after it, it is the next step.
    const blank = await page(browser, '/console/rules/new');
    expect(blank).toMatch(/<button type="submit" id="rule-impact-form" name="step" value="impact" class="btn plain" disabled>/);
    const validated = await post('/console/rules/new', { ...form('no-big-docs', '800'), step: 'validate' });
    expect(validated.html).toMatch(/<button type="submit" id="rule-impact-form" name="step" value="impact" class="btn primary">/);

    const decisionsBefore = (await server.ctx.store.audit.list({ limit: 1000 })).length;
    const r = await post('/console/rules/new', { ...form('no-big-docs', '800'), step: 'impact' });
    expect(r.status, r.html).toBe(200);
    // A size that is not a number fails the deny rule closed: denied too.
    const expected = asked.filter((a, i) => (typeof a.size !== 'number' || a.size > 800) && before[i] !== 'deny').length;
    expect(expected).toBeGreaterThan(0);
    const line = impactLine(r.html)!;
    expect(line).not.toBeNull();
    expect([Number(line[1]), Number(line[2])]).toEqual([asked.length, expected]);
    // The table: each change grouped by recorded decision -> decision with the rule.
    const rows = [...r.html.matchAll(/<tr><td><code>(\w+)<\/code> → <code>(\w+)<\/code><\/td><td>(\d+)<\/td>/g)].map((m) => [m[1], m[2], Number(m[3])]);
    expect(rows.every(([, after]) => after === 'deny')).toBe(true);
    expect(rows.reduce((n, [, , c]) => n + (c as number), 0)).toBe(expected);
    // The form is still filled in, and Save is now the next step.
    expect(r.html).toContain('name="cond_value" type="text" value="800"');
    expect(r.html).toMatch(/<button type="submit" id="rule-save" name="step" value="save" class="btn primary">/);
    expect(carryOf(r.html).length).toBeGreaterThan(20);

    // Nothing written: no rule, no audit record.
    expect(await server.ctx.store.rules.list()).toEqual([]);
    expect((await server.ctx.store.audit.list({ limit: 1000 })).length).toBe(decisionsBefore);

    // The management API's replay of the same rule (created as a draft, taken as live) agrees.
    const created = await server.admin('POST', '/rules', asRule('api-no-big-docs', 800));
    const api = await server.admin('POST', '/policy/replay', { since: '7d', enable: [created.body.id] });
    expect(api.body.changed).toBe(expected);
    expect(rows).toEqual(api.body.changes.map((c: { before: string; after: string; count: number }) => [c.before, c.after, c.count]));
    expect((await server.admin('DELETE', `/rules/${created.body.id}`)).status).toBe(204);
  }, 60_000);

  it('an invalid form shows its errors at Impact and replays nothing', async () => {
    const r = await post('/console/rules/new', { ...form('broken', '800'), object: 'document', step: 'impact' });
    expect(r.status).toBe(400);
    expect(r.html).toContain('id="f-object-error"');
    expect(impactLine(r.html)).toBeNull();
    expect(r.html).not.toContain('name="impact_seen"');
  });

  it('Save right after Impact of the same content: Enable follows without another Impact', async () => {
    const shown = await post('/console/rules/new', { ...form('no-huge-docs', '1000'), step: 'impact' });
    // Pressing Validate again keeps the proof of the Impact of the same content.
    const again = await post('/console/rules/new', { ...form('no-huge-docs', '1000'), impact_seen: carryOf(shown.html), step: 'validate' });
    expect(carryOf(again.html)).toBe(carryOf(shown.html));
    const saved = await post('/console/rules/new', { ...form('no-huge-docs', '1000'), impact_seen: carryOf(again.html), step: 'save' });
    expect(saved.status).toBe(303);
    const rule = (await byName('no-huge-docs'))!;
    expect(rule).toMatchObject({ state: 'draft', impact_hash: ruleContentHash(rule), validated_hash: ruleContentHash(rule) });
    // The rule's page offers Enable at once.
    expect(await page(browser, `/console/rules/${rule.id}`)).toMatch(/<button type="submit" id="rule-enable" class="btn primary">/);
    expect((await enable(rule.id)).status).toBe(303);
    expect((await server.ctx.store.rules.get(rule.id))!.state).toBe('live');

    // An edit of the live rule on its own form: Impact of the edited content (in place of the
    // live version), then Save of it: the rule leaves the policy and Enable follows at once.
    const edited = await post(`/console/rules/${rule.id}`, { ...form('no-huge-docs', '2000'), step: 'impact' });
    const line = impactLine(edited.html)!;
    // Above 2000 no recorded size is a number above it: only sizes that are not numbers are denied
    // (failing closed). Were the live version at 1000 still taken as live, 1500 would be too.
    const narrower = asked.filter((a, i) => typeof a.size !== 'number' && before[i] !== 'deny').length;
    expect(narrower).toBeLessThan(asked.filter((a, i) => (typeof a.size !== 'number' || a.size > 1000) && before[i] !== 'deny').length);
    expect(Number(line[2])).toBe(narrower);
    expect((await server.ctx.store.rules.get(rule.id))!.condition).toEqual({ field: 'size', op: 'gt', value: 1000 });
    expect((await post(`/console/rules/${rule.id}`, { ...form('no-huge-docs', '2000'), impact_seen: carryOf(edited.html), step: 'save' })).status).toBe(303);
    const draft = (await server.ctx.store.rules.get(rule.id))!;
    expect(draft.state).toBe('draft');
    expect(draft.impact_hash).toBe(ruleContentHash(draft));
    expect((await enable(rule.id)).status).toBe(303);
    expect((await server.admin('POST', `/rules/${rule.id}/disable`)).status).toBe(200);
  }, 60_000);

  it('Save of content edited after Impact: Enable refuses until Impact of what was saved', async () => {
    const shown = await post('/console/rules/new', { ...form('edited-after', '900'), step: 'impact' });
    const rule = await saveNew({ ...form('edited-after', '950'), impact_seen: carryOf(shown.html) });
    expect(rule.validated_hash).toBe(ruleContentHash(rule));
    expect(rule.impact_hash).toBeNull();
    const refused = await enable(rule.id);
    expect(refused.status).toBe(409);
    expect(refused.html).toContain('see the Impact of this rule');
    expect((await server.ctx.store.rules.get(rule.id))!.state).toBe('draft');

    // The same on a saved rule's form: Impact of one edit, Save of another.
    const seen = await post(`/console/rules/${rule.id}`, { ...form('edited-after', '950'), step: 'impact' });
    // The form's content is the stored content: its impact counts as shown for the rule.
    expect((await server.ctx.store.rules.get(rule.id))!.impact_hash).toBe(ruleContentHash(rule));
    const other = await post(`/console/rules/${rule.id}`, { ...form('edited-after', '700'), step: 'impact' });
    expect((await server.ctx.store.rules.get(rule.id))!.impact_hash).toBe(ruleContentHash(rule));
    expect((await post(`/console/rules/${rule.id}`, { ...form('edited-after', '750'), impact_seen: carryOf(other.html), step: 'save' })).status).toBe(303);
    const changed = (await server.ctx.store.rules.get(rule.id))!;
    expect(changed.impact_hash).not.toBe(ruleContentHash(changed));
    expect((await enable(rule.id)).status).toBe(409);
    // The proof for the content before the edit does not carry over to it either.
    expect((await post(`/console/rules/${rule.id}`, { ...form('edited-after', '750'), impact_seen: carryOf(seen.html), step: 'save' })).status).toBe(303);
    expect((await enable(rule.id)).status).toBe(409);
    expect((await server.admin('DELETE', `/rules/${rule.id}`)).status).toBe(204);
  }, 60_000);

  it('a forged, garbled or foreign proof of Impact does not let Enable follow', async () => {
    const content = form('forged', '1200');
    const shown = await post('/console/rules/new', { ...content, step: 'impact' });
    const real = carryOf(shown.html);
    const elsewhere = carryOf((await post('/console/rules/new', { ...form('forged', '1300'), step: 'impact' })).html);
    const otherPerson = carryOf((await post('/console/rules/new', { ...content, step: 'impact' }, other)).html);
    const hash = ruleContentHash({ ...asRule('forged', 1200) });
    const flipped = real.slice(0, 10) + (real[10] === 'A' ? 'B' : 'A') + real.slice(11);
    const forgeries: Record<string, string> = {
      'the content hash itself': hash,
      'a garbled value': 'not-a-sealed-value',
      'a changed character': flipped,
      'the proof for other content': elsewhere,
      "another person's proof": otherPerson,
      'an empty value': '',
    };
    for (const [what, value] of Object.entries(forgeries)) {
      const rule = await saveNew({ ...content, impact_seen: value });
      expect(ruleContentHash(rule), what).toBe(hash);
      expect(rule.impact_hash, what).toBeNull();
      expect((await enable(rule.id)).status, what).toBe(409);
      expect((await server.admin('DELETE', `/rules/${rule.id}`)).status).toBe(204);
    }

    // A new rule's proof does not carry to an existing rule's Save of the same content.
    const existing = await saveNew(form('forged', '1000'));
    expect((await post(`/console/rules/${existing.id}`, { ...content, impact_seen: real, step: 'save' })).status).toBe(303);
    expect((await server.ctx.store.rules.get(existing.id))!.impact_hash).toBeNull();
    expect((await enable(existing.id)).status).toBe(409);
    expect((await server.admin('DELETE', `/rules/${existing.id}`)).status).toBe(204);

    // Past its hour the proof is stale.
    clockAt.t += 61 * 60_000;
    const late = await saveNew({ ...content, impact_seen: real });
    expect(late.impact_hash).toBeNull();
    clockAt.t -= 61 * 60_000;
    expect((await server.admin('DELETE', `/rules/${late.id}`)).status).toBe(204);

    // And the genuine proof, in time, does.
    const genuine = await saveNew({ ...content, impact_seen: real });
    expect(genuine.impact_hash).toBe(hash);
    expect((await enable(genuine.id)).status).toBe(303);
  }, 60_000);
});
