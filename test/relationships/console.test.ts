import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import type { Browser } from '../oauth/helpers.js';
import { consoleSignIn, makePerson } from '../console/helpers.js';
import { MODEL, rel } from './fixtures.js';

// The console's relationships page: an object's relationships (who holds what on it, and
// through what), and a person's or agent's access explained as the path.

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer({ policies: { 'drive.policy': MODEL } });
  const ada = await makePerson(server, 'ada@example.com', ['admin']);
  ({ browser } = await consoleSignIn(server, ada.email, ada.password));
  const w = await server.admin('POST', '/relationships', {
    writes: [
      rel('group:eng#member@user:anne'),
      rel('folder:root#viewer@group:eng#member'),
      rel('document:1#parent@folder:root'),
      rel('document:1#viewer@agent:helper'),
      rel('folder:ops#viewer@group:ops#member', { name: 'office_hours', context: { start: 9, end: 17 } }),
      rel('group:ops#member@user:olga'),
      rel('document:2#parent@folder:ops'),
    ],
  });
  expect(w.status, JSON.stringify(w.body)).toBe(200);
});
afterAll(async () => {
  await server?.stop();
});

const page = async (q: Record<string, string>) => {
  const res = await browser.get(`/console/relationships?${new URLSearchParams(q).toString()}`);
  return { status: res.status, html: await res.text() };
};
/** The text of a section, tags dropped and entities decoded enough to compare. */
const sectionText = (html: string, id: string): string => {
  const at = html.indexOf(`id="${id}"`);
  if (at < 0) return '';
  const end = html.indexOf('</section>', at);
  return html.slice(at, end).replace(/<[^>]+>/g, ' ').replace(/&gt;/g, '>').replace(/&#39;|&apos;/g, "'").replace(/&quot;/g, '"').replace(/&amp;/g, '&').replace(/\s+/g, ' ');
};

describe('the relationships page', () => {
  it('shows who holds what on an object, and through what', async () => {
    const { status, html } = await page({ object: 'document:1' });
    expect(status).toBe(200);
    const holders = sectionText(html, 'holders');
    expect(holders).toContain('viewer user:anne document:1#parent@folder:root → folder:root#viewer@group:eng#member → group:eng#member@user:anne');
    expect(holders).toContain('viewer agent:helper document:1#viewer@agent:helper');
    expect(holders).toContain('parent folder:root document:1#parent@folder:root');
    const stored = sectionText(html, 'stored');
    expect(stored).toContain('parent folder:root');
    expect(stored).toContain('viewer agent:helper');
    expect(stored).not.toContain('anne');
    expect(html).toContain('aria-current="page"');
  });

  it('explains a person’s access as the path, or that there is none', async () => {
    const yes = sectionText((await page({ object: 'document:1', subject: 'user:anne', relation: 'viewer' })).html, 'access');
    expect(yes).toContain('viewer holds it through document:1#parent@folder:root → folder:root#viewer@group:eng#member → group:eng#member@user:anne');
    const no = sectionText((await page({ object: 'document:1', subject: 'user:bob' })).html, 'access');
    expect(no).toContain('viewer does not hold it');
    expect(no).toContain('blocked does not hold it');
  });

  it('names what cannot be resolved, and takes a context for conditions', async () => {
    const without = sectionText((await page({ object: 'document:2', subject: 'user:olga', relation: 'viewer' })).html, 'access');
    expect(without).toMatch(/cannot be resolved: .*hour/);
    const at10 = sectionText((await page({ object: 'document:2', subject: 'user:olga', relation: 'viewer', context: '{"hour": 10}' })).html, 'access');
    expect(at10).toContain('holds it through document:2#parent@folder:ops → folder:ops#viewer@group:ops#member → group:ops#member@user:olga');
  });

  it('refuses what it cannot read, naming it', async () => {
    for (const [q, why] of [
      [{ object: 'document' }, 'needs the form'],
      [{ object: 'spaceship:1' }, 'declares no type spaceship'],
      [{ object: 'document:1', relation: 'owner' }, 'has no relation owner'],
      [{ object: 'document:1', context: '[1' }, 'Context must be a JSON object'],
    ] as const) {
      const r = await page(q);
      expect(r.status, JSON.stringify(q)).toBe(400);
      expect(r.html).toContain(why);
    }
  });
});
