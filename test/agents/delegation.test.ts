import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { authorizationUrl, Browser, discover, parseForms, signInAndExchange, startFixture, type Fixture } from '../oauth/helpers.js';
import { bind, bindAndDecide, postForm, postJson, putRole, registerAgent, assertion, JWT_BEARER, type TestAgent } from './helpers.js';
import { EVENT_TYPES } from '../../src/signals.js';
import { consoleSignIn } from '../console/helpers.js';
import { mayList } from '../../src/authz/listing.js';
import { verifyAgentAccessToken } from '../../src/authz/agent-access-token.js';
import { Receiver, setVerifier } from '../ssf/receiver.js';

process.env.GATEHOUSE_SSF_POLL_MS = '20';

// Delegation chains through the real HTTP interface: a person signs in (openid-client), lets
// an agent act for them, and the agent and its sub-agents exchange tokens (openid-client's
// genericGrantRequest with private_key_jwt) and act through the transaction-token and decision
// endpoints.

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

let f: Fixture;
let server: TestServer;
let personToken: string;
let receiver: Receiver;
let streamAud: string;
const agents: Record<string, TestAgent> = {};

/** The agent's openid-client configuration: the agent token endpoint, private_key_jwt with its Ed25519 key. */
function agentConfig(agent: TestAgent): client.Configuration {
  const metadata = { issuer: server.ctx.urls.issuer, token_endpoint: server.ctx.urls.agentToken };
  // openid-client names an Ed25519 signature `Ed25519` (RFC 9864), which the agent endpoint takes as it takes `EdDSA`.
  const auth = client.PrivateKeyJwt(agent.privateKey);
  const config = new client.Configuration(metadata, agent.id, undefined, auth);
  client.allowInsecureRequests(config);
  return config;
}

async function exchange(agent: TestAgent, subjectToken: string, extra: Record<string, string> = {}) {
  return client.genericGrantRequest(agentConfig(agent), EXCHANGE, { subject_token: subjectToken, subject_token_type: ACCESS, ...extra });
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof client.ResponseBodyError) return `${err.error}: ${err.error_description ?? ''}`;
    throw err;
  }
  throw new Error('expected a refusal');
}

const decide = (agent: TestAgent, token: string, action = 'read:docs', resource = 'doc:1') => bindAndDecide(server, agent, token, action, resource, {});

beforeAll(async () => {
  f = await startFixture();
  server = f.server;
  receiver = await new Receiver().start();
  const stream = await fetch(`${server.url}/v1/ssf/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: receiver.url }, events_requested: Object.values(EVENT_TYPES) }),
  });
  expect(stream.status).toBe(201);
  streamAud = ((await stream.json()) as { aud: string }).aud;
  await putRole(server, 'docs', ['read:docs', 'write:docs']);
  // (admin: the person also signs in to the console below)
  expect((await server.admin('PATCH', `/users/${f.user.id}`, { roles: ['admin', 'docs'] })).status).toBe(200);
  const caps = (...names: string[]) => names.map((name) => ({ name }));
  // planner → researcher → summariser → quoter → citer → extra: a chain one too deep at the end.
  for (const [name, c] of [
    ['planner', caps('read:docs', 'write:docs')],
    ['researcher', caps('read:docs', 'write:docs')],
    ['summariser', caps('read:docs')],
    ['quoter', caps('read:docs')],
    ['citer', caps('read:docs')],
    ['extra', caps('read:docs')],
    ['stranger', caps('read:docs')],
  ] as const) {
    agents[name] = await registerAgent(server, { name, mode: 'delegated', roles: ['docs'], capabilities: [...c] });
  }
  const link = async (parent: string, child: string) =>
    expect((await server.admin('PATCH', `/agents/${encodeURIComponent(agents[parent]!.id)}`, { sub_agents: [agents[child]!.id] })).status).toBe(200);
  await link('planner', 'researcher');
  await link('researcher', 'summariser');
  await link('summariser', 'quoter');
  await link('quoter', 'citer');
  await link('citer', 'extra');

  const put = await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(agents.planner!.id)}`, { capabilities: ['read:docs', 'write:docs'] });
  expect(put.status).toBe(204);
  const config = await discover(f, f.web);
  const { tokens } = await signInAndExchange(config, f, { email: f.user.email, password: f.user.password });
  personToken = tokens.access_token;
});
afterAll(async () => {
  await f?.server.stop();
  await receiver?.stop();
});

