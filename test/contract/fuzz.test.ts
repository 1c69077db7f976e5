import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startTestServer, verifyAuditTrail, type TestServer } from '../helpers/server.js';
import { assertion, createRule, JWT_BEARER, newKeyPair, postForm, postJson, registerAgent, type TestAgent } from '../agents/helpers.js';
import { newCaller } from '../authzen/helpers.js';
import { consoleSignIn, makePerson } from '../console/helpers.js';
import { createHash, randomBytes } from 'node:crypto';
import { Browser, followSignIn, parseForms, postForm as postFormWith, TOTP_SECRET, totpNow, type ParsedForm } from '../oauth/helpers.js';
import { postJson as postJsonAs, registerPasskey, signInToAccount } from '../account/helpers.js';
import { SoftAuthenticator } from '../account/soft-authenticator.js';
import { MODEL, rel } from '../relationships/fixtures.js';

// A generative fuzz of every HTTP surface: one server with a little real data, a valid request
// for each route (the management API's from its own OpenAPI document, the rest written out, the
// console's and the account's from the forms their pages serve), and random mutations of it:
// a field dropped, retyped, made huge, deep or full of control characters; duplicate and array
// parameters; numbers JSON cannot hold; an empty body or the wrong content type; a hostile path
// parameter or header. Whatever comes, the answer is below 500, shows no stack trace or source
// path, a JSON error carries an `error` code, and the server still answers /healthz.
//
// A new seed every run (fast-check prints it with a counterexample; GATEHOUSE_TEST_SEED=<seed>
// replays one), bounded in time: a slow machine sends fewer requests rather than failing.
const SEED = process.env.GATEHOUSE_TEST_SEED ? { seed: Number(process.env.GATEHOUSE_TEST_SEED) } : {};
const TIME_LIMIT_MS = 30_000;
const SWEEP_LIMIT_MS = 25_000;

type Body = Record<string, unknown>;
interface Seed {
  label: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** with `{name}` placeholders filled from `params` */
  path: string;
  /** a function where each request needs a fresh value (an approval answered once is answered) */
  params?: Record<string, string> | (() => Promise<Record<string, string>>);
  query?: Record<string, string>;
  kind: 'json' | 'form' | 'none';
  /** a function may read the headers made for the same request (a session's own CSRF value) */
  body?: Body | ((headers?: Record<string, string>) => Promise<Body>);
  headers?: Record<string, string> | (() => Promise<Record<string, string>>);
  /** body members sent as JSON text (a form field a page's script fills with JSON), mutated inside */
  jsonFields?: string[];
}

let s: TestServer;
const seeds: Seed[] = [];

// ---- fixtures --------------------------------------------------------------------------------

let agent: TestAgent;
let app: { client_id: string; client_secret: string };
let userId: string;
let ruleId: string;
let consoleBrowser: Browser | undefined;

