// docs/authzen.md's quick start cannot rot: its blocks run as a reader pastes them (./walk.ts)
// against a server started with the variables its first block sets, and each block prints what
// its trailing comments promise.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { expectPromisedOutput, runBlocks, sectionBlocks } from './walk.js';

describe('the AuthZEN quick start', () => {
  const blocks = sectionBlocks('docs/authzen.md', '## Quick start: the Todo interop scenario');
  let server: TestServer | undefined;
  afterAll(async () => server?.stop());

  it('runs as written and prints what it promises', async () => {
    const start = blocks.find((b) => /npm start &/.test(b.text))!;
    const adminToken = /export GATEHOUSE_ADMIN_TOKEN=(\S+)/.exec(start.text)![1]!;
    const startLine = start.text.split('\n').find((l) => /npm start/.test(l))!;
    const env = Object.fromEntries([...startLine.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, join(projectRoot, m[2]!)]));
    expect(Object.keys(env).sort()).toEqual(['GATEHOUSE_POLICY_DIR', 'GATEHOUSE_PROJECT_FILE']);
    server = await startTestServer({ env: { ...env, GATEHOUSE_ADMIN_TOKEN: adminToken } });

    const out = await runBlocks(blocks, { port: server.port, tmp: join(server.dir, 'tmp'), env: { GATEHOUSE_ADMIN_TOKEN: adminToken } });
    const shell = blocks.filter((b) => b.lang === 'sh');
    expect(shell.length).toBeGreaterThanOrEqual(4);
    for (const b of shell) expectPromisedOutput(b, out.of(b.index).text);
    expect(shell.filter((b) => /^# /m.test(b.text)).length).toBeGreaterThanOrEqual(3);
    expect(out.of(start.index).text).toContain(`"policy_decision_point": "http://localhost:${server.port}"`);
    // The grant's status is the one its comment gives.
    expect(out.of(blocks.find((b) => /grants\//.test(b.text))!.index).text.trim()).toBe('204');
  }, 200_000);
});
