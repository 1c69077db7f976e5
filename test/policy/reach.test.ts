// The language's reach: several relations a rule, named action groups, the action in conditions,
// and presence tests (`has`), through the parser, the validator, decide(), fmt and diff (checked by
// brute force over a small domain), and against the reference interpreter.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, loadPolicySet, type DecisionRequest, type SubjectFacts } from '../../src/policy/index.js';
import { diffPolicySets, inRegion, DiffTooLarge, type Change } from '../../src/policy/diff.js';
import { completeRequest } from '../../src/policy/explain.js';
import { formatFile } from '../../src/policy/format.js';
import { parsePolicy } from '../../src/policy/parser.js';
import { parseAndValidate } from '../../src/policy/load.js';
import type { Expr, Item, PathNode, PolicyFileNode } from '../../src/policy/ast.js';
import { L, P, reference, setFromAst, setOf } from './helpers.js';

const NOW = Date.parse('2026-03-30T10:00:00Z');

function agent(over: Partial<SubjectFacts> = {}): SubjectFacts {
  return {
    type: 'agent', id: 'a', mode: 'autonomous', roles: [], groups: [], attributes: {},
    permissions: ['push:repos', 'merge:repos', 'read:repos', 'open_pr:repos'],
    capabilities: [{ name: 'push:repos' }, { name: 'merge:repos' }, { name: 'read:repos' }, { name: 'open_pr:repos' }], ...over,
  };
}
function req(action: string, over: Partial<DecisionRequest> = {}): DecisionRequest {
  return { subject: agent(), action, resource: 'repo:1', context: {}, now: NOW, resourceAttributes: {}, ...over };
}
const reason = (text: string, r: DecisionRequest) => decide(r, setOf(text)).reason;

function errorsOf(text: string): string[] {
  const r = loadPolicySet({ files: [{ path: "p.policy", text }] });
  return r.diagnostics.filter((d) => d.severity === 'error').map((d) => d.message);
}

