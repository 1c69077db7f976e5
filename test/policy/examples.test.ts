// The example policies and the language guide cannot rot: every example set passes
// `policy check --strict` and `policy test` through the CLI as a user runs it, and every
// block of policy text in docs/policy-language.md parses, validates, is in canonical layout
// and passes its own tests (its Cedar blocks parse with cedar-wasm, its JSON rules validate).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { projectRoot } from '../../src/paths.js';
import { buildPolicySet, parseAndValidate } from '../../src/policy/load.js';
import { parsePolicy } from '../../src/policy/parser.js';
import { formatFile } from '../../src/policy/format.js';
import { collectTests, runTests } from '../../src/policy/test-runner.js';
import { decide, formatDiagnostic, loadPolicySet, validateJsonRule, type DecisionRequest, type SubjectFacts } from '../../src/policy/index.js';
import { localTime } from '../../src/policy/time.js';
import { gatehouse, workDir } from '../cli/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { pdpPost, tokenFor } from '../authzen/helpers.js';

const EXAMPLES = join(projectRoot, 'policies', 'examples');
const GUIDE = join(projectRoot, 'docs', 'policy-language.md');

/** Every directory under policies/examples (itself included) that holds policy files. */
function exampleSets(dir = EXAMPLES): string[] {
  const names = readdirSync(dir);
  const here = names.some((n) => n.endsWith('.policy')) ? [dir] : [];
  return [...here, ...names.filter((n) => statSync(join(dir, n)).isDirectory()).flatMap((n) => exampleSets(join(dir, n)))];
}

interface CheckJson { ok: boolean; errors: number; warnings: number; diagnostics: unknown[]; targets: { rules: number | null; tests: number | null }[] }
interface TestJson { ok: boolean; passed: number; failed: number; diagnostics: unknown[]; results: { name: string; file: string; pass: boolean }[] }

