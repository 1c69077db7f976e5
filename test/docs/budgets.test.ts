// docs/budgets.md's examples cannot rot: its `limits` block is a valid policy, its limits JSON
// is what the management API accepts and gives back, and each error line it shows is the
// management API's message for a limit that does not read.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair } from 'jose';
import { projectRoot } from '../../src/paths.js';
import { loadPolicySet } from '../../src/policy/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const DOC = readFileSync(join(projectRoot, 'docs', 'budgets.md'), 'utf8');
const blocks = [...DOC.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));

describe('docs/budgets.md', () => {
  let server: TestServer;
  let jwk: object;
  beforeAll(async () => {
    server = await startTestServer();
    jwk = await exportJWK((await generateKeyPair('EdDSA', { crv: 'Ed25519' })).publicKey);
  });
  afterAll(async () => server.stop());
  const createAgent = (limits: unknown) =>
    server.admin('POST', '/agents', { name: `budget-${Math.random().toString(36).slice(2)}`, mode: 'autonomous', public_jwk: jwk, capabilities: [{ name: 'create:refunds', limits }] });

  it('its limits block is a valid policy', () => {
    const block = blocks.find((b) => b.text.startsWith('limits '))!;
    const { policySet, diagnostics } = loadPolicySet({ files: [{ path: 'budgets.policy', text: `policy "budgets" version 1\n\n${block.text}` }] });
    expect(diagnostics).toEqual([]);
    expect(policySet).not.toBeNull();
  });

  it('its limits JSON is accepted by the management API as written', async () => {
    const limits = JSON.parse(blocks.find((b) => b.lang === 'json' && b.text.includes('"per"') && !b.text.includes('"data"'))!.text);
    const res = await createAgent(limits);
    expect(res.status).toBe(201);
    expect(res.body.capabilities).toEqual([{ name: 'create:refunds', limits }]);
  });

  it('its error lines are the messages of the limits that do not read', async () => {
    const shown = blocks.find((b) => b.text.startsWith('count[0].per:'))!.text.trim().split('\n');
    const bad = [
      { count: [{ max: 20, per: '1w' }, { max: 3, per: '1h', scope: 'team' }], amount: { sum: { max: 5, per: '32d' } }, currency: { in: ['EUR'], sum: { max: 1, per: '1d' } } },
      { count: [{ max: 2.5, per: '1h' }] },
    ];
    const messages: string[] = [];
    for (const limits of bad) {
      const res = await createAgent(limits);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_request');
      for (const issue of res.body.issues as { path: string; message: string }[]) {
        expect(issue.path).toBe('capabilities.0.limits');
        messages.push(issue.message);
      }
    }
    expect(messages.sort()).toEqual([...shown].sort());
  });
});
