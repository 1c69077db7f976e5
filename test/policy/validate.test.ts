import { describe, expect, it } from 'vitest';
import { loadPolicySet, validateJsonLimits, validateJsonRule, formatDiagnostic } from '../../src/policy/index.js';

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
    expect(errors(rule('  when amount == 5 or amount == "x"'))[0]).toContain('field amount is compared with a number and with a string');
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
    expect(bad('subjects', '"group:x"')[0]).toContain('unknown type "group"');
    expect(bad('subjects', '"agent:spiffe://x/ag*"')[0]).toContain('whole segment');
    expect(bad('relation', '"createrefunds"')[0]).toContain('not a permission key');
    expect(bad('relation', '"create:ref unds"')[0]).toContain('not a permission key');
    expect(bad('object', '"refund"')[0]).toContain('not a pattern <kind>:<id>');
    expect(errors('limits "create:*" for "*" {\n  a max 1\n}\n')[0]).toContain('no wildcards here');
    expect(errors('limits "create:refunds" for "agent:x" {\n  a max 1\n}\n')[0]).toContain('without "agent:"');
  });
  it('rejects unknown effects, missing and repeated fields, bad versions', () => {
    expect(errors('rule "r" {\n  effect allow\n  subjects "agent:*"\n  relation "a:b"\n  object "b:*"\n}\n')).toEqual(['v.policy:2:10: unknown effect "allow" (use deny or require_approval)']);
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
