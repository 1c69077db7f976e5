import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { toProtocolError } from '../../src/http/edge.js';
import { createLogger } from '../../src/logger.js';
import { consoleSignIn, makePerson } from '../console/helpers.js';
import { parseForms } from '../oauth/helpers.js';

/** Hostile input at every surface: the answer is a 4xx (or a page), never a 500 or a stack trace. */
let s: TestServer;
let A: Record<string, string>;

beforeAll(async () => {
  s = await startTestServer();
  A = { authorization: `Bearer ${s.adminToken}` };
});
afterAll(() => s.stop());

type Case = [label: string, path: string, init?: RequestInit];
const form = (body: string | Uint8Array, extra: Record<string, string> = {}): RequestInit => ({
  method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...extra }, body, redirect: 'manual',
});
const jsonInit = (body: string, extra: Record<string, string> = {}): RequestInit => ({
  method: 'POST', headers: { 'content-type': 'application/json', ...extra }, body, redirect: 'manual',
});

async function expectNo500(cases: Case[]) {
  for (const [label, path, init] of cases) {
    const res = await fetch(`${s.url}${path}`, { redirect: 'manual', ...init });
    const text = await res.text();
    expect(res.status, label).toBeLessThan(500);
    expect(text, label).not.toMatch(/\bat [\w.<>]+ \(|node:internal|\.ts:\d+:\d+/);
  }
}

describe('Errors: broken encodings', () => {
  it('broken percent-encoding in a path parameter is 400 invalid_request', async () => {
    for (const path of ['/admin/v1/users/%E0%A4%A', '/admin/v1/agents/%ZZ', '/admin/v1/applications/%/grants/x']) {
      const res = await fetch(`${s.url}${path}`, { headers: A });
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    }
    await expectNo500([['saml sp', '/saml/sp/%E0%A4%A/metadata'], ['oauth', '/oauth/%E0%A4%A']]);
  });

  it('compressed, mis-encoded and odd-charset bodies', async () => {
    await expectNo500([
      ['gzip garbage', '/oauth/token', form('notgzip', { 'content-encoding': 'gzip' })],
      ['gzip ok', '/oauth/token', form(gzipSync('grant_type=password'), { 'content-encoding': 'gzip' })],
      ['br', '/oauth/token', form('x', { 'content-encoding': 'br' })],
      ['latin1', '/oauth/token', { ...form('grant_type=x'), headers: { 'content-type': 'application/x-www-form-urlencoded; charset=iso-8859-1' } }],
      ['klingon', '/oauth/token', { ...form('grant_type=x'), headers: { 'content-type': 'application/x-www-form-urlencoded; charset=klingon' } }],
      ['deep json', '/admin/v1/users', jsonInit('['.repeat(5000) + ']'.repeat(5000), A)],
      ['1e999', '/admin/v1/rules', jsonInit('{"name":"x","effect":"deny","subjects":["agent:*"],"relation":"a:b","object":"b:*","condition":{"field":"a","op":"gt","value":1e999}}', A)],
      ['too large', '/admin/v1/users', jsonInit(JSON.stringify({ name: 'x'.repeat(400_000) }), A)],
    ]);
  });
});

describe('Errors: methods and unknown paths', () => {
  it('wrong methods and unknown paths are 404/405 in the error shape', async () => {
    await expectNo500([
      ['PUT token', '/oauth/token', { method: 'PUT' }],
      ['DELETE userinfo', '/oauth/userinfo', { method: 'DELETE' }],
      ['POST jwks', '/.well-known/jwks.json', { method: 'POST' }],
      ['PATCH decision', '/apis/regional/v1/agents/authorize', { method: 'PATCH' }],
      ['traversal', '/.well-known/../admin/v1/users'],
      ['null byte', '/oauth/authorize%00'],
    ]);
  });
});

describe('Errors: sign-in pages', () => {
  it('forms with junk, repeated fields or JSON never crash', async () => {
    await expectNo500([
      ['authorize json', '/oauth/authorize', jsonInit('{"client_id":["a"]}')],
      ['authorize text', '/oauth/authorize', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' }],
      ['login repeated', '/login', form('email=a&email=b&password[]=x')],
      ['login no csrf', '/login', form('email=a@b.c&password=x&request=nope')],
      ['login get junk', '/login?request=%ff&request=2'],
      ['otp json', '/login/otp', jsonInit('{"otp":123456}')],
      ['otp huge', '/login/otp', form(`otp=${'9'.repeat(10000)}&request=x`)],
      ['consent junk', '/consent', form('decision=approve&request=x')],
      ['consent get junk', '/consent?request[]=1'],
      ['approvals', '/approvals'],
      ['approvals post', '/approvals', form('decision=approve&id=1')],
      ['logout junk', '/oauth/logout?post_logout_redirect_uri=javascript:alert(1)&client_id[]=x'],
    ]);
  });
});

describe('Errors: agents, MCP, SAML, SSF', () => {
  it('junk at every agent endpoint', async () => {
    await expectNo500([
      ['ciba array', '/apis/regional/v1/ai/auth/backchannel-authorize', jsonInit('[1]')],
      ['agent token json', '/apis/regional/v1/ai/auth/token', jsonInit('{"grant_type":"client_credentials"}')],
      ['agent token ciba', '/apis/regional/v1/ai/auth/token', form('grant_type=urn:openid:params:grant-type:ciba&auth_req_id=x&client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer&client_assertion=a.b.c')],
      ['agent token repeated', '/apis/regional/v1/ai/auth/token', form('grant_type=client_credentials&client_assertion=a&client_assertion=b')],
      ['txn alg none', '/apis/regional/v1/ai/auth/transaction-token', jsonInit('{}', { authorization: `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.e30.` })],
      ['decision form', '/apis/regional/v1/agents/authorize', form('agent_id=x')],
    ]);
  });

  it('the MCP gateway answers 401 to any bad bearer', async () => {
    for (const h of ['Bearer ' + 'x'.repeat(5000), 'Bearer a.b.c', 'Basic eDp5', `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.e30.`]) {
      const res = await fetch(`${s.url}/mcp`, { method: 'POST', headers: { authorization: h, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"initialize"}' });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('resource_metadata=');
    }
  });

  it('SAML endpoints refuse junk and entity tricks', async () => {
    const xxe = Buffer.from('<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><x>&xxe;</x>').toString('base64');
    await expectNo500([
      ['sso pct', '/saml/sso?SAMLRequest=%%%&RelayState=x'],
      ['sso not deflated', `/saml/sso?SAMLRequest=${encodeURIComponent(Buffer.from('not deflated').toString('base64'))}`],
      ['sso xxe', '/saml/sso', form(`SAMLRequest=${encodeURIComponent(xxe)}`)],
      ['slo', '/saml/slo?SAMLRequest=abc'],
      ['acs', '/saml/sp/x/acs', form('SAMLResponse=abc')],
    ]);
  });

  it('SSF and admin sub-routers refuse junk bodies with 400', async () => {
    await expectNo500([
      ['subjects', '/v1/ssf/subjects:add', jsonInit('{"stream_id":"x","subject":{"format":"email","email":["a"]}}', A)],
      ['status', '/v1/ssf/status', jsonInit('{"stream_id":"x","status":"exploded"}', A)],
      ['verify', '/v1/ssf/verify', jsonInit('[]', A)],
      ['mcp upstream', '/admin/v1/mcp/upstreams', jsonInit('{"name":[1]}', A)],
      ['saml connection', '/admin/v1/saml/connections', jsonInit('{"name":[1]}', A)],
    ]);
  });
});

describe('JSON nested thousands of levels deep', () => {
  const DEPTH = 10_000;
  const arrays = '['.repeat(DEPTH) + ']'.repeat(DEPTH);
  // A plausible body with a hostile member: what an agent's `context` could carry.
  const objects = `{"agent_id":"x","action":"a:b","resource":"b:1","context":${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}}`;

  async function expectDepth400(label: string, method: string, path: string, headers: Record<string, string>, chunked = false) {
    for (const body of [arrays, objects]) {
      const init: RequestInit & { duplex?: string } = { method, headers: { 'content-type': 'application/json', ...headers }, redirect: 'manual' };
      if (chunked) {
        // No Content-Length: the request takes the Express path even where a fast path exists.
        init.body = new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(body)), c.close()) });
        init.duplex = 'half';
      } else {
        init.body = body;
      }
      const res = await fetch(`${s.url}${path}`, init);
      const text = await res.text();
      expect(res.status, `${label}: ${text.slice(0, 200)}`).toBe(400);
      expect(JSON.parse(text), label).toEqual({ error: 'invalid_request', error_description: 'the JSON body nests deeper than 64 levels' });
    }
  }

  it('answers 400 at the edge on every JSON endpoint, on both transports', async () => {
    // Every write operation of the management API, from its own OpenAPI document.
    const doc = (await (await fetch(`${s.url}/admin/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const admin: [string, string][] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of ['post', 'put', 'patch']) if (ops[method]) admin.push([method.toUpperCase(), `/admin/v1${path.replace(/\{[^}]+\}/g, 'x')}`]);
    }
    expect(admin.length).toBeGreaterThan(20);
    const others: [string, string][] = [
      ['POST', '/admin/v1/mcp/upstreams'],
      ['PUT', '/admin/v1/mcp/upstreams/x'],
      ['POST', '/admin/v1/saml/connections'],
      ['POST', '/admin/v1/approvals/x/approve'],
      ['POST', '/v1/ssf/streams'],
      ['PATCH', '/v1/ssf/streams'],
      ['PUT', '/v1/ssf/streams'],
      ['POST', '/v1/ssf/status'],
      ['POST', '/v1/ssf/subjects:add'],
      ['POST', '/v1/ssf/subjects:remove'],
      ['POST', '/v1/ssf/verify'],
      ['POST', '/v1/ssf/events:retry'],
      ['POST', '/mcp'],
      ['POST', '/apis/regional/v1/ai/auth/token'],
      ['POST', '/apis/regional/v1/ai/auth/backchannel-authorize'],
      ['POST', '/oauth/token'],
      ['POST', '/oauth/token/introspect'],
      ['POST', '/oauth/token/revoke'],
      ['POST', '/oauth/userinfo'],
    ];
    for (const [method, path] of [...admin, ...others]) await expectDepth400(`${method} ${path}`, method, path, A);
    // The decision and transaction-token endpoints: the raw fast path and Express alike.
    for (const path of ['/apis/regional/v1/agents/authorize', '/apis/regional/v1/ai/auth/transaction-token']) {
      await expectDepth400(`${path} (fast path)`, 'POST', path, { authorization: 'Bearer x' });
      await expectDepth400(`${path} (Express)`, 'POST', path, { authorization: 'Bearer x' }, true);
    }
  });

  it('a body nested just within the bound is read (and judged on its fields)', async () => {
    const context = JSON.parse('{"a":'.repeat(60) + '1' + '}'.repeat(60)) as Record<string, unknown>;
    const res = await fetch(`${s.url}/apis/regional/v1/agents/authorize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: 'spiffe://localhost/agent/nobody', action: 'a:b', resource: 'b:1', context }),
    });
    // Step 1 of the decision order: an unknown agent.
    expect(res.status).toBe(401);
  });
});


