import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-mcp-project-'));
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the project file mcp_upstreams section', () => {
  it('registers upstreams idempotently, and a bad one stops start-up naming the file', async () => {
    const file = join(dir, 'project.json');
    writeFileSync(
      file,
      JSON.stringify({
        mcp_upstreams: [
          {
            name: 'billing',
            url: 'http://127.0.0.1:9/mcp',
            headers: { Authorization: 'Bearer up-secret' },
            tools: [{ name: 'refund', action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } }],
          },
        ],
      }),
    );
    const first = await startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } });
    const got = await first.admin('GET', '/mcp/upstreams/billing');
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      header_names: ['Authorization'],
      timeout_ms: 10000,
      tools: { refund: { action: 'create:refunds', resource_from_argument: { kind: 'refund', argument: 'refund_id' } } },
    });
    const version = await first.ctx.store.settings.version('mcp');
    await first.close();

    // The same file again: one upstream, unchanged.
    const second = await startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } });
    servers.push(second);
    const list = await second.admin('GET', '/mcp/upstreams');
    expect(list.body.data).toHaveLength(1);
    // Nothing was rewritten: the change counter every worker's cache follows did not move.
    expect(await second.ctx.store.settings.version('mcp')).toBe(version);
    await second.close();
    servers.pop();

    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ mcp_upstreams: [{ name: 'x', url: 'ftp://nope' }] }));
    await expect(startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: bad } })).rejects.toThrow(/GATEHOUSE_PROJECT_FILE/);
  });
});
