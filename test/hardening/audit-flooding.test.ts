import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, assertion, bind, JWT_BEARER, newKeyPair, postForm, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';
import { flushRefusalSummary } from '../../src/agents/refusal-summary.js';
import { AUDIT_CONTEXT_MAX_BYTES } from '../../src/authz/audit.js';

/**
 * What a caller without credentials can make the audit trail hold: a decision's context is
 * kept only up to a size (past it, its size and digest), and refused sign-ins for agents that
 * do not exist are counted and summed up in one record, not stored one by one.
 */

let server: TestServer;
let agent: TestAgent;
beforeAll(async () => {
  server = await startTestServer();
  await putRole(server, 'reader', ['read:docs']);
  agent = await registerAgent(server, { name: 'flood-agent', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
});
afterAll(async () => {
  await server?.stop();
});

const tokenRecords = async () => server.ctx.store.audit.list({ kind: 'token', limit: 1000 });

describe('the audit trail under unauthenticated traffic', () => {
  it('keeps a large context as its size and digest, a small one whole', async () => {
    const big = { blob: 'x'.repeat(240 * 1024) };
    const small = { amount: 5, note: 'short' };
    for (const context of [big, small]) {
      const res = await fetch(`${server.url}/apis/regional/v1/agents/authorize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ agent_id: agent.id, action: 'read:docs', resource: `doc:${Object.keys(context).length}`, context }),
      });
      expect(res.status).toBe(200);
    }
    const records = await server.ctx.store.audit.list({ agent_id: agent.id, kind: 'decision', limit: 10 });
    const bigRecord = records.find((r) => r.resource === 'doc:1')!;
    const smallRecord = records.find((r) => r.resource === 'doc:2')!;
    expect(JSON.stringify(bigRecord.context).length).toBeLessThan(AUDIT_CONTEXT_MAX_BYTES);
    expect(bigRecord.context).toEqual({ $truncated: { bytes: JSON.stringify(big).length, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    expect(smallRecord.context).toEqual(small);
    // Through a binding too (a token record), and the chain still verifies.
    const token = await accessTokenFor(server, agent);
    expect((await bind(server, token, 'read:docs', 'doc:bound', big)).status).toBe(200);
    const bound = (await tokenRecords()).find((r) => r.resource === 'doc:bound')!;
    expect(bound.context).toMatchObject({ $truncated: { bytes: JSON.stringify(big).length } });
    expect((await server.ctx.store.audit.verify()).broken).toBeNull();
  });

  it('counts refused sign-ins for agents that do not exist in one summary; an existing agent’s refusal is recorded whole', async () => {
    const before = (await tokenRecords()).length;
    const { privateKey } = await newKeyPair();
    const t = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 25; i++) {
      const iss = `spiffe://attacker.example/agent/${i}-${randomUUID()}`;
      const forged = await new SignJWT({ iss, sub: iss, aud: server.ctx.urls.agentToken, iat: t, exp: t + 60, jti: randomUUID() }).setProtectedHeader({ alg: 'EdDSA' }).sign(privateKey);
      const res = await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: forged });
      expect(res.status).toBe(401);
    }
    // Not even a JWT: counted too.
    expect((await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: 'garbage' })).status).toBe(401);
    expect((await tokenRecords()).length).toBe(before);

    // An existing agent whose assertion fails (signed with another key) is recorded as before.
    const wrongKey = await assertion(server, agent, { key: privateKey });
    expect((await postForm(server.ctx.urls.agentToken, { grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: wrongKey })).status).toBe(401);
    const own = (await tokenRecords()).filter((r) => r.agent_id === agent.id && r.decision === 'refused');
    expect(own).toHaveLength(1);

    await flushRefusalSummary(server.ctx);
    const summaries = (await tokenRecords()).filter((r) => r.agent_id === null && r.reason?.startsWith('unknown_agent: '));
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.reason).toBe('unknown_agent: 26 refused sign-ins for agents that do not exist');
    expect(summaries[0]!.context).toMatchObject({ count: 26, claimed: expect.arrayContaining([expect.stringMatching(/^spiffe:\/\/attacker\.example\/agent\//)]) });
    expect((summaries[0]!.context as { claimed: string[] }).claimed.length).toBeLessThanOrEqual(5);
    expect((await tokenRecords()).length).toBe(before + 2);
  });
});
