import { Browser, parseForms } from '../oauth/helpers.js';
import type { TestServer } from '../helpers/server.js';

/** A person with a password, made through the management API. */
export async function makePerson(server: TestServer, email: string, roles: string[], name = email.split('@')[0]!): Promise<{ id: string; email: string; password: string }> {
  const password = `${email} long password`;
  const res = await server.admin('POST', '/users', { email, password, name, roles });
  if (res.status !== 201) throw new Error(`user failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.id, email, password };
}

/**
 * Signs in to the console without a browser engine: follows the redirects by hand (console →
 * authorize → sign-in page → callback) and posts the sign-in form. Returns the cookie-keeping
 * client and the last answer (the console page, or the refusal).
 */
export async function consoleSignIn(server: TestServer, email: string, password: string, start = '/console'): Promise<{ browser: Browser; last: Response; statuses: { url: string; status: number }[] }> {
  const browser = new Browser(server.url);
  const statuses: { url: string; status: number }[] = [];
  let res = await browser.get(start);
  let url = new URL(start, server.url).toString();
  for (let hops = 0; hops < 12; hops++) {
    statuses.push({ url, status: res.status });
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location')!, url).toString();
      res = await browser.get(url);
      continue;
    }
    if (new URL(url).pathname === '/login' && res.status === 200) {
      const html = await res.text();
      const form = parseForms(html)[0]!;
      res = await browser.post(new URL(form.action, url).toString(), { ...form.fields, email, password });
      url = new URL('/login', server.url).toString();
      continue;
    }
    return { browser, last: res, statuses };
  }
  throw new Error(`too many redirects: ${JSON.stringify(statuses)}`);
}

/** The CSRF token in a console page's forms. */
export function csrfOf(html: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no csrf input on the page');
  return m[1]!;
}