describe('consent', () => {
  it('is listed by the management API and carried as may_act in the person’s access token', async () => {
    const list = await server.admin('GET', `/users/${f.user.id}/delegations`);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([{ agent_id: agents.planner!.id, capabilities: ['read:docs', 'write:docs'], created_at: expect.any(String) }]);
    expect(decodeJwt(personToken).may_act).toEqual({ sub: agents.planner!.id });
    // Introspection by the application shows it too (openid-client's tokenIntrospection).
    const introspected = await client.tokenIntrospection(await discover(f, f.web), personToken);
    expect(introspected.active).toBe(true);
    expect(introspected.may_act).toEqual({ sub: agents.planner!.id });
  });

  it('refuses a capability the agent does not hold, an unknown person, and a withdrawal of nothing', async () => {
    const wide = await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(agents.summariser!.id)}`, { capabilities: ['write:docs'] });
    expect(wide.status).toBe(400);
    expect(JSON.stringify(wide.body)).toContain('capabilities');
    expect((await server.admin('PUT', `/users/nobody/delegations/${encodeURIComponent(agents.planner!.id)}`, { capabilities: [] })).status).toBe(404);
    expect((await server.admin('DELETE', `/users/${f.user.id}/delegations/${encodeURIComponent(agents.stranger!.id)}`)).status).toBe(404);
    expect((await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(agents.planner!.id)}`, { capabilities: 'read:docs' })).status).toBe(400);
  });
});

describe('consent from the person', () => {
  it('a client asks for it at sign-in (delegate_agent): the consent page names the agent, and the token carries it', async () => {
    const browser = new Browser(f.issuer);
    const config = await discover(f, f.web);
    const flow = await authorizationUrl(config, f, { delegate_agent: agents.quoter!.id, delegate_capabilities: 'read:docs' });
    // The application is first party, yet the page asks: an agent acting for the person always does.
    const page = await browser.get(flow.url);
    const consent = await browser.get(new URL(page.headers.get('location')!, f.issuer).toString());
    expect(consent.status).toBe(200);
    const signIn = await consent.text();
    const afterLogin = await browser.submit(signIn, { email: f.user.email, password: f.user.password }, consent.url || f.issuer);
    const consentUrl = new URL(afterLogin.headers.get('location')!, f.issuer).toString();
    expect(consentUrl).toContain('/consent');
    const html = await (await browser.get(consentUrl)).text();
    expect(html).toContain(agents.quoter!.id);
    const callback = new URL((await browser.submit(html, { decision: 'approve' }, consentUrl)).headers.get('location')!, f.issuer);
    expect(callback.origin).toBe(new URL(f.redirectUri).origin);
    const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce });
    expect(decodeJwt(tokens.access_token).may_act).toEqual(expect.arrayContaining([{ sub: agents.quoter!.id }]));
    const list = await server.admin('GET', `/users/${f.user.id}/delegations`);
    expect(list.body.data.find((d: { agent_id: string }) => d.agent_id === agents.quoter!.id)?.capabilities).toEqual(['read:docs']);
    expect(decodeJwt((await exchange(agents.quoter!, tokens.access_token)).access_token).act).toEqual({ sub: agents.quoter!.id });

    // An unknown agent is refused at the authorization request.
    const bad = await authorizationUrl(config, f, { delegate_agent: 'spiffe://nowhere/agent/x' });
    const refused = new URL((await browser.get(bad.url)).headers.get('location')!);
    expect(refused.searchParams.get('error')).toBe('invalid_request');

    // The person stops it from their account page.
    const account = await (await browser.get('/account')).text();
    const form = parseForms(account).find((x) => x.action === '/account/agents/withdraw' && x.fields.agent_id === agents.quoter!.id);
    expect(form).toBeDefined();
    const done = await browser.post('/account/agents/withdraw', form!.fields);
    expect(done.status).toBe(303);
    expect((await server.admin('GET', `/users/${f.user.id}/delegations`)).body.data.some((d: { agent_id: string }) => d.agent_id === agents.quoter!.id)).toBe(false);
  });
});