beforeAll(async () => {
  s = await startTestServer({ policies: { 'drive.policy': MODEL } });
  const A = { authorization: `Bearer ${s.adminToken}` };
  const ok = (what: string, r: { status: number; body: unknown }) => {
    if (r.status >= 300) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as any;
  };
  userId = ok('user', await s.admin('POST', '/users', { email: 'ada@example.com', password: 'a long enough password', name: 'Ada', roles: ['reader'] })).id;
  const admin = await makePerson(s, 'root@example.com', ['admin']);
  app = ok('application', await s.admin('POST', '/applications', { name: 'web', type: 'web', redirect_uris: ['https://app.example/cb'], post_logout_redirect_uris: ['https://app.example/bye'] }));
  ok('role', await s.admin('PUT', '/roles/reader', { permissions: ['read:documents'] }));
  agent = await registerAgent(s, { name: 'fuzzer', mode: 'autonomous', capabilities: [{ name: 'send:emails', limits: { amount: { max: 100 } } }] });
  ok('tuple', await s.admin('POST', '/relationships', { writes: [rel('document:d1#viewer@user:ada'), rel('folder:f1#viewer@group:eng#member')], deletes: [] }));
  ruleId = ok('rule', await s.admin('POST', '/rules', { name: 'no big mail', effect: 'deny', subjects: ['agent:*'], relation: 'send:emails', object: 'email:*', condition: { field: 'amount', op: 'gt', value: 50 } })).id;
  ok('entity', await s.admin('PUT', '/entities/document/d1', { attributes: { owner: 'ada@example.com' } }));
  const caller = await newCaller(s);
  const agentToken = async (resource?: string) => (await postForm(`${s.url}/apis/regional/v1/ai/auth/token`, {
    grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, agent, { aud: s.ctx.urls.issuer }), ...(resource ? { resource } : {}),
  })).body.access_token as string;
  const bearerAgent = async () => ({ authorization: `Bearer ${await agentToken()}` });
  const delegated = await registerAgent(s, { name: 'delegated', mode: 'delegated', capabilities: [{ name: 'send:emails' }] });
  // A pending approval, fresh for each request that answers one: an agent action a
  // live require_approval rule holds (amount 20 and more), bound and decided.
  const approvalRule = await createRule(s, { name: 'mid mail', effect: 'require_approval', subjects: ['agent:*'], relation: 'send:emails', object: 'email:*', condition: { field: 'amount', op: 'gte', value: 20 } });
  ok('mailer role', await s.admin('PUT', '/roles/mailer', { permissions: ['send:emails'] }));
  const approver = await registerAgent(s, { name: 'mailer', mode: 'autonomous', roles: ['mailer'], capabilities: [{ name: 'send:emails' }] });
  const approverToken = (await postForm(`${s.url}/apis/regional/v1/ai/auth/token`, {
    grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, approver, { aud: s.ctx.urls.issuer }),
  })).body.access_token as string;
  let pendingCount = 0;
  const pendingApproval = async (): Promise<string> => {
    const held = { action: 'send:emails', resource: `email:pending-${++pendingCount}`, context: { amount: 30, to: 'x@example.com' } };
    const bound = ok('bind', await postJson(`${s.url}/apis/regional/v1/ai/auth/transaction-token`, held, { authorization: `Bearer ${approverToken}` }));
    const decided = ok('decision', await postJson(`${s.url}/apis/regional/v1/agents/authorize`, { agent_id: approver.id, transaction_token: bound.data.transaction_token, ...held }));
    if (!decided.data?.approval_id) {
      const [role, who] = [await s.admin('GET', '/roles/mailer'), await s.admin('GET', `/agents/${encodeURIComponent(approver.id)}`)];
      throw new Error(`no approval asked for: ${JSON.stringify(decided)} role ${JSON.stringify(role.body)} agent ${JSON.stringify(who.body)}`);
    }
    return decided.data.approval_id as string;
  };
  await pendingApproval(); // so that the console's approvals page serves its answer forms
  const appToken = ok('app token', await postForm(`${s.url}/oauth/token`, { grant_type: 'client_credentials', client_id: caller.client_id, client_secret: caller.client_secret }));

  // The management API: every operation its OpenAPI document lists, with a body made from the
  // operation's schema (or written out below where the schema alone cannot make a valid one).
  const doc = (await (await fetch(`${s.url}/admin/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
  // The management API works on targets of its own, so that what it changes (a secret, a key, a
  // role) leaves the fixtures the other surfaces sign in with as they were.
  const target = {
    agent: await registerAgent(s, { name: 'target', mode: 'delegated', capabilities: [{ name: 'send:emails' }] }),
    app: ok('target application', await s.admin('POST', '/applications', { name: 'target', type: 'web', redirect_uris: ['https://t.example/cb'] })),
    user: ok('target user', await s.admin('POST', '/users', { email: 'target@example.com', password: 'a long enough password', name: 'T' })).id as string,
  };
  ok('target role', await s.admin('PUT', '/roles/target', { permissions: ['read:documents'] }));
  ok('target upstream', await s.admin('POST', '/mcp/upstreams', { name: 'target', url: 'http://127.0.0.1:9/mcp' }));
  ok('target connection', await s.admin('POST', '/saml/connections', { name: 'target', kind: 'sp', entity_id: 'https://t.example', acs_url: 'https://t.example/acs' }));
  const targetRule = ok('target rule', await s.admin('POST', '/rules', { name: 'target', effect: 'deny', subjects: ['agent:*'], relation: 'a:b', object: 'b:*' })).id as string;
  const jwks = { keys: [{ ...(await newKeyPair()).publicJwk, kid: 'k1' }] };
  ok('target issuer', await s.admin('POST', '/trusted-issuers', { issuer: 'https://issuer.example', jwks }));
  const params: Record<string, string> = {
    agent_id: target.agent.id, client_id: target.app.client_id, user_id: target.user, api_client_id: `${s.ctx.urls.issuer}/access/v1`,
    type: 'document', issuer: 'https://issuer.example',
  };
  const nameFor: Record<string, string> = { '/roles/': 'target', '/mcp/': 'target', '/saml/': 'target', '/agents/': 'send:emails' };
  const queryValue: Record<string, string> = { limit: '5', offset: '0', since: '2020-01-01T00:00:00Z', until: '2030-01-01T00:00:00Z', decision: 'allow', before: '1000', state: 'pending', object: 'document:d1', subject: 'user:ada', relation: 'viewer', email: 'ada@example.com' };
  const written: Record<string, Body> = {
    'POST /agents': { name: 'second', mode: 'delegated', public_jwk: (await newKeyPair()).publicJwk, roles: ['reader'], capabilities: [{ name: 'read:documents' }], attributes: { team: 'a' } },
    'PATCH /agents/{agent_id}': { attributes: { team: 'b' }, capabilities: [{ name: 'send:emails', limits: { amount: { max: 10 }, to: { in: ['a@x.com'] } } }] },
    'PUT /agents/{agent_id}/capabilities/{name}': { limits: { amount: { max: 5 } } },
    'POST /applications': { name: 'other', type: 'spa', redirect_uris: ['https://spa.example/cb'], refresh_tokens: true },
    'PATCH /applications/{client_id}': { name: 'web 2', redirect_uris: ['https://app.example/cb2'] },
    'PUT /applications/{client_id}/grants/{api_client_id}': { scopes: ['read'], search_subject_types: ['user'] },
    'PUT /authorization-details-types/{type}': { description: 'payments', schema: { type: 'object', properties: { amount: { type: 'number' } } } },
    'PUT /entities/{type}/{id}': { attributes: { owner: 'ada@example.com', tags: ['a'] } },
    'POST /keys/rotate': { alg: 'EdDSA' },
    'POST /mcp/upstreams': { name: 'files', url: 'http://127.0.0.1:9/mcp', timeout_ms: 500 },
    'PUT /mcp/upstreams/{name}': { url: 'http://127.0.0.1:9/mcp' },
    'POST /policy/replay': { since: '7d', disable: [ruleId], files: { 'x.policy': 'policy "x" version 1\n' } },
    'POST /relationships': { writes: [rel('document:d2#viewer@user:bob')], deletes: [rel('document:d9#viewer@user:zed')] },
    'POST /relationships/check': { object: 'document:d1', relation: 'viewer', subject: 'user:ada', context: { hour: 10 }, contextual_relationships: [rel('folder:f2#viewer@group:eng#member', { name: 'office_hours', context: { start: 9, end: 17 } })] },
    'POST /relationships/list-objects': { subject: 'user:ada', relation: 'viewer', type: 'document', context: {} },
    'POST /relationships/list-subjects': { object: 'document:d1', relation: 'viewer', subject_type: 'user' },
    'POST /roles': { name: 'writer', permissions: ['write:documents'] },
    'PUT /roles/{name}': { permissions: ['read:documents', 'list:documents'] },
    'POST /rules': { name: 'r', effect: 'require_approval', subjects: ['agent:*'], relation: 'send:emails', object: 'email:*', condition: { expr: 'context.amount > 10' } },
    'PATCH /rules/{id}': { condition: { field: 'amount', op: 'lte', value: 3 } },
    'POST /saml/connections': { name: 'sp', kind: 'sp', entity_id: 'https://sp.example', acs_url: 'https://sp.example/acs' },
    'PUT /saml/connections/{name}': { kind: 'sp', entity_id: 'https://sp.example', acs_url: 'https://sp.example/acs' },
    'POST /trusted-issuers': { issuer: 'https://other-issuer.example', jwks, subject_mapping: 'email' },
    'PUT /trusted-issuers/{issuer}': { jwks },
    'POST /users': { email: 'bob@example.com', password: 'another long password', name: 'Bob', attributes: { level: 3 }, groups: ['eng'] },
    'PATCH /users/{id}': { name: 'Ada L', attributes: { level: 4 } },
    'POST /users/{id}/credential-compromise': { credential_type: 'password', reason: 'leaked' },
    'PUT /users/{id}/delegations/{agent_id}': { capabilities: ['send:emails'] },
  };
  // Throwaways: what a destructive request (a delete, a revocation, a re-keying) works on, made
  // fresh for each request, so that it reaches the removal itself and no fixture goes.
  let made = 0;
  const throwaway = {
    rule: async () => ok('throwaway rule', await s.admin('POST', '/rules', { name: `throwaway ${++made}`, effect: 'deny', subjects: ['agent:*'], relation: 'a:b', object: 'b:*' })).id as string,
    user: async () => ok('throwaway user', await s.admin('POST', '/users', { email: `throwaway-${++made}@example.com`, password: 'a long enough password', name: 'T' })).id as string,
    agent: async () => (await registerAgent(s, { name: `throwaway-${++made}`, mode: 'delegated', capabilities: [{ name: 'send:emails' }] })).id,
    app: async (type = 'web') => ok('throwaway application', await s.admin('POST', '/applications', { name: `throwaway ${++made}`, type, ...(type === 'm2m' ? {} : { redirect_uris: ['https://t.example/cb'] }) })).client_id as string,
    role: async () => {
      const name = `throwaway-${++made}`;
      ok('throwaway role', await s.admin('PUT', `/roles/${name}`, { permissions: ['read:documents'] }));
      return name;
    },
    issuer: async () => ok('throwaway issuer', await s.admin('POST', '/trusted-issuers', { issuer: `https://t${++made}.example`, jwks })).issuer as string,
  };
  const throwawayParams: Record<string, () => Promise<Record<string, string>>> = {
    'DELETE /rules/{id}': async () => ({ id: await throwaway.rule() }),
    'DELETE /users/{id}': async () => ({ id: await throwaway.user() }),
    'POST /users/{id}/sessions/revoke': async () => ({ id: await throwaway.user() }),
    'DELETE /users/{id}/delegations/{agent_id}': async () => {
      const [id, agent_id] = [await throwaway.user(), await throwaway.agent()];
      ok('throwaway delegation', await s.admin('PUT', `/users/${id}/delegations/${encodeURIComponent(agent_id)}`, { capabilities: ['send:emails'] }));
      return { id, agent_id };
    },
    'DELETE /agents/{agent_id}': async () => ({ agent_id: await throwaway.agent() }),
    'POST /agents/{agent_id}/revoke': async () => ({ agent_id: await throwaway.agent() }),
    'DELETE /agents/{agent_id}/capabilities/{name}': async () => ({ agent_id: await throwaway.agent(), name: 'send:emails' }),
    'DELETE /applications/{client_id}': async () => ({ client_id: await throwaway.app() }),
    'DELETE /applications/{client_id}/grants/{api_client_id}': async () => {
      const client_id = await throwaway.app('m2m');
      ok('throwaway grant', await s.admin('PUT', `/applications/${encodeURIComponent(client_id)}/grants/${encodeURIComponent(params.api_client_id!)}`, { scopes: ['read'] }));
      return { client_id, api_client_id: params.api_client_id! };
    },
    // (a person of its own too: a request on the target person whose method is mutated to DELETE removes it)
    'DELETE /applications/{client_id}/assignments/{user_id}': async () => {
      const [client_id, user_id] = [await throwaway.app(), await throwaway.user()];
      ok('throwaway assignment', await s.admin('PUT', `/applications/${encodeURIComponent(client_id)}/assignments/${user_id}`));
      return { client_id, user_id };
    },
    'DELETE /roles/{name}': async () => ({ name: await throwaway.role() }),
    'DELETE /trusted-issuers/{issuer}': async () => ({ issuer: await throwaway.issuer() }),
    'DELETE /authorization-details-types/{type}': async () => {
      const type = `throwaway_${++made}`;
      ok('throwaway type', await s.admin('PUT', `/authorization-details-types/${type}`, { description: 't', schema: { type: 'object' } }));
      return { type };
    },
    'DELETE /entities/{type}/{id}': async () => {
      const id = `throwaway-${++made}`;
      ok('throwaway entity', await s.admin('PUT', `/entities/document/${id}`, { attributes: { owner: 'x' } }));
      return { type: 'document', id };
    },
    'DELETE /saml/connections/{name}': async () => {
      const name = `throwaway-${++made}`;
      ok('throwaway connection', await s.admin('POST', '/saml/connections', { name, kind: 'sp', entity_id: `https://${name}.example`, acs_url: `https://${name}.example/acs` }));
      return { name };
    },
    'DELETE /mcp/upstreams/{name}': async () => {
      const name = `throwaway-${++made}`;
      ok('throwaway upstream', await s.admin('POST', '/mcp/upstreams', { name, url: 'http://127.0.0.1:9/mcp' }));
      return { name };
    },
  };
  const idFor: Record<string, string> = { '/rules/': targetRule, '/users/': target.user, '/entities/': 'd1', '/agents/': '1' };
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const key = `${method.toUpperCase()} ${path}`;
      const schema = op.requestBody?.content?.['application/json']?.schema;
      const p: Record<string, string> = {};
      for (const name of path.match(/\{[^}]+\}/g) ?? []) {
        const n = name.slice(1, -1);
        const byPrefix = (table: Record<string, string>) => Object.entries(table).find(([prefix]) => path.startsWith(prefix))?.[1];
        p[n] = n === 'id' ? (byPrefix(idFor) ?? 'x') : n === 'name' ? (byPrefix(nameFor) ?? 'x') : (params[n] ?? 'x');
      }
      // The fixtures stay: what would remove or revoke one works on a name no fixture has.
      if (method === 'delete' || /\/revoke$/.test(path)) for (const n of Object.keys(p)) p[n] = `gone-${n}`;
      const query: Record<string, string> = {};
      for (const q of op.parameters ?? []) if (q.in === 'query') query[q.name] = queryValue[q.name] ?? 'x';
      const answersApproval = /^\/approvals\/\{id\}\/(approve|deny)$/.test(path) && method === 'post';
      seeds.push({
        label: `admin ${key}`, method: method.toUpperCase() as Seed['method'], path: `/admin/v1${path}`, params: answersApproval ? async () => ({ id: await pendingApproval() }) : p, query, headers: A,
        kind: schema ? 'json' : 'none', ...(schema ? { body: written[key] ?? (exampleOf(schema) as Body) } : {}),
      });
      const fresh = throwawayParams[key];
      if (fresh) {
        seeds.push({
          label: `admin ${key} of a throwaway`, method: method.toUpperCase() as Seed['method'], path: `/admin/v1${path}`, params: fresh, query, headers: A,
          kind: schema ? 'json' : 'none', ...(schema ? { body: written[key] ?? (exampleOf(schema) as Body) } : {}),
        });
      }
    }
  }

  // OAuth, sign-in pages and discovery.
  const basic = { authorization: `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}` };
  // A person's access token, from a real sign-in (authorization code with PKCE), so that the
  // userinfo requests pass their first check and their mutations reach the claims code.
  const personToken = await (async () => {
    const r = await s.admin('PUT', `/applications/${encodeURIComponent(app.client_id)}/assignments/${userId}`);
    if (r.status >= 300) throw new Error(`assignment: ${r.status} ${JSON.stringify(r.body)}`);
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const query = new URLSearchParams({ response_type: 'code', client_id: app.client_id, redirect_uri: 'https://app.example/cb', scope: 'openid profile email', state: 'st', nonce: 'n', code_challenge: challenge, code_challenge_method: 'S256' });
    const callback = await followSignIn(new Browser(s.url), `${s.url}/oauth/authorize?${query}`, { email: 'ada@example.com', password: 'a long enough password' });
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`sign-in ended without a code: ${callback}`);
    const token = ok('person token', await postFormWith(`${s.url}/oauth/token`, { grant_type: 'authorization_code', code, redirect_uri: 'https://app.example/cb', code_verifier: verifier }, basic)).access_token as string;
    const claims = await fetch(`${s.url}/oauth/userinfo`, { headers: { authorization: `Bearer ${token}` } });
    if (claims.status !== 200) throw new Error(`userinfo with the person's token: ${claims.status} ${await claims.text()}`);
    return token;
  })();
  // An authorization details type (RFC 9396) of its own, for the requests that carry details.
  ok('details type', await s.admin('PUT', '/authorization-details-types/payment', { description: 'a payment', schema: { type: 'object', properties: { amount: { type: 'number' }, currency: { type: 'string' } }, required: ['amount'] } }));
  const authorizeQuery = { response_type: 'code', client_id: app.client_id, redirect_uri: 'https://app.example/cb', scope: 'openid profile', state: 's', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };
  seeds.push(
    { label: 'token client_credentials', method: 'POST', path: '/oauth/token', kind: 'form', body: { grant_type: 'client_credentials', client_id: caller.client_id, client_secret: caller.client_secret, resource: `${s.ctx.urls.issuer}/access/v1` } },
    { label: 'token code', method: 'POST', path: '/oauth/token', kind: 'form', headers: basic, body: { grant_type: 'authorization_code', code: 'abc', redirect_uri: 'https://app.example/cb', code_verifier: 'v'.repeat(43) } },
    { label: 'token refresh', method: 'POST', path: '/oauth/token', kind: 'form', headers: basic, body: { grant_type: 'refresh_token', refresh_token: 'abc', scope: 'openid' } },
    { label: 'token exchange', method: 'POST', path: '/oauth/token', kind: 'form', headers: basic, body: { grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: appToken.access_token, subject_token_type: 'urn:ietf:params:oauth:token-type:access_token', audience: 'x' } },
    { label: 'introspect', method: 'POST', path: '/oauth/token/introspect', kind: 'form', headers: basic, body: { token: appToken.access_token, token_type_hint: 'access_token' } },
    { label: 'revoke', method: 'POST', path: '/oauth/token/revoke', kind: 'form', headers: basic, body: { token: 'not-a-token', token_type_hint: 'refresh_token' } },
    { label: 'userinfo', method: 'GET', path: '/oauth/userinfo', kind: 'none', headers: { authorization: `Bearer ${personToken}` } },
    { label: 'userinfo post', method: 'POST', path: '/oauth/userinfo', kind: 'form', headers: { authorization: `Bearer ${personToken}` }, body: {} },
    { label: 'userinfo by an application', method: 'GET', path: '/oauth/userinfo', kind: 'none', headers: { authorization: `Bearer ${appToken.access_token}` } },
    { label: 'par', method: 'POST', path: '/oauth/par', kind: 'form', headers: basic, body: authorizeQuery },
    { label: 'par with details', method: 'POST', path: '/oauth/par', kind: 'form', headers: basic, body: { ...authorizeQuery, authorization_details: [{ type: 'payment', amount: 5, currency: 'EUR' }] }, jsonFields: ['authorization_details'] },
    { label: 'authorize', method: 'GET', path: '/oauth/authorize', kind: 'none', query: authorizeQuery },
    { label: 'authorize post', method: 'POST', path: '/oauth/authorize', kind: 'form', body: authorizeQuery },
    { label: 'logout', method: 'GET', path: '/oauth/logout', kind: 'none', query: { client_id: app.client_id, post_logout_redirect_uri: 'https://app.example/bye', state: 'x' } },
    { label: 'logout post', method: 'POST', path: '/oauth/logout', kind: 'form', body: { client_id: app.client_id, post_logout_redirect_uri: 'https://app.example/bye', state: 'x' } },
    { label: 'jwks', method: 'GET', path: '/.well-known/jwks.json', kind: 'none' },
    { label: 'discovery', method: 'GET', path: '/.well-known/openid-configuration', kind: 'none' },
  );

  // The sign-in pages, with real interactions: each seed names a pending authorization request
  // at the step its page is for, with the CSRF value and cookie of the browser that holds it.
  // Where a good answer uses the request up (a password, a code, a passkey, a consent), every
  // request gets a fresh one. The fuzz's hostile requests all come from one address, so the
  // sign-in limits would soon refuse the fresh sign-ins the seeds make: each of those starts
  // from cleared counters (the limits themselves are tested with the sign-in pages).
  const clearLimits = () => s.ctx.store.rateLimits.purgeOlderThan(Number.MAX_SAFE_INTEGER);
  const grace = ok('totp person', await s.admin('POST', '/users', { email: 'grace@example.com', password: 'a long enough password', name: 'Grace', totp_secret: TOTP_SECRET })).id as string;
  const pat = ok('passkey person', await s.admin('POST', '/users', { email: 'pat@example.com', password: 'a long enough password', name: 'Pat' })).id as string;
  const third = ok('third-party application', await s.admin('POST', '/applications', { name: 'third', type: 'web', first_party: false, redirect_uris: ['https://third.example/cb'] }));
  for (const [client, person] of [[app.client_id, grace], [app.client_id, pat], [third.client_id, userId]]) {
    ok('assignment', await s.admin('PUT', `/applications/${encodeURIComponent(client!)}/assignments/${person}`));
  }
  const passkey = new SoftAuthenticator(s.ctx.urls.issuer);
  const patBrowser = new Browser(s.url);
  await signInToAccount(patBrowser, 'pat@example.com', 'a long enough password');
  const registered = await registerPasskey(patBrowser, passkey, 'Laptop');
  if (registered.status !== 303) throw new Error(`passkey registration: ${registered.status} ${await registered.text()}`);
  /** A pending authorization request (its id) and the page it sends the browser to first. */
  const interaction = async (extra: Record<string, string> = {}, cookie?: string): Promise<{ page: string; request: string }> => {
    const r = await fetch(`${s.url}/oauth/authorize?${new URLSearchParams({ ...authorizeQuery, ...extra })}`, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    const at = new URL(r.headers.get('location') ?? '/', s.url);
    const request = at.searchParams.get('request');
    if (r.status !== 302 || !request) throw new Error(`authorization request: ${r.status} ${at} ${await r.text()}`);
    return { page: at.pathname, request };
  };
  // One browser for the sign-in seeds: its CSRF value and cookie stay the same for every request.
  const signInBrowser = new Browser(s.url);
  const signInCsrf = parseForms(await (await signInBrowser.get(`/login?request=${(await interaction()).request}`)).text())[0]?.fields.csrf;
  if (!signInCsrf) throw new Error('the sign-in page has no CSRF value');
  // and its passkey ceremony cookie, which the first challenge sets
  const ceremony = await postJsonAs(signInBrowser, '/login/passkey/options', { csrf: signInCsrf, mode: 'autofill' });
  if (ceremony.status !== 200) throw new Error(`passkey options: ${ceremony.status} ${JSON.stringify(ceremony.body)}`);
  const signInCookie = { cookie: signInBrowser.jar.header() };
  /** A pending request past the password of a person with a second step to take (its id). */
  const pastPassword = async (email: string, acr: string) => {
    await clearLimits();
    const { request } = await interaction({ acr_values: acr });
    const r = await fetch(`${s.url}/login`, {
      method: 'POST', redirect: 'manual', headers: { ...signInCookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email, password: 'a long enough password', request, csrf: signInCsrf }),
    });
    const next = r.headers.get('location') ?? '';
    if (r.status !== 302 || !next.includes(request)) throw new Error(`password step for ${email}: ${r.status} ${next} ${(await r.text()).slice(0, 300)}`);
    return request;
  };
  const MFA = 'urn:service:acr:mfa', PASSKEY = 'urn:service:acr:passkey';
  // A used time step is refused: the codes go round the three steps the check accepts (one
  // of skew each way), so that the first requests of a window each pass.
  let codes = 0;
  const passkeyAnswer = async () => {
    await clearLimits();
    const { request } = await interaction({ acr_values: PASSKEY });
    const options = await postJson(`${s.url}/login/passkey/options`, { csrf: signInCsrf, request, mode: 'autofill' }, signInCookie);
    if (options.status !== 200) throw new Error(`passkey options: ${options.status} ${JSON.stringify(options.body)}`);
    return { csrf: signInCsrf, request, mode: 'sign-in', credential: passkey.assert(options.body) };
  };
  // A person signed in (the consent and approvals pages' own session, kept for the whole run),
  // and fresh sessions for signing out.
  const signedIn = async (email: string, cookies: [string, string][] = []): Promise<Browser> => {
    await clearLimits();
    const b = new Browser(s.url);
    for (const [name, value] of cookies) b.jar.cookies.set(name, value);
    const page = await b.get('/login?return_to=/approvals');
    const r = await b.submit(page, { email, password: 'a long enough password' }, '/login');
    if (r.status !== 302 || !b.jar.header().includes('session')) throw new Error(`sign-in of ${email}: ${r.status} ${await r.text()}`);
    return b;
  };
  const ada = await signedIn('ada@example.com');
  const adaCookie = { cookie: ada.jar.header() };
  const toThird = { client_id: third.client_id, redirect_uri: 'https://third.example/cb', prompt: 'consent' };
  const consentRequest = await interaction(toThird, ada.jar.header());
  if (consentRequest.page !== '/consent') throw new Error(`a third-party request went to ${consentRequest.page}, not the consent page`);
  const adaCsrf = parseForms(await (await ada.get(`/consent?request=${consentRequest.request}`)).text())[0]?.fields.csrf;
  if (!adaCsrf) throw new Error('the consent page has no CSRF value');
  const [otpRequest, passkeyRequest] = [await pastPassword('grace@example.com', MFA), await pastPassword('pat@example.com', PASSKEY)];
  const bye = { client_id: app.client_id, post_logout_redirect_uri: 'https://app.example/bye', state: 'x' };
  // with the CSRF cookie of Ada's browser, so that the CSRF value of her pages goes with it
  const adaCsrfCookie = [...ada.jar.cookies].filter(([, value]) => value === adaCsrf);
  const freshSession = async () => ({ cookie: (await signedIn('ada@example.com', adaCsrfCookie)).jar.header() });
  seeds.push(
    { label: 'login page', method: 'GET', path: '/login', kind: 'none', headers: signInCookie, query: { request: (await interaction()).request } },
    { label: 'login', method: 'POST', path: '/login', kind: 'form', headers: signInCookie, body: async () => {
      await clearLimits();
      return { email: 'ada@example.com', password: 'a long enough password', request: (await interaction()).request, csrf: signInCsrf };
    } },
    { label: 'otp page', method: 'GET', path: '/login/otp', kind: 'none', headers: signInCookie, query: { request: otpRequest } },
    { label: 'otp', method: 'POST', path: '/login/otp', kind: 'form', headers: signInCookie, body: async () => ({ otp: totpNow(TOTP_SECRET, [0, 1, -1][codes++ % 3]), request: await pastPassword('grace@example.com', MFA), csrf: signInCsrf }) },
    { label: 'passkey page', method: 'GET', path: '/login/passkey', kind: 'none', headers: signInCookie, query: { request: passkeyRequest } },
    { label: 'passkey options', method: 'POST', path: '/login/passkey/options', kind: 'json', headers: async () => {
      await clearLimits();
      return signInCookie;
    }, body: { csrf: signInCsrf, request: passkeyRequest, mode: 'step' } },
    { label: 'passkey', method: 'POST', path: '/login/passkey', kind: 'form', headers: signInCookie, body: passkeyAnswer, jsonFields: ['credential'] },
    { label: 'consent page', method: 'GET', path: '/consent', kind: 'none', headers: adaCookie, query: { request: consentRequest.request } },
    { label: 'consent', method: 'POST', path: '/consent', kind: 'form', headers: adaCookie, body: async () => ({ decision: 'approve', request: (await interaction(toThird, adaCookie.cookie)).request, csrf: adaCsrf }) },
    // Signing out ends the session it is sent with: each request brings a session of its own.
    { label: 'logout signed in', method: 'GET', path: '/oauth/logout', kind: 'none', headers: freshSession, query: bye },
    { label: 'logout post signed in', method: 'POST', path: '/oauth/logout', kind: 'form', headers: freshSession, body: { ...bye, confirm: 'yes', csrf: adaCsrf } },
  );
  // Agents: tokens, CIBA, the decision endpoint, transaction tokens, approvals.
  const action = { action: 'send:emails', resource: 'email:1', context: { amount: 10, to: 'x@example.com' } };
  let asked = 0;
  /** A CIBA request of the delegated agent waiting for Ada: its approval's id. */
  const personApproval = async (): Promise<string> => {
    const message = `fuzz ${++asked}`;
    ok('ciba', await postForm(`${s.url}/apis/regional/v1/ai/auth/backchannel-authorize`, {
      client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, delegated, { aud: s.ctx.urls.issuer }), login_hint: 'ada@example.com', scope: 'openid send:emails', binding_message: message,
    }));
    const waiting = ok('approvals', await s.admin('GET', `/approvals?state=pending&user_id=${userId}&limit=20`)).data as { id: string; binding_message: string | null }[];
    const mine = waiting.find((a) => a.binding_message === message);
    if (!mine) throw new Error(`the CIBA request "${message}" is not among Ada's pending approvals`);
    return mine.id;
  };
  seeds.push(
    { label: 'agent token', method: 'POST', path: '/apis/regional/v1/ai/auth/token', kind: 'form', body: async () => ({ grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, agent, { aud: s.ctx.urls.issuer }), scope: 'send:emails' }) },
    { label: 'ciba', method: 'POST', path: '/apis/regional/v1/ai/auth/backchannel-authorize', kind: 'form', body: async () => ({ client_assertion_type: JWT_BEARER, client_assertion: await assertion(s, delegated, { aud: s.ctx.urls.issuer }), login_hint: 'ada@example.com', scope: 'openid send:emails', binding_message: 'hi', authorization_details: [{ type: 'payment', amount: 5, currency: 'EUR' }] }), jsonFields: ['authorization_details'] },
    { label: 'decision', method: 'POST', path: '/apis/regional/v1/agents/authorize', kind: 'json', body: { agent_id: agent.id, ...action } },
    { label: 'decision with token', method: 'POST', path: '/apis/regional/v1/agents/authorize', kind: 'json', headers: bearerAgent, body: { agent_id: agent.id, ...action } },
    { label: 'transaction token', method: 'POST', path: '/apis/regional/v1/ai/auth/transaction-token', kind: 'json', headers: bearerAgent, body: action },
    // The person's own page, with Ada's session: a CIBA request waiting for her, fresh for each answer.
    { label: 'approvals page', method: 'GET', path: '/approvals', kind: 'none', headers: adaCookie, query: { done: 'approved' } },
    { label: 'approvals answer', method: 'POST', path: '/approvals', kind: 'form', headers: adaCookie, body: async () => ({ id: await personApproval(), decision: 'approve', csrf: adaCsrf }) },
    { label: 'admin approvals unknown', method: 'POST', path: '/admin/v1/approvals/{id}/approve', params: { id: 'x' }, kind: 'json', headers: A, body: { note: 'ok' } },
    { label: 'admin approvals deny', method: 'POST', path: '/admin/v1/approvals/{id}/deny', params: async () => ({ id: await pendingApproval() }), kind: 'json', headers: A, body: { note: 'no' } },
  );

  // AuthZEN, with the granted application's token.
  const Z = { authorization: `Bearer ${caller.token}` };
  const subject = { type: 'user', id: 'ada', properties: { department: 'x' } };
  const resource = { type: 'document', id: 'd1', properties: {} };
  seeds.push(
    { label: 'authzen evaluation', method: 'POST', path: '/access/v1/evaluation', kind: 'json', headers: Z, body: { subject, action: { name: 'viewer' }, resource, context: { hour: 10 } } },
    { label: 'authzen evaluations', method: 'POST', path: '/access/v1/evaluations', kind: 'json', headers: Z, body: { subject, action: { name: 'viewer' }, evaluations: [{ resource }, { resource: { type: 'document', id: 'd2' } }], options: { evaluations_semantic: 'deny_on_first_deny' } } },
    { label: 'authzen search subject', method: 'POST', path: '/access/v1/search/subject', kind: 'json', headers: Z, body: { subject: { type: 'user' }, action: { name: 'viewer' }, resource, page: { limit: 2 } } },
    { label: 'authzen search resource', method: 'POST', path: '/access/v1/search/resource', kind: 'json', headers: Z, body: { subject, action: { name: 'viewer' }, resource: { type: 'document' }, page: { token: 'x' } } },
    { label: 'authzen search action', method: 'POST', path: '/access/v1/search/action', kind: 'json', headers: Z, body: { subject, resource } },
    { label: 'authzen metadata', method: 'GET', path: '/.well-known/authzen-configuration', kind: 'none' },
  );

  // MCP (an agent's token), SSF (the admin token), SAML.
  // A real stream, so that the SSF routes other than create find it and go past the lookup
  // (deleting works on an id no stream has, so the others keep theirs).
  const streamBody = { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'http://127.0.0.1:9/events' }, events_requested: ['https://schemas.openid.net/secevent/caep/event-type/session-revoked'], description: 'x' };
  const stream = ok('stream', await postJson(`${s.url}/v1/ssf/streams`, streamBody, A)).stream_id as string;
  if (!stream) throw new Error('the stream was created without a stream_id');
  const mcpHeaders = async () => ({ authorization: `Bearer ${await agentToken(s.ctx.urls.mcp)}`, accept: 'application/json, text/event-stream' });
  seeds.push(
    { label: 'mcp initialize', method: 'POST', path: '/mcp', kind: 'json', headers: mcpHeaders, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'f', version: '1' } } } },
    { label: 'mcp tools/call', method: 'POST', path: '/mcp', kind: 'json', headers: mcpHeaders, body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'files.read', arguments: { path: '/x' } } } },
    { label: 'mcp get', method: 'GET', path: '/mcp', kind: 'none', headers: mcpHeaders },
    { label: 'ssf create', method: 'POST', path: '/v1/ssf/streams', kind: 'json', headers: A, body: streamBody },
    { label: 'ssf get', method: 'GET', path: '/v1/ssf/streams', kind: 'none', headers: A, query: { stream_id: stream } },
    { label: 'ssf patch', method: 'PATCH', path: '/v1/ssf/streams', kind: 'json', headers: A, body: { stream_id: stream, description: 'y' } },
    { label: 'ssf put', method: 'PUT', path: '/v1/ssf/streams', kind: 'json', headers: A, body: { stream_id: stream, delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'http://127.0.0.1:9/e' } } },
    { label: 'ssf delete', method: 'DELETE', path: '/v1/ssf/streams', kind: 'none', headers: A, query: { stream_id: 'gone-stream' } },
    { label: 'ssf status', method: 'POST', path: '/v1/ssf/status', kind: 'json', headers: A, body: { stream_id: stream, status: 'paused', reason: 'r' } },
    { label: 'ssf status get', method: 'GET', path: '/v1/ssf/status', kind: 'none', headers: A, query: { stream_id: stream, subject: 'x' } },
    { label: 'ssf subjects add', method: 'POST', path: '/v1/ssf/subjects:add', kind: 'json', headers: A, body: { stream_id: stream, subject: { format: 'email', email: 'a@b.c' }, verified: true } },
    { label: 'ssf subjects remove', method: 'POST', path: '/v1/ssf/subjects:remove', kind: 'json', headers: A, body: { stream_id: stream, subject: { format: 'opaque', id: 'x' } } },
    { label: 'ssf verify', method: 'POST', path: '/v1/ssf/verify', kind: 'json', headers: A, body: { stream_id: stream, state: 's' } },
    { label: 'ssf events', method: 'GET', path: '/v1/ssf/events', kind: 'none', headers: A, query: { stream_id: stream, state: 'failed', limit: '5' } },
    { label: 'ssf retry', method: 'POST', path: '/v1/ssf/events:retry', kind: 'json', headers: A, body: { stream_id: stream, event_ids: ['x'] } },
    { label: 'saml metadata', method: 'GET', path: '/saml/metadata', kind: 'none' },
    { label: 'saml sso', method: 'GET', path: '/saml/sso', kind: 'none', query: { SAMLRequest: 'fZBBa8MwDIX/ivE9ieOuLRMhZazsMGjZYGHQW3HVxCW2g+Wk7b+fk22MXXYRQnrv0yfVTXWoqsmO5NXFpTb6TQZx30NekT22g/IIPRs6DjKkErlQdQPWPtWE0BZU0vDVXXb3HnWwrvC4tAc79W2HNtQJ', RelayState: 'r' } },
    { label: 'saml sso post', method: 'POST', path: '/saml/sso', kind: 'form', body: { SAMLRequest: 'PHg+PC94Pg==', RelayState: 'r' } },
    { label: 'saml sso resume', method: 'GET', path: '/saml/sso/resume', kind: 'none', query: { request: 'x' } },
    { label: 'saml slo', method: 'GET', path: '/saml/slo', kind: 'none', query: { SAMLRequest: 'x', RelayState: 'r', SigAlg: 'x', Signature: 'x' } },
    { label: 'saml slo post', method: 'POST', path: '/saml/slo', kind: 'form', body: { SAMLResponse: 'PHg+PC94Pg==' } },
    { label: 'saml sp login', method: 'GET', path: '/saml/sp/{name}/login', params: { name: 'sp' }, kind: 'none', query: { return_to: '/account' } },
    { label: 'saml sp metadata', method: 'GET', path: '/saml/sp/{name}/metadata', params: { name: 'sp' }, kind: 'none' },
    { label: 'saml acs', method: 'POST', path: '/saml/sp/{name}/acs', params: { name: 'sp' }, kind: 'form', body: { SAMLResponse: 'PHg+PC94Pg==', RelayState: 'x' } },
    { label: 'metrics', method: 'GET', path: '/metrics', kind: 'none' },
  );

  // The console and the account pages, signed in as an administrator: every POST form their
  // pages serve (with its CSRF token), and the pages themselves.
  const signIn = await consoleSignIn(s, admin.email, admin.password);
  if (signIn.last.status !== 200) throw new Error(`console sign-in: ${JSON.stringify(signIn.statuses)}`);
  consoleBrowser = signIn.browser;
  const cookie = async () => ({ cookie: consoleBrowser!.jar.header() });
  // The fixture each destructive form of the console may name (on its area's pages), and its throwaway.
  const consoleThrowaways = [
    { area: '/console/rules/', fixture: targetRule, make: throwaway.rule },
    { area: '/console/people/', fixture: target.user, make: throwaway.user },
    { area: '/console/agents/', fixture: target.agent.id, make: throwaway.agent },
    { area: '/console/applications/', fixture: target.app.client_id, make: () => throwaway.app() },
    { area: '/console/roles/', fixture: 'target', make: throwaway.role },
    { area: '/console/trusted-issuers/', fixture: 'https://issuer.example', make: throwaway.issuer },
    { area: '/console/streams/', fixture: stream, make: async () => ok('throwaway stream', await postJson(`${s.url}/v1/ssf/streams`, { ...streamBody, delivery: { ...streamBody.delivery, endpoint_url: `http://127.0.0.1:9/events-${++made}` } }, A)).stream_id as string },
  ];
  /** A console session of its own (its cookie), for a request that ends it; its CSRF value is kept by cookie. */
  const consoleCsrf = new Map<string, string>();
  const consoleSession = async () => {
    await clearLimits();
    const own = await consoleSignIn(s, admin.email, admin.password);
    const csrf = parseForms(await own.last.text()).find((f) => f.action === '/console/logout')?.fields.csrf;
    if (own.last.status !== 200 || !csrf) throw new Error(`a second console session: ${JSON.stringify(own.statuses)}`);
    const header = own.browser.jar.header();
    consoleCsrf.set(header, csrf);
    return { cookie: header };
  };
  // A passkey registered from the account page, as its script does (the browser's ceremony
  // cookie is set by a first challenge, so that the seed's cookie header carries it).
  const accountCsrf = parseForms(await (await consoleBrowser.get('/account')).text()).find((f) => f.action === '/account/passkeys')?.fields.csrf;
  if (!accountCsrf) throw new Error('the account page has no passkey form');
  const registrationOptions = async () => {
    const options = await postJsonAs(consoleBrowser!, '/account/passkeys/options', { csrf: accountCsrf });
    if (options.status !== 200) throw new Error(`account passkey options: ${options.status} ${JSON.stringify(options.body)}`);
    return options.body;
  };
  await registrationOptions();
  seeds.push({
    label: 'account passkey registration', method: 'POST', path: '/account/passkeys', kind: 'form', headers: cookie, jsonFields: ['credential'],
    body: async () => ({ csrf: accountCsrf, name: 'Key', credential: new SoftAuthenticator(s.ctx.urls.issuer).register(await registrationOptions()) }),
  });
  const pages = [
    '/console', '/console/rules', `/console/rules/${targetRule}`, '/console/rules/new', '/console/policy', '/console/policy/diff', '/console/approvals',
    '/console/keys', '/console/audit', '/console/people', `/console/people/${target.user}`, '/console/agents', `/console/agents/${encodeURIComponent(target.agent.id)}`,
    '/console/applications', `/console/applications/${target.app.client_id}`, '/console/relationships', '/console/roles', '/console/streams', '/console/trusted-issuers',
    '/account', '/account/totp',
  ];
  for (const page of pages) {
    seeds.push({ label: `page ${page}`, method: 'GET', path: page, kind: 'none', headers: cookie, query: { q: 'x', page: '2' } });
    const res = await consoleBrowser.get(page);
    if (res.status !== 200) continue;
    for (const form of parseForms(await res.text())) {
      const action = new URL(form.action || page, new URL(page, s.url));
      // Signing out would end the session the rest of the run uses; deleting, revoking or
      // re-keying would take away the fixtures the other surfaces reach deep code with. So the
      // console's sign-out goes with a session of its own, and a destructive form works on a
      // throwaway in place of the fixture it names (or is left out when it names another).
      if (/logout|sign-?out|sessions\/end|\/(delete|remove|revoke|revoke-sessions|rotate-secret|key|compromised|password|withdraw)$/.test(action.pathname)) {
        if (action.pathname === '/console/logout') {
          if (!seeds.some((x) => x.label === 'form console sign-out')) {
            seeds.push({ label: 'form console sign-out', method: 'POST', path: action.pathname, kind: 'form', headers: consoleSession, body: async (h) => ({ ...form.fields, csrf: consoleCsrf.get(h?.cookie ?? '') ?? '' }) });
          }
          continue;
        }
        const segments = action.pathname.split('/');
        for (const t of consoleThrowaways) {
          if (!action.pathname.startsWith(t.area)) continue;
          const at = segments.findIndex((x) => decodeURIComponent(x) === t.fixture);
          const field = Object.keys(form.fields).find((k) => form.fields[k] === t.fixture);
          if (at < 0 && field === undefined) continue;
          // what a person would type into the form's empty fields
          const fields = { ...form.fields, ...(form.fields.password === '' ? { password: 'another long enough password' } : {}) };
          const label = `form ${page} → ${action.pathname} of a throwaway`;
          if (at >= 0) seeds.push({ label, method: 'POST', path: segments.map((x, i) => (i === at ? '{id}' : x)).join('/'), params: async () => ({ id: await t.make() }), kind: 'form', headers: cookie, body: fields });
          else seeds.push({ label, method: 'POST', path: action.pathname, kind: 'form', headers: cookie, body: async () => ({ ...fields, [field!]: await t.make() }) });
          break;
        }
        continue;
      }
      // Nor may a form change what the pending approvals are made with (the mailer's role, agent and rule).
      const approvalFixture = [approvalRule, 'mailer', approver.id, encodeURIComponent(approver.id)];
      if (approvalFixture.some((x) => decodeURIComponent(action.pathname).includes(x) || Object.values(form.fields).includes(x))) continue;
      const fields = { ...form.fields };
      const answersApproval = action.pathname === '/console/approvals/answer' && 'id' in fields;
      seeds.push({ label: `form ${page} → ${action.pathname}`, method: 'POST', path: action.pathname, kind: 'form', headers: cookie, body: answersApproval ? async () => ({ ...fields, decision: 'approve', id: await pendingApproval() }) : fields });
    }
  }

  // The account page's destructive forms (removing a sign-in method, ending sessions, withdrawing
  // a consent or an agent): each request signs in a person of its own, made with what the form
  // removes, and posts the form their account page serves.
  const accountForms = new Map<string, ParsedForm[]>();
  const accountOf = (has: 'passkey' | 'consent' | 'agent' | undefined) => async () => {
    const email = `account-${++made}@example.com`;
    const id = ok('account person', await s.admin('POST', '/users', { email, password: 'a long enough password', name: 'A', totp_secret: TOTP_SECRET })).id as string;
    if (has === 'agent') ok('account delegation', await s.admin('PUT', `/users/${id}/delegations/${encodeURIComponent(delegated.id)}`, { capabilities: ['send:emails'] }));
    if (has === 'consent') ok('account assignment', await s.admin('PUT', `/applications/${encodeURIComponent(third.client_id)}/assignments/${id}`));
    const b = await signedIn(email);
    if (has === 'passkey' && (await registerPasskey(b, new SoftAuthenticator(s.ctx.urls.issuer), 'Key')).status !== 303) throw new Error('an account passkey was not registered');
    if (has === 'consent') {
      const { request } = await interaction(toThird, b.jar.header());
      const page = `/consent?request=${request}`;
      const r = await b.submit(await b.get(page), { decision: 'approve' }, page);
      if (r.status !== 302) throw new Error(`an account consent: ${r.status} ${await r.text()}`);
    }
    const header = b.jar.header();
    accountForms.set(header, parseForms(await (await b.get('/account')).text()));
    return { cookie: header };
  };
  const accountForm = (action: string, which: (f: ParsedForm) => boolean = () => true) => async (h?: Record<string, string>) => {
    const form = accountForms.get(h?.cookie ?? '')?.find((f) => f.action === action && which(f));
    return form ? { ...form.fields } : {};
  };
  seeds.push(
    { label: 'account totp removed', method: 'POST', path: '/account/totp/remove', kind: 'form', headers: accountOf(undefined), body: accountForm('/account/totp/remove') },
    { label: 'account passkey removed', method: 'POST', path: '/account/passkeys/remove', kind: 'form', headers: accountOf('passkey'), body: accountForm('/account/passkeys/remove') },
    { label: 'account session ended', method: 'POST', path: '/account/sessions/end', kind: 'form', headers: accountOf(undefined), body: accountForm('/account/sessions/end') },
    { label: 'account other sessions ended', method: 'POST', path: '/account/sessions/end-all', kind: 'form', headers: accountOf(undefined), body: accountForm('/account/sessions/end-all', (f) => f.fields.keep_current === '1') },
    { label: 'account all sessions ended', method: 'POST', path: '/account/sessions/end-all', kind: 'form', headers: accountOf(undefined), body: accountForm('/account/sessions/end-all', (f) => !('keep_current' in f.fields)) },
    { label: 'account consent withdrawn', method: 'POST', path: '/account/consents/withdraw', kind: 'form', headers: accountOf('consent'), body: accountForm('/account/consents/withdraw') },
    { label: 'account agent withdrawn', method: 'POST', path: '/account/agents/withdraw', kind: 'form', headers: accountOf('agent'), body: accountForm('/account/agents/withdraw') },
  );
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

