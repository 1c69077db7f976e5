import { expect } from 'vitest';
import { Browser, parseForms, type ParsedForm } from '../oauth/helpers.js';
import type { SoftAuthenticator } from './soft-authenticator.js';

/** The page's POST form whose action is `action` (and, when given, that has `field` = `value`). */
export function formFor(html: string, action: string, field?: [string, string]): ParsedForm {
  const form = parseForms(html).find((f) => f.action === action && (!field || f.fields[field[0]] === field[1]));
  if (!form) throw new Error(`no form for ${action} ${field ? field.join('=') : ''} in ${html.slice(0, 300)}`);
  return form;
}

/** The hidden CSRF value of a page. */
export function csrfOf(html: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no csrf on the page');
  return m[1]!;
}

/** POST JSON with the browser's cookies (the pages' scripts do this for the WebAuthn options). */
export async function postJson(browser: Browser, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(new URL(path, browser.base), {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: browser.jar.header(), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  browser.jar.store(res);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Signs in with the password at /login?return_to=/account; returns the account page's HTML. */
export async function signInToAccount(browser: Browser, email: string, password: string): Promise<string> {
  const first = await browser.get('/account');
  expect(first.status).toBe(302);
  expect(first.headers.get('location')).toBe('/login?return_to=%2Faccount');
  const login = await browser.get(first.headers.get('location')!);
  const res = await browser.submit(login, { email, password }, '/login');
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe('/account');
  return accountPage(browser);
}

export async function accountPage(browser: Browser): Promise<string> {
  const res = await browser.get('/account');
  expect(res.status).toBe(200);
  return res.text();
}

/** Submits one of the account page's forms; returns the response (a 303 back to /account when it worked). */
export async function submitAccountForm(browser: Browser, action: string, values: Record<string, string> = {}, field?: [string, string]) {
  const html = await accountPage(browser);
  const form = formFor(html, action, field);
  return browser.post(action, { ...form.fields, ...values });
}

/** Registers the soft authenticator's passkey from the account page, as the page's script does. */
export async function registerPasskey(browser: Browser, auth: SoftAuthenticator, name: string): Promise<Response> {
  const html = await accountPage(browser);
  const form = formFor(html, '/account/passkeys');
  const options = await postJson(browser, '/account/passkeys/options', { csrf: form.fields.csrf });
  expect(options.status).toBe(200);
  expect(options.body.attestation).toBe('none');
  return browser.post('/account/passkeys', { ...form.fields, name, credential: JSON.stringify(auth.register(options.body)) });
}

export interface PasskeySignIn {
  /** the sign-in page (or passkey step page) the browser is on */
  pageUrl: string;
  mode?: 'button' | 'autofill' | 'step';
  email?: string;
  /** the signature counter to send (default: one more than the last) */
  counter?: number;
  /** changes the answer before it is posted (a forgery, a replay) */
  tamper?: (answer: Record<string, any>) => Record<string, any>;
}

/**
 * A passkey sign-in as the page's script does it: options from /login/passkey/options, the
 * authenticator's answer posted to /login/passkey with the page's hidden fields.
 */
export async function passkeySignIn(browser: Browser, auth: SoftAuthenticator, s: PasskeySignIn) {
  const html = await (await browser.get(s.pageUrl)).text();
  const hidden = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1]?.replace(/&amp;/g, '&');
  const csrf = hidden('csrf')!;
  const request = hidden('request');
  const returnTo = hidden('return_to');
  const mode = s.mode ?? (s.pageUrl.startsWith('/login/passkey') ? 'step' : 'button');
  const options = await postJson(browser, '/login/passkey/options', { csrf, request, mode, email: s.email });
  expect(options.status, JSON.stringify(options.body)).toBe(200);
  let answer = auth.assert(options.body, s.counter);
  if (s.tamper) answer = s.tamper(answer);
  const form: Record<string, string> = { csrf, mode: mode === 'step' ? 'step' : 'sign-in', credential: JSON.stringify(answer) };
  if (request) form.request = request;
  if (returnTo) form.return_to = returnTo.replace(/&#39;/g, "'");
  const res = await browser.post('/login/passkey', form);
  return { res, options: options.body, answer, form };
}
