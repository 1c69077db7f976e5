// `gatehouse policy import openfga`: models and store files in, a policy (and relationships and
// tests) out; refusals as file:line: why with exit 2; and every OpenFGA sample store imported and
// passing its own tests under `policy test`.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { relationship } from '../../src/admin/schemas.js';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { PEERS_MISSING, SAMPLE_STORES } from '../helpers/peers.js';
import { gatehouse, workDir } from './helpers.js';

async function run(args: string[], cwd: string) {
  let out = '';
  let err = '';
  const code = await runPolicyCommand(args, { stdout: (s) => { out += s; }, stderr: (s) => { err += s; }, cwd });
  return { code, out, err };
}

const MODEL = `model
  schema 1.1

type user
type folder
  relations
    define parent: [folder]
    define viewer: [user, user:*] or viewer from parent
type document
  relations
    define parent: [folder]
    define owner: [user]
    define blocked: [user]
    define viewer: ([user with office_hours] or owner or viewer from parent) but not blocked

condition office_hours(hour: int, start: int, end: int) {
  hour >= start && hour < end
}
`;

const POLICY = `# Imported from OpenFGA: docs.fga.
policy "docs" version 1

type user

type folder {
  relation parent: [folder]
  relation viewer: [user, user:*] or viewer from parent
}

type document {
  relation parent: [folder]
  relation owner: [user]
  relation blocked: [user]
  relation viewer: ([user with office_hours] or owner or viewer from parent) but not blocked
}

condition office_hours(hour: int, start: int, end: int) {
  hour >= start and hour < end
}
`;

const STORE = `name: docs
model_file: docs.fga
tuples:
  - user: folder:root
    relation: parent
    object: document:1
  - user: user:anne
    relation: viewer
    object: folder:root
tests:
  - name: anne reads through the folder
    check:
      - user: user:anne
        object: document:1
        assertions:
          viewer: true
`;

let cwd: string;
beforeAll(async () => {
  cwd = await workDir({ 'm/docs.fga': MODEL, 'm/docs.fga.yaml': STORE, 'm/transit.fga': 'model\n  schema 1.1\n\ntype user\n\ntype bus\n  relations\n    define driver: [user]\n\ntype campus\n',  'm/bad.fga': MODEL.replace('[user, user:*] or viewer from parent', '[user, user:*] or viewer from parent but not viewer') });
});

describe('gatehouse policy import openfga', () => {
  it('prints the policy for a model', async () => {
    const r = await run(['import', 'openfga', 'm/docs.fga'], cwd);
    expect(r).toEqual({ code: 0, out: POLICY, err: '' });
  });

  it('writes the policy, the relationships and the tests of a store file with --out', async () => {
    const r = await run(['import', 'openfga', 'm/docs.fga.yaml', '--out', 'out'], cwd);
    expect(r).toEqual({ code: 0, out: 'out/docs.policy\nout/docs.tests\nout/docs.relationships.json\n', err: '' });
    expect(await readFile(join(cwd, 'out/docs.policy'), 'utf8')).toBe(POLICY.replace('docs.fga.', 'docs.fga.yaml.'));
    expect(JSON.parse(await readFile(join(cwd, 'out/docs.relationships.json'), 'utf8'))).toEqual({ relationships: [
      { object: 'document:1', relation: 'parent', subject: 'folder:root' },
      { object: 'folder:root', relation: 'viewer', subject: 'user:anne' },
    ] });
    expect(await readFile(join(cwd, 'out/docs.tests'), 'utf8')).toBe(`# The tests of the OpenFGA store docs.fga.yaml, imported.

relationships {
  "document:1#parent@folder:root"
  "folder:root#viewer@user:anne"
}

test "anne reads through the folder" {
  check "user:anne" "viewer" "document:1" expect true
}
`);
  });

  it('names the plural of a type English reads back as another name, so its relations are permissions', async () => {
    const r = await run(['import', 'openfga', 'm/transit.fga', '--out', 'transit'], cwd);
    expect(r.code, r.err).toBe(0);
    expect(await readFile(join(cwd, 'transit/transit.policy'), 'utf8')).toBe(`# Imported from OpenFGA: transit.fga.
policy "transit" version 1

type user

type bus {
  relation driver: [user]
}

kind "buses" singular "bus"

type campus
`);
    // As policy check and fmt take it: no warning, already in the canonical layout.
    expect(await run(['check', 'transit'], cwd)).toMatchObject({ code: 0, err: '' });
    expect((await run(['fmt', 'transit', '--check'], cwd)).code).toBe(0);
  });

  it('refuses with exit 2, naming the file, the line and why', async () => {
    const r = await gatehouse(['policy', 'import', 'openfga', 'm/bad.fga'], cwd);
    expect(r).toEqual({ code: 2, stdout: '', stderr: 'm/bad.fga:8: folder#viewer: "or" and "but not" mixed at one level: add parentheses\n' });
    const missing = await run(['import', 'openfga', 'm/nope.fga'], cwd);
    expect(missing).toEqual({ code: 2, out: '', err: 'm/nope.fga:1: no such file: m/nope.fga\n' });
    const usage = await run(['import', 'openfga'], cwd);
    expect(usage.code).toBe(2);
    expect(usage.err).toBe("gatehouse policy import openfga: needs <file> (see 'gatehouse policy import openfga --help')\n");
  });

  it('policy import alone lists its formats; another format is unknown', async () => {
    const alone = await run(['import'], cwd);
    expect(alone.code).toBe(2);
    expect(alone.err).toMatch(/^usage: gatehouse policy import <command> \[options\]\n\ncommands:\n  policy import openfga <file> /);
    expect(await run(['import', 'spicedb', 'x.zed'], cwd)).toEqual({ code: 2, out: '', err: "gatehouse: unknown command 'policy import spicedb' (see 'gatehouse policy import --help')\n" });
  });

  it('is in the help', async () => {
    const r = await run(['import', 'openfga', '--help'], cwd);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^usage: gatehouse policy import openfga <file> \[options\]/);
    expect(r.out).toContain('--out <dir>');
  });
});