describe('the example policies', () => {
  const sets = exampleSets();

  it('are found: the main set and its sub-sets', () => {
    expect(sets).toContain(EXAMPLES);
    expect(sets.length).toBeGreaterThan(1);
  });

  for (const set of sets) {
    const name = relative(projectRoot, set);
    describe(name, () => {
      it('pass policy check --strict: no error, no warning', async () => {
        const r = await gatehouse(['policy', 'check', '--strict', '--format', 'json', set], projectRoot);
        const j = JSON.parse(r.stdout) as CheckJson;
        expect(j.diagnostics, r.stderr).toEqual([]);
        expect(j).toMatchObject({ ok: true, errors: 0, warnings: 0 });
        expect(j.targets[0]!.rules).toBeGreaterThan(0);
        expect(r.code).toBe(0);
      });

      it('pass their tests, and every policy file has tests beside it', async () => {
        const r = await gatehouse(['policy', 'test', '--format', 'json', set], projectRoot);
        const j = JSON.parse(r.stdout) as TestJson;
        expect(j.diagnostics, r.stderr).toEqual([]);
        expect(j.results.filter((t) => !t.pass).map((t) => t.name)).toEqual([]);
        expect(j.ok).toBe(true);
        expect(r.code).toBe(0);
        // A policy file with rules or limits is tested by a `.tests` file of the same name.
        const files = readdirSync(set);
        for (const f of files.filter((n) => n.endsWith('.policy'))) {
          const text = readFileSync(join(set, f), 'utf8');
          if (!/^(rule|limits) /m.test(text)) continue;
          const tests = join(set, f.replace(/\.policy$/, '.tests'));
          expect(files, `${f} has no ${relative(set, tests)} beside it`).toContain(relative(set, tests));
          expect(j.results.filter((t) => t.file.endsWith(relative(set, tests))).length, `no test ran from ${relative(set, tests)}`).toBeGreaterThan(0);
        }
      });
    });
  }

  it('the main set is in canonical layout (policy fmt --check)', async () => {
    const r = await gatehouse(['policy', 'fmt', '--check', EXAMPLES], projectRoot);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('a broken example fails: the checks above can fail', async () => {
    // The same CLI calls on a copy of the refunds example with one expectation turned around.
    const policy = readFileSync(join(EXAMPLES, 'refunds.policy'), 'utf8');
    const tests = readFileSync(join(EXAMPLES, 'refunds.tests'), 'utf8').replace('expect deny "constraint_violated: amount sum"', 'expect allow');
    const dir = await workDir({ 'refunds.policy': policy, 'refunds.tests': tests });
    const r = await gatehouse(['policy', 'test', '--format', 'json', dir], projectRoot);
    expect(r.code).toBe(1);
    expect((JSON.parse(r.stdout) as TestJson).results.filter((t) => !t.pass).map((t) => t.name)).toEqual(['the daily budget of the billing agent']);
  });
});

// ---- served: the example set with its project file, through the AuthZEN endpoint ------------

describe('the example set served with its project file (people, roles and entities)', () => {
  let server: TestServer;
  let base: string;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { GATEHOUSE_POLICY_DIR: EXAMPLES, GATEHOUSE_PROJECT_FILE: join(EXAMPLES, 'project.json') } });
    base = server.ctx.urls.issuer;
    const api = `${base}/access/v1`;
    expect((await server.admin('PUT', `/applications/examples-pep/grants/${encodeURIComponent(api)}`, { scopes: [] })).status).toBe(204);
    token = await tokenFor(base, { client_id: 'examples-pep', client_secret: 'examples-pep-secret-change-me-0123456789' }, api);
  });
  afterAll(async () => server?.stop());

  const ask = async (who: string, action: string, type: string, id: string) => {
    const res = await pdpPost(base, '/access/v1/evaluation', { subject: { type: 'user', id: who }, action: { name: action }, resource: { type, id } }, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    return res.body as { decision: boolean; context?: { reason?: string } };
  };

  const DECISIONS: [string, string, string, string, boolean][] = [
    ['alice', 'update', 'document', 'd-1', true], // her own
    ['alice', 'update', 'document', 'd-2', false], // Bob's
    ['alice', 'update', 'document', 'd-3', false], // her own, archived
    ['alice', 'read', 'document', 'd-2', true], // reading comes from her role
    ['carol', 'update', 'document', 'd-1', true], // an editor, the document of her team
    ['carol', 'update', 'document', 'd-2', false], // another team's
    ['bob', 'update', 'document', 'd-2', true],
    ['dana', 'read', 'customer', 'c-100', true], // standard
    ['dana', 'read', 'customer', 'c-200', false], // VIP, and Dana is not in VIP support
    ['frank', 'read', 'customer', 'c-200', true], // VIP support
    ['erin', 'update', 'customer', 'c-100', true], // her customer
    ['erin', 'update', 'customer', 'c-200', false], // another manager's
  ];

  it.each(DECISIONS)('%s %s %s:%s → %s', async (who, action, type, id, expected) => {
    expect((await ask(who, action, type, id)).decision).toBe(expected);
  });

  it('the reasons name the rule or the missing grant', async () => {
    expect((await ask('dana', 'read', 'customer', 'c-200')).context?.reason).toBe('rule_denied: vip-records-need-a-vip-support-person');
    expect((await ask('alice', 'update', 'document', 'd-3')).context?.reason).toBe('rule_denied: archived-documents-are-read-only');
    expect((await ask('alice', 'update', 'document', 'd-2')).context?.reason).toBe('not_granted: update:documents');
  });

  it('a changed entity applies to the next decision; a document nobody stored fails closed', async () => {
    expect((await ask('dana', 'read', 'customer', 'c-100')).decision).toBe(true);
    expect((await server.admin('PUT', '/entities/customer/c-100', { attributes: { tier: 'vip', account_manager: 'erin@example.com' } })).status).toBeLessThan(300);
    expect((await ask('dana', 'read', 'customer', 'c-100')).decision).toBe(false);
    expect((await ask('alice', 'update', 'document', 'd-404')).context?.reason).toBe('rule_denied: archived-documents-are-read-only');
  });
});

// ---- the guide ------------------------------------------------------------------------------

interface Block { info: string; text: string; line: number }

/** The fenced blocks of a Markdown text, with their info string and first line. */
function fencedBlocks(md: string): Block[] {
  const out: Block[] = [];
  const lines = md.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end] !== '```') end++;
    out.push({ info: open[1]!.trim(), text: lines.slice(start, end).join('\n') + '\n', line: start + 1 });
    i = end;
  }
  return out;
}

const guide = readFileSync(GUIDE, 'utf8');
const blocks = fencedBlocks(guide);
const where = (b: Block) => `docs/policy-language.md:${b.line}`;