// ---- the valid request's body, from its schema ---------------------------------------------

interface Operation {
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
  parameters?: { in: string; name: string }[];
}
interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minimum?: number;
  example?: unknown;
  default?: unknown;
}

/** A plausible value of a JSON Schema: its example, const, first enum value, or a value of its type with every property. */
function exampleOf(schema: JsonSchema): unknown {
  if (schema.example !== undefined) return schema.example;
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  const alt = schema.anyOf ?? schema.oneOf;
  if (alt?.length) return exampleOf(alt[0]!);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type ?? (schema.properties ? 'object' : undefined)) {
    case 'object': return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, exampleOf(v)]));
    case 'array': return schema.items ? [exampleOf(schema.items)] : [];
    case 'string': return 'x';
    case 'number': case 'integer': return schema.minimum ?? 1;
    case 'boolean': return true;
    case 'null': return null;
    default: return 'x';
  }
}

// ---- hostile values and mutations -----------------------------------------------------------

/** A value standing for a JSON token JSON.stringify cannot write (1e309, -0, ...): swapped in as raw text. */
const RAW = '\u0000raw:';
const rawToken = (t: string) => `${RAW}${t}`;

const hugeString = fc.constantFrom(10_000, 70_000, 300_000).map((n) => 'é'.repeat(n / 2));
const weirdString = fc.oneof(
  fc.constantFrom(
    '', ' ', '\u0000', 'a\u0000b', '\r\n\r\nX-Injected: 1', '\u202e', '\ud800', '\udfff\ud800', '\ufeff', '../../etc/passwd', '%00', '%E0%A4%A', '%',
    '<script>alert(1)</script>', "' OR 1=1 --", '__proto__', 'constructor', 'toString', 'NaN', 'Infinity', '-0', '1e309', '0x10', '[]', '{}',
    'null', 'true', '*', 'user:*', 'document:', ':', '#', 'a#b@c', 'user:ada#member', 'javascript:alert(1)', 'http://127.0.0.1:1/', 'https://',
    'spiffe://', '2020-13-45T99:99:99Z', '9999-12-31T23:59:59Z', '-1', '0', '4294967296', '9007199254740993', 'a'.repeat(2049),
    // For the rule and policy language, patterns and schemas: nesting that could exhaust a parser's stack, backtracking bait.
    `${'('.repeat(3000)}1${')'.repeat(3000)}`, 'not '.repeat(3000) + 'true', `${'['.repeat(2000)}${']'.repeat(2000)}`, `${'a and '.repeat(2000)}b`,
    `context.x like "${'*'.repeat(500)}b"`, '*'.repeat(2000), '(a+)+$', `${'a'.repeat(5000)}!`, 'context.amount > 1e309', 'context.a.b.c.d.e.f.g.h.i.j.k > 0',
    'policy "x" version 1\nrule "r" {', 'type user\ntype doc { relation r: [user, doc#r] or r from r }', '7d', '99999999999d', '0s',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)), maxLength: 8 }),
  hugeString,
);
const deep = (depth: number, leaf: unknown): unknown => {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
};
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  weirdString,
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 2 ** 53 + 1, 1e308, -1e308, Number.MIN_VALUE, [], {}, [null], [[]], ['a', 'b'], { a: 1 }, { __proto__: 1 }),
  fc.constantFrom('1e309', '-1e309', '-0', '1e-400', '123456789012345678901234567890').map(rawToken),
  fc.integer({ min: 20, max: 63 }).map((d) => deep(d, 'x')),
  fc.jsonValue({ maxDepth: 3 }),
  fc.array(weirdString, { maxLength: 3 }),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => Array.from({ length: n }, (_, i) => i)),
  fc.dictionary(weirdString, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 4 }),
);
const CONTENT_TYPES = [
  'application/json', 'application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x', 'application/xml',
  'application/json; charset=utf-16', 'application/merge-patch+json', 'application/x-www-form-urlencoded; charset=klingon', '', ';;;', 'application/*',
];
const HEADER_NAMES = ['authorization', 'dpop', 'x-request-id', 'accept', 'cookie', 'origin', 'x-forwarded-for', 'x-forwarded-proto', 'mcp-session-id', 'if-none-match'];
const headerValue = fc.oneof(
  fc.constantFrom('Bearer', 'Bearer ', 'Bearer a.b.c', 'Basic', 'Basic !!!', `Basic ${Buffer.from('a').toString('base64')}`, `Basic ${Buffer.from(':').toString('base64')}`,
    'DPoP x', 'a'.repeat(8000), 'text/html', '*/*;q=x', 'csrf=x; gh_session=y', 'null', 'e30.e30.', '1.2.3.4, ::1, garbage'),
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 60 }),
);