describe('token exchange down a chain', () => {
  it('person → agent → sub-agent → sub-sub-agent: nested act, narrowed scope, lifetime never beyond the subject token', async () => {
    const person = decodeJwt(personToken);
    const t1 = await exchange(agents.planner!, personToken, { scope: 'read:docs write:docs' });
    expect(t1.issued_token_type).toBe(ACCESS);
    expect(t1.token_type).toBe('bearer');
    const c1 = decodeJwt(t1.access_token);
    expect(c1.sub).toBe(f.user.id);
    expect(c1.act).toEqual({ sub: agents.planner!.id });
    expect(c1.scope).toBe('read:docs write:docs');
    expect(c1.exp!).toBeLessThanOrEqual(person.exp!);

    // The sub-agent asks for nothing: it gets what both the token and it hold (read only).
    const t2 = await exchange(agents.researcher!, t1.access_token, { scope: 'read:docs' });
    const c2 = decodeJwt(t2.access_token);
    expect(c2.sub).toBe(f.user.id);
    expect(c2.act).toEqual({ sub: agents.researcher!.id, act: { sub: agents.planner!.id } });
    expect(c2.scope).toBe('read:docs');
    expect(c2.exp!).toBeLessThanOrEqual(c1.exp!);

    const t3 = await exchange(agents.summariser!, t2.access_token);
    const c3 = decodeJwt(t3.access_token);
    expect(c3.act).toEqual({ sub: agents.summariser!.id, act: { sub: agents.researcher!.id, act: { sub: agents.planner!.id } } });
    expect(c3.scope).toBe('read:docs');
    expect(c3.client_id).toBe(agents.summariser!.id);
    expect(c3.exp!).toBeLessThanOrEqual(c2.exp!);

    for (const [agent, token] of [[agents.planner!, t1.access_token], [agents.researcher!, t2.access_token], [agents.summariser!, t3.access_token]] as const) {
      expect((await decide(agent, token)).decision?.decision).toBe('allow');
    }
    // The audit trail names the chain of the sub-sub-agent's decision.
    const audit = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(agents.summariser!.id)}`);
    expect(audit.body.data[0].chain).toEqual([agents.planner!.id, agents.researcher!.id, agents.summariser!.id]);

    // The console shows the chain: on the audit page beside the agent, and on the agent's page.
    const { browser, last } = await consoleSignIn(server, f.user.email, f.user.password, `/console/audit?agent_id=${encodeURIComponent(agents.summariser!.id)}`);
    expect(last.status).toBe(200);
    const auditPage = await last.text();
    expect(auditPage).toContain(`for ${f.user.id} through`);
    expect(auditPage).toContain(agents.researcher!.id);
    const agentPage = await (await browser.get(`/console/agents/${encodeURIComponent(agents.researcher!.id)}`)).text();
    expect(agentPage).toMatch(/Sub-agents<\/dt><dd>.*summariser/);
    expect(agentPage).toMatch(/Sub-agent of<\/dt><dd>.*planner/);
    const plannerPage = await (await browser.get(`/console/agents/${encodeURIComponent(agents.planner!.id)}`)).text();
    expect(plannerPage).toMatch(new RegExp(`Acts for</dt><dd>.*${f.user.id}.*read:docs, write:docs`));
  });

  it('refuses an exchange without consent, without the parent listing the sub-agent, beyond the depth, or widening scope', async () => {
    expect(await refusal(exchange(agents.stranger!, personToken))).toMatch(/^invalid_grant: .*may_act/);
    const t1 = await exchange(agents.planner!, personToken);
    expect(await refusal(exchange(agents.stranger!, t1.access_token))).toMatch(/^invalid_grant: .*sub-agents/);
    expect(await refusal(exchange(agents.summariser!, t1.access_token))).toMatch(/^invalid_grant: .*sub-agents/);
    // Widening: the researcher's token reads only; the summariser cannot get write through it.
    const t2 = await exchange(agents.researcher!, t1.access_token, { scope: 'read:docs' });
    expect(await refusal(exchange(agents.summariser!, t2.access_token, { scope: 'write:docs' }))).toMatch(/^invalid_scope: /);
    expect(await refusal(exchange(agents.researcher!, t1.access_token, { scope: 'delete:docs' }))).toMatch(/^invalid_scope: /);
    // Five agents is the limit: the sixth is refused.
    let token = t2.access_token;
    for (const name of ['summariser', 'quoter', 'citer']) token = (await exchange(agents[name]!, token)).access_token;
    expect((decodeJwt(token).act as { sub: string }).sub).toBe(agents.citer!.id);
    expect(await refusal(exchange(agents.extra!, token))).toMatch(/^invalid_grant: .*at most 5 agents/);
    // Other RFC 8693 refusals.
    expect(await refusal(exchange(agents.planner!, personToken, { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' }))).toMatch(/^invalid_request: subject_token_type/);
    expect(await refusal(exchange(agents.planner!, 'not-a-token'))).toMatch(/^invalid_grant: /);
    expect(await refusal(exchange(agents.planner!, personToken, { resource: 'https://elsewhere.example/' }))).toMatch(/^invalid_target: /);
    expect(await refusal(exchange(agents.planner!, personToken, { actor_token: 'x.y.z', actor_token_type: 'urn:ietf:params:oauth:token-type:jwt' }))).toMatch(/^invalid_request: actor_token/);
  });

  it('carries what the person approved in detail (authorization_details) down the chain', async () => {
    const schema = { type: 'object', properties: { actions: { type: 'array', items: { enum: ['read'] } } }, required: ['actions'] };
    expect((await server.admin('PUT', '/authorization-details-types/docs_access', { description: 'Reading your documents', schema })).status).toBe(201);
    const details = [{ type: 'docs_access', actions: ['read'] }];
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password }, { authorization_details: JSON.stringify(details) });
    expect(decodeJwt(tokens.access_token).authorization_details).toEqual(details);
    const t1 = await exchange(agents.planner!, tokens.access_token);
    const t2 = await exchange(agents.researcher!, t1.access_token);
    expect(decodeJwt(t1.access_token).authorization_details).toEqual(details);
    expect(decodeJwt(t2.access_token).authorization_details).toEqual(details);
  });

  it('an exchange may ask for narrower authorization_details, never wider', async () => {
    const schema = { type: 'object', properties: { amount: { type: 'number' }, currency: { enum: ['EUR', 'USD'] } } };
    expect([200, 201]).toContain((await server.admin('PUT', '/authorization-details-types/payment_initiation', { description: 'A payment', schema })).status);
    const approved = [{ type: 'payment_initiation', amount: 240, currency: 'EUR' }];
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password }, { authorization_details: JSON.stringify(approved) });
    // narrower: a smaller amount, the same currency
    const narrower = [{ type: 'payment_initiation', amount: 100, currency: 'EUR' }];
    const t1 = await exchange(agents.planner!, tokens.access_token, { authorization_details: JSON.stringify(narrower) });
    expect(decodeJwt(t1.access_token).authorization_details).toEqual(narrower);
    // and down the chain, never wider than the hop above
    expect(await refusal(exchange(agents.researcher!, t1.access_token, { authorization_details: JSON.stringify(approved) })))
      .toMatch(/^invalid_authorization_details: .*amount 240 is above the approved 100/);
    // wider: a larger amount, another currency, a field left unconstrained, an undeclared type
    expect(await refusal(exchange(agents.planner!, tokens.access_token, { authorization_details: JSON.stringify([{ type: 'payment_initiation', amount: 500, currency: 'EUR' }]) }))).toMatch(/^invalid_authorization_details: /);
    expect(await refusal(exchange(agents.planner!, tokens.access_token, { authorization_details: JSON.stringify([{ type: 'payment_initiation', amount: 100, currency: 'USD' }]) }))).toMatch(/^invalid_authorization_details: /);
    expect(await refusal(exchange(agents.planner!, tokens.access_token, { authorization_details: JSON.stringify([{ type: 'payment_initiation', currency: 'EUR' }]) }))).toMatch(/^invalid_authorization_details: .*amount must be stated/);
    expect(await refusal(exchange(agents.planner!, tokens.access_token, { authorization_details: JSON.stringify([{ type: 'nope' }]) }))).toMatch(/^invalid_authorization_details: /);
  });

  it('takes an actor_token that is the same agent’s assertion, and refuses another agent’s', async () => {
    const own = await assertion(server, agents.planner!);
    const ok = await exchange(agents.planner!, personToken, { actor_token: own, actor_token_type: 'urn:ietf:params:oauth:token-type:jwt' });
    expect(decodeJwt(ok.access_token).act).toEqual({ sub: agents.planner!.id });
    const other = await assertion(server, agents.stranger!);
    expect(await refusal(exchange(agents.planner!, personToken, { actor_token: other, actor_token_type: 'urn:ietf:params:oauth:token-type:jwt' }))).toMatch(/^invalid_request: actor_token must be/);
  });

  it('refuses an autonomous agent and an unsupported grant stays unsupported_grant_type', async () => {
    const robot = await registerAgent(server, { name: 'robot', mode: 'autonomous', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    const res = await postForm(server.ctx.urls.agentToken, {
      grant_type: EXCHANGE, client_assertion_type: JWT_BEARER, client_assertion: await assertion(server, robot),
      subject_token: personToken, subject_token_type: ACCESS,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('unauthorized_client');
  });
});

describe('decisions over the chain', () => {
  it('a revoked middle agent stops the two below it at their next decision; the one above goes on', async () => {
    const mid = await registerAgent(server, { name: 'mid', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    const low = await registerAgent(server, { name: 'low', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    const lowest = await registerAgent(server, { name: 'lowest', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    const top = await registerAgent(server, { name: 'top', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    await server.admin('PATCH', `/agents/${encodeURIComponent(top.id)}`, { sub_agents: [mid.id] });
    await server.admin('PATCH', `/agents/${encodeURIComponent(mid.id)}`, { sub_agents: [low.id] });
    await server.admin('PATCH', `/agents/${encodeURIComponent(low.id)}`, { sub_agents: [lowest.id] });
    expect((await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(top.id)}`, { capabilities: ['read:docs'] })).status).toBe(204);
    // The person's token names one agent in may_act (planner); a fresh sign-in names both.
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
    expect(decodeJwt(tokens.access_token).may_act).toEqual(expect.arrayContaining([{ sub: agents.planner!.id }, { sub: top.id }]));
    const t1 = (await exchange(top, tokens.access_token)).access_token;
    const t2 = (await exchange(mid, t1)).access_token;
    const t3 = (await exchange(low, t2)).access_token;
    const t4 = (await exchange(lowest, t3)).access_token;
    // Bound before the revocation: the decision itself must refuse.
    const bound = await bind(server, t4, 'read:docs', 'doc:1', {});
    expect(bound.status).toBe(200);
    expect((await server.admin('POST', `/agents/${encodeURIComponent(low.id)}/revoke`)).status).toBe(204);
    const after = await fetch(server.ctx.urls.agentAuthorize, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: lowest.id, transaction_token: bound.body.data.transaction_token, action: 'read:docs', resource: 'doc:1', context: {} }),
    }).then((r) => r.json() as Promise<{ data: { decision: string; reason: string } }>);
    expect(after.data.decision).toBe('deny');
    expect(after.data.reason).toMatch(/^delegation_revoked: agent .*low/);
    expect((await bind(server, t4, 'read:docs', 'doc:1', {})).status).toBe(401);
    expect((await decide(top, t1)).decision?.decision).toBe('allow');
    expect((await decide(mid, t2)).decision?.decision).toBe('allow');
    // Withdrawing the consent stops the rest, and tells Shared Signals receivers the new may_act.
    const from = receiver.accepted.length;
    expect((await server.admin('DELETE', `/users/${f.user.id}/delegations/${encodeURIComponent(top.id)}`)).status).toBe(204);
    expect((await decide(top, t1)).bindStatus).toBe(401);
    await receiver.waitFor((r) => r.accepted.length >= from + 1);
    const verify = setVerifier(server.url);
    const sets = await Promise.all(receiver.accepted.slice(from).map((p) => verify(p.body, streamAud)));
    const change = sets.find((s) => s.type === EVENT_TYPES.tokenClaimsChange);
    expect(change?.event).toMatchObject({ claims: { may_act: expect.anything() }, initiating_entity: 'admin' });
    expect(JSON.stringify(change?.event.claims)).not.toContain(top.id);
  });

  it('every agent of the chain must be granted: a parent without the permission denies the sub-agent', async () => {
    await putRole(server, 'readers-only', ['read:docs']);
    const boss = await registerAgent(server, { name: 'boss', mode: 'delegated', roles: ['readers-only'], capabilities: [{ name: 'read:docs' }, { name: 'write:docs' }] });
    const helper = await registerAgent(server, { name: 'helper', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }, { name: 'write:docs' }] });
    await server.admin('PATCH', `/agents/${encodeURIComponent(boss.id)}`, { sub_agents: [helper.id] });
    await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(boss.id)}`, { capabilities: ['read:docs', 'write:docs'] });
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
    const t1 = (await exchange(boss, tokens.access_token)).access_token;
    const t2 = (await exchange(helper, t1)).access_token;
    expect((await decide(helper, t2, 'read:docs')).decision?.decision).toBe('allow');
    const denied = await decide(helper, t2, 'write:docs');
    expect(denied.decision?.decision).toBe('deny');
    expect(denied.decision?.reason).toBe(`not_granted: write:docs (agent ${boss.id} in the chain)`);
    // The MCP gateway's listing agrees: the sub-agent's tools are those every agent may use.
    const may = await mayList(server.ctx, await verifyAgentAccessToken(server.ctx, t2));
    expect([may('read:docs', 'doc:1'), may('write:docs', 'doc:1')]).toEqual([true, false]);
  });

  it("50 concurrent sub-agent calls against a parent's 10 remaining give exactly 10 allows", async () => {
    const parent = await registerAgent(server, {
      name: 'budgeted', mode: 'delegated', roles: ['docs'],
      capabilities: [{ name: 'read:docs', limits: { count: { max: 12, per: '1h' } } }],
    });
    const child = await registerAgent(server, { name: 'spender', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs', limits: { count: { max: 1000, per: '1h' } } }] });
    await server.admin('PATCH', `/agents/${encodeURIComponent(parent.id)}`, { sub_agents: [child.id] });
    await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(parent.id)}`, { capabilities: ['read:docs'] });
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
    const t1 = (await exchange(parent, tokens.access_token)).access_token;
    // The parent spends 2 of its 12 itself: 10 remain.
    for (let i = 0; i < 2; i++) expect((await decide(parent, t1)).decision?.decision).toBe('allow');
    const t2 = (await exchange(child, t1)).access_token;
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => decide(child, t2, 'read:docs', `doc:${i}`)));
    const allowed = results.filter((r) => r.decision?.decision === 'allow').length;
    expect(allowed).toBe(10);
    // The parent's own counter holds every use, its own and its sub-agent's.
    const usage = await server.admin('GET', `/agents/${encodeURIComponent(parent.id)}/usage`);
    expect(JSON.stringify(usage.body)).toContain('"used":12');
    expect((await decide(parent, t1)).decision?.reason ?? 'refused at binding').toMatch(/constraint_violated|refused at binding/);
  });

  it('a consent withdrawn on one instance stops the chain on another at its next decision', async () => {
    // Another process over the same database, with the same issuer (as instances behind one name are).
    const other = await startTestServer({ dir: server.dir, role: 'worker', env: { GATEHOUSE_ISSUER: server.ctx.urls.issuer } });
    const at = (url: string) => `${other.url}${new URL(url).pathname}`;
    expect(other.url).not.toBe(server.url);
    try {
      const roamer = await registerAgent(server, { name: 'roamer', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
      const helper = await registerAgent(server, { name: 'roamer-helper', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
      await server.admin('PATCH', `/agents/${encodeURIComponent(roamer.id)}`, { sub_agents: [helper.id] });
      await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(roamer.id)}`, { capabilities: ['read:docs'] });
      const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
      const t2 = (await exchange(helper, (await exchange(roamer, tokens.access_token)).access_token)).access_token;
      const onOther = async () => {
        const b = await postJson(at(server.ctx.urls.transactionToken), { action: 'read:docs', resource: 'doc:1', context: {} }, { authorization: `Bearer ${t2}` });
        if (b.status !== 200) return b.status;
        const d = await postJson(at(server.ctx.urls.agentAuthorize), { agent_id: helper.id, transaction_token: b.body.data.transaction_token, action: 'read:docs', resource: 'doc:1', context: {} });
        return d.body.data.decision as string;
      };
      expect(await onOther()).toBe('allow');
      expect((await server.admin('DELETE', `/users/${f.user.id}/delegations/${encodeURIComponent(roamer.id)}`)).status).toBe(204);
      // The other instance learns of the change from its change feed (read per turn on SQLite,
      // pushed on PostgreSQL): once it has, its very next call is refused.
      const stamp = await server.ctx.store.changes.version('delegations');
      for (let i = 0; i < 100 && (await other.ctx.store.changes.version('delegations')) < stamp; i++) await new Promise((r) => setTimeout(r, 20));
      expect(await other.ctx.store.changes.version('delegations')).toBeGreaterThanOrEqual(stamp);
      expect(await onOther()).toBe(401);
    } finally {
      await other.stop();
    }
  });

  it("the person's sign-out with session revocation stops the chain's tokens", async () => {
    const solo = await registerAgent(server, { name: 'solo', mode: 'delegated', roles: ['docs'], capabilities: [{ name: 'read:docs' }] });
    await server.admin('PUT', `/users/${f.user.id}/delegations/${encodeURIComponent(solo.id)}`, { capabilities: ['read:docs'] });
    const { tokens } = await signInAndExchange(await discover(f, f.web), f, { email: f.user.email, password: f.user.password });
    const t1 = (await exchange(solo, tokens.access_token)).access_token;
    expect((await decide(solo, t1)).decision?.decision).toBe('allow');
    const from = receiver.accepted.length;
    expect((await server.admin('POST', `/users/${f.user.id}/sessions/revoke`)).status).toBe(204);
    expect((await decide(solo, t1)).bindStatus).toBe(401);
    await receiver.waitFor((r) => r.accepted.length >= from + 1);
    const verify = setVerifier(server.url);
    const sets = await Promise.all(receiver.accepted.slice(from).map((p) => verify(p.body, streamAud)));
    expect(sets.some((s) => s.type === EVENT_TYPES.sessionRevoked)).toBe(true);
    expect(await refusal(exchange(solo, tokens.access_token))).toMatch(/^invalid_grant: .*session/);
  });
});
