import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.stop());

const paths = (res: { body: { issues: { path: string }[] } }) => res.body.issues.map((i) => i.path).sort();
const agentsVersion = () => server.ctx.store.settings.version('agents');
const newJwk = () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { pub: publicKey.export({ format: 'jwk' }), priv: privateKey.export({ format: 'jwk' }) };
};
const enc = encodeURIComponent;

describe('roles', () => {
  it('create, read, replace, delete; each change moves the agents counter', async () => {
    let v = await agentsVersion();
    const created = await server.admin('POST', '/roles', { name: 'support', permissions: ['read:tickets', 'update:tickets'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'support', permissions: ['read:tickets', 'update:tickets'] });
    expect(await agentsVersion()).toBeGreaterThan(v);
    expect((await server.admin('POST', '/roles', { name: 'support', permissions: [] })).status).toBe(409);

    v = await agentsVersion();
    const put = await server.admin('PUT', '/roles/support', { permissions: ['read:tickets'] });
    expect(put.status).toBe(200);
    expect(put.body.permissions).toEqual(['read:tickets']);
    expect(await agentsVersion()).toBeGreaterThan(v);
    expect((await server.admin('GET', '/roles/support')).body.permissions).toEqual(['read:tickets']);
    expect((await server.admin('GET', '/roles')).body.data.map((r: { name: string }) => r.name)).toContain('support');

    v = await agentsVersion();
    expect((await server.admin('DELETE', '/roles/support')).status).toBe(204);
    expect(await agentsVersion()).toBeGreaterThan(v);
    expect((await server.admin('GET', '/roles/support')).status).toBe(404);
  });

  it('names bad permissions', async () => {
    const res = await server.admin('POST', '/roles', { name: 'bad name', permissions: ['refunds', 'create:refunds', 'a b:c'] });
    expect(res.status).toBe(400);
    expect(paths(res)).toEqual(['name', 'permissions.0', 'permissions.2']);
  });
});

describe('agents', () => {
  it('registers with a SPIFFE ID on the issuer host, reachable URL-encoded', async () => {
    const { pub } = newJwk();
    const v = await agentsVersion();
    const res = await server.admin('POST', '/agents', {
      name: 'billing',
      mode: 'autonomous',
      public_jwk: pub,
      roles: ['refunder'],
      capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500, min: 1 }, currency: { in: ['USD', 'EUR'] }, channel: 'api' } }],
    });
    expect(res.status).toBe(201);
    expect(res.body.agent_id).toBe('spiffe://localhost/agent/billing');
    expect(res.body.public_jwk).toEqual({ kty: 'OKP', crv: 'Ed25519', x: pub.x });
    expect(await agentsVersion()).toBeGreaterThan(v);

    const got = await server.admin('GET', `/agents/${enc(res.body.agent_id)}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ name: 'billing', mode: 'autonomous', roles: ['refunder'], revoked: false });
    expect(got.body.capabilities).toEqual([{ name: 'create:refunds', limits: { amount: { max: 500, min: 1 }, currency: { in: ['USD', 'EUR'] }, channel: 'api' } }]);
    expect((await server.admin('GET', '/agents')).body.data.map((a: { agent_id: string }) => a.agent_id)).toContain(res.body.agent_id);
    expect((await server.admin('POST', '/agents', { name: 'billing', mode: 'delegated', public_jwk: pub })).status).toBe(409);
  });

  it('refuses private keys, other key types and malformed SPIFFE IDs, naming the field', async () => {
    const { pub, priv } = newJwk();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' });
    for (const jwk of [priv, rsa, { ...pub, crv: 'Ed448' }, { kty: 'OKP', crv: 'Ed25519', x: 'short' }, 'not a key']) {
      const res = await server.admin('POST', '/agents', { name: 'k', mode: 'autonomous', public_jwk: jwk });
      expect(res.status).toBe(400);
      expect(paths(res)).toEqual(['public_jwk']);
    }
    for (const agentId of [
      'https://localhost/agent/x',
      'SPIFFE://localhost/agent/x',
      'spiffe://Localhost/agent/x',
      'spiffe://localhost:8443/agent/x',
      'spiffe://user@localhost/agent/x',
      'spiffe://localhost',
      'spiffe://localhost/agent//x',
      'spiffe://localhost/agent/../x',
      'spiffe://localhost/agent/x/',
      'spiffe://localhost/agent/x?y=1',
      'spiffe://localhost/agent/x#f',
      'spiffe://localhost/agent/a b',
    ]) {
      const res = await server.admin('POST', '/agents', { name: 'k', mode: 'autonomous', public_jwk: pub, agent_id: agentId });
      expect([agentId, res.status, paths(res)]).toEqual([agentId, 400, ['agent_id']]);
    }
    const bad = await server.admin('POST', '/agents', {
      name: 'has space',
      mode: 'robot',
      public_jwk: pub,
      capabilities: [{ name: 'refunds', limits: {} }, { name: 'create:refunds', limits: { amount: { max: 'lots' } } }],
    });
    expect(paths(bad)).toEqual(['capabilities.0.name', 'capabilities.1.limits', 'mode', 'name']);
  });

  it('a given SPIFFE ID is kept; PATCH rotates the key and replaces capabilities; capability PUT/DELETE; revoke', async () => {
    const first = newJwk();
    const id = 'spiffe://agents.example.org/team-a/reporter';
    const created = await server.admin('POST', '/agents', { name: 'reporter', mode: 'delegated', public_jwk: first.pub, agent_id: id });
    expect(created.body.agent_id).toBe(id);

    const second = newJwk();
    let v = await agentsVersion();
    const patched = await server.admin('PATCH', `/agents/${enc(id)}`, { public_jwk: second.pub, capabilities: [{ name: 'read:reports' }], roles: ['viewer'] });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'reporter', public_jwk: { x: second.pub.x }, roles: ['viewer'], capabilities: [{ name: 'read:reports', limits: {} }] });
    expect(await agentsVersion()).toBeGreaterThan(v);

    v = await agentsVersion();
    const cap = await server.admin('PUT', `/agents/${enc(id)}/capabilities/${enc('create:refunds')}`, { limits: { amount: { max: 100 } } });
    expect(cap.status).toBe(200);
    expect(cap.body).toEqual({ name: 'create:refunds', limits: { amount: { max: 100 } } });
    expect(await agentsVersion()).toBeGreaterThan(v);
    const lowered = await server.admin('PUT', `/agents/${enc(id)}/capabilities/create:refunds`, { limits: { amount: { max: 10 } } });
    expect(lowered.body.limits).toEqual({ amount: { max: 10 } });
    expect((await server.ctx.store.agents.get(id))!.capabilities.find((c) => c.name === 'create:refunds')!.limits).toEqual({ amount: { max: 10 } });
    expect((await server.admin('PUT', `/agents/${enc(id)}/capabilities/refunds`, {})).status).toBe(400);
    expect((await server.admin('PUT', `/agents/${enc(id)}/capabilities/create:refunds`, { limits: { amount: { nope: 1 } } })).status).toBe(400);

    expect((await server.admin('DELETE', `/agents/${enc(id)}/capabilities/create:refunds`)).status).toBe(204);
    expect((await server.admin('DELETE', `/agents/${enc(id)}/capabilities/create:refunds`)).status).toBe(404);

    v = await agentsVersion();
    expect((await server.admin('POST', `/agents/${enc(id)}/revoke`)).status).toBe(204);
    expect(await agentsVersion()).toBeGreaterThan(v);
    const revoked = await server.admin('GET', `/agents/${enc(id)}`);
    expect(revoked.body.revoked).toBe(true);
    expect(revoked.body.revoked_at).toEqual(expect.any(String));
  });
});

describe('rules and policy', () => {
  const rule = {
    name: 'block-large-refunds',
    effect: 'deny',
    subjects: ['agent:*'],
    relation: 'create:refunds',
    object: 'refund:*',
    condition: { field: 'amount', op: 'gt', value: 10000 },
  };

  it('draft → validate → live → disabled; enable is refused before validate; the policy follows', async () => {
    const created = await server.admin('POST', '/rules', rule);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ ...rule, state: 'draft', id: expect.any(String) });
    const id = created.body.id;
    expect((await server.admin('POST', '/rules', rule)).status).toBe(409);

    const early = await server.admin('POST', `/rules/${id}/enable`);
    expect(early.status).toBe(409);
    expect((await server.admin('GET', `/rules/${id}`)).body.state).toBe('draft');

    const before = (await server.admin('GET', '/policy')).body;
    expect(await server.admin('POST', `/rules/${id}/validate`)).toMatchObject({ status: 200, body: { valid: true, errors: [] } });
    const live = await server.admin('POST', `/rules/${id}/enable`);
    expect(live.status).toBe(200);
    expect(live.body.state).toBe('live');
    const during = (await server.admin('GET', '/policy')).body;
    expect(during.version).not.toBe(before.version);
    expect(during.sources.map((s: { path: string }) => s.path)).toContain(`api:rule/${id}`);

    const disabled = await server.admin('POST', `/rules/${id}/disable`);
    expect(disabled.body.state).toBe('disabled');
    const after = (await server.admin('GET', '/policy')).body;
    expect(after.sources.map((s: { path: string }) => s.path)).not.toContain(`api:rule/${id}`);
    expect((await server.admin('GET', '/rules')).body.data.find((r: { id: string }) => r.id === id).state).toBe('disabled');

    // disabled → live again needs no new validate while the content is unchanged; a changed rule does
    expect((await server.admin('POST', `/rules/${id}/enable`)).body.state).toBe('live');
    const changed = await server.admin('PATCH', `/rules/${id}`, { condition: { field: 'amount', op: 'gt', value: 5000 } });
    expect(changed.body).toMatchObject({ state: 'draft', validated: false });
    expect((await server.admin('POST', `/rules/${id}/enable`)).status).toBe(409);

    expect((await server.admin('DELETE', `/rules/${id}`)).status).toBe(204);
    expect((await server.admin('GET', `/rules/${id}`)).status).toBe(404);
  });

  it('a rule that does not hold validates as invalid and cannot go live', async () => {
    const bad = await server.admin('POST', '/rules', { ...rule, name: 'bad-subjects', subjects: ['robot:*'], condition: { field: 'not a field', op: 'eq', value: 1 } });
    expect(bad.status).toBe(201);
    const check = await server.admin('POST', `/rules/${bad.body.id}/validate`);
    expect(check.status).toBe(200);
    expect(check.body.valid).toBe(false);
    expect(check.body.errors.length).toBeGreaterThan(0);
    expect(check.body.errors.every((e: unknown) => typeof e === 'string')).toBe(true);
    expect((await server.admin('POST', `/rules/${bad.body.id}/enable`)).status).toBe(409);
  });

  it('names each bad rule field', async () => {
    const res = await server.admin('POST', '/rules', { name: 'x', effect: 'allow', subjects: [], relation: 'create:refunds', condition: { field: 'amount', op: 'between', value: [1, 2] } });
    expect(res.status).toBe(400);
    expect(paths(res)).toEqual(['condition.op', 'condition.value', 'effect', 'object', 'subjects']);
  });

  it('policy reload: a file with errors is a 400 listing file:line:col, and the policy in force stays', async () => {
    const before = (await server.admin('GET', '/policy')).body;
    writeFileSync(join(server.policyDir, 'broken.policy'), 'policy "p" version 1\nrule "r" {\n  effect maybe\n}\n');
    const res = await server.admin('POST', '/policy/reload');
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.errors[0]).toMatch(/broken\.policy:\d+:\d+: /);
    expect((await server.admin('GET', '/policy')).body.version).toBe(before.version);

    writeFileSync(
      join(server.policyDir, 'broken.policy'),
      'policy "refunds" version 3\n\nrule "block" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when amount > 10000\n}\n',
    );
    const ok = await server.admin('POST', '/policy/reload');
    expect(ok.status).toBe(200);
    expect(ok.body.sources).toEqual(expect.arrayContaining([expect.objectContaining({ policy: 'refunds', version: 3 })]));
  });
});

describe('audit', () => {
  it('newest first, filtered, a page at a time', async () => {
    const a = 'spiffe://localhost/agent/auditor';
    for (let i = 0; i < 5; i++) {
      await server.ctx.store.audit.append({ agent_id: a, action: 'create:refunds', resource: `refund:${i}`, decision: i % 2 ? 'deny' : 'allow', reason: i % 2 ? 'rule_denied: r' : 'allowed', policy_version: 'v1', time: 1_700_000_000 + i });
    }
    await server.ctx.store.audit.append({ agent_id: 'spiffe://localhost/agent/other', action: 'read:refunds', resource: 'refund:x', decision: 'allow', reason: 'allowed' });

    const first = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(a)}&limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.data.map((r: { resource: string }) => r.resource)).toEqual(['refund:4', 'refund:3']);
    expect(first.body.data[0]).toMatchObject({ time: new Date((1_700_000_000 + 4) * 1000).toISOString(), agent_id: a, action: 'create:refunds', decision: 'allow', reason: 'allowed', policy_version: 'v1' });
    const second = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(a)}&limit=2&before=${first.body.next_before}`);
    expect(second.body.data.map((r: { resource: string }) => r.resource)).toEqual(['refund:2', 'refund:1']);
    const last = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(a)}&limit=2&before=${second.body.next_before}`);
    expect(last.body.data.map((r: { resource: string }) => r.resource)).toEqual(['refund:0']);
    expect(last.body.next_before).toBeNull();

    const denies = await server.admin('GET', `/audit?agent_id=${encodeURIComponent(a)}&decision=deny`);
    expect(denies.body.data.map((r: { resource: string }) => r.resource)).toEqual(['refund:3', 'refund:1']);
  });
});