describe('A NUL character, which PostgreSQL cannot hold in text', () => {
  it('the database refusing it is the request\'s error: 400 invalid_request, not a 500', () => {
    for (const code of ['22021', '22P05']) {
      const refused = Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code });
      const err = toProtocolError(refused, createLogger('silent'));
      expect([err.status, err.error]).toEqual([400, 'invalid_request']);
      expect(err.description).toContain('NUL');
    }
  });

  it('in a path, a JSON field, a form field or a decision it is never a 500 (on either database)', async () => {
    await expectNo500([
      ['rule id', '/admin/v1/rules/%00', { headers: A }],
      ['role name', '/admin/v1/roles/a%00b', { method: 'PUT', headers: { ...A, 'content-type': 'application/json' }, body: '{"permissions":["read:documents"]}' }],
      ['user name', '/admin/v1/users', jsonInit('{"email":"nul@example.com","password":"a long enough password","name":"a\\u0000b"}', A)],
      ['client id', '/oauth/token', form('grant_type=client_credentials&client_id=a%00b&client_secret=x')],
      ['saml connection', '/saml/sp/%00/acs', form('SAMLResponse=abc')],
      ['decision', '/apis/regional/v1/agents/authorize', jsonInit('{"agent_id":"a\\u0000","action":"a:\\u0000","resource":"b:\\u0000"}')],
    ]);
  });

  it('in a console form it is a page saying so, not an error page', async () => {
    const admin = await makePerson(s, 'nul-admin@example.com', ['admin']);
    const { browser } = await consoleSignIn(s, admin.email, admin.password);
    // The form that edits a person: the name goes to the database as typed.
    const person = await makePerson(s, 'nul-person@example.com', []);
    const page = `/console/people/${person.id}`;
    const form = parseForms(await (await browser.get(page)).text()).find((f) => new URL(f.action || page, s.url).pathname === page)!;
    const res = await browser.post(`${s.url}${page}`, { ...form.fields, name: 'a\u0000b' });
    const text = await res.text();
    expect(res.status, text.slice(0, 500)).toBeLessThan(500);
  });
});
