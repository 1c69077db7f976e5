// The language tools of the second edition as a user runs them (bin/gatehouse.js as a process):
// check's warnings and --strict, the schema block, errors in the new forms with carets,
// explain's reads and counters, and diff over prior usage and relations between two values.
import { beforeAll, describe, expect, it } from 'vitest';
import { expectCaretBlocks, gatehouse, workDir, type JsonDiagnostic } from './helpers.js';

const rule = (name: string, body: string) => `rule "${name}" {\n${body}\n}\n`;
const refundRule = (name: string, effect: string, when: string, subjects = '"agent:*"') =>
  rule(name, `  effect ${effect}\n  subjects ${subjects}\n  relation "create:refunds"\n  object "refund:*"\n  when ${when}`);

const WARN = `policy "w" version 1

${refundRule('never', 'deny', 'amount > 1000 and amount < 10')}
${rule('wrong-kind', '  effect require_approval\n  subjects "role:editor"\n  relation "create:refunds"\n  object "deployment:*"')}
${refundRule('no-hour', 'deny', 'time.hour < 8 and time.hour > 20')}
${refundRule('fine', 'deny', 'resource.owner != person.email and time.weekday in ["sat", "sun"]')}
limits "send:emails" for "*" {
  count max 3 per 1h
}
`;

const SCHEMA = `policy "s" version 1

schema {
  context.amount: number
  resource.tags: [string]
  subject.max_amount: number
}

${refundRule('typed', 'deny', 'resource.owner == person.email or amount > "5" or context.amount > subject.max_amount')}`;

const SCHEMA_OK = SCHEMA.replace('resource.owner == person.email or amount > "5" or ', 'resource.tags contains "vip" or ');

/** Broken files, each its own policy, each with errors in the forms of the second edition. */
const BROKEN: Record<string, string> = {
  'broken/path.policy': `policy "b1" version 1\n\n${refundRule('b1', 'deny', 'time.minute.x > 3 or time.week == 2 or subject.id.part == "x"')}`,
  'broken/types.policy': `policy "b2" version 1\n\n${refundRule('b2', 'deny', 'time.hour < "8" or context.to like 5 or resource.tags contains any "vip"')}`,
  'broken/zone.policy': 'policy "b3" version 1\ntimezone "Mars/Olympus"\n',
  'broken/limits.policy': 'policy "b4" version 1\n\nlimits "create:refunds" for "*" {\n  currency in ["USD"]\n  count max 3 per 10x\n  amount sum max 100 per 40d\n  currency sum max 5 per 1h\n  count max 2.5 per 1h\n}\n',
  'broken/subjects.policy': `policy "b5" version 1\n\n${refundRule('b5', 'permit', 'time.weekday in ["sat"]', '"role:", "group:", "group:eng*", "group:Site Reliability"')}`,
  'broken-schema/schema.policy': 'policy "b6" version 1\n\nschema {\n  context.amount: money\n  time.hour: string\n}\n',
  'broken/syntax.policy': `policy "b7" version 1\n\n${refundRule('b7', 'deny', 'resource.owner ==')}`,
};

/** Role names are names; group names come from identity providers, spaces and all, but are exact and never empty. */
const SUBJECTS_ERRORS = [
  '5:12 subject "role:": a role name is 1 to 100 letters, digits and _ . : -',
  '5:21 subject "group:" has an empty value',
  '5:31 subject "group:eng*": a group is named exactly (no *)',
];

let cwd: string;
beforeAll(async () => {
  cwd = await workDir({ 'warn/w.policy': WARN, 'schema/s.policy': SCHEMA, 'schema-ok/s.policy': SCHEMA_OK, ...BROKEN });
});

const checkJson = async (target: string, ...more: string[]) => {
  const r = await gatehouse(['policy', 'check', target, '--format', 'json', ...more], cwd);
  return { code: r.code, j: JSON.parse(r.stdout) as { ok: boolean; errors: number; warnings: number; diagnostics: JsonDiagnostic[] } };
};

