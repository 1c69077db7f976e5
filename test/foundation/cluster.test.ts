import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, discover, postForm, signInAndExchange, type Fixture } from '../oauth/helpers.js';
import { accessToken, admin as adminOn, dropCluster, freshCall, registerAgent, scrapeMetrics, startCluster, type Cluster } from '../helpers/cluster.js';
import { parseMetrics } from '../pipeline/metrics-text.js';

// `gatehouse serve` as `npm start` runs it: a primary and two worker processes over one
// database (the SQLite file, or PostgreSQL with GATEHOUSE_TEST_DATABASE_URL). Requests land
// on either worker, so every flow here crosses processes.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cluster-'));
let cluster: Cluster;
let base: string;
const admin = (method: string, path: string, body?: unknown) => adminOn(base, method, path, body);

beforeAll(async () => {
  cluster = await startCluster(dir);
  base = cluster.base;
});

afterAll(async () => {
  await cluster?.stop();
  await dropCluster(dir);
  rmSync(dir, { recursive: true, force: true });
});

describe('two worker processes over one database', () => {
  it('signs people in, refreshes, and rotates keys consistently whichever worker answers', async () => {
    const redirectUri = 'http://localhost:9/callback';
    const app = (await admin('POST', '/applications', { name: 'web', type: 'web', redirect_uris: [redirectUri] })).body;
    const password = 'correct horse battery staple';
    const user = (await admin('POST', '/users', { email: 'ada@example.com', password, name: 'Ada' })).body;
    expect((await admin('PUT', `/applications/${app.client_id}/assignments/${user.id}`)).status).toBe(204);
    const f = { issuer: base, redirectUri } as Fixture;
    const config = await discover(f, app);

    // Several sign-ins: the pages, the pending request and the code cross workers.
    for (let i = 0; i < 3; i++) {
      const { tokens } = await signInAndExchange(config, f, { email: 'ada@example.com', password });
      expect(tokens.access_token).toBeTruthy();
      // The refresh token rotates once; the replay is refused by whichever worker sees it.
      const auth = { authorization: basic(app.client_id, app.client_secret) };
      const next = await postForm(`${base}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
      expect(next.status).toBe(200);
      const replay = await postForm(`${base}/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, auth);
      expect([replay.status, replay.body.error]).toEqual([400, 'invalid_grant']);
    }

    // After a rotation no worker signs with the old key.
    const m2m = (await admin('POST', '/applications', { name: 'svc', type: 'm2m' })).body;
    const rotated = await admin('POST', '/keys/rotate', { alg: 'RS256' });
    expect(rotated.status).toBe(200);
    const newKid = rotated.body.keys[0].kid;
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 8; i++) {
      const t = await postForm(`${base}/oauth/token`, { grant_type: 'client_credentials' }, { authorization: basic(m2m.client_id, m2m.client_secret) });
      expect(t.status).toBe(200);
      expect(decodeProtectedHeader(t.body.access_token).kid).toBe(newKid);
    }
  });

  it('answers /metrics for the whole deployment: the primary adds up both workers', async () => {
    // Requests on fresh connections spread over both workers (the primary deals connections out
    // in turn), so each worker alone has seen about half of them.
    const path = '/.well-known/agent-configuration';
    const n = 24;
    for (let i = 0; i < n; i++) expect((await freshCall(base, 'GET', path)).status).toBe(200);
    const counts: number[] = [];
    let processes = 0;
    for (let i = 0; i < 4; i++) {
      const m = parseMetrics(await scrapeMetrics(base));
      counts.push(m.sum('gatehouse_http_request_duration_seconds_count', { route: path }));
      processes = m.value('gatehouse_processes')!;
    }
    // Whichever worker answers the scrape, it reports every worker's requests.
    expect(counts).toEqual([n, n, n, n]);
    expect(processes).toBe(3);
  });

  it('verifies a transaction token once per instance: one bound on either worker is known to both', async () => {
    expect((await admin('PUT', '/roles/cluster-refunder', { permissions: ['create:refunds'] })).status).toBe(200);
    const agent = await registerAgent(base, 'cluster-agent', [{ name: 'create:refunds', limits: { amount: { max: 500 } } }], ['cluster-refunder']);
    const bearer = { authorization: `Bearer ${await accessToken(base, agent)}` };

    // Every request on a connection of its own, so bindings and decisions land on both workers.
    const before = parseMetrics(await scrapeMetrics(base));
    // An odd number: the primary deals connections out in turn, so with an even one each token
    // could be presented to the worker that bound it.
    const n = 13;
    const bound: Record<string, unknown>[] = [];
    for (let i = 0; i < n; i++) {
      const action = { action: 'create:refunds', resource: `refund:c${i}`, context: { amount: 10 + i } };
      const res = await freshCall(base, 'POST', '/apis/regional/v1/ai/auth/transaction-token', action, bearer);
      expect(res.status).toBe(200);
      bound.push({ agent_id: agent.id, transaction_token: res.body.data.transaction_token, ...action });
    }
    // The workers tell each other through the primary, in batches at most 10 ms apart: each
    // token reaches the one worker that did not bind it.
    const shared = async () => parseMetrics(await scrapeMetrics(base)).sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result: 'shared' });
    const sharedBefore = before.sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result: 'shared' });
    for (let i = 0; i < 200 && (await shared()) - sharedBefore < n; i++) await new Promise((r) => setTimeout(r, 25));
    expect((await shared()) - sharedBefore).toBe(n);
    for (const body of bound) {
      const res = await freshCall(base, 'POST', '/apis/regional/v1/agents/authorize', body);
      expect(res.status).toBe(200);
      expect(res.body.data.decision).toBe('allow');
    }
    const after = parseMetrics(await scrapeMetrics(base));
    const delta = (result: string) =>
      after.sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result }) - before.sum('gatehouse_verified_token_cache_total', { kind: 'transaction', result });
    // About half the decisions came to the worker that did not sign the token: without the
    // workers sharing what they signed, those would be misses.
    expect(delta('hit')).toBe(n);
    expect(delta('miss')).toBe(0);

    // A token changed by one character is not the one remembered: verified, and refused.
    const token = bound[0]!.transaction_token as string;
    // (A character in the middle of the signature: the last one carries padding bits.)
    const at = token.length - 20;
    const forged = `${token.slice(0, at)}${token[at] === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`;
    const res = await freshCall(base, 'POST', '/apis/regional/v1/agents/authorize', { ...bound[0], transaction_token: forged });
    expect(res.body.data.decision).toBe('deny');
    expect(res.body.data.reason).toMatch(/^invalid_transaction_token/);
  });

  it('stops cleanly on SIGTERM', async () => {
    expect(await cluster.stop()).toBe(0);
  });
});
