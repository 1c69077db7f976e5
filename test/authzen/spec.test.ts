// The AuthZEN 1.0 specification's examples, request by request, against a started server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putRole, registerAgent } from '../agents/helpers.js';
import { startTestServer } from '../helpers/server.js';
import { putUser, startAuthzen, type AuthzenFixture } from './helpers.js';

const POLICY = `
policy "authzen-spec-examples" version 1

rule "document-2-is-closed" {
  effect deny
  subjects "user:*"
  relation "read:documents"
  object "document:2"
}

rule "closing-accounts-needs-a-second-person" {
  effect require_approval
  subjects "user:*"
  relation "close:accounts"
  object "account:*"
}

rule "resource-search-is-a-draft" {
  effect deny
  subjects "user:*"
  relation "can_edit:documents"
  object "document:resource-search.md"
}
`;

let f: AuthzenFixture;

beforeAll(async () => {
  f = await startAuthzen({ policies: { 'spec.policy': POLICY } });
  await putRole(f.server, 'reader', ['can_read:accounts', 'can_read:documents', 'read:documents', 'close:accounts']);
  await putRole(f.server, 'writer', ['can_edit:documents']);
  await putUser(f.server, { id: 'alice@acmecorp.com', email: 'alice@acmecorp.com', roles: ['reader', 'writer'] });
  await putUser(f.server, { id: 'alice@example.com', email: 'alice@example.com', roles: ['reader'] });
}, 30_000);
afterAll(async () => f?.server.stop());

describe('PDP metadata', () => {
  it('GET /.well-known/authzen-configuration names the issuer and every endpoint', async () => {
    const res = await fetch(`${f.base}/.well-known/authzen-configuration`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      policy_decision_point: f.base,
      access_evaluation_endpoint: `${f.base}/access/v1/evaluation`,
      access_evaluations_endpoint: `${f.base}/access/v1/evaluations`,
      search_subject_endpoint: `${f.base}/access/v1/search/subject`,
      search_resource_endpoint: `${f.base}/access/v1/search/resource`,
      search_action_endpoint: `${f.base}/access/v1/search/action`,
    });
  });
});

describe('PDP metadata of a PDP whose identifier has a path', () => {
  it('is also at the well-known URI with the path after the suffix (RFC 8615), naming that identifier', async () => {
    const s = await startTestServer({ env: { GATEHOUSE_ISSUER: 'https://pdp.example.com/tenant1' } });
    try {
      for (const path of ['/.well-known/authzen-configuration/tenant1', '/.well-known/authzen-configuration']) {
        const res = await fetch(`${s.url}${path}`, { headers: { 'x-request-id': 'tenant-md' } });
        expect([res.status, res.headers.get('x-request-id')]).toEqual([200, 'tenant-md']);
        expect(await res.json()).toMatchObject({
          policy_decision_point: 'https://pdp.example.com/tenant1',
          access_evaluation_endpoint: 'https://pdp.example.com/tenant1/access/v1/evaluation',
        });
      }
      expect((await fetch(`${s.url}/.well-known/authzen-configuration/tenant2`)).status).toBe(404);
    } finally {
      await s.stop();
    }
  });
});

