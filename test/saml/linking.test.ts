// Which local accounts an external IdP may sign in (email domains, administrators), and the
// console's required sign-in strength with step-up. The IdP is Gatehouse itself (the loop of
// sp.test.ts), so the Assertions are real and signed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { Browser, parseForms, totpNow } from '../oauth/helpers.js';
import { consoleSignIn } from '../console/helpers.js';

const TOTP_SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const GRACE = { email: 'grace@example.com', password: 'correct horse battery staple', name: 'Grace' };
const ROOT = { email: 'root@example.com', password: 'correct horse battery staple', name: 'Root', roles: ['admin'], totp_secret: TOTP_SECRET };
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ env: { GATEHOUSE_CONSOLE_SIGN_IN_STRENGTH: 'mfa' } });
  for (const p of [GRACE, ROOT]) expect((await server.admin('POST', '/users', p)).status).toBe(201);
  const idpMetadata = await (await fetch(`${server.url}/saml/metadata`)).text();
  for (const [name, extra] of [
    ['loop', {}],
    ['corp', { allowed_email_domains: ['Example.ORG'] }],
    ['admins', { admit_administrators: true }],
  ] as const) {
    const idp = await server.admin('POST', '/saml/connections', { name, kind: 'idp', idp_metadata_xml: idpMetadata, ...extra });
    expect(idp.status).toBe(201);
    const sp = await server.admin('POST', '/saml/connections', { name: `${name}-sp`, kind: 'sp', entity_id: idp.body.sp_entity_id, acs_url: idp.body.sp_acs_url });
    expect(sp.status).toBe(201);
  }
});
afterAll(() => server?.stop());

/** Signs `person` in at our IdP through the `idp` connection `name`, and posts the Response to the ACS. */
async function throughIdp(name: string, person: { email: string; password: string }, browser = new Browser(server.url)): Promise<{ acs: Response; browser: Browser }> {
  const start = await browser.get(`/saml/sp/${name}/login?return_to=/approvals`);
  let res = await browser.get(start.headers.get('location')!);
  const login = res.headers.get('location')!;
  let page = await browser.get(login);
  res = await browser.submit(page, { email: person.email, password: person.password }, login);
  let url = res.headers.get('location')!;
  for (let hop = 0; hop < 6 && res.status >= 300; hop++) {
    res = await browser.get(url);
    if (res.status >= 300) url = new URL(res.headers.get('location')!, new URL(url, server.url)).toString();
  }
  const html = await res.text();
  let [form] = parseForms(html);
  if (form!.inputs.includes('otp')) {
    // The IdP side (Gatehouse's own sign-in) asks an administrator with TOTP for nothing more by default.
    page = await browser.submit(html, { otp: totpNow(TOTP_SECRET) }, url);
    [form] = parseForms(await page.text());
  }
  return { acs: await browser.post(form!.action, form!.fields), browser };
}

describe('an external IdP signs in only the accounts its connection allows', () => {
  it('shows the connection settings', async () => {
    const corp = await server.admin('GET', '/saml/connections/corp');
    expect(corp.body).toMatchObject({ allowed_email_domains: ['example.org'], admit_administrators: false });
    const bad = await server.admin('POST', '/saml/connections', { name: 'x', kind: 'sp', entity_id: 'urn:x', acs_url: 'https://x.example/acs', admit_administrators: true });
    expect(bad.status).toBe(400);
    expect(bad.body.error_description).toMatch(/admit_administrators/);
  });

  it('an email outside the allowed domains is refused; without a list any domain signs in', async () => {
    const refused = await throughIdp('corp', GRACE);
    expect(refused.acs.status).toBe(400);
    expect(await refused.acs.text()).toContain('may not sign in accounts of example.com');
    const allowed = await throughIdp('loop', GRACE);
    expect(allowed.acs.status).toBe(302);
    expect(allowed.acs.headers.get('location')).toBe('/approvals');
  });

  it('an administrator is refused unless the connection admits administrators', async () => {
    const refused = await throughIdp('loop', ROOT);
    expect(refused.acs.status).toBe(400);
    expect(await refused.acs.text()).toContain('may not sign in administrators');
    const admitted = await throughIdp('admins', ROOT);
    expect(admitted.acs.status).toBe(302);
  });
});

describe('the console requires a sign-in strength', () => {
  it('asks an administrator signing in with a password for the one-time code too', async () => {
    const { last, browser } = await consoleSignIn(server, ROOT.email, ROOT.password);
    expect(last.status).toBe(200);
    const html = await last.text();
    expect(parseForms(html)[0]!.inputs).toContain('otp');
    let res = await browser.submit(html, { otp: totpNow(TOTP_SECRET, 1) }, '/login');
    for (let hop = 0; hop < 6 && res.status >= 300; hop++) res = await browser.get(res.headers.get('location')!);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Sign out');
  });

  it('steps a federated (single-factor) session up before letting it in', async () => {
    const { acs, browser } = await throughIdp('admins', ROOT);
    expect(acs.status).toBe(302);
    let res = await browser.get('/console');
    let url = '/console';
    for (let hop = 0; hop < 6 && res.status >= 300; hop++) {
      url = new URL(res.headers.get('location')!, new URL(url, server.url)).toString();
      res = await browser.get(url);
    }
    // Not the console: Gatehouse's second step.
    expect(res.status).toBe(200);
    expect(parseForms(await res.text())[0]!.inputs).toContain('otp');
  });
});
