import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dropCluster, startCluster, type Cluster } from '../helpers/cluster.js';
import { dpopKey, proof, readJson } from './helpers.js';

// A primary and two worker processes over one database: each worker records the proofs it
// accepts (on SQLite, appended to the log each process reads on from), and every worker refuses
// a proof any of them accepted.
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-dpop-cluster-'));
let cluster: Cluster;
let tokenEndpoint: string;
let m2m: { client_id: string; client_secret: string };

beforeAll(async () => {
  cluster = await startCluster(dir);
  tokenEndpoint = ((await (await fetch(`${cluster.base}/.well-known/openid-configuration`)).json()) as { token_endpoint: string }).token_endpoint;
  m2m = (await admin(cluster.base, 'POST', '/applications', { name: 'svc', type: 'm2m' })).body;
});
afterAll(async () => {
  await cluster?.stop();
  await dropCluster(dir);
  rmSync(dir, { recursive: true, force: true });
});

/** client_credentials with `dpop`, on a connection of its own (so that requests spread over the workers). */
const tokenWith = async (dpop: string) =>
  readJson(
    await fetch(tokenEndpoint, {
      method: 'POST',
      headers: {
        connection: 'close',
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${m2m.client_id}:${m2m.client_secret}`).toString('base64')}`,
        dpop,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }),
  );

describe('DPoP proofs across worker processes', () => {
  it('one proof sent many times at once gets one token; many fresh proofs at once all get theirs', async () => {
    const key = await dpopKey();
    const once = await proof(key, { htm: 'POST', htu: tokenEndpoint });
    const answers = await Promise.all(Array.from({ length: 12 }, () => tokenWith(once)));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of answers.filter((r) => r.status !== 200)) expect([r.status, r.body.error]).toEqual([400, 'invalid_dpop_proof']);

    const proofs = await Promise.all(Array.from({ length: 24 }, () => proof(key, { htm: 'POST', htu: tokenEndpoint })));
    const fresh = await Promise.all(proofs.map(tokenWith));
    expect(fresh.map((r) => r.status)).toEqual(Array(24).fill(200));
    // and each of those is refused afterwards, whichever worker it reaches
    const replays = await Promise.all(proofs.map(tokenWith));
    expect(replays.map((r) => r.status)).toEqual(Array(24).fill(400));
  });
});