/** A value of each JSON type (and a few that are the right type in the wrong shape). */
const WRONG_TYPES: readonly unknown[] = [0, -1, 1.5, 1e308, '', 'x', true, false, null, [], ['x'], [1], {}, { a: 1 }];

/** As a `deep` mutation's value: remove the member (or item) instead of replacing it. */
const DROP = Symbol('drop');

/** Every place inside a JSON value (member or item, at any depth), as a path of keys. */
function placesIn(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (Array.isArray(v)) v.forEach((item, i) => (out.push([...at, i]), placesIn(item, [...at, i], out)));
  else if (v && typeof v === 'object') for (const [k, item] of Object.entries(v)) out.push([...at, k]), placesIn(item, [...at, k], out);
  return out;
}

/** `v` with the place at `path` replaced (or removed), copying what it changes. */
function replaceAt(v: unknown, path: (string | number)[], value: unknown): unknown {
  if (!path.length) return value;
  const [head, ...rest] = path;
  if (Array.isArray(v)) {
    const copy = [...v];
    if (rest.length === 0 && value === DROP) copy.splice(head as number, 1);
    else copy[head as number] = replaceAt(copy[head as number], rest, value);
    return copy;
  }
  const copy = { ...(v as Body) };
  if (rest.length === 0 && value === DROP) delete copy[head as string];
  else copy[head as string] = replaceAt(copy[head as string], rest, value);
  return copy;
}