describe('docs/policy-language.md', () => {
  it('has the blocks it is checked by: policy text, Cedar and JSON', () => {
    expect(blocks.filter((b) => b.info === 'policy').length).toBeGreaterThanOrEqual(15);
    expect(blocks.filter((b) => b.info === 'cedar').length).toBe(8);
    expect(blocks.filter((b) => b.info === 'json').length).toBeGreaterThanOrEqual(1);
    // Every block says what it is, so none escapes the checks below.
    expect(blocks.filter((b) => b.info === '').every((b) => !/^\s*(rule|limits|test|schema|policy|timezone) /m.test(b.text))).toBe(true);
  });

  for (const b of blocks.filter((x) => x.info === 'policy' || x.info === 'policy warnings')) {
    const wantWarnings = b.info === 'policy warnings';
    it(`${where(b)}: parses, validates${wantWarnings ? ' (with warnings)' : ' without a warning'}, is canonical and passes its tests`, () => {
      const path = `policy-language-${b.line}.policy`;
      const parsed = parseAndValidate({ files: [{ path, text: b.text }] }, { warnings: true });
      const shown = parsed.diagnostics.map((d) => formatDiagnostic({ ...d, file: 'docs/policy-language.md', line: b.line + d.line - 1 }));
      const errors = parsed.diagnostics.filter((d) => d.severity !== 'warning');
      expect(errors.map(formatDiagnostic), shown.join('\n')).toEqual([]);
      if (wantWarnings) expect(parsed.diagnostics.length).toBeGreaterThan(0);
      else expect(shown).toEqual([]);

      const file = parsePolicy(path, b.text).file!;
      expect(formatFile(file), `${where(b)} is not in the layout policy fmt gives`).toBe(b.text);

      const tests = collectTests(parsed.files);
      const results = runTests(tests, buildPolicySet(parsed.files, []));
      expect(results.filter((r) => !r.passed).map((r) => `${r.name}: ${r.failures.join('; ')}`)).toEqual([]);
    });
  }

  it('its warnings block shows each kind of warning policy check gives', () => {
    const b = blocks.find((x) => x.info === 'policy warnings')!;
    const parsed = parseAndValidate({ files: [{ path: 'w.policy', text: b.text }] }, { warnings: true });
    expect(parsed.diagnostics.map((d) => d.code).sort()).toEqual(['kind_mismatch', 'unreachable_limits', 'unsatisfiable']);
    // The output shown after it is what policy check prints for it.
    const shown = blocks[blocks.indexOf(b) + 1]!;
    expect(shown.info).toBe('');
    for (const d of parsed.diagnostics) expect(shown.text).toContain(`w.policy:${d.line}:${d.col}: warning: ${d.message}\n`);
  });

  it('its explain example is what policy explain prints for the request it shows', async () => {
    const i = blocks.findIndex((x) => x.info === 'sh' && x.text.includes('policy explain policies/examples --request'));
    const request = /--request '([^']*)'/.exec(blocks[i]!.text)![1]!;
    const shown = blocks[i + 1]!;
    const r = await gatehouse(['policy', 'explain', 'policies/examples', '--request', request], projectRoot);
    expect(r.code, r.stderr).toBe(3); // deny
    const printed = r.stdout.split('\n').map((l) => l.trimEnd());
    for (const line of shown.text.split('\n').filter(Boolean)) expect(printed).toContain(line.trimEnd());
  });

  it('its diff example is what policy diff prints for the change it describes', async () => {
    const rule = blocks.find((x) => x.info === 'policy' && x.text.startsWith('timezone "Europe/Berlin"') && (x.text.match(/^rule /gm) ?? []).length === 1)!;
    expect(rule.text).toContain('time.hour >= 18');
    const dir = await workDir({ 'old/refunds.policy': rule.text, 'new/refunds.policy': rule.text.replace('time.hour >= 18', 'time.hour >= 17') });
    const r = await gatehouse(['policy', 'diff', join(dir, 'old'), join(dir, 'new')], projectRoot);
    expect(r.code, r.stderr).toBe(1); // something changes
    const shown = blocks.find((x) => x.info === '' && x.text.startsWith('1 region change decision:'))!;
    expect(r.stdout.trimEnd()).toBe(shown.text.trimEnd());
  });

  it('its Cedar blocks parse with cedar-wasm', () => {
    for (const b of blocks.filter((x) => x.info === 'cedar')) {
      const r = cedar.checkParsePolicySet({ staticPolicies: b.text });
      expect(r, `${where(b)}: ${JSON.stringify(r)}`).toEqual({ type: 'success' });
    }
  });

  it('its JSON rules validate as management API rules', () => {
    const rules = blocks.filter((x) => x.info === 'json').map((b) => ({ b, v: JSON.parse(b.text) as Record<string, unknown> })).filter(({ v }) => 'effect' in v);
    expect(rules.length).toBeGreaterThan(0);
    for (const { b, v } of rules) expect(validateJsonRule(v).map(formatDiagnostic), where(b)).toEqual([]);
  });
});