describe('gatehouse policy check: warnings and --strict', () => {
  it('rules that can never apply and limits nothing names: warnings with carets, exit 0; --strict exits 1', async () => {
    const [text, strict, asJson, strictJson] = await Promise.all([
      gatehouse(['policy', 'check', 'warn'], cwd),
      gatehouse(['policy', 'check', 'warn', '--strict'], cwd),
      checkJson('warn'),
      checkJson('warn', '--strict'),
    ]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^ok: 1 file, 4 rules/);
    expect(asJson.code).toBe(0);
    expect(asJson.j).toMatchObject({ ok: true, errors: 0, warnings: 4 });
    expect(asJson.j.diagnostics.map((d) => [d.line, d.col, d.severity, d.code])).toEqual([
      [8, 8, 'warning', 'unsatisfiable'],
      [15, 10, 'warning', 'kind_mismatch'],
      [23, 8, 'warning', 'unsatisfiable'],
      [34, 1, 'warning', 'unreachable_limits'],
    ]);
    expect(asJson.j.diagnostics[0]!.message).toContain('rule "never"');
    expect(asJson.j.diagnostics[1]!.message).toContain('deployment:*');
    expect(asJson.j.diagnostics[3]!.message).toContain('send:emails');
    expect(asJson.j.diagnostics.some((d) => d.message.includes('"fine"'))).toBe(false);
    await expectCaretBlocks(cwd, text.stderr, asJson.j.diagnostics);
    expect(text.stderr.trimEnd().split('\n').at(-1)).toBe('4 warnings');

    expect(strict.code).toBe(1);
    expect(strict.stdout).toBe('');
    expect(strict.stderr.trimEnd().split('\n').at(-1)).toBe('4 warnings (warnings fail under --strict)');
    expect(strictJson.code).toBe(1);
    expect(strictJson.j).toMatchObject({ ok: false, errors: 0, warnings: 4, strict: true });
  });

  it('--strict passes a file without warnings', async () => {
    const r = await gatehouse(['policy', 'check', 'schema-ok', '--strict'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });
});

describe('gatehouse policy check: the schema block', () => {
  it('an undeclared path and a comparison with the wrong type are errors with carets; exit 1', async () => {
    const [text, { code, j }] = await Promise.all([gatehouse(['policy', 'check', 'schema'], cwd), checkJson('schema')]);
    expect(text.code).toBe(1);
    expect(code).toBe(1);
    const msgs = j.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
    expect(msgs).toEqual([
      '14:8 resource.owner is not declared in the schema',
      expect.stringMatching(/^14:42 operator > compares numbers, not a string/),
    ]);
    expect(j.diagnostics.every((d) => d.severity === 'error')).toBe(true);
    await expectCaretBlocks(cwd, text.stderr, j.diagnostics);
  });

  it('without the undeclared path and the mistyped constant, the same schema passes', async () => {
    const { code, j } = await checkJson('schema-ok');
    expect(code).toBe(0);
    expect(j.diagnostics).toEqual([]);
  });
});

describe('gatehouse policy check: broken files in the new forms', () => {
  it('every error with file, line, column, the source line and a caret', async () => {
    const [text, { code, j }] = await Promise.all([gatehouse(['policy', 'check', 'broken'], cwd), checkJson('broken')]);
    expect(text.code).toBe(1);
    expect(code).toBe(1);
    const at = (file: string) => j.diagnostics.filter((d) => d.file === `broken/${file}.policy`).map((d) => `${d.line}:${d.col} ${d.message}`);
    expect(at('path')).toEqual([
      '8:8 time.minute.x: time.minute has no parts',
      expect.stringMatching(/^8:29 unknown time value time\.week/),
      expect.stringMatching(/^8:47 subject\.id\.part/),
    ]);
    expect(at('types')).toEqual([
      expect.stringMatching(/^8:8 operator < compares numbers, not a string/),
      expect.stringMatching(/^8:27 like needs a pattern in quotes/),
      expect.stringMatching(/^8:48 resource\.tags contains any needs a list/),
    ]);
    expect(at('zone')).toEqual([expect.stringMatching(/^2:1 unknown time zone "Mars\/Olympus"/)]);
    expect(at('limits')).toEqual([
      expect.stringMatching(/^5:3 count: unknown window unit "x"/),
      expect.stringMatching(/^6:3 amount sum: window "40d" is longer than 31 days/),
      expect.stringMatching(/^7:3 currency sum: .*a sum needs a number/),
      expect.stringMatching(/^8:3 .*whole number/),
    ]);
    expect(at('subjects')).toEqual(SUBJECTS_ERRORS);
    expect(at('syntax')).toEqual([expect.stringMatching(/^9:1 expected /)]);
    for (const d of j.diagnostics) expect(d.severity).toBe('error');
    await expectCaretBlocks(cwd, text.stderr, j.diagnostics);
  });

  it('a schema with an unknown type and a type for a built-in value', async () => {
    const [text, { code, j }] = await Promise.all([gatehouse(['policy', 'check', 'broken-schema'], cwd), checkJson('broken-schema')]);
    expect(text.code).toBe(1);
    expect(code).toBe(1);
    expect(j.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`)).toEqual([
      '4:19 unknown type "money" (use number, string, boolean, or a list such as [string])',
      '5:3 time.hour is built in (a number); declare only attributes and context fields',
    ]);
    await expectCaretBlocks(cwd, text.stderr, j.diagnostics);
  });
});

const EXPLAINED = `policy "e" version 1

limits "create:refunds" for "*" {
  amount max 500
  amount sum max 2000 per 24h
  count max 20 per 1h
}

${refundRule('vip', 'deny', 'resource.tags contains "vip" and not (subject.roles contains "vip-support")')}
${refundRule('own', 'require_approval', 'resource.owner != person.email or time.hour >= 18')}`;

describe('gatehouse policy explain: every value read, and the counters', () => {
  const request = (usage: Record<string, number>, more: Record<string, unknown> = {}) => JSON.stringify({
    subject: { type: 'agent', id: 'a', mode: 'delegated', roles: ['x'], permissions: ['create:refunds'] },
    person: { id: 'u1', email: 'ada@x.com', permissions: ['create:refunds'] },
    action: 'create:refunds', resource: 'refund:1',
    resource_attributes: { tags: ['gold'], owner: 'ada@x.com' },
    context: { amount: 100 }, now: '2026-03-30T10:00:00Z', usage, ...more,
  });

  it('each rule with the values it read and why; each limit over time with the usage it read', async () => {
    const dir = await workDir({ 'e/e.policy': EXPLAINED });
    const r = await gatehouse(['policy', 'explain', 'e', '--request', request({ 'amount sum per 24h': 1500, 'count per 1h': 19 })], dir);
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;
    expect(out).toContain('usage: amount sum per 1d = 1500, count per 1h = 19');
    expect(out).toMatch(/amount sum max 2000 per 24h \(used 1500, this adds 100\).*\n\s+read: usage\.amount sum per 1d = 1500, context\.amount = 100/);
    expect(out).toMatch(/count max 20 per 1h \(used 19, this adds 1\).*\n\s+read: usage\.count per 1h = 19/);
    // the deny rule that did not apply still shows what it read
    expect(out).toMatch(/deny_rules\s+pass\s+deny rule "vip".*\n\s+why: condition does not hold\n\s+read: resource\.tags = \["gold"\], subject\.roles = \["x"\]/);
    expect(out).toMatch(/approval_rules\s+pass\s+approval rule "own".*\n\s+why: condition does not hold\n\s+read: resource\.owner = "ada@x\.com", person\.email = "ada@x\.com", time\.hour = 10/);

    const over = await gatehouse(['policy', 'explain', 'e', '--request', request({ 'count per 1h': 20 }), '--format', 'json'], dir);
    expect(over.code).toBe(3);
    const j = JSON.parse(over.stdout) as { reason: string; trace: { check: string; outcome: string; reads?: { path: string; value: unknown }[] }[] };
    expect(j.reason).toBe('constraint_violated: count');
    const count = j.trace.find((t) => t.check.startsWith('count max 20'))!;
    expect(count.outcome).toBe('fail');
    expect(count.reads).toEqual([{ path: 'usage.count per 1h', value: 20, present: true }]);
  });

  it('a missing value that made a rule fail closed is named', async () => {
    const dir = await workDir({ 'e/e.policy': EXPLAINED });
    const r = await gatehouse(['policy', 'explain', 'e', '--request', request({}, { resource_attributes: { owner: 'ada@x.com' } })], dir);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/deny_rules\s+fail\s+deny rule "vip".*\n\s+why: fails closed, applies: .*resource\.tags is missing\n\s+read: resource\.tags = \(missing\)/);
  });
});

describe('gatehouse policy diff: prior usage and relations', () => {
  it('a lowered rate: a region on the usage with an example stating it, which explain confirms', async () => {
    const dir = await workDir({
      'v1/p.policy': 'policy "p" version 1\n\nlimits "create:refunds" for "*" {\n  count max 5 per 1h\n}\n',
      'v2/p.policy': 'policy "p" version 2\n\nlimits "create:refunds" for "*" {\n  count max 3 per 1h\n}\n',
    });
    const [text, asJson] = await Promise.all([gatehouse(['policy', 'diff', 'v1', 'v2'], dir), gatehouse(['policy', 'diff', 'v1', 'v2', '--json'], dir)]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain('when used count per 1h > 2 and used count per 1h <= 4 and permissions cover the action: allow -> deny');
    const changes = JSON.parse(asJson.stdout).changes as { example: Record<string, unknown>; before: string; after: string }[];
    expect(changes).toHaveLength(1);
    const example = JSON.stringify(changes[0]!.example);
    expect(changes[0]!.example.usage).toEqual({ 'count per 1h': 3 });
    const [before, after] = await Promise.all([
      gatehouse(['policy', 'explain', 'v1', '--request', example], dir),
      gatehouse(['policy', 'explain', 'v2', '--request', example], dir),
    ]);
    expect([before.code, after.code]).toEqual([0, 3]);
    expect(after.stdout).toContain('reason: constraint_violated: count');
  });

  it('a relation between two values is printed as the relation; the example carries the attributes', async () => {
    const todos = (when: string) => `policy "t" version 1\n\nrule "own" {\n  effect permit\n  subjects "role:editor"\n  relation "update:todos"\n  object "todo:*"\n  when ${when}\n}\n`;
    const dir = await workDir({ 'a/t.policy': todos('resource.owner == person.email'), 'b/t.policy': todos('resource.owner == person.email or resource.public == true') });
    const r = await gatehouse(['policy', 'diff', 'a', 'b'], dir);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('and resource.owner == person.email and');
    expect(r.stdout).toContain('and resource.owner != person.email and');
    expect(r.stdout).toContain('resource.public == true');
    expect(r.stdout).toMatch(/"resource_attributes":\{[^}]*"public":true/);
  });
});
