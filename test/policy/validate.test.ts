import { describe, expect, it } from 'vitest';
import { loadPolicySet, parseAndValidate, ruleToJson, validateJsonLimits, validateJsonRule, formatDiagnostic } from '../../src/policy/index.js';
import { strip } from './helpers.js';

function errors(text: string): string[] {
  const r = loadPolicySet({ files: [{ path: 'v.policy', text }] });
  expect(r.policySet === null).toBe(r.diagnostics.length > 0);
  return r.diagnostics.map(formatDiagnostic);
}

const rule = (body: string, name = 'r') => `rule "${name}" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n${body}\n}\n`;

describe('validation', () => {
  it('accepts a valid policy', () => {
    expect(errors(rule('  when amount > 5'))).toEqual([]);
  });
  it('rejects unknown operators in conditions and limits', () => {
    expect(errors(rule('  when amount => 5'))).toEqual(['v.policy:6:8: unknown operator "=>" (use >=, >, <=, <, == or !=)']);
    expect(errors('limits "create:refunds" for "*" {\n  amount most 5\n}\n')).toEqual(['v.policy:2:10: unknown operator "most" in limits (use max, min, in, not_in or =)']);
    expect(errors('limits "create:refunds" for "*" {\n  amount < 5\n}\n')[0]).toContain('unknown operator "<" in limits');
  });
  it('rejects comparisons of incompatible literal types', () => {
    expect(errors(rule('  when amount > "5"'))[0]).toContain('operator > compares numbers, not a string');
    expect(errors(rule('  when amount == 5 or amount == "x"'))[0]).toContain('amount is compared with a number and with a string');
    expect(errors(rule('  when currency in ["USD", 1]'))[0]).toContain('mixes string and number');
    expect(errors(rule('  when amount == [1]'))[0]).toContain('with a list (use in)');
    expect(errors('limits "create:refunds" for "*" {\n  amount max 5 in ["a"]\n}\n')[0]).toContain('different types');
  });
  it('rejects min above max, empty lists and non-number bounds', () => {
    expect(errors('limits "create:refunds" for "*" {\n  amount max 5 min 6\n}\n')).toEqual(['v.policy:2:3: amount: min 6 is above max 5']);
    expect(errors('limits "create:refunds" for "*" {\n  currency in []\n}\n')).toEqual(['v.policy:2:3: currency in has an empty list']);
    expect(errors(rule('  when currency not in []'))[0]).toContain('empty list');
    expect(errors('limits "create:refunds" for "*" {\n  amount max "5"\n}\n')[0]).toContain('amount max needs a number');
  });
  it('rejects duplicate rule names across files and API rules', () => {
    const r = loadPolicySet({
      files: [{ path: 'a.policy', text: rule('', 'same') }, { path: 'b.policy', text: rule('', 'same') }],
      rules: [{ id: 'r1', name: 'same', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*' }],
    });
    expect(r.policySet).toBeNull();
    expect(r.diagnostics.map(formatDiagnostic)).toEqual([
      'b.policy:1:6: duplicate rule name "same" (also at a.policy:1)',
      'api:rule/r1:1:1: duplicate rule name "same" (also at a.policy:1)',
    ]);
  });
  it('rejects malformed patterns and permission keys', () => {
    const bad = (field: string, value: string) => errors(`rule "r" {\n  effect deny\n  subjects ${field === 'subjects' ? value : '"agent:*"'}\n  relation ${field === 'relation' ? value : '"create:refunds"'}\n  object ${field === 'object' ? value : '"refund:*"'}\n}\n`);
    expect(bad('subjects', '"agent"')[0]).toContain('not a pattern');
    expect(bad('subjects', '"team:x"')[0]).toContain('unknown type "team"');
    expect(bad('subjects', '"agent:spiffe://x/ag*"')[0]).toContain('whole segment');
    expect(bad('relation', '"createrefunds"')[0]).toContain('not a permission key');
    expect(bad('relation', '"create:ref unds"')[0]).toContain('not a permission key');
    expect(bad('object', '"refund"')[0]).toContain('not a pattern <kind>:<id>');
    expect(errors('limits "create:*" for "*" {\n  a max 1\n}\n')[0]).toContain('no wildcards here');
    expect(errors('limits "create:refunds" for "agent:x" {\n  a max 1\n}\n')[0]).toContain('without "agent:"');
  });
  it('rejects unknown effects, missing and repeated fields, bad versions', () => {
    expect(errors('rule "r" {\n  effect allow\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n}\n')).toEqual(['v.policy:2:10: unknown effect "allow" (use deny, require_approval or permit)']);
    expect(errors('rule "r" {\n  effect deny\n  subjects "agent:*"\n  object "b:*"\n}\n')).toEqual(['v.policy:1:1: rule "r" has no relation']);
    expect(errors('rule "r" {\n  effect deny\n  effect deny\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n}\n')[0]).toContain('effect is given twice');
    expect(errors('policy "p" version 1.5\n')[0]).toContain('version must be a whole number');
  });
  it('collects every error of a set, sorted by file', () => {
    const r = loadPolicySet({ files: [{ path: 'a.policy', text: rule('  when amount => 5') + rule('  when x > "y"', 'r2') }, { path: 'b.policy', text: 'rule {' }] });
    expect(r.diagnostics.length).toBe(3);
  });
  it('conflicting kind singulars are an error', () => {
    expect(errors('kind "people" singular "person"\nkind "people" singular "human"\n')[0]).toContain('has singular "person"');
  });
});

describe('JSON shapes of the management API', () => {
  const good = { id: 'r1', name: 'big', effect: 'deny', subjects: ['agent:*'], relation: 'create:refunds', object: 'refund:*', condition: { field: 'amount', op: 'gt', value: 5 } };
  it('accepts a valid rule, with or without a condition', () => {
    expect(validateJsonRule(good)).toEqual([]);
    expect(validateJsonRule({ ...good, condition: null })).toEqual([]);
  });
  it('names the source api:rule/<id> and each bad field', () => {
    expect(validateJsonRule({ ...good, condition: { field: 'amount', op: 'gtx', value: 5 } }).map(formatDiagnostic)).toEqual(['api:rule/r1:1:1: condition.op: unknown operator "gtx" (use gte, gt, lte, lt, eq or ne)']);
    expect(validateJsonRule({ ...good, condition: { field: 'amount', op: 'gt', value: 'x' } })[0]!.message).toContain('compares numbers');
    expect(validateJsonRule({ ...good, subjects: [] })[0]!.message).toContain('subjects');
    expect(validateJsonRule({ ...good, effect: 'maybe' })[0]!.message).toContain('unknown effect');
    expect(validateJsonRule({ ...good, relation: 'refunds' })[0]!.message).toContain('permission key');
    expect(validateJsonRule('nope')[0]!.message).toContain('JSON object');
    expect(validateJsonRule({ ...good, id: undefined, name: 'n' }, 'api:rule/xyz')[0]?.file ?? 'api:rule/xyz').toBe('api:rule/xyz');
  });
  it('validates limits', () => {
    expect(validateJsonLimits({ amount: { max: 500, min: 1 }, currency: { in: ['USD'] }, region: { not_in: ['XX'] }, channel: 'api' })).toEqual([]);
    expect(validateJsonLimits(null)).toEqual([]);
    expect(validateJsonLimits({ amount: { max: 1, min: 2 } })[0]!.message).toContain('min 2 is above max 1');
    expect(validateJsonLimits({ amount: { most: 1 } })[0]!.message).toContain('unknown operator "most"');
    expect(validateJsonLimits({ currency: { in: [] } })[0]!.message).toContain('empty list');
    expect(validateJsonLimits({ tags: ['a'] })[0]!.message).toContain('bare limit');
    expect(validateJsonLimits({ 'bad key': 1 })[0]!.message).toContain('field name');
    expect(validateJsonLimits([1])[0]!.message).toContain('JSON object');
  });
});

describe('validation of the second edition', () => {
  const when = (cond: string, extra = '') => errors(`${extra}${rule(`  when ${cond}`)}`);
  it('accepts paths, two-path comparisons, lists, like and time', () => {
    for (const c of [
      'resource.owner == person.email', 'context.amount > subject.max_amount', 'resource.tags contains "vip"',
      'resource.tags contains any ["a", "b"]', 'subject.groups contains all resource.groups', '"vip" in resource.tags',
      'subject.id not in resource.editors', 'context.to not like "*@example.com"', 'time.weekday in ["sat", "sun"] or time.hour < 8',
      'time.date == "2026-12-24"', 'time.epoch > context.deadline', 'resource.owner.team == "ops"', '10 < amount',
    ]) expect(when(c), c).toEqual([]);
  });
  it('types: built-in paths, comparisons of two paths, lists and like', () => {
    expect(when('time.hour == "8"')[0]).toContain('time.hour is a number; it cannot be compared with a string');
    expect(when('subject.roles == "x"')[0]).toContain('subject.roles is a list of strings; it cannot be compared with a string');
    expect(when('subject.roles == resource.roles')[0]).toContain('subject.roles is a list of strings; compare it with contains or in');
    expect(when('subject.id contains "x"')[0]).toContain('subject.id is a string; it cannot be compared with a list of strings');
    expect(when('amount > 5 and amount == person.email')[0]).toContain('person.email is a string; it cannot be compared with a number');
    expect(when('resource.tags contains "x" and resource.tags contains 1')[0]).toContain('resource.tags is compared with a list of strings and with a list of numbers');
    expect(when('context.to like 5')[0]).toContain('like needs a pattern in quotes');
    expect(when('"x" like context.to')[0]).toContain('like needs a path on its left');
    expect(when('1 == 1')[0]).toContain('a comparison needs a path on one side');
    expect(when('resource.tags contains ["a"]')[0]).toContain('use contains any or contains all');
    expect(when('amount in 5')[0]).toContain('needs a list or a path to one');
    expect(when('time.hour == time.minute')[0]).toContain('compares two time values');
  });
  it('paths: time values, built-in facts have no parts, names', () => {
    expect(when('time.second == 1')[0]).toContain('unknown time value time.second');
    expect(when('time.hour.x == 1')[0]).toContain('time.hour has no parts');
    expect(when('subject.id.x == "a"')[0]).toContain('subject.id is a string; it has no attributes');
    expect(when('time.weekday == "saturday"')[0]).toContain('time.weekday is one of');
    expect(when('time.date == "2026-02-30"')[0]).toContain('a real date');
  });
  it('a path read as a value and as an object is an error', () => {
    expect(errors(rule('  when resource.owner == "a"') + rule('  when resource.owner.team == "b"', 'r2'))[0]).toContain('resource.owner is read as a value here and as an object elsewhere');
  });
  it('a value and an object under one name are fine in rules that never read the same request', () => {
    const on = (name: string, relation: string, object: string, when: string) => `rule "${name}" {\n  effect deny\n  subjects "agent:*"\n  relation "${relation}"\n  object "${object}"\n  when ${when}\n}\n`;
    const doc = on('doc', 'update:documents', 'document:*', 'resource.owner == "a"');
    // objects of another kind, or another action on the same kind: each rule reads its own requests
    expect(errors(doc + on('cust', 'update:customers', 'customer:*', 'resource.owner.team == "b"'))).toEqual([]);
    expect(errors(doc + on('arch', 'archive:documents', 'document:*', 'resource.owner.team == "b"'))).toEqual([]);
    // a rule on every object, or on every action of documents, meets the first
    expect(errors(doc + on('any', 'update:*', '*:*', 'resource.owner.team == "b"'))[0]).toContain('resource.owner is read as a value here and as an object elsewhere (resource.owner.team)');
    expect(errors(doc + on('all', '*:documents', 'document:d1', 'resource.owner.team == "b"'))[0]).toContain('resource.owner is read as a value here and as an object elsewhere');
    // context fields too: one action's amount is a number, another's an object
    expect(errors(on('a', 'create:refunds', 'refund:*', 'amount > 5') + on('b', 'create:transfers', 'transfer:*', 'amount.value > 5'))).toEqual([]);
  });
  it('subjects: role and group names are exact', () => {
    expect(errors(`rule "r" {\n  effect permit\n  subjects "role:*"\n  relation "a:b"\n  object "b:*"\n}\n`)[0]).toContain('a role is named exactly');
    expect(errors(`rule "r" {\n  effect permit\n  subjects "role:a b"\n  relation "a:b"\n  object "b:*"\n}\n`)[0]).toContain('a role name is');
    expect(errors(`rule "r" {\n  effect permit\n  subjects "group:Sales Team", "role:editor"\n  relation "a:b"\n  object "b:*"\n}\n`)).toEqual([]);
  });
  it('time zones', () => {
    expect(errors('timezone "Europe/Berlin"\n')).toEqual([]);
    expect(errors('timezone "Mars/Olympus"\n')[0]).toContain('unknown time zone "Mars/Olympus"');
    expect(errors('timezone "UTC"\ntimezone "UTC"\n')[0]).toContain('at most one timezone');
  });
  it('with a schema: undeclared paths and wrong types are errors', () => {
    const schema = 'schema {\n  context.amount: number\n  resource.tags: [string]\n  subject.max_amount: number\n}\n';
    expect(errors(schema + rule('  when amount > subject.max_amount and resource.tags contains "vip" and subject.roles contains "x" and time.hour > 3'))).toEqual([]);
    expect(errors(schema + rule('  when resource.owner == "x"'))).toEqual(['v.policy:11:8: resource.owner is not declared in the schema']);
    expect(errors(schema + rule('  when amount == "x"'))[0]).toContain('amount is declared number in the schema; it cannot be compared with a string');
    expect(errors(schema + rule('  when resource.tags contains 1'))[0]).toContain('declared [string] in the schema');
    expect(errors(schema + 'limits "create:refunds" for "*" {\n  currency in ["USD"]\n}\n')[0]).toContain('context.currency is not declared in the schema');
    expect(errors('schema {\n  time.hour: number\n  subject.id: string\n  x: numbr\n}\n')).toEqual([
      'v.policy:2:3: time.hour is built in (a number); declare only attributes and context fields',
      'v.policy:3:3: subject.id is built in (a string); declare only attributes and context fields',
      'v.policy:4:6: unknown type "numbr" (use number, string, boolean, or a list such as [string])',
    ]);
    // a schema in one file types the whole set, API rules included
    const r = loadPolicySet({
      files: [{ path: 's.policy', text: schema }],
      rules: [{ id: 'r1', name: 'x', effect: 'deny', subjects: ['agent:*'], relation: 'a:bs', object: 'b:*', condition: { expr: 'resource.owner == "x"' } }],
    });
    expect(r.diagnostics.map(formatDiagnostic)).toEqual(['api:rule/r1:1:1: resource.owner is not declared in the schema']);
  });
  it('tests: a user or an agent, a valid now', () => {
    const t = (body: string) => loadPolicySet({ files: [{ path: 't.tests', text: `test "t" {\n${body}\n  action "a:bs"\n  resource "b:1"\n  expect allow\n}\n` }] }).diagnostics.map((d) => d.message);
    expect(t('  user "u1"\n  roles "editor"\n  now "2026-03-29T01:30:00+01:00"')).toEqual([]);
    expect(t('  user "u1"\n  agent "a"')[0]).toContain('an agent or a user, not both');
    expect(t('  agent "a"\n  now "tomorrow"')[0]).toContain('now must be an ISO 8601 instant');
    expect(t('  user "u1"\n  capability "a:bs"')[0]).toContain('capabilities belong to agents');
  });
});

describe('JSON rules: permit and expr conditions', () => {
  const base = { id: 'r1', name: 'own', effect: 'permit', subjects: ['role:editor'], relation: 'update:todos', object: 'todo:*' };
  it('accepts permit and a condition in the file syntax, compiling to the same AST as a file rule', () => {
    expect(validateJsonRule({ ...base, condition: { expr: 'resource.owner == person.email' } })).toEqual([]);
    const api = loadPolicySet({ files: [], rules: [{ ...base, effect: 'permit', condition: { expr: 'resource.owner == person.email' } }] }).policySet!;
    const file = loadPolicySet({ files: [{ path: 'f.policy', text: 'rule "own" {\n  effect permit\n  subjects "role:editor"\n  relation "update:todos"\n  object "todo:*"\n  when resource.owner == person.email\n}\n' }] }).policySet!;
    expect(strip(api.compiled.rules[0]!.ast.when)).toEqual(strip(file.compiled.rules[0]!.ast.when));
    expect(api.compiled.rules[0]!.effect).toBe('permit');
  });
  it('reports errors inside expr at their column', () => {
    expect(validateJsonRule({ ...base, condition: { expr: 'resource.owner = = 1' } }).map(formatDiagnostic)[0]).toMatch(/^api:rule\/r1:1:\d+: condition\.expr: expected /);
    expect(validateJsonRule({ ...base, condition: { expr: 'time.hour == "x"' } }).map(formatDiagnostic)).toEqual(['api:rule/r1:1:1: time.hour is a number; it cannot be compared with a string']);
    expect(validateJsonRule({ ...base, condition: { expr: '' } })[0]!.message).toContain('condition.expr must be');
    expect(validateJsonRule({ ...base, condition: { expr: 'a == 1', field: 'a' } })[0]!.message).toContain('either expr or field');
  });
  it('ruleToJson gives the old shape where it fits, else expr', () => {
    const f = loadPolicySet({ files: [{ path: 'f.policy', text: rule('  when amount > 5') + rule('  when amount > 5 and resource.owner == "x"', 'r2') }] }).policySet!;
    expect(ruleToJson(f.compiled.rules[0]!.ast).condition).toEqual({ field: 'amount', op: 'gt', value: 5 });
    expect(ruleToJson(f.compiled.rules[1]!.ast).condition).toEqual({ expr: 'amount > 5 and resource.owner == "x"' });
  });
});

describe('policy check analysis: warnings', () => {
  const check = (text: string, strict = false) => parseAndValidate({ files: [{ path: 'w.policy', text }] }, { warnings: true, strict }).diagnostics;
  it('an unsatisfiable condition, a relation whose kind cannot meet the object, limits no rule names', () => {
    const ds = check(rule('  when amount > 1000 and amount < 10') + rule('  when time.hour > 23', 'r2')
      + 'rule "k" {\n  effect deny\n  subjects "agent:*"\n  relation "create:refunds"\n  object "deployment:*"\n}\n'
      + 'rule "p" {\n  effect permit\n  subjects "role:x"\n  relation "create:refunds"\n  object "refund:*"\n  when resource.tags contains "a" and not ("a" in resource.tags)\n}\n'
      + 'limits "create:widgets" for "*" {\n  a max 1\n}\n');
    expect(ds.every((d) => d.severity === 'warning')).toBe(true);
    expect(ds.map((d) => [d.code, formatDiagnostic(d)])).toEqual([
      ['unsatisfiable', 'w.policy:6:8: warning: rule "r": the condition can never hold, so it applies only when a value it reads is missing or of the wrong type'],
      ['unsatisfiable', 'w.policy:13:8: warning: rule "r2": the condition can never hold, so it applies only when a value it reads is missing or of the wrong type'],
      ['kind_mismatch', 'w.policy:19:10: warning: rule "k" can never apply: relation "create:refunds" covers refund objects, and object "deployment:*" is never one (nothing grants the action on it)'],
      ['unsatisfiable', 'w.policy:26:8: warning: rule "p": the condition can never hold, so it never grants'],
      ['unreachable_limits', 'w.policy:28:1: warning: limits on "create:widgets": no rule in the policy names this capability (roles are not in policy files: if a role grants it, the limits apply)'],
    ]);
    expect(check(rule('  when amount > 1000 and amount < 10'), true).map((d) => d.severity)).toEqual(['error']);
  });
  it('no warning for conditions that can hold, including relations and time across a day', () => {
    expect(check(rule('  when amount > 10 and amount < 1000 and resource.owner == person.email and time.weekday == "sun" and time.hour == 2'))).toEqual([]);
    expect(check(rule('  when context.a > context.b and context.b > context.c and context.c > context.a'))[0]!.code).toBe('unsatisfiable');
    expect(check(rule('  when resource.owner == person.email and resource.owner == "a" and person.email == "b"'))[0]!.code).toBe('unsatisfiable');
    expect(check(rule('  when subject.type == "user" and subject.mode == "delegated"'))[0]!.code).toBe('unsatisfiable');
    expect(check(rule('  when time.date == "2026-03-29" and time.weekday == "mon"'))[0]!.code).toBe('unsatisfiable');
  });
  it('warnings never stop a load', () => {
    const r = loadPolicySet({ files: [{ path: 'w.policy', text: rule('  when amount > 1000 and amount < 10') }] });
    expect(r.diagnostics).toEqual([]);
    expect(r.policySet).not.toBeNull();
  });
  it('rejects a test line given twice (only capability and used lines repeat)', () => {
    const text = 'test "t" {\n  agent "x"\n  capability "a:bs"\n  capability "c:ds"\n  person "p" permissions "a:bs"\n  person "q" {\n    roles "r"\n  }\n  used count 1 in 1h\n  used count 2 in 1d\n  action "a:bs"\n  resource "b:1"\n  resource "b:2"\n  expect allow\n}\n';
    const r = loadPolicySet({ files: [{ path: 't.tests', text }] });
    expect(r.diagnostics.map(formatDiagnostic)).toEqual([
      't.tests:6:3: test "t": person is given twice',
      't.tests:13:3: test "t": resource is given twice',
    ]);
  });
});