describe('several relations a rule, and action groups', () => {
  const text = `rule "no writes" {\n  effect deny\n  subjects "agent:*"\n  relation "push:repos", "merge:repos"\n  object "repo:*"\n}\n`;

  it('a rule names several relations and applies to each, not to others', () => {
    expect(reason(text, req('push:repos'))).toBe('rule_denied: no writes');
    expect(reason(text, req('merge:repos'))).toBe('rule_denied: no writes');
    expect(reason(text, req('read:repos'))).toBe('allowed');
  });

  it('fmt keeps the list, and the list in brackets reads the same', () => {
    const { file } = parsePolicy('p.policy', text);
    expect(formatFile(file!)).toContain('relation "push:repos", "merge:repos"');
    const bracketed = text.replace('"push:repos", "merge:repos"', '["push:repos", "merge:repos"]');
    expect(reason(bracketed, req('merge:repos'))).toBe('rule_denied: no writes');
  });

  it('a named group stands where a relation does, alone or with others', () => {
    const groups = `actions "write" = ["push:repos", "merge:repos"]\n`;
    const g = groups + text.replace('"push:repos", "merge:repos"', '"write"');
    expect(reason(g, req('push:repos'))).toBe('rule_denied: no writes');
    expect(reason(g, req('merge:repos'))).toBe('rule_denied: no writes');
    expect(reason(g, req('read:repos'))).toBe('allowed');
    const mixed = groups + text.replace('"push:repos", "merge:repos"', '"write", "read:repos"');
    expect(reason(mixed, req('read:repos'))).toBe('rule_denied: no writes');
    const { file } = parsePolicy('p.policy', g);
    expect(formatFile(file!)).toContain('actions "write" = ["push:repos", "merge:repos"]');
    expect(formatFile(file!)).toContain('relation "write"');
  });

  it('a group may be declared in another file of the set', () => {
    const r = loadPolicySet({ files: [
      { path: 'a.policy', text: text.replace('"push:repos", "merge:repos"', '"write"') },
      { path: 'b.policy', text: 'actions "write" = ["push:repos"]\n' },
    ] });
    expect(r.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    expect(decide(req('push:repos'), r.policySet!).reason).toBe('rule_denied: no writes');
  });

  it('an unknown group, a bad member, a repeated declaration and a repeated relation are errors', () => {
    expect(errorsOf(`actions "write" = ["push:repos"]\n` + text.replace('"push:repos", "merge:repos"', '"wrte"')).join('\n'))
      .toMatch(/relation "wrte" is not a permission key .* nor a declared action group \(did you mean "write"\?\)/);
    expect(errorsOf(`actions "write" = ["push"]\n`).join('\n')).toMatch(/action group "write": "push" is not a relation/);
    expect(errorsOf(`actions "write" = ["push:repos"]\nactions "write" = ["merge:repos"]\n`).join('\n')).toMatch(/action group "write" is also declared at p.policy:1/);
    expect(errorsOf(text.replace('"push:repos", "merge:repos"', '"push:repos", "push:repos"')).join('\n')).toMatch(/relation "push:repos" is named twice/);
  });
});

describe('the action in conditions', () => {
  const rule = (when: string) => `rule "only prs" {\n  effect deny\n  subjects "agent:*"\n  relation "*:repos"\n  object "repo:*"\n  when ${when}\n}\n`;

  it('`action` is the action asked, not a context field', () => {
    const t = rule('action != "open_pr:repos"');
    expect(reason(t, req('open_pr:repos'))).toBe('allowed');
    expect(reason(t, req('push:repos', { context: { action: 'open_pr:repos' } }))).toBe('rule_denied: only prs');
  });

  it('action.verb and action.kind are its two parts; context.action is still the context field', () => {
    expect(reason(rule('action.verb in ["push", "merge"]'), req('merge:repos'))).toBe('rule_denied: only prs');
    expect(reason(rule('action.verb in ["push", "merge"]'), req('read:repos'))).toBe('allowed');
    expect(reason(rule('action.kind == "repos"'), req('read:repos'))).toBe('rule_denied: only prs');
    expect(reason(rule('context.action == "x"'), req('read:repos', { context: { action: 'x' } }))).toBe('rule_denied: only prs');
  });

  it('an unknown part of the action is an error', () => {
    expect(errorsOf(rule('action.name == "x"')).join('\n')).toMatch(/unknown action value action.name/);
  });

  it('diff cuts the actions at the constants a condition compares the action with', () => {
    const a = setOf(rule('action != "open_pr:repos"'));
    const b = setOf(rule('action.verb == "push"'));
    const { changes } = diffPolicySets(a, b);
    const requests = ['push:repos', 'merge:repos', 'read:repos', 'open_pr:repos'].map((x) => req(x));
    expectExact(changes, a, b, requests);
    expect(changes.length).toBeGreaterThan(0);
  });
});

describe('presence: has', () => {
  const rule = (when: string, effect = 'deny') => `rule "fraud" {\n  effect ${effect}\n  subjects "agent:*"\n  relation "*:repos"\n  object "repo:*"\n  when ${when}\n}\n`;
  const withFraud = (fraud?: unknown) => req('read:repos', { resourceAttributes: fraud === undefined ? {} : { fraud } });

  it('guards the comparison beside it: a missing field no longer fails closed', () => {
    const t = rule('resource has fraud and resource.fraud == true');
    expect(reason(t, withFraud())).toBe('allowed');
    expect(reason(t, withFraud(true))).toBe('rule_denied: fraud');
    expect(reason(t, withFraud(false))).toBe('allowed');
    // there, but mistyped: the comparison still fails closed
    expect(reason(t, withFraud('yes'))).toBe('rule_denied: fraud');
    // without the guard, the missing field fails closed as before
    expect(reason(rule('resource.fraud == true'), withFraud())).toBe('rule_denied: fraud');
  });

  it('context has, nested paths, and a negated guard in an or', () => {
    const t = rule('not (context has coupon) or coupon == "BAD"');
    expect(reason(t, req('read:repos'))).toBe('rule_denied: fraud');
    expect(reason(t, req('read:repos', { context: { coupon: 'OK' } }))).toBe('allowed');
    expect(reason(t, req('read:repos', { context: { coupon: 'BAD' } }))).toBe('rule_denied: fraud');
    const nested = rule('resource.customer has tier');
    expect(reason(nested, req('read:repos', { resourceAttributes: { customer: { tier: 'gold' } } }))).toBe('rule_denied: fraud');
    expect(reason(nested, req('read:repos', { resourceAttributes: { customer: {} } }))).toBe('allowed');
  });

  it('fmt prints it back as written; a relationship question still parses as one', () => {
    for (const w of ['resource has fraud', 'context has coupon', 'resource.customer has tier', 'coupon has code']) {
      const { file, diagnostics } = parsePolicy('p.policy', rule(w));
      expect(diagnostics).toEqual([]);
      expect(formatFile(file!)).toContain(`when ${w}\n`);
    }
    const { file } = parsePolicy('p.policy', rule('person has viewer on resource'));
    const r = file!.items[0] as { when: Expr };
    expect(r.when.type).toBe('has');
  });
});

// ---- brute force: diff and the evaluator over a small domain with presence, actions and groups ----

function* smallRequests(): Generator<DecisionRequest> {
  for (const who of ['auto', 'user'] as const)
    for (const action of ['push:repos', 'merge:repos', 'read:repos'])
      for (const coupon of [undefined, 'X', 'Y', 5])
        for (const fraud of [undefined, true, false, 'x'])
        for (const owner of ['none', 'inline', 'ref', 'dangling'] as const) {
          const subject: SubjectFacts = who === 'user'
            ? { type: 'user', id: 'u1', roles: [], groups: [], permissions: ['push:repos', 'merge:repos', 'read:repos'], attributes: {} }
            : agent({ capabilities: [{ name: action }] });
          const r: DecisionRequest = { subject, action, resource: 'repo:1', context: {}, now: NOW, resourceAttributes: {}, approved: false };
          if (coupon !== undefined) r.context.coupon = coupon;
          if (fraud !== undefined) r.resourceAttributes!.fraud = fraud;
          // the owner: absent, an inline object, a reference to a stored entity, a reference to none
          if (owner === 'inline') r.resourceAttributes!.owner = { tier: coupon === 'X' ? 'gold' : 'basic' };
          if (owner === 'ref' || owner === 'dangling') {
            r.resourceAttributes!.owner = { type: 'customer', id: owner === 'ref' ? 'c-1' : 'c-9' };
            r.entities = new Map([['customer:c-1', { tier: fraud === true ? 'gold' : 'basic' }], ['customer:c-9', null]]);
          }
          yield r;
        }
}

const present = (path: string): Expr => ({ type: 'present', left: P(path) as PathNode, right: { type: 'lit', value: true } });
const atom: fc.Arbitrary<Expr> = fc.constantFrom<Expr>(
  present('context.coupon'),
  present('resource.fraud'),
  { type: 'cmp', left: P('coupon'), op: 'eq', right: L('X') },
  { type: 'cmp', left: P('resource.fraud'), op: 'eq', right: L(true) },
  { type: 'cmp', left: P('action'), op: 'eq', right: L('push:repos') },
  { type: 'cmp', left: P('action'), op: 'ne', right: L('read:repos') },
  { type: 'in', left: P('action.verb'), negated: false, right: L(['merge']) },
  { type: 'cmp', left: P('resource.owner.tier'), op: 'eq', right: L('gold') },
  present('resource.owner.tier'),
  present('resource.owner'),
);
const expr: fc.Arbitrary<Expr> = fc.oneof(
  atom,
  fc.tuple(atom, atom).map(([x, y]): Expr => ({ type: 'and', items: [x, y] })),
  fc.tuple(atom, atom).map(([x, y]): Expr => ({ type: 'or', items: [{ type: 'not', expr: x }, y] })),
);
const file = fc.tuple(
  fc.array(fc.record({
    effect: fc.constantFrom('deny', 'require_approval', 'permit'),
    subjects: fc.constantFrom(['agent:*'], ['user:*'], ['agent:*', 'user:*']),
    relations: fc.constantFrom(['push:repos'], ['push:repos', 'merge:repos'], ['*:repos'], ['write']),
    when: fc.option(expr, { nil: undefined }),
  }), { maxLength: 3 }),
  fc.constantFrom(['push:repos'], ['push:repos', 'merge:repos'], ['merge:repos', 'read:repos']),
).map(([rules, write]): PolicyFileNode => ({
  path: 's.policy',
  items: [
    { kind: "actions", name: "write", members: [...write] },
    ...rules.map((r, i) => ({ kind: "rule" as const, name: `r${i}`, effect: r.effect, subjects: [...r.subjects], relation: r.relations[0]!, relations: [...r.relations], object: 'repo:*', ...(r.when ? { when: r.when } : {}) })),
  ] as Item[],
}));

function expectExact(changes: Change[], a: ReturnType<typeof setOf>, b: ReturnType<typeof setOf>, requests: Iterable<DecisionRequest>): void {
  for (const r of requests) {
    const before = decide(r, a).decision, after = decide(r, b).decision;
    const hits = changes.filter((c) => inRegion(c, r));
    if (before === after) expect(hits, `unchanged request in a region: ${JSON.stringify(r)}`).toEqual([]);
    else {
      expect(hits.length, `changed request (${before} -> ${after}) in ${hits.length} regions: ${JSON.stringify(r)}`).toBe(1);
      expect([hits[0]!.before, hits[0]!.after]).toEqual([before, after]);
    }
  }
  for (const c of changes) {
    const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => NaN);
    expect(inRegion(c, request), JSON.stringify(c)).toBe(true);
    expect([decide(request, a).decision, decide(request, b).decision]).toEqual([c.before, c.after]);
  }
}

