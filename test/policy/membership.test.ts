// Membership tests (`in`, `not in`, `contains`, `contains any/all`) over empty and mistyped lists:
// the compiled evaluator, explain and the reference interpreter give one answer, and a value
// that can never be an item of the list's declared type fails closed, whether the list is empty
// or not.
import { describe, expect, it } from 'vitest';
import { decide, type DecisionRequest } from '../../src/policy/index.js';
import { explainDecision } from '../../src/policy/explain.js';
import { parsePolicy } from '../../src/policy/parser.js';
import type { PolicyFileNode } from '../../src/policy/ast.js';
import { NOWS, reference, setOf } from './helpers.js';
import { MEMBERSHIP_CONDITIONS, membershipPolicy, membershipRequests } from './membership-cases.js';

function fileOf(text: string): PolicyFileNode {
  const r = parsePolicy('m.policy', text);
  if (!r.file) throw new Error(r.diagnostics.map((d) => d.message).join('\n'));
  return r.file;
}

const request = (context: Record<string, unknown>, codes: unknown, roles: string[] = []): DecisionRequest => ({
  subject: { type: 'agent', id: 'a', mode: 'autonomous', roles, groups: [], permissions: [], attributes: {}, capabilities: [{ name: 'read:docs' }] },
  action: 'read:docs', resource: 'doc:1', context, now: NOWS[0]!, resourceAttributes: codes === undefined ? {} : { codes },
});

describe('membership: one answer over empty and mistyped lists', () => {
  const all = [...membershipRequests()];

  it('the compiled evaluator, explain and the reference interpreter agree (with and without a schema)', () => {
    let checked = 0;
    for (const schema of [false, true]) for (const effect of ['deny', 'permit', 'require_approval']) for (const when of MEMBERSHIP_CONDITIONS) {
      const text = membershipPolicy(effect, when, schema);
      const set = setOf(text, 'm.policy');
      const file = fileOf(text);
      for (const r of all) {
        const d = decide(r, set);
        expect({ decision: d.decision, reason: d.reason }, `${text}\n${JSON.stringify(r)}`).toEqual(reference(file, r));
        expect(explainDecision(r, set).decision).toBe(d.decision);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10_000);
  });

  it('a number in a declared list of strings fails closed whether the list is empty or not', () => {
    for (const codes of [[], ['main']]) {
      const deny = setOf(membershipPolicy('deny', 'not (context.code in resource.codes)', true));
      const permit = setOf(membershipPolicy('permit', 'not (context.code in resource.codes)', true));
      const r = request({ code: -2 }, codes);
      expect(decide(r, deny).reason).toBe('rule_denied: r');
      expect(decide(r, permit).decision).toBe('deny');
      expect(decide(r, permit).reason).toMatch(/^not_granted/);
    }
    // explain names the value and the type the schema declares for it
    const why = explainDecision(request({ code: -2 }, []), setOf(membershipPolicy('deny', 'not (context.code in resource.codes)', true))).trace
      .map((t) => t.why ?? '').join('\n');
    expect(why).toContain('context.code is a number (-2) (the schema declares string), resource.codes is an empty list');
    // a string is compared: not in the empty list, so `not (...)` holds
    expect(decide(request({ code: 'main' }, []), setOf(membershipPolicy('permit', 'not (context.code in resource.codes)', true))).decision).toBe('allow');
  });

  it('a built-in list of strings declares its items: a number is never a role, also with no roles', () => {
    const permit = setOf(membershipPolicy('permit', 'not (context.code in subject.roles)', false));
    expect(decide(request({ code: -2 }, undefined, []), permit).decision).toBe('deny');
    expect(decide(request({ code: -2 }, undefined, ['main']), permit).decision).toBe('deny');
    expect(decide(request({ code: 'x' }, undefined, []), permit).decision).toBe('allow');
  });

  it('with nothing declared, an empty list holds nothing of any type: `in` is false, `not in` true', () => {
    const permit = setOf(membershipPolicy('permit', 'not (context.code in resource.codes)', false));
    expect(decide(request({ code: -2 }, []), permit).decision).toBe('allow');
    expect(decide(request({ code: -2 }, ['main']), permit).decision).toBe('deny');
    expect(decide(request({ code: 'x' }, ['main']), permit).decision).toBe('allow');
  });

  it('contains any/all: the declared item type holds for both lists, also where one is empty', () => {
    const deny = setOf(membershipPolicy('deny', 'resource.codes contains any context.labels', true));
    expect(decide(request({ labels: [-2] }, []), deny).reason).toBe('rule_denied: r');
    expect(decide({ ...request({ labels: ['x'] }, []), subject: { ...request({}, []).subject, permissions: ['read:docs'] } }, deny).decision).toBe('allow');
  });
});