describe('Access Evaluation API', () => {
  it('the example request (properties and context): permitted, with the X-Request-ID echoed', async () => {
    const res = await f.post(
      '/access/v1/evaluation',
      {
        subject: { type: 'user', id: 'alice@acmecorp.com' },
        resource: { type: 'account', id: '123' },
        action: { name: 'can_read', properties: { method: 'GET' } },
        context: { time: '1985-10-26T01:22-07:00' },
      },
      { 'x-request-id': 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716' },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-request-id')).toBe('bfe9eb29-ab87-4ca3-be83-a1d5d8305716');
    expect(res.body).toEqual({ decision: true });
  });

  it('the subject with properties (department, ip_address, device_id) is accepted', async () => {
    const res = await f.post('/access/v1/evaluation', {
      subject: { type: 'user', id: 'alice@acmecorp.com', properties: { department: 'Sales', ip_address: '172.217.22.14', device_id: '8:65:ee:17:7e:0b' } },
      resource: { type: 'book', id: '123', properties: { library_record: { title: 'AuthZEN in Action', isbn: '978-0593383322' } } },
      action: { name: 'can_read' },
    });
    // No role grants can_read on books: a deny is a 200 with decision false and the reason.
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ decision: false, context: { reason: 'not_granted: can_read:books' } });
  });

  it('a deny names its reason in the context; the same question gets the same answer', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await f.post('/access/v1/evaluation', {
        subject: { type: 'user', id: 'alice@example.com' },
        action: { name: 'read' },
        resource: { type: 'document', id: '2' },
      });
      expect(res.body).toEqual({ decision: false, context: { reason: 'rule_denied: document-2-is-closed' } });
    }
  });

  it('an unknown subject is a deny, not an error', async () => {
    const res = await f.post('/access/v1/evaluation', {
      subject: { type: 'user', id: 'nobody@acmecorp.com' },
      action: { name: 'can_read' },
      resource: { type: 'account', id: '123' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ decision: false, context: { reason: 'unknown_subject: user nobody@acmecorp.com' } });
    const other = await f.post('/access/v1/evaluation', {
      subject: { type: 'spaceship', id: 'x' },
      action: { name: 'can_read' },
      resource: { type: 'account', id: '123' },
    });
    expect([other.status, other.body.decision]).toEqual([200, false]);
  });

  it('a request without X-Request-ID still gets one; an unusual one comes back unchanged', async () => {
    const q = { subject: { type: 'user', id: 'alice@acmecorp.com' }, action: { name: 'can_read' }, resource: { type: 'account', id: '1' } };
    const plain = await f.post('/access/v1/evaluation', q);
    expect(plain.headers.get('x-request-id')).toBeTruthy();
    const odd = 'req 42/α'.replace('α', 'a') + ' {x}';
    const echoed = await f.post('/access/v1/evaluation', q, { 'x-request-id': odd });
    expect([echoed.status, echoed.headers.get('x-request-id')]).toEqual([200, odd]);
  });

  it('any identifier HTTP carries comes back byte for byte: a long one, one with a tab, one with non-ASCII bytes', async () => {
    const q = { subject: { type: 'user', id: 'alice@acmecorp.com' }, action: { name: 'can_read' }, resource: { type: 'account', id: '1' } };
    for (const id of ['r'.repeat(2000), 'tab\there', 'caf\u00e9-42']) {
      for (const path of ['/access/v1/evaluation', '/access/v1/search/action']) {
        const res = await f.post(path, path.endsWith('evaluation') ? q : { subject: q.subject, resource: q.resource }, { 'x-request-id': id });
        // fetch sends a header's UTF-8 bytes and reads the answer's bytes back as Latin-1.
        expect([res.status, Buffer.from(res.headers.get('x-request-id') ?? '', 'latin1').toString('utf8')]).toEqual([200, id]);
      }
    }
    const unauthenticated = await f.post('/access/v1/evaluation', q, { authorization: null, 'x-request-id': 'r'.repeat(2000) });
    expect([unauthenticated.status, unauthenticated.headers.get('x-request-id')]).toEqual([401, 'r'.repeat(2000)]);
  });

  it('the metadata document echoes the X-Request-ID too', async () => {
    const res = await fetch(`${f.base}/.well-known/authzen-configuration`, { headers: { 'x-request-id': 'md-1' } });
    expect(res.headers.get('x-request-id')).toBe('md-1');
  });
});