/** Every sample store file: each imports (none is refused), paths relative to the stores folder. */
const STORES_THAT_IMPORT = [
  'abac-with-rebac/store.fga.yaml', 'advanced-entitlements/store.fga.yaml', 'banking/store.fga.yaml', 'condition-data-types/store.fga.yaml',
  'custom-roles/store.fga.yaml', 'developer-portal/store.fga.yaml', 'entitlements/store.fga.yaml', 'expenses/store.fga.yaml',
  'gdrive/store.fga.yaml', 'github/store.fga.yaml', 'groups-resource-attributes/store.fga.yaml', 'iot/store.fga.yaml',
  'ip-based-access/store.fga.yaml', 'modeling-guide/step-1-basic.fga.yaml', 'modeling-guide/step-10-fine-grained-api-access.fga.yaml',
  'modeling-guide/step-2-multi-tenancy.fga.yaml', 'modeling-guide/step-3-groups.fga.yaml', 'modeling-guide/step-4-public-access.fga.yaml',
  'modeling-guide/step-5-relation-based-abac.fga.yaml', 'modeling-guide/step-6-super-admin.fga.yaml',
  'modeling-guide/step-7-conditional-relationships-abac.fga.yaml', 'modeling-guide/step-8-custom-roles.fga.yaml',
  'modeling-guide/step-9-application-access.fga.yaml', 'modular/core.fga.yaml', 'modular/issue-tracker.fga.yaml', 'modular/store.fga.yaml',
  'modular/wiki.fga.yaml', 'multitenant-rbac/store.fga.yaml', 'role-assignments/store.fga.yaml', 'slack/store.fga.yaml',
  'superadmin/store.fga.yaml', 'temporal-access/store.fga.yaml',
];
/** Store files the import refuses, with the exact refusal: none today. */
const STORES_REFUSED: Record<string, string> = {};

describe.skipIf(!SAMPLE_STORES)('the OpenFGA sample stores', () => {
  let out: string;
  const imported = new Map<string, string>();
  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), 'gh-openfga-'));
  });

  it(SAMPLE_STORES ? 'every store file imports, or is refused with the reason stated here' : PEERS_MISSING, async () => {
    const { filesUnder } = await import('../policy/openfga/helpers.js');
    const stores = filesUnder(SAMPLE_STORES!, (n) => n.endsWith('.fga.yaml')).map((p) => relative(SAMPLE_STORES!, p));
    expect(stores.sort()).toEqual([...STORES_THAT_IMPORT, ...Object.keys(STORES_REFUSED)].sort());
    const outcomes: Record<string, string> = {};
    for (const s of stores) {
      const dir = join(out, s.replace(/\.fga\.yaml$/, '').replace(/\//g, '_'));
      const r = await run(['import', 'openfga', join(SAMPLE_STORES!, s), '--out', dir], SAMPLE_STORES!);
      outcomes[s] = r.code === 0 ? 'imported' : r.err.replaceAll(SAMPLE_STORES! + '/', '');
      if (r.code === 0) imported.set(s, dir);
    }
    expect(outcomes).toEqual(Object.fromEntries(stores.map((s) => [s, STORES_REFUSED[s] ?? 'imported'])));
  });

  it(SAMPLE_STORES ? 'every relationships file is what the project file and the management API take' : PEERS_MISSING, async () => {
    expect(imported.size).toBe(STORES_THAT_IMPORT.length);
    let n = 0;
    for (const [s, dir] of imported) {
      const file = JSON.parse(await readFile(join(dir, `${s.split('/').pop()!.replace(/\.fga\.yaml$/, '')}.relationships.json`), 'utf8')) as { relationships: unknown[] };
      expect(Object.keys(file)).toEqual(['relationships']);
      for (const r of file.relationships) expect([s, relationship.safeParse(r).success]).toEqual([s, true]);
      n += file.relationships.length;
    }
    expect(n).toBeGreaterThan(100);
  });

  it(SAMPLE_STORES ? 'every imported file is already in the layout policy fmt prints' : PEERS_MISSING, async () => {
    expect(imported.size).toBe(STORES_THAT_IMPORT.length);
    const changed: string[] = [];
    for (const dir of imported.values()) {
      const r = await run(['fmt', '--check', dir], out);
      if (r.code !== 0) changed.push(r.out + r.err);
    }
    expect(changed).toEqual([]);
  });

  it(SAMPLE_STORES ? 'every imported store passes its own tests under policy test' : PEERS_MISSING, async () => {
    expect(imported.size).toBe(STORES_THAT_IMPORT.length);
    const failures: Record<string, string> = {};
    let passed = 0;
    for (const [s, dir] of imported) {
      expect(existsSync(join(dir, `${s.split('/').pop()!.replace(/\.fga\.yaml$/, '')}.tests`))).toBe(true);
      const r = await run(['test', dir], out);
      if (r.code !== 0) failures[s] = (r.out + r.err).split('\n').filter((l) => !/^ok /.test(l)).join('\n');
      else passed += Number(/^(\d+) passed, 0 failed/m.exec(r.out)?.[1] ?? 0);
    }
    expect(failures).toEqual({});
    // The stores' own tests, every one run (a test asserting nothing is left out by the import).
    expect(passed).toBe(102);
  });
});