type Mutation =
  | { op: 'drop'; field: number }
  | { op: 'set'; field: number; value: unknown }
  | { op: 'nest'; field: number; key: string; value: unknown }
  | { op: 'deep'; at: number; value: unknown | typeof DROP }
  | { op: 'retype'; at: number; value: unknown }
  | { op: 'add'; key: string; value: unknown }
  | { op: 'body'; value: unknown }
  | { op: 'raw'; text: string }
  | { op: 'duplicate'; field: number }
  | { op: 'contentType'; value: string | undefined }
  | { op: 'param'; field: number; value: string }
  | { op: 'query'; field: number; value: unknown }
  | { op: 'header'; name: string; value: string | undefined }
  | { op: 'method'; value: string };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('drop' as const), field: fc.nat() }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('set' as const), field: fc.nat(), value: hostileValue }), weight: 8 },
  { arbitrary: fc.record({ op: fc.constant('nest' as const), field: fc.nat(), key: fc.constantFrom('a', 'type', 'id', 'name', '__proto__', 'max', 'in', 'properties', '0'), value: hostileValue }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('retype' as const), at: fc.nat(), value: fc.constantFrom(...WRONG_TYPES) }), weight: 8 },
  { arbitrary: fc.record({ op: fc.constant('deep' as const), at: fc.nat(), value: fc.oneof(hostileValue, fc.constant(DROP)) }), weight: 6 },
  { arbitrary: fc.record({ op: fc.constant('add' as const), key: fc.oneof(weirdString, fc.constantFrom('__proto__', 'constructor', 'id', 'client_id', 'agent_id', 'scope', 'resource')), value: hostileValue }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('body' as const), value: hostileValue }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('raw' as const), text: fc.constantFrom('', '{', '{"a":1,"a":2}', 'null', '"x"', '[]', 'NaN', '{"a":NaN}', '\u0000', '{"__proto__":{"admin":true}}', 'a=1&a=2&a[]=3', '%', '\ufeff{}', '{"a":1e309}') }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('duplicate' as const), field: fc.nat() }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('contentType' as const), value: fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined }) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('param' as const), field: fc.nat(), value: weirdString }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('query' as const), field: fc.nat(), value: hostileValue }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('header' as const), name: fc.constantFrom(...HEADER_NAMES), value: fc.option(headerValue, { nil: undefined }) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('method' as const), value: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') }), weight: 1 },
);