describe('Access Evaluations API', () => {
  const alice = { type: 'user', id: 'alice@acmecorp.com' };

  it('three requests with no default values', async () => {
    const res = await f.post('/access/v1/evaluations', {
      evaluations: ['boxcarring.md', 'subject-search.md', 'resource-search.md'].map((id) => ({
        subject: alice,
        action: { name: 'can_read' },
        resource: { type: 'document', id },
        context: { time: '2024-05-31T15:22-07:00' },
      })),
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ evaluations: [{ decision: true }, { decision: true }, { decision: true }] });
  });

  it('a default subject and context for three requests', async () => {
    const res = await f.post('/access/v1/evaluations', {
      subject: alice,
      context: { time: '2024-05-31T15:22-07:00' },
      evaluations: ['boxcarring.md', 'subject-search.md', 'resource-search.md'].map((id) => ({
        action: { name: 'can_read' },
        resource: { type: 'document', id },
      })),
    });
    expect(res.body).toEqual({ evaluations: [{ decision: true }, { decision: true }, { decision: true }] });
  });

  it('a default action overridden by the third request (the HTTPS binding example)', async () => {
    const res = await f.post(
      '/access/v1/evaluations',
      {
        subject: alice,
        context: { time: '2024-05-31T15:22-07:00' },
        action: { name: 'can_read' },
        evaluations: [
          { resource: { type: 'document', id: 'boxcarring.md' } },
          { resource: { type: 'document', id: 'subject-search.md' } },
          { action: { name: 'can_edit' }, resource: { type: 'document', id: 'resource-search.md' } },
        ],
      },
      { 'x-request-id': 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716' },
    );
    expect(res.headers.get('x-request-id')).toBe('bfe9eb29-ab87-4ca3-be83-a1d5d8305716');
    expect(res.body).toEqual({
      evaluations: [{ decision: true }, { decision: true }, { decision: false, context: { reason: 'rule_denied: resource-search-is-a-draft' } }],
    });
  });

  describe('evaluation semantics: read on documents 1, 2 and 3 (2 is denied)', () => {
    const batch = (semantic?: string) => ({
      subject: { type: 'user', id: 'alice@example.com' },
      action: { name: 'read' },
      ...(semantic ? { options: { evaluations_semantic: semantic } } : {}),
      evaluations: ['1', '2', '3'].map((id) => ({ resource: { type: 'document', id } })),
    });
    const denied = { decision: false, context: { reason: 'rule_denied: document-2-is-closed' } };

    it('execute_all (and the default) answers all three in order', async () => {
      for (const body of [batch('execute_all'), batch()]) {
        expect((await f.post('/access/v1/evaluations', body)).body).toEqual({ evaluations: [{ decision: true }, denied, { decision: true }] });
      }
    });

    it('deny_on_first_deny stops at the first denial', async () => {
      expect((await f.post('/access/v1/evaluations', batch('deny_on_first_deny'))).body).toEqual({ evaluations: [{ decision: true }, denied] });
    });

    it('permit_on_first_permit stops at the first permit', async () => {
      expect((await f.post('/access/v1/evaluations', batch('permit_on_first_permit'))).body).toEqual({ evaluations: [{ decision: true }] });
    });

    it('an unknown option is ignored; an unknown semantic is a 400', async () => {
      const ok = await f.post('/access/v1/evaluations', { ...batch(), options: { another_option: 'value' } });
      expect(ok.body.evaluations).toHaveLength(3);
      const bad = await f.post('/access/v1/evaluations', batch('evaluate_some'));
      expect(bad.status).toBe(400);
      expect(bad.body.error_description).toContain('options.evaluations_semantic');
    });
  });

  it('without evaluations (or with an empty array) it answers as a single evaluation', async () => {
    const q = { subject: alice, action: { name: 'can_read' }, resource: { type: 'account', id: '123' } };
    expect((await f.post('/access/v1/evaluations', q)).body).toEqual({ decision: true });
    expect((await f.post('/access/v1/evaluations', { ...q, evaluations: [] })).body).toEqual({ decision: true });
  });

  it('an item still incomplete after the defaults is a deny carrying the error; the others are answered', async () => {
    const res = await f.post('/access/v1/evaluations', {
      subject: alice,
      action: { name: 'can_read' },
      evaluations: [{ resource: { type: 'account', id: '1' } }, {}, { resource: { type: 'account' } }],
    });
    expect(res.status).toBe(200);
    expect(res.body.evaluations).toHaveLength(3);
    expect(res.body.evaluations[0]).toEqual({ decision: true });
    expect(res.body.evaluations[1]).toEqual({ decision: false, context: { error: { status: 400, message: 'evaluations.1.resource: is required' } } });
    expect(res.body.evaluations[2]).toEqual({ decision: false, context: { error: { status: 400, message: 'evaluations.2.resource.id: is required' } } });
  });

  it('a partial default resource: the item supplies the id, the default the type', async () => {
    const res = await f.post('/access/v1/evaluations', {
      subject: alice,
      action: { name: 'can_read' },
      resource: { type: 'account' },
      evaluations: [{ resource: { id: '1', properties: { status: 'active' } } }, { resource: { type: 'book', id: '2' } }],
    });
    expect(res.body.evaluations).toEqual([{ decision: true }, { decision: false, context: { reason: 'not_granted: can_read:books' } }]);
  });
});

describe('the audit trail', () => {
  it('records every AuthZEN decision with its caller, batches item by item; the chain verifies', async () => {
    const res = await f.post('/access/v1/evaluations', {
      subject: { type: 'user', id: 'alice@example.com' },
      action: { name: 'read' },
      context: { channel: 'audit-test' },
      evaluations: ['1', '2'].map((id) => ({ resource: { type: 'document', id } })),
    });
    expect(res.body.evaluations).toHaveLength(2);
    const audit = await f.server.admin('GET', `/audit?caller=${encodeURIComponent(f.caller.client_id)}&limit=2`);
    expect(audit.status).toBe(200);
    expect(audit.body.data.map((r: Record<string, unknown>) => [r.resource, r.decision, r.caller, r.user_id, r.action, r.context])).toEqual([
      ['document:2', 'deny', f.caller.client_id, 'alice@example.com', 'read:documents', { channel: 'audit-test' }],
      ['document:1', 'allow', f.caller.client_id, 'alice@example.com', 'read:documents', { channel: 'audit-test' }],
    ]);
    expect((await f.server.ctx.store.audit.verify()).broken).toBeNull();
  });
});

describe('approval_required', () => {
  it('is decision false with the reason and the approval to wait for; once approved, the same question is allowed once', async () => {
    const q = { subject: { type: 'user', id: 'alice@acmecorp.com' }, action: { name: 'close' }, resource: { type: 'account', id: '9' }, context: { why: 'moving' } };
    const first = await f.post('/access/v1/evaluation', q);
    expect(first.body.decision).toBe(false);
    expect(first.body.context.reason).toBe('approval_required: closing-accounts-needs-a-second-person');
    const approvalId = first.body.context.approval_id;
    expect(approvalId).toEqual(expect.any(String));
    // Asked again while pending: the same approval.
    expect((await f.post('/access/v1/evaluation', q)).body.context.approval_id).toBe(approvalId);
    // The person's pending approvals list it; an administrator answers it.
    const pending = await f.server.admin('GET', '/approvals?state=pending');
    expect(pending.body.data.map((a: { id: string }) => a.id)).toContain(approvalId);
    expect((await f.server.admin('POST', `/approvals/${approvalId}/approve`, {})).status).toBeLessThan(300);
    expect((await f.post('/access/v1/evaluation', q)).body).toEqual({ decision: true });
    // Allowed once: the next time it waits again.
    const again = await f.post('/access/v1/evaluation', q);
    expect(again.body.decision).toBe(false);
    expect(again.body.context.approval_id).not.toBe(approvalId);
  });
});

describe('an agent as the subject', () => {
  it('is decided as at the decision endpoint: its capability, and its limits over time (an allow consumes)', async () => {
    await putRole(f.server, 'payer', ['pay:invoices']);
    const agent = await registerAgent(f.server, {
      name: 'payer-bot',
      mode: 'autonomous',
      roles: ['payer'],
      capabilities: [{ name: 'pay:invoices', limits: { count: [{ max: 2, per: '1h' }] } }],
    });
    // The caller is the agent's enforcement point: its evaluations act.
    const grant = await f.server.admin('PUT', `/applications/${f.caller.client_id}/grants/${encodeURIComponent(f.api)}`, { enforcement_point_for: [agent.id] });
    expect(grant.status).toBe(204);
    const q = { subject: { type: 'agent', id: agent.id }, action: { name: 'pay' }, resource: { type: 'invoice', id: 'i-1' } };
    expect((await f.post('/access/v1/evaluation', q)).body).toEqual({ decision: true });
    expect((await f.post('/access/v1/evaluation', q)).body).toEqual({ decision: true });
    expect((await f.post('/access/v1/evaluation', q)).body).toEqual({ decision: false, context: { reason: 'constraint_violated: count' } });
    // Without the capability: not granted.
    const refund = await f.post('/access/v1/evaluation', { ...q, action: { name: 'refund' } });
    expect(refund.body).toEqual({ decision: false, context: { reason: 'not_granted: refund:invoices (capability)' } });
    const audit = await f.server.admin('GET', `/audit?agent_id=${encodeURIComponent(agent.id)}&limit=1`);
    expect(audit.body.data[0]).toMatchObject({ agent_id: agent.id, caller: f.caller.client_id, reason: 'not_granted: refund:invoices (capability)' });
  });
});
