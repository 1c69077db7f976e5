// docs/operations.md cannot rot: its commands run against a started server and print what
// their comments say, its metrics table names exactly the metrics `/metrics` serves, and the
// label values it lists for decisions are every one the sources record.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runBlocks, sectionBlocks } from './walk.js';

const DOC = readFileSync(join(projectRoot, 'docs', 'operations.md'), 'utf8');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [readFileSync(p, 'utf8')] : [];
  });
}

/** The metrics table: name → its labels column. */
function metricsTable(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of DOC.split('\n')) {
    const m = /^\| `(gatehouse_[a-z_]+)` \| [a-z]+ \|([^|]*)\|/.exec(line);
    if (m) rows.set(m[1]!, m[2]!);
  }
  return rows;
}

describe('docs/operations.md', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.stop());
  // The CLI reads the server's database as the server does: PostgreSQL when the tests run on it.
  const database = (): Record<string, string> => {
    const url = server.ctx.config.databaseUrl;
    const token = { GATEHOUSE_ADMIN_TOKEN: server.adminToken };
    return url ? { ...token, GATEHOUSE_DATABASE_URL: url } : { ...token, GATEHOUSE_DB: join(server.dir, 'gatehouse.db') };
  };

  it('its commands for checking a running server run and print what they say', async () => {
    const blocks = sectionBlocks('docs/operations.md', '## Checking a running server');
    expect(blocks.length).toBe(1);
    const out = await runBlocks(blocks, { port: server.port, tmp: join(server.dir, 'tmp'), env: database() });
    const { text, code } = out.of(0);
    expect(text).toContain('{"status":"ok"}');
    expect(text).toContain('gatehouse_policy_status{status="ok"} 1');
    expect(text).toMatch(/^gatehouse_processes 1$/m);
    expect(text).toMatch(/^up to date: /m);
    expect(text).toMatch(/^ok: \d+ records$/m);
    expect(code).toBe(0);
  }, 120_000);

  it('its metrics table names exactly the metrics served', async () => {
    const served = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.adminToken}` } })).text();
    const names = [...served.matchAll(/^# TYPE (gatehouse_\w+) /gm)].map((m) => m[1]!).sort();
    expect([...metricsTable().keys()].sort()).toEqual(names);
  });

  it('lists every `via` and `reason` a decision is counted with', () => {
    const labels = metricsTable().get('gatehouse_decisions_total')!;
    const listed = new Set([...labels.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!));
    const authz = sources(join(projectRoot, 'src'));
    const vias = new Set(authz.flatMap((t) => [...t.matchAll(/\bvia: '([a-z_]+)'/g)].map((m) => m[1]!)));
    // The relations engine's error codes answer relationship questions; a decision that meets one
    // is not_granted, with the error named in its reason, so they are no decision's cause.
    const policySources = readdirSync(join(projectRoot, 'src', 'policy')).filter((n) => n !== 'relations').flatMap((n) => {
      const p = join(projectRoot, 'src', 'policy', n);
      return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [readFileSync(p, 'utf8')] : [];
    });
    const causes = [...sources(join(projectRoot, 'src', 'authz')), ...policySources]
      .flatMap((t) => [...t.matchAll(/\{ code: '([a-z_]+)'/g)].map((m) => m[1]!));
    expect(vias.size).toBeGreaterThanOrEqual(4);
    expect(new Set(causes).size).toBeGreaterThanOrEqual(10);
    expect([...vias, ...new Set(causes)].filter((v) => !listed.has(v))).toEqual([]);
  });
});