// ---- the side-by-side with Cedar: the same decisions -----------------------------------------

type CedarUid = { type: string; id: string };
type CedarEntity = { uid: CedarUid; attrs: Record<string, unknown>; parents: CedarUid[] };
interface Case {
  name: string;
  gatehouse: DecisionRequest;
  cedar: { principal: CedarUid; action: string; resource: CedarUid; context: Record<string, unknown>; entities: CedarEntity[] };
  /** Gatehouse's answer; Cedar's is the same with approval_required read as Deny, unless `cedar` says otherwise. */
  expect: 'allow' | 'deny' | 'approval_required';
  cedarDiffers?: 'allow' | 'deny';
}

const user = (id: string, email: string, roles: string[] = [], groups: string[] = []): SubjectFacts =>
  ({ type: 'user', id, email, roles, groups, permissions: [], attributes: {} });
const agentFacts = (id: string, roles: string[], permission: string, mode: 'autonomous' | 'delegated' = 'autonomous'): SubjectFacts =>
  ({ type: 'agent', id, mode, roles, groups: [], permissions: [permission], attributes: {}, capabilities: [{ name: permission }] });
const NOW = Date.parse('2026-04-14T10:00:00+02:00'); // a Tuesday morning in Berlin
const entity = (type: string, id: string, attrs: Record<string, unknown> = {}, parents: CedarUid[] = []): CedarEntity => ({ uid: { type, id }, attrs, parents });
const role = (r: string): CedarUid => ({ type: 'Role', id: r });

function ownership(owner: string | undefined): Case {
  const attrs = owner === undefined ? {} : { owner };
  return {
    name: `ownership: owner ${owner ?? '(none)'}`,
    gatehouse: { subject: user('alice', 'alice@example.com'), action: 'update:documents', resource: 'document:d-1', resourceAttributes: attrs, context: {}, now: NOW },
    cedar: { principal: { type: 'User', id: 'alice' }, action: 'update', resource: { type: 'Document', id: 'd-1' }, context: {},
      entities: [entity('User', 'alice', { email: 'alice@example.com' }), entity('Document', 'd-1', attrs)] },
    expect: owner === 'alice@example.com' ? 'allow' : 'deny',
  };
}

function vip(tier: string | undefined, roles: string[]): Case {
  const attrs = tier === undefined ? {} : { tier };
  return {
    name: `VIP: tier ${tier ?? '(none)'}, roles [${roles}]`,
    gatehouse: { subject: agentFacts('spiffe://localhost/agent/support', roles, 'read:customers'), action: 'read:customers', resource: 'customer:c-1', resourceAttributes: attrs, context: {}, now: NOW },
    cedar: { principal: { type: 'Agent', id: 'support' }, action: 'read', resource: { type: 'Customer', id: 'c-1' }, context: {},
      entities: [entity('Agent', 'support', {}, roles.map(role)), ...roles.map((r) => entity('Role', r)), entity('Customer', 'c-1', attrs)] },
    expect: tier === 'vip' && !roles.includes('vip-support') ? 'deny' : tier === undefined ? 'deny' : 'allow',
    // Cedar skips a forbid whose condition errors on the missing attribute: the base permit allows.
    ...(tier === undefined ? { cedarDiffers: 'allow' as const } : {}),
  };
}

function hours(at: string, approved: boolean): Case {
  const now = Date.parse(at);
  const local = localTime(now, 'Europe/Berlin'); // what the application must compute for Cedar
  const out = ['sat', 'sun'].includes(local.weekday) || local.hour < 8 || local.hour >= 18;
  return {
    name: `office hours: ${at}${approved ? ', approved' : ''}`,
    gatehouse: { subject: agentFacts('spiffe://localhost/agent/billing', [], 'create:refunds'), action: 'create:refunds', resource: 'refund:r-1', context: {}, now, ...(approved ? { approved: true } : {}) },
    cedar: { principal: { type: 'Agent', id: 'billing' }, action: 'create', resource: { type: 'Refund', id: 'r-1' },
      context: { weekday: local.weekday, hour: local.hour, approved }, entities: [entity('Agent', 'billing'), entity('Refund', 'r-1')] },
    expect: out && !approved ? 'approval_required' : 'allow',
  };
}

