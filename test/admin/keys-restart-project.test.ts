import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { sha256 } from '../../src/crypto/hash.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const dirs: string[] = [];
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'gatehouse-admin-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const jwksKids = async (s: TestServer) =>
  ((await (await fetch(`${s.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid).sort();

describe('keys', () => {
  it('rotation: new tokens carry the new kid, the old kid stays in the JWK Set, and both verify; a restart keeps them', async () => {
    const dir = freshDir();
    let server = await startTestServer({ dir });
    try {
      const claims = { iss: server.ctx.urls.issuer, sub: 'someone', aud: 'test' };
      const oldToken = await server.ctx.keys.sign('RS256', claims, 'JWT');
      const oldKid = decodeProtectedHeader(oldToken).kid!;

      expect((await server.admin('POST', '/keys/rotate', { alg: 'PS256' })).status).toBe(400);
      const rotated = await server.admin('POST', '/keys/rotate', { alg: 'RS256' });
      expect(rotated.status).toBe(200);
      expect(rotated.body.keys).toEqual([{ kid: expect.any(String), alg: 'RS256' }]);
      const newKid = rotated.body.keys[0].kid;
      expect(newKid).not.toBe(oldKid);

      const newToken = await server.ctx.keys.sign('RS256', claims, 'JWT');
      expect(decodeProtectedHeader(newToken).kid).toBe(newKid);
      const kids = await jwksKids(server);
      expect(kids).toEqual(expect.arrayContaining([oldKid, newKid]));

      const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
      for (const t of [oldToken, newToken]) expect((await jwtVerify(t, jwks, { issuer: server.ctx.urls.issuer })).payload.sub).toBe('someone');

      // both algorithms when none is named
      const both = await server.admin('POST', '/keys/rotate');
      expect(both.body.keys.map((k: { alg: string }) => k.alg).sort()).toEqual(['EdDSA', 'RS256']);
      const created = await server.admin('POST', '/users', { email: 'keep@example.com', password: 'correct horse battery', name: 'Keep' });

      const before = await jwksKids(server);
      await server.stop();
      server = await startTestServer({ dir });
      expect(await jwksKids(server)).toEqual(before);
      const again = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
      expect((await jwtVerify(newToken, again)).protectedHeader.kid).toBe(newKid);
      expect((await server.admin('GET', `/users/${created.body.id}`)).body.email).toBe('keep@example.com');
    } finally {
      await server.stop();
    }
  });
});

describe('GATEHOUSE_PROJECT_FILE', () => {
  const jwk = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
  const secret = 'project-file-secret-0123456789abcdef';
  const project = (userName: string) => ({
    roles: [{ name: 'refunder', permissions: ['create:refunds'] }],
    users: [
      { id: 'user-ada', email: 'ada@example.com', password: 'correct horse battery', name: userName, groups: ['eng'] },
      { email: 'bob@example.com', password: 'another good password', name: 'Bob' },
    ],
    applications: [
      { name: 'Portal', type: 'web', client_id: 'portal', client_secret: secret, redirect_uris: ['https://portal.example/cb'], assignments: ['user-ada', 'bob@example.com'] },
      { name: 'Nightly job', type: 'm2m', client_id: 'nightly', client_secret: secret, grants: [{ api_client_id: 'orders-api', scopes: ['orders:read'] }] },
      { name: 'Orders API', type: 'api', client_id: 'orders-api' },
      { name: 'Mobile', type: 'native', redirect_uris: ['com.example.app:/cb'] },
    ],
    agents: [{ name: 'billing', mode: 'autonomous', public_jwk: jwk, roles: ['refunder'], capabilities: [{ name: 'create:refunds', limits: { amount: { max: 500 } } }] }],
    rules: [
      { name: 'block-large', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'gt', value: 10000 }, state: 'live' },
      { name: 'draft-one', effect: 'require_approval', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*' },
    ],
  });

  const counts = async (s: TestServer) => ({
    roles: (await s.admin('GET', '/roles')).body.data.length,
    users: (await s.admin('GET', '/users')).body.data.length,
    applications: (await s.admin('GET', '/applications')).body.data.length,
    agents: (await s.admin('GET', '/agents')).body.data.length,
    rules: (await s.admin('GET', '/rules')).body.data.length,
  });

  it('applied twice gives one copy of each object; a changed value is updated in place', async () => {
    const dir = freshDir();
    const file = join(dir, 'project.json');
    writeFileSync(file, JSON.stringify(project('Ada')));
    const env = { GATEHOUSE_PROJECT_FILE: file };

    let server = await startTestServer({ dir, env });
    const expected = { roles: 1, users: 2, applications: 6, agents: 1, rules: 2 }; // 4 and the built-in console and AuthZEN API
    let adaHash: string | null;
    try {
      expect(await counts(server)).toEqual(expected);
      const rules = (await server.admin('GET', '/rules')).body.data;
      expect(Object.fromEntries(rules.map((r: { name: string; state: string }) => [r.name, r.state]))).toEqual({ 'block-large': 'live', 'draft-one': 'draft' });
      expect((await server.ctx.store.applications.getWithSecret('portal'))!.secret_hash).toBe(sha256(secret));
      expect((await server.admin('GET', '/applications/nightly')).body.grants).toEqual([{ api_client_id: 'orders-api', scopes: ['orders:read'] }]);
      expect((await server.admin('GET', '/applications/portal')).body.assignments).toHaveLength(2);
      adaHash = (await server.ctx.store.users.credentialsById('user-ada'))!.password_hash;
    } finally {
      await server.stop();
    }

    writeFileSync(file, JSON.stringify(project('Ada Lovelace')));
    server = await startTestServer({ dir, env });
    try {
      expect(await counts(server)).toEqual(expected);
      expect((await server.admin('GET', '/users/user-ada')).body.name).toBe('Ada Lovelace');
      // an unchanged password is not re-hashed on every start
      expect((await server.ctx.store.users.credentialsById('user-ada'))!.password_hash).toBe(adaHash);
      expect((await server.admin('GET', '/applications/portal')).body.assignments).toHaveLength(2);
      const agent = (await server.admin('GET', `/agents/${encodeURIComponent('spiffe://localhost/agent/billing')}`)).body;
      expect(agent.capabilities).toEqual([{ name: 'create:refunds', limits: { amount: { max: 500 } } }]);
    } finally {
      await server.stop();
    }
  });

  it.each([
    ['not JSON', '{"users": ['],
    ['a bad field', JSON.stringify({ applications: [{ name: 'X', type: 'desktop' }] })],
    ['an unknown section', JSON.stringify({ widgets: [] })],
    ['an m2m grant on a missing API', JSON.stringify({ applications: [{ name: 'J', type: 'm2m', grants: [{ api_client_id: 'nope' }] }] })],
  ])('a file with %s stops start-up with one line naming the variable', async (_what, text) => {
    const dir = freshDir();
    const file = join(dir, 'project.json');
    writeFileSync(file, text);
    const err = await startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } }).then(
      async (s) => {
        await s.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe('GATEHOUSE_PROJECT_FILE');
    expect((err as ConfigError).message).not.toContain('\n');
  });
});