describe('brute force over a small domain with presence, the action and groups', () => {
  const all = [...smallRequests()];

  it('the compiled evaluator agrees with the reference interpreter', () => {
    fc.assert(fc.property(file, (f) => {
      const set = setFromAst(f);
      for (const r of all) expect({ decision: decide(r, set).decision, reason: decide(r, set).reason }).toEqual(reference(f, r));
    }), { numRuns: 60 });
  });

  it('diff: every changed request lies in exactly one region, and each example explains as reported', () => {
    fc.assert(fc.property(file, file, (a, b) => {
      const sa = setFromAst(a), sb = setFromAst(b);
      let changes: Change[];
      try { changes = diffPolicySets(sa, sb).changes; } catch (e) { if (e instanceof DiffTooLarge) { fc.pre(false); } throw e; }
      expectExact(changes, sa, sb, all);
    }), { numRuns: 25 });
  }, 300_000);
});

describe('check: the traps it now names', () => {
  const warningsOf = (text: string) => parseAndValidate({ files: [{ path: 'p.policy', text }] }, { warnings: true }).diagnostics;
  const rule = (when: string, subjects = '"agent:*"') => `rule "r" {\n  effect deny\n  subjects ${subjects}\n  relation "read:repos"\n  object "repo:*"\n  when ${when}\n}\n`;

  it('comparing with null warns, and --strict makes it an error', () => {
    const w = warningsOf(rule('coupon != null and coupon == "x"'));
    expect(w.map((d) => d.code)).toContain('null_compared');
    expect(w.find((d) => d.code === 'null_compared')!.message).toMatch(/has no null/);
    const strict = parseAndValidate({ files: [{ path: 'p.policy', text: rule('coupon != null and coupon == "x"') }] }, { warnings: true, strict: true }).diagnostics;
    expect(strict.some((d) => d.severity === 'error' && d.code === 'null_compared')).toBe(true);
  });

  it('a bare word read once and declared nowhere warns; read twice, or declared, it does not', () => {
    expect(warningsOf(rule('amout > 5')).map((d) => [d.code, d.line])).toEqual([['undeclared_field', 6]]);
    expect(warningsOf(rule('amount > 5 and amount < 100')).filter((d) => d.code === 'undeclared_field')).toEqual([]);
    expect(warningsOf('schema {\n  context.amount: number\n}\n' + rule('amount > 5')).filter((d) => d.code === 'undeclared_field')).toEqual([]);
  });

  it('a path no request the rule applies to carries warns', () => {
    const w = warningsOf(rule('subject.email like "*@example.com"'));
    expect(w.map((d) => d.code)).toContain('never_present');
    expect(w.find((d) => d.code === 'never_present')!.message).toMatch(/person.email/);
    expect(warningsOf(rule('subject.email like "*@example.com"', '"agent:*", "user:*"')).filter((d) => d.code === 'never_present')).toEqual([]);
  });

  it('a parse error points at the unclosed parenthesis, and a misspelt keyword gets the nearest one', () => {
    const open = parsePolicy('p.policy', rule('(amount > 5 and coupon == "x"'));
    expect(open.diagnostics[0]!.message).toMatch(/this "\(" is never closed/);
    expect([open.diagnostics[0]!.line, open.diagnostics[0]!.col]).toEqual([6, 8]);
    const typo = parsePolicy('p.policy', rule('amount > 5').replace('effect deny', 'efect deny'));
    expect(typo.diagnostics[0]!.message).toMatch(/did you mean "effect"\?/);
  });

  it('an undeclared path under a schema suggests the nearest declared one', () => {
    const errs = errorsOf('schema {\n  context.amount: number\n}\n' + rule('amuont > 5'));
    expect(errs.join("\n")).toMatch(/amuont is not declared in the schema \(did you mean amount\?\)/);
  });
});