interface Built {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

const pick = <T>(list: readonly T[], n: number): T | undefined => (list.length ? list[n % list.length] : undefined);

/** JSON text with the raw tokens swapped in. */
const toJson = (v: unknown) => JSON.stringify(v).replace(/"\\u0000raw:([^"]*)"/g, '$1');

/** A form (or query) value: strings as they are, arrays as repeated fields, anything else as JSON. */
function appendForm(out: URLSearchParams, key: string, v: unknown): void {
  if (Array.isArray(v)) for (const item of v.slice(0, 50)) appendForm(out, key, item);
  else if (typeof v === 'string') out.append(key, v.startsWith(RAW) ? v.slice(RAW.length) : v);
  else out.append(key, v === undefined ? '' : typeof v === 'object' ? toJson(v) : String(v));
}
const formOf = (body: Body) => {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(body)) appendForm(out, k, v);
  return out.toString();
};

/** A path segment percent-encoded; a lone surrogate goes as the bytes a careless client would send. */
const encodeSegment = (v: string) => v.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\u0001').split('\u0001').map(encodeURIComponent).join('%ED%A0%80');

async function build(seed: Seed, mutations: Mutation[]): Promise<Built> {
  let method: string = seed.method;
  const params = { ...(typeof seed.params === 'function' ? await seed.params() : seed.params) };
  const query: Body = { ...seed.query };
  const headers: Record<string, string> = { ...(typeof seed.headers === 'function' ? await seed.headers() : seed.headers) };
  let body: unknown = seed.body === undefined ? undefined : { ...(typeof seed.body === 'function' ? await seed.body(headers) : seed.body) };
  let kind = seed.kind;
  let contentType: string | undefined = kind === 'json' ? 'application/json' : kind === 'form' ? 'application/x-www-form-urlencoded' : undefined;
  let raw: string | undefined;
  const duplicates: string[] = [];
  for (const m of mutations) {
    const fields = body && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : [];
    const obj = body as Body;
    switch (m.op) {
      case 'drop': { const f = pick(fields, m.field); if (f !== undefined) delete obj[f]; break; }
      case 'set': { const f = pick(fields, m.field); if (f !== undefined) obj[f] = m.value; else if (kind === 'none') query[pick(Object.keys(query), m.field) ?? 'x'] = m.value; break; }
      case 'nest': { const f = pick(fields, m.field); if (f !== undefined) { const inner = obj[f]; obj[f] = inner && typeof inner === 'object' && !Array.isArray(inner) ? { ...inner, [m.key]: m.value } : { [m.key]: m.value }; } break; }
      case 'retype': { const place = pick(placesIn(body), m.at); if (place) body = replaceAt(body, place, m.value); else if (kind === 'none') query[pick(Object.keys(query), m.at) ?? 'x'] = m.value; break; }
      case 'deep': { const place = pick(placesIn(body), m.at); if (place) body = replaceAt(body, place, m.value); break; }
      case 'add': if (body && typeof body === 'object' && !Array.isArray(body)) obj[m.key] = m.value; else query[m.key] = m.value; break;
      case 'body': body = m.value; if (kind === 'none') { kind = 'json'; contentType = 'application/json'; } break;
      case 'raw': raw = m.text; contentType ??= 'application/json'; break;
      case 'duplicate': { const f = pick(fields, m.field) ?? pick(Object.keys(query), m.field); if (f !== undefined) duplicates.push(f); break; }
      case 'contentType': contentType = m.value; break;
      case 'param': { const f = pick(Object.keys(params), m.field); if (f !== undefined) params[f] = m.value; break; }
      case 'query': query[pick(Object.keys(query), m.field) ?? 'x'] = m.value; break;
      case 'header': if (m.value === undefined) delete headers[m.name]; else headers[m.name] = m.value; break;
      case 'method': method = m.value; break;
    }
  }
  for (const f of seed.jsonFields ?? []) {
    const obj = body as Body | undefined;
    if (obj && typeof obj === 'object' && !Array.isArray(obj) && obj[f] !== undefined && typeof obj[f] !== 'string') obj[f] = toJson(obj[f]);
  }
  let path = seed.path.replace(/\{([^}]+)\}/g, (_, n: string) => encodeSegment(params[n] ?? 'x'));
  const qs = formOf(query);
  if (qs) path += `?${qs}${duplicates.filter((d) => d in query).map((d) => `&${encodeSegment(d)}=dup`).join('')}`;
  let text: string | undefined = raw;
  if (text === undefined && body !== undefined) {
    if (kind === 'form' && body && typeof body === 'object' && !Array.isArray(body)) {
      text = formOf(body as Body) + duplicates.map((d) => `&${encodeSegment(d)}=dup`).join('');
    } else {
      text = toJson(body);
      // A repeated member: the JSON parser keeps the last, which must be judged like any other value.
      for (const d of duplicates) text = text.replace(/^\{/, `{${JSON.stringify(d)}:"dup",`);
    }
  }
  if (contentType) headers['content-type'] = contentType;
  else delete headers['content-type'];
  const noBody = method === 'GET' || method === 'HEAD';
  return { method, url: `${s.url}${path}`, headers, ...(noBody || text === undefined ? {} : { body: text }) };
}

