import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { accessTokenFor, authorize, bind, putRole, registerAgent, type TestAgent } from '../agents/helpers.js';

/**
 * A decision that cannot be recorded is not given: while the database refuses the decision
 * records of one resource (a trigger on the audit table, so the refusal comes from the database
 * itself), deciding about it answers 503 with Retry-After, on SQLite and on PostgreSQL alike;
 * the decisions about other resources, and the same one once the refusal is lifted, are answered
 * and recorded.
 */

async function refuseDecisionRecords(server: TestServer, on: boolean): Promise<void> {
  const sql = server.ctx.store.sql;
  if (sql.dialect === 'sqlite') {
    await sql.exec(
      on
        ? `CREATE TRIGGER refuse_decision_records BEFORE INSERT ON audit_log WHEN NEW.kind = 'decision' AND NEW.resource = 'doc:refused' BEGIN SELECT RAISE(ABORT, 'decision records refused'); END`
        : 'DROP TRIGGER refuse_decision_records',
    );
  } else {
    await sql.exec(
      on
        ? `CREATE OR REPLACE FUNCTION refuse_decision_records() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'decision records refused'; END $$ LANGUAGE plpgsql;
           CREATE TRIGGER refuse_decision_records BEFORE INSERT ON audit_log FOR EACH ROW WHEN (NEW.kind = 'decision' AND NEW.resource = 'doc:refused') EXECUTE FUNCTION refuse_decision_records()`
        : 'DROP TRIGGER refuse_decision_records ON audit_log',
    );
  }
}

describe('a decision whose audit record cannot be written', () => {
  let server: TestServer;
  let agent: TestAgent;
  let token: string;

  beforeAll(async () => {
    server = await startTestServer();
    await putRole(server, 'reader', ['read:docs']);
    agent = await registerAgent(server, { name: 'reader-agent', mode: 'autonomous', roles: ['reader'], capabilities: [{ name: 'read:docs' }] });
    token = await accessTokenFor(server, agent);
  });
  afterAll(async () => {
    await server?.close();
  });

  const recorded = async (resource: string) => (await server.ctx.store.audit.list({ agent_id: agent.id, kind: 'decision', limit: 1000 })).filter((r) => r.resource === resource);

  it('is answered 503 with Retry-After, never allow or deny, and nothing is recorded for it', async () => {
    const refused = await bind(server, token, 'read:docs', 'doc:refused', {});
    const other = await bind(server, token, 'read:docs', 'doc:other', {});
    expect(refused.status).toBe(200);
    expect(other.status).toBe(200);
    await refuseDecisionRecords(server, true);
    try {
      for (const transaction_token of [refused.body.data.transaction_token, undefined]) {
        const res = await fetch(`${server.url}/apis/regional/v1/agents/authorize`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ agent_id: agent.id, ...(transaction_token ? { transaction_token } : {}), action: 'read:docs', resource: 'doc:refused', context: {} }),
        });
        const body = (await res.json()) as { error?: string; data?: unknown };
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
        expect(body.error).toBe('temporarily_unavailable');
        expect(body.data).toBeUndefined();
      }
      expect(await recorded('doc:refused')).toEqual([]);
      // Other decisions are answered and recorded meanwhile.
      const fine = await authorize(server, { agent_id: agent.id, transaction_token: other.body.data.transaction_token, action: 'read:docs', resource: 'doc:other', context: {} });
      expect(fine.status).toBe(200);
      expect(fine.body.data.decision).toBe('allow');
      expect(await recorded('doc:other')).toHaveLength(1);
    } finally {
      await refuseDecisionRecords(server, false);
    }
    const again = await authorize(server, { agent_id: agent.id, transaction_token: refused.body.data.transaction_token, action: 'read:docs', resource: 'doc:refused', context: {} });
    expect(again.status).toBe(200);
    expect(again.body.data.decision).toBe('allow');
    expect(await recorded('doc:refused')).toHaveLength(1);
  });
});