describe('entity references in the evaluator and explain', () => {
  const rule = `rule "fraud" {\n  effect deny\n  subjects "agent:*"\n  relation "read:repos"\n  object "repo:*"\n  when resource.owner.fraud == true\n}\n`;
  const set = () => setOf(rule);
  const owner = { type: 'customer', id: 'c-1' };

  it('a path steps through a reference into the stored entity the request brings', () => {
    const r = req('read:repos', { resourceAttributes: { owner }, entities: new Map([['customer:c-1', { fraud: true }]]) });
    expect(decide(r, set()).reason).toBe('rule_denied: fraud');
    expect(decide({ ...r, entities: new Map([['customer:c-1', { fraud: false }]]) }, set()).reason).toBe('allowed');
  });

  it('a reference to no entity, or one not loaded, is missing: the deny rule fails closed', () => {
    expect(decide(req('read:repos', { resourceAttributes: { owner }, entities: new Map([['customer:c-1', null]]) }), set()).reason).toBe('rule_denied: fraud');
    expect(decide(req('read:repos', { resourceAttributes: { owner } }), set()).reason).toBe('rule_denied: fraud');
  });

  it('an inline object reads the same as a reference to an entity with those attributes', () => {
    expect(decide(req('read:repos', { resourceAttributes: { owner: { fraud: false } } }), set()).reason).toBe('allowed');
    // its own type and id are read as fields, not followed
    const own = setOf(rule.replace('resource.owner.fraud == true', 'resource.owner.type == "customer"'));
    expect(decide(req('read:repos', { resourceAttributes: { owner } }), own).reason).toBe('rule_denied: fraud');
  });

  it('a path the schema declares a reference holds the id alone', () => {
    const declared = setOf(`schema {\n  resource.owner: entity customer\n  resource.owner.fraud: boolean\n}\n\n${rule}`);
    const entities = new Map([['customer:c-1', { fraud: true }], ['customer:c-2', { fraud: false }]]);
    expect(decide(req('read:repos', { resourceAttributes: { owner: 'c-1' }, entities }), declared).reason).toBe('rule_denied: fraud');
    expect(decide(req('read:repos', { resourceAttributes: { owner: 'c-2' }, entities }), declared).reason).toBe('allowed');
    // without the declaration a string is just a string: no attribute to read, fail closed
    expect(decide(req('read:repos', { resourceAttributes: { owner: 'c-2' }, entities }), set()).reason).toBe('rule_denied: fraud');
    const { file } = parsePolicy('p.policy', `schema {\n  resource.owner: entity customer\n}\n`);
    expect(formatFile(file!)).toContain('resource.owner: entity customer');
  });

  it('explain takes the entities with the request', () => {
    const { request } = completeRequest({ agent: { id: 'a', permissions: ['read:repos'] }, action: 'read:repos', resource: 'repo:1', resource_attributes: { owner }, entities: { 'customer:c-1': { fraud: false } } });
    expect(decide(request, set()).reason).toBe('allowed');
  });
});