// ---- the checks -----------------------------------------------------------------------------

const STACK = /\bat [\w.<>$]+ \(|node:internal|\.[cm]?[jt]s:\d+:\d+|\/work\/|node_modules|[A-Za-z]*Error: .*\n\s+at /;

async function send(b: Built): Promise<{ status: number; text: string; type: string; location: string }> {
  const res = await fetch(b.url, { method: b.method, headers: b.headers, body: b.body, redirect: 'manual', signal: AbortSignal.timeout(20_000) });
  const text = await res.text();
  return { status: res.status, text, type: res.headers.get('content-type') ?? '', location: res.headers.get('location') ?? '' };
}

/**
 * What the valid request of a seed that needs real state is answered with once it has passed
 * its first checks (a known request, the CSRF value, a session): a status, and where a redirect
 * goes. A sign-in that went through sends the browser back to the application with a code.
 */
const PAST_FIRST_CHECK: Record<string, { status: number; location?: RegExp; page?: string }> = {
  'login page': { status: 200 },
  login: { status: 302, location: /^https:\/\/app\.example\/cb\?code=/ },
  'otp page': { status: 200 },
  otp: { status: 302, location: /^https:\/\/app\.example\/cb\?code=/ },
  'passkey page': { status: 200 },
  'passkey options': { status: 200 },
  passkey: { status: 302, location: /^https:\/\/app\.example\/cb\?code=/ },
  'consent page': { status: 200 },
  consent: { status: 302, location: /^https:\/\/third\.example\/cb\?code=/ },
  'logout signed in': { status: 302, location: /^https:\/\/app\.example\/bye\?state=x$/ },
  'logout post signed in': { status: 302, location: /^https:\/\/app\.example\/bye\?state=x$/ },
  'approvals page': { status: 200 },
  'account passkey registration': { status: 303, location: /^\/account\?done=passkey-added\b/ },
  'account totp removed': { status: 303, location: /^\/account\?done=totp-removed\b/ },
  'account passkey removed': { status: 303, location: /^\/account\?done=passkey-removed\b/ },
  'account session ended': { status: 200, page: 'You have been signed out.' },
  'account other sessions ended': { status: 303, location: /^\/account\?done=sessions-ended\b/ },
  'account all sessions ended': { status: 200, page: 'You have been signed out.' },
  'account consent withdrawn': { status: 303, location: /^\/account\?done=consent-withdrawn\b/ },
  'account agent withdrawn': { status: 303, location: /^\/account\?done=agent-withdrawn\b/ },
  'approvals answer': { status: 303, location: /^\/approvals\?done=approved$/ },
};

function problems(r: { status: number; text: string; type: string }): string[] {
  const out: string[] = [];
  if (r.status >= 500) out.push(`status ${r.status}`);
  if (STACK.test(r.text)) out.push('a stack trace or source path in the body');
  if (r.status >= 400 && /json/.test(r.type) && r.text) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(r.text);
    } catch {
      out.push('a JSON error body that is not JSON');
    }
    // JSON-RPC (MCP) carries its error as an object; every other JSON error names a code.
    const error = (parsed as { error?: unknown } | undefined)?.error;
    if (parsed !== undefined && typeof error !== 'string' && !(error && typeof error === 'object')) out.push('a JSON error without an `error` code');
  }
  return out;
}