function editors(roles: string[], groups: string[], team: string): Case {
  return {
    name: `editors: roles [${roles}], groups [${groups}], team ${team}`,
    gatehouse: { subject: user('carol', 'carol@example.com', roles, groups), action: 'update:documents', resource: 'document:d-1', resourceAttributes: { team }, context: {}, now: NOW },
    cedar: { principal: { type: 'User', id: 'carol' }, action: 'update', resource: { type: 'Document', id: 'd-1' }, context: {},
      entities: [
        entity('User', 'carol', { email: 'carol@example.com' }, [...roles.map(role), ...groups.map((g) => ({ type: 'Team', id: g }))]),
        ...roles.map((r) => entity('Role', r)), ...groups.map((g) => entity('Team', g)),
        entity('Document', 'd-1', { team: { __entity: { type: 'Team', id: team } } }),
      ] },
    expect: roles.includes('editor') && groups.includes(team) ? 'allow' : 'deny',
  };
}

function mail(to: string, from: string): Case {
  const person = { id: 'alice', email: 'alice@example.com', roles: [], groups: [], permissions: ['send:emails'], attributes: {} };
  return {
    name: `mail: to ${to}, from ${from}`,
    gatehouse: { subject: agentFacts('spiffe://localhost/agent/mailer', [], 'send:emails', 'delegated'), person, action: 'send:emails', resource: 'email:m-1', context: { to, from }, now: NOW },
    cedar: { principal: { type: 'Agent', id: 'mailer' }, action: 'send', resource: { type: 'Email', id: 'm-1' },
      context: { to, from, person: { email: 'alice@example.com' } }, entities: [entity('Agent', 'mailer'), entity('Email', 'm-1')] },
    expect: to.endsWith('@example.com') && from === 'alice@example.com' ? 'allow' : 'deny',
  };
}

describe('the side-by-side with Cedar decides alike', () => {
  const start = guide.indexOf('## Gatehouse and Cedar side by side');
  const section = fencedBlocks(guide.slice(start, guide.indexOf('### What each says', start)));
  const gh = section.filter((b) => b.info === 'policy');
  const ced = section.filter((b) => b.info === 'cedar');
  // Forbid-only Cedar policies need something to forbid: roles grant in Gatehouse, a permit-all stands for them.
  const BASE = '\npermit (principal, action, resource);\n';
  const pairs: [string, Case[], boolean][] = [
    ['ownership', [ownership('alice@example.com'), ownership('bob@example.com'), ownership(undefined)], false],
    ['VIP records', [vip('vip', ['support']), vip('vip', ['vip-support']), vip('standard', ['support']), vip(undefined, ['support'])], true],
    ['out of hours', [hours('2026-04-14T10:00:00+02:00', false), hours('2026-04-18T10:00:00+02:00', false), hours('2026-03-30T16:30:00Z', false),
      hours('2026-03-27T16:30:00Z', false), hours('2026-03-30T16:30:00Z', true)], true],
    ['team editors', [editors(['editor'], ['finance'], 'finance'), editors(['editor'], ['sales'], 'finance'), editors(['staff'], ['finance'], 'finance')], false],
    ['mail', [mail('bob@example.com', 'alice@example.com'), mail('x@gmail.com', 'alice@example.com'), mail('bob@example.com.attacker.net', 'alice@example.com'),
      mail('bob@example.com', 'ceo@example.com')], true],
  ];

  it('has five pairs', () => {
    expect(gh).toHaveLength(5);
    expect(ced).toHaveLength(5);
  });

  pairs.forEach(([name, cases, base], i) => {
    it(`${name}: the same decisions in both`, () => {
      const set = loadPolicySet({ files: [{ path: `${name}.policy`, text: gh[i]!.text }] });
      expect(set.diagnostics).toEqual([]);
      const policies = { staticPolicies: ced[i]!.text + (base ? BASE : '') };
      for (const c of cases) {
        const ours = decide(c.gatehouse, set.policySet!);
        expect(ours.decision, `${c.name}: ${ours.reason}`).toBe(c.expect);
        const answer = cedar.isAuthorized({ ...c.cedar, action: { type: 'Action', id: c.cedar.action }, policies, entities: c.cedar.entities } as never);
        expect(answer.type, JSON.stringify(answer)).toBe('success');
        const theirs = answer.type === 'success' ? answer.response.decision : null;
        expect(theirs, c.name).toBe(c.cedarDiffers ?? (c.expect === 'allow' ? 'allow' : 'deny'));
      }
    });
  });
});
