// The README's five-minute walk-through cannot rot: its shell blocks run as a newcomer pastes
// them (./walk.ts), the restart with the examples done here with the variables the README sets.
// An output block the README shows after a shell block must appear, line for line, in what that
// block printed, and what its comments and prose promise is checked.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runBlocks, sectionBlocks } from './walk.js';

describe('the README walk-through', () => {
  const blocks = sectionBlocks('README.md', '## Five minutes with Gatehouse');
  const shell = blocks.filter((b) => b.lang === 'sh');
  const startBlock = shell.find((b) => /npm ci && npm start &/.test(b.text));
  const restartBlock = shell.find((b) => /kill %1/.test(b.text));
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-readme-'));
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts the server, restarts it with the examples, and shows its outputs', () => {
    expect(startBlock).toBeDefined();
    expect(restartBlock).toBeDefined();
    expect(blocks.filter((b) => b.lang === '').length).toBeGreaterThanOrEqual(2);
  });

  it('runs as written, block by block, and prints what it shows', async () => {
    const adminToken = /export GATEHOUSE_ADMIN_TOKEN=(\S+)/.exec(startBlock!.text)![1]!;
    // The restart's variables, as the README sets them before `npm start`.
    const restartLine = restartBlock!.text.split('\n').find((l) => /npm start/.test(l))!;
    const restartEnv = Object.fromEntries([...restartLine.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, join(projectRoot, m[2]!)]));
    expect(Object.keys(restartEnv).sort()).toEqual(['GATEHOUSE_POLICY_DIR', 'GATEHOUSE_PROJECT_FILE']);

    const tmp = join(dir, 'tmp');
    const vars = join(dir, 'vars.sh');
    const env = { GATEHOUSE_ADMIN_TOKEN: adminToken };
    const common = { GATEHOUSE_ADMIN_TOKEN: adminToken, GATEHOUSE_DB: join(dir, 'gatehouse.db') };
    const restartAt = restartBlock!.index;

    // Up to the restart: the default policy directory, as `npm start` in the project folder has.
    const first = await startTestServer({ dir, env: { ...common, GATEHOUSE_POLICY_DIR: join(projectRoot, 'policies') } });
    servers.push(first);
    const a = await runBlocks(blocks.filter((b) => b.index < restartAt), { port: first.port, tmp, env, after: `declare -p ADMIN USER_ID > ${vars}` });
    await first.stop();
    servers.pop();

    const second = await startTestServer({ dir, env: { ...common, ...restartEnv } });
    servers.push(second);
    const b = await runBlocks(blocks.filter((x) => x.index >= restartAt), { port: second.port, tmp, env, before: `source ${vars}` });
    const outputOf = (i: number) => (i < restartAt ? a : b).of(i);

    // Every output block shown matches what the shell block before it printed.
    for (const [k, block] of blocks.entries()) {
      if (block.lang !== '') continue;
      const before = shell.filter((s) => s.index < k).at(-1)!;
      const printed = outputOf(before.index).text.split('\n');
      for (const line of block.text.trim().split('\n')) expect(printed, `README block ${k}: ${line}`).toContain(line);
    }

    // What the comments and the prose promise.
    const having = (re: RegExp) => {
      const block = shell.find((s) => re.test(s.text));
      if (!block) throw new Error(`no walk-through block matches ${re}`);
      return outputOf(block.index);
    };
    expect(having(/openid-configuration/).text).toContain(`"issuer": "http://localhost:${first.port}"`);
    expect(having(/assignments/).text).toContain('204');
    expect(having(/CODE=/).text).toMatch(/\/callback\?code=[\w-]+&state=xyz&iss=/);
    const token = JSON.parse(having(/grant_type=authorization_code/).text);
    expect(token).toMatchObject({ token_type: 'Bearer', scope: 'openid profile email' });
    const explain = having(/policy explain/);
    expect(explain.text).toContain('decision: approval_required');
    expect(explain.text).toContain('amount sum max 500000 per 24h (used 0, this adds 2500)');
    expect(explain.text).toContain('exit 4');
    expect(having(/policy check --strict/).text).toMatch(/^ok: /m);
    const diff = having(/policy diff/);
    expect(diff.text).toContain('allow -> approval_required');
    expect(diff.code).toBe(1);
    expect(having(/grants\//).text).toContain('204');
    expect(JSON.parse(having(/"roles":\["admin"\]/).text)).toEqual({ email: 'ada@example.com', roles: ['admin'] });
  }, 300_000);
});
