// docs/relationships.md cannot rot: its shell blocks run in order, as a reader pastes them
// (./walk.ts), against a server started on the guide's policy folder; each output block shown
// after a shell block appears, line for line, in what it printed, and what the blocks'
// comments promise is checked. Its OpenFGA models import, its Cedar schemas and policies
// parse in Cedar, and its project file is accepted by a server.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/paths.js';
import { importOpenfga } from '../../src/policy/openfga/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { expectPromisedOutput, runBlocks, sectionBlocks, type Block } from './walk.js';

const FILE = 'docs/relationships.md';
const TEXT = readFileSync(join(projectRoot, FILE), 'utf8');
/** Every fenced block of the guide, in order (the sections are walked as one). */
const blocks: Block[] = [...TEXT.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m, index) => ({ index, lang: m[1]!, text: m[2]! }));

describe('docs/relationships.md', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-relationships-doc-'));
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has its sections', () => {
    for (const h of ['## A first folder tree', '## Relationships through the management API', '## Tests: fixtures, checks and lists', '## Conditions', '## A multi-tenant model: organisations, teams, repositories', '## Importing from OpenFGA', '## Decisions through relations', '## The hop limit and failure modes']) {
      expect(sectionBlocks(FILE, h).length, h).toBeGreaterThan(0);
    }
  });

  it('runs as written, block by block, and prints what it shows', async () => {
    const start = blocks.find((b) => b.lang === 'sh' && /npm start &/.test(b.text))!;
    const adminToken = /export GATEHOUSE_ADMIN_TOKEN=(\S+)/.exec(start.text)![1]!;
    const tmp = join(dir, 'tmp');
    mkdirSync(join(tmp, 'drive'), { recursive: true });
    const server = await startTestServer({ dir, env: { GATEHOUSE_ADMIN_TOKEN: adminToken, GATEHOUSE_POLICY_DIR: join(tmp, 'drive') } });
    servers.push(server);
    const out = await runBlocks(blocks, { port: server.port, tmp, env: { GATEHOUSE_ADMIN_TOKEN: adminToken } });
    const shell = blocks.filter((b) => b.lang === 'sh');
    for (const b of shell) {
      const { text } = out.of(b.index);
      if (process.env.SHOW_DOC_OUTPUT) process.stdout.write(`---- block ${b.index}\n${text}\n`);
      expectPromisedOutput(b, text);
    }
    // Every output block shown matches what the shell block before it printed.
    for (const b of blocks) {
      if (b.lang !== '') continue;
      const before = shell.filter((s) => s.index < b.index).at(-1)!;
      const printed = out.of(before.index).text.split('\n');
      for (const line of b.text.trim().split('\n')) expect(printed, `block ${b.index}: ${line}`).toContain(line);
    }
    const having = (re: RegExp) => out.of(shell.find((s) => re.test(s.text))!.index).text;
    // A refused write names the relationship's index and why, and writes nothing.
    expect(JSON.parse(having(/"owner", "subject": "group:eng#member"/).trim())).toEqual([{ path: 'writes.1', message: expect.stringContaining('does not allow group#member'), code: 'custom' }]);
    // (the server's admin token is the guide's)
    const listed = (await (await fetch(`${server.url}/admin/v1/relationships?object=document:roadmap`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as { data: unknown };
    expect(listed.data).toEqual([{ object: 'document:roadmap', relation: 'parent', subject: 'folder:plans' }]);
    // The deep folder: written, then the check is the error.
    expect(having(/seq 1 30/)).toContain('{"written":31,"deleted":0}');
  }, 300_000);

  it('its OpenFGA models import', () => {
    const models = blocks.filter((b) => b.lang === 'fga');
    expect(models.length).toBeGreaterThanOrEqual(3);
    for (const b of models) {
      const r = importOpenfga('model.fga', () => ({ text: b.text }));
      expect(r.ok ? [] : r.refusals, `block ${b.index}`).toEqual([]);
    }
  });

  it('its Cedar schemas and policies parse', () => {
    const schemas = blocks.filter((b) => b.lang === 'cedarschema');
    const policies = blocks.filter((b) => b.lang === 'cedar');
    expect(schemas.length).toBeGreaterThanOrEqual(2);
    expect(policies.length).toBeGreaterThanOrEqual(3);
    for (const b of schemas) expect(cedar.checkParseSchema(b.text), `block ${b.index}`).toMatchObject({ type: 'success' });
    for (const b of policies) expect(cedar.checkParsePolicySet({ staticPolicies: b.text }), `block ${b.index}`).toMatchObject({ type: 'success' });
  });

  it('its project file is accepted, with the first model', async () => {
    const project = blocks.find((b) => b.lang === 'json' && b.text.includes('"relationships"'))!;
    const policy = /cat > \/tmp\/drive\/drive\.policy <<'EOF'\n([\s\S]*?)\nEOF/.exec(TEXT)![1]!;
    const own = join(dir, 'project');
    mkdirSync(join(own, 'policies'), { recursive: true });
    writeFileSync(join(own, 'policies', 'drive.policy'), policy);
    writeFileSync(join(own, 'project.json'), project.text);
    const server = await startTestServer({ dir: own, env: { GATEHOUSE_POLICY_DIR: join(own, 'policies'), GATEHOUSE_PROJECT_FILE: join(own, 'project.json') } });
    servers.push(server);
    const check = await server.admin('POST', '/relationships/check', { object: 'document:roadmap', relation: 'viewer', subject: 'user:anne' });
    expect(check.body.allowed).toBe(true);
  }, 120_000);
});
