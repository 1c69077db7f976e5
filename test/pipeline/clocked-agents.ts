import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { expect } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { CIBA_GRANT, JWT_BEARER, postForm, postJson, type TestAgent } from '../agents/helpers.js';

// Agents driven against a server whose clock the test holds: every assertion is signed at the
// clock's time, so a decision can be asked at any instant (a daylight-saving change, a weekend).

/** An endpoint of this process: the issuer's URLs may name a host that only the tokens know. */
export const local = (server: TestServer, url: string): string => {
  const u = new URL(url);
  return `${server.url}${u.pathname}${u.search}`;
};

/** The transaction-token endpoint of this process. */
export const bindAt = (server: TestServer, accessToken: string, action: string, resource: string, context: Record<string, unknown>) =>
  postJson(local(server, server.ctx.urls.transactionToken), { action, resource, context }, { authorization: `Bearer ${accessToken}` });

/** The decision endpoint of this process. */
export const decideAt = (server: TestServer, body: Record<string, unknown>) => postJson(local(server, server.ctx.urls.agentAuthorize), body);

/** A clock the server reads and the test moves. */
export class TestClock {
  private t: number;
  constructor(iso: string) {
    this.t = Date.parse(iso);
  }
  readonly clock = { now: () => this.t };
  set(iso: string): void {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) throw new Error(`not an instant: ${iso}`);
    this.t = t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  /** The clock's instant as the audit trail writes it. */
  get iso(): string {
    return new Date(Math.floor(this.t / 1000) * 1000).toISOString();
  }
  get seconds(): number {
    return Math.floor(this.t / 1000);
  }
}

/** A client assertion for the agent, valid at the clock's time. */
export async function assertionAt(server: TestServer, clock: TestClock, agent: TestAgent, aud = server.ctx.urls.agentToken): Promise<string> {
  const t = clock.seconds;
  return new SignJWT({ iss: agent.id, sub: agent.id, aud, iat: t, exp: t + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA' })
    .sign(agent.privateKey);
}

/** An autonomous agent's access token (client_credentials) at the clock's time. */
export async function autonomousToken(server: TestServer, clock: TestClock, agent: TestAgent): Promise<string> {
  const res = await postForm(local(server, server.ctx.urls.agentToken), {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertionAt(server, clock, agent),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.access_token;
}

/**
 * A delegated agent's access token for one person, through CIBA as a real agent gets it: the
 * agent asks, an administrator approves for the person, the clock moves past the poll interval,
 * the agent polls.
 */
export async function delegatedToken(server: TestServer, clock: TestClock, agent: TestAgent, loginHint: string, scope: string[]): Promise<string> {
  const asked = await postForm(local(server, server.ctx.urls.backchannelAuthorize), {
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertionAt(server, clock, agent, server.ctx.urls.issuer),
    scope: scope.join(' '),
    login_hint: loginHint,
    binding_message: 'policy language checks',
  });
  expect(asked.status, JSON.stringify(asked.body)).toBe(200);
  const pending = await server.admin('GET', '/approvals?state=pending');
  const request = pending.body.data.find((a: { auth_req_id?: string }) => a.auth_req_id === asked.body.auth_req_id);
  expect(request, 'the CIBA request is pending').toBeTruthy();
  expect([200, 204]).toContain((await server.admin('POST', `/approvals/${request.id}/approve`)).status);
  clock.advance((asked.body.interval + 1) * 1000);
  const token = await postForm(local(server, server.ctx.urls.agentToken), {
    grant_type: CIBA_GRANT,
    client_assertion_type: JWT_BEARER,
    client_assertion: await assertionAt(server, clock, agent),
    auth_req_id: asked.body.auth_req_id,
  });
  expect(token.status, JSON.stringify(token.body)).toBe(200);
  return token.body.access_token;
}

export interface Answer {
  decision: string;
  reason: string;
  policy_version?: string;
  approval_id?: string;
}

/**
 * Binds a transaction token and asks the decision endpoint: the answer, or (when the binding is
 * refused) `refused` with the binding's reason.
 */
export async function ask(
  server: TestServer,
  agent: TestAgent,
  accessToken: string,
  action: string,
  resource: string,
  context: Record<string, unknown> = {},
): Promise<Answer> {
  const b = await bindAt(server, accessToken, action, resource, context);
  if (b.status !== 200) return { decision: 'refused', reason: `${b.status} ${b.body.reason ?? b.body.error}` };
  const d = await decideAt(server, { agent_id: agent.id, transaction_token: b.body.data.transaction_token, action, resource, context });
  expect(d.status, JSON.stringify(d.body)).toBe(200);
  return d.body.data;
}

/** `decision reason`, the short form most checks compare. */
export const said = (a: Answer): string => `${a.decision} ${a.reason}`;

/** The newest decision records of an agent. */
export async function decisionsOf(server: TestServer, agentId: string, limit = 20): Promise<Record<string, any>[]> {
  const res = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(agentId)}&limit=${limit}`);
  expect(res.status).toBe(200);
  return res.body.data;
}