const describeBuilt = (seed: Seed, b: Built) => `${seed.label}: ${b.method} ${b.url.slice(0, 300)} ${JSON.stringify(b.headers).slice(0, 300)} ${(b.body ?? '').slice(0, 400)}`;

describe('the generative fuzz of every HTTP surface', () => {
  it('has a valid request for each surface, and the valid requests are answered', async () => {
    expect(seeds.length).toBeGreaterThan(150);
    const surfaces = new Set(seeds.map((x) => x.path.split('/')[1]));
    for (const surface of ['admin', 'oauth', 'apis', 'access', 'mcp', 'v1', 'saml', 'console', 'account', 'login', 'consent', 'approvals']) expect(surfaces).toContain(surface);
    expect(seeds.filter((x) => x.label.startsWith('form ')).length).toBeGreaterThan(10);
    const bad: string[] = [];
    for (const seed of seeds) {
      const b = await build(seed, []);
      const r = await send(b);
      for (const p of problems(r)) bad.push(`${p} — ${describeBuilt(seed, b)} → ${r.text.slice(0, 300)}`);
    }
    expect(bad).toEqual([]);
    // The requests that need real state (a person's token, a pending approval, a stream) have it:
    // they pass their first check, so their mutations reach past it.
    for (const label of ['userinfo', 'userinfo post', 'admin POST /approvals/{id}/approve', 'admin POST /approvals/{id}/deny', 'admin approvals deny']) {
      const seed = seeds.find((x) => x.label === label);
      expect(seed, label).toBeDefined();
      const r = await send(await build(seed!, []));
      expect(r.status, `${label}: ${r.text.slice(0, 300)}`).toBe(200);
    }
    for (const [label, expected] of Object.entries(PAST_FIRST_CHECK)) {
      const seed = seeds.find((x) => x.label === label);
      expect(seed, label).toBeDefined();
      const r = await send(await build(seed!, []));
      expect({ label, status: r.status, location: r.location }, r.text.slice(0, 300)).toMatchObject({ label, status: expected.status, location: expected.location ? expect.stringMatching(expected.location) : expect.anything() });
      if (expected.page) expect(r.text, label).toContain(expected.page);
    }
    // Destructive requests reach the removal itself: on a throwaway they succeed.
    const destructive = [
      'DELETE /rules/{id}', 'DELETE /users/{id}', 'POST /users/{id}/sessions/revoke', 'DELETE /agents/{agent_id}', 'POST /agents/{agent_id}/revoke',
      'DELETE /applications/{client_id}', 'DELETE /roles/{name}', 'DELETE /trusted-issuers/{issuer}', 'DELETE /saml/connections/{name}', 'DELETE /mcp/upstreams/{name}',
    ].map((key) => `admin ${key} of a throwaway`);
    const consoleForms = ['/console/rules/{id}/delete', '/console/people/{id}/delete', '/console/people/{id}/revoke-sessions', '/console/people/{id}/password', '/console/agents/{id}/key',
      '/console/agents/{id}/revoke', '/console/agents/{id}/delete', '/console/applications/{id}/rotate-secret', '/console/applications/{id}/delete', '/console/roles/delete',
      '/console/trusted-issuers/remove', '/console/streams/delete'];
    for (const path of consoleForms) expect(seeds.some((x) => x.path === path && x.label.endsWith('of a throwaway')), path).toBe(true);
    for (const label of destructive) expect(seeds.some((x) => x.label === label), label).toBe(true);
    for (const seed of seeds.filter((x) => x.label.endsWith('of a throwaway'))) {
      const r = await send(await build(seed, []));
      if (seed.label.startsWith('admin ')) expect(r.status, `${seed.label}: ${r.text.slice(0, 300)}`).toBeLessThan(300);
      // a new secret is shown once, on the answer itself; anything else goes back with a message
      else if (seed.path.endsWith('/rotate-secret')) expect({ label: seed.label, status: r.status, secret: r.text.includes('The secret was replaced.') }).toEqual({ label: seed.label, status: 200, secret: true });
      else expect({ label: seed.label, status: r.status, location: r.location }, r.text.slice(0, 300)).toMatchObject({ label: seed.label, status: 303, location: expect.stringMatching(/^\/console\//) });
    }
    const signOut = seeds.find((x) => x.label === 'form console sign-out');
    expect(signOut, 'the console sign-out').toBeDefined();
    const signedOut = await send(await build(signOut!, []));
    expect({ status: signedOut.status, location: signedOut.location }).toMatchObject({ status: 303, location: expect.stringContaining('/oauth/logout?') });
    for (const seed of seeds.filter((x) => x.label.startsWith('ssf ') && x.label !== 'ssf delete' && x.method === 'GET')) {
      const r = await send(await build(seed, []));
      expect(r.status, `${seed.label}: ${r.text.slice(0, 300)}`).toBeLessThan(300);
    }
    const consoleAnswer = seeds.find((x) => x.path === '/console/approvals/answer');
    expect(consoleAnswer, 'the console approvals page serves an answer form').toBeDefined();
    const answered = await send(await build(consoleAnswer!, []));
    expect(answered.status).toBeLessThan(400);
  }, 120_000);

  it('every field of every valid request, given each other JSON type, is never a 5xx', async () => {
    // Exhaustive where the random run samples: each place in each body (at any depth), each
    // query and path parameter, and the body itself, once per JSON type (and once each with a
    // number JSON cannot hold, control characters, a long string and deep nesting); in a random order of
    // the seeds so that a time-bounded sweep covers different routes on different runs.
    const order = fc.sample(fc.shuffledSubarray(seeds, { minLength: seeds.length, maxLength: seeds.length }), { numRuns: 1, ...SEED })[0]!;
    const started = Date.now();
    let sent = 0;
    const bad: string[] = [];
    const TYPES: readonly unknown[] = [7, 'x', true, null, ['x'], { a: 1 }, rawToken('1e309'), rawToken('-0'), 'a\u0000\u202e\ud800', 'é'.repeat(40_000), deep(60, 'x')];
    sweep: for (const seed of order) {
      const body = typeof seed.body === 'function' ? await seed.body() : seed.body;
      const mutations: Mutation[][] = [];
      placesIn(body).forEach((_, at) => TYPES.forEach((value) => mutations.push([{ op: 'retype', at, value }])));
      Object.keys(seed.query ?? {}).forEach((_, field) => mutations.push([{ op: 'query', field, value: ['a', 'b'] }], [{ op: 'query', field, value: '' }]));
      Object.keys((typeof seed.params === 'function' ? await seed.params() : seed.params) ?? {}).forEach((_, field) => mutations.push([{ op: 'param', field, value: '\u0000' }], [{ op: 'param', field, value: '' }]));
      if (seed.kind !== 'none') for (const value of [[], 'x', 1, null]) mutations.push([{ op: 'body', value }]);
      for (const m of mutations) {
        if (Date.now() - started > SWEEP_LIMIT_MS) break sweep;
        const b = await build(seed, m);
        const r = await send(b);
        sent++;
        for (const p of problems(r)) bad.push(`${p} — ${describeBuilt(seed, b)} → ${r.status} ${r.text.slice(0, 300)}`);
      }
    }
    expect(bad).toEqual([]);
    expect(sent).toBeGreaterThan(100);
  }, SWEEP_LIMIT_MS + 60_000);

  it('a mutated request is never a 5xx, a stack trace, a bare JSON error or a hang', async () => {
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(fc.nat(), fc.array(mutation, { minLength: 1, maxLength: 3 }), async (which, mutations) => {
        const seed = seeds[which % seeds.length]!;
        const b = await build(seed, mutations);
        let r: Awaited<ReturnType<typeof send>>;
        try {
          r = await send(b);
        } catch (err) {
          throw new Error(`no answer (${(err as Error).message}) — ${describeBuilt(seed, b)}`);
        }
        sent++;
        const found = problems(r);
        if (found.length) throw new Error(`${found.join('; ')} — ${describeBuilt(seed, b)} → ${r.status} ${r.text.slice(0, 400)}`);
        const health = await fetch(`${s.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
        if (health.status !== 200) throw new Error(`/healthz answered ${health.status} after ${describeBuilt(seed, b)}`);
      }),
      { ...SEED, numRuns: 1_000_000, interruptAfterTimeLimit: TIME_LIMIT_MS, endOnFailure: false },
    );
    // Enough requests went out that the run meant something (a slow machine still sends hundreds).
    expect(sent).toBeGreaterThan(100);
    // Nothing the fuzz did broke the audit chain.
    const audit = await verifyAuditTrail(s);
    expect(audit.code, audit.stdout).toBe(0);
  }, TIME_LIMIT_MS + 60_000);
});
