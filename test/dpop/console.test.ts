import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { parseForms } from '../oauth/helpers.js';
import { consoleSignIn, csrfOf, makePerson } from '../console/helpers.js';
import { dpopKey } from './helpers.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.stop());

describe('the console sets dpop_bound_access_tokens', () => {
  it('on create and on edit', async () => {
    const admin = await makePerson(server, 'dpop-admin@example.com', ['admin']);
    const { browser } = await consoleSignIn(server, admin.email, admin.password);
    const list = await (await browser.get('/console/applications')).text();
    const created = await browser.post('/console/applications', {
      csrf: csrfOf(list),
      name: 'bound-spa',
      type: 'spa',
      redirect_uris: 'https://spa.example/cb',
      first_party: 'on',
      dpop_bound_access_tokens: 'on',
    });
    expect(created.status).toBeLessThan(400);
    const app = (await server.admin('GET', '/applications')).body.data.find((a: { name: string }) => a.name === 'bound-spa');
    expect(app.dpop_bound_access_tokens).toBe(true);

    const detailPath = `/console/applications/${encodeURIComponent(app.client_id)}`;
    const detail = await (await browser.get(detailPath)).text();
    const edit = parseForms(detail).find((f) => f.inputs.includes('dpop_bound_access_tokens'))!;
    expect(detail).toMatch(/<input[^>]*name="dpop_bound_access_tokens"[^>]*checked/);
    const { dpop_bound_access_tokens: _ticked, ...unticked } = edit.fields;
    const saved = await browser.post(new URL(edit.action || detailPath, server.url).toString(), { ...unticked, redirect_uris: 'https://spa.example/cb' });
    expect(saved.status).toBeLessThan(400);
    expect((await server.admin('GET', `/applications/${app.client_id}`)).body.dpop_bound_access_tokens).toBe(false);
  });

  it("on an agent's settings", async () => {
    const admin = await makePerson(server, 'dpop-admin2@example.com', ['admin']);
    const { browser } = await consoleSignIn(server, admin.email, admin.password);
    const keys = await dpopKey('EdDSA');
    const agent = (await server.admin('POST', '/agents', { name: 'console-bot', mode: 'autonomous', public_jwk: keys.publicJwk })).body;
    const path = `/console/agents/${encodeURIComponent(agent.agent_id)}`;
    const page = await (await browser.get(path)).text();
    const settings = parseForms(page).find((f) => f.inputs.includes('dpop_bound_access_tokens'))!;
    expect(page).not.toMatch(/<input[^>]*name="dpop_bound_access_tokens"[^>]*checked/);
    const saved = await browser.post(new URL(settings.action || path, server.url).toString(), { ...settings.fields, roles: '', attributes: '{}', dpop_bound_access_tokens: 'on' });
    expect(saved.status).toBeLessThan(400);
    expect((await server.admin('GET', `/agents/${encodeURIComponent(agent.agent_id)}`)).body.dpop_bound_access_tokens).toBe(true);
    expect(await (await browser.get(path)).text()).toMatch(/<input[^>]*name="dpop_bound_access_tokens"[^>]*checked/);
  });
});
