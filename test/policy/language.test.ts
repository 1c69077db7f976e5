// The second edition of the language, operator by operator and path by path, through
// decide(): paths into the request, comparisons of two values, lists, like, the clock in a
// time zone across daylight-saving changes, role and group subjects, permit, and failing closed.
import { describe, expect, it } from 'vitest';
import { decide, loadPolicySet, type DecisionRequest, type PersonFacts, type SubjectFacts } from '../../src/policy/index.js';
import { explainDecision } from '../../src/policy/explain.js';
import { setOf } from './helpers.js';

const NOW = Date.parse('2026-03-30T10:00:00Z'); // a Monday, 12:00 in Berlin

function agent(over: Partial<SubjectFacts> = {}): SubjectFacts {
  return { type: 'agent', id: 'spiffe://h/agent/a', mode: 'autonomous', roles: [], groups: [], permissions: ['read:docs'], attributes: {}, capabilities: [{ name: 'read:docs' }], ...over };
}
function person(over: Partial<PersonFacts> = {}): PersonFacts {
  return { id: 'u1', email: 'ada@example.com', roles: [], groups: [], permissions: ['read:docs'], attributes: {}, ...over };
}
function req(over: Partial<DecisionRequest> = {}): DecisionRequest {
  return { subject: agent(), action: 'read:docs', resource: 'doc:d1', context: {}, now: NOW, resourceAttributes: {}, ...over };
}

/** A policy with one deny rule on read:docs; `denied(cond, r)` tells whether the rule applies to r. */
function denyWhen(cond: string, extra = ''): (r: DecisionRequest) => boolean {
  const set = setOf(`${extra}rule "x" {\n  effect deny\n  subjects "agent:*", "user:*"\n  relation "read:docs"\n  object "doc:*"\n  when ${cond}\n}\n`);
  return (r) => {
    const d = decide(r, set);
    expect(['allowed', 'rule_denied: x']).toContain(d.reason);
    return d.reason === 'rule_denied: x';
  };
}
const withCtx = (context: Record<string, unknown>) => req({ context });
const withRes = (resourceAttributes: Record<string, unknown>, over: Partial<DecisionRequest> = {}) => req({ resourceAttributes, ...over });

describe('paths', () => {
  it('context fields, bare or with context., nested', () => {
    const bare = denyWhen('amount > 10'), full = denyWhen('context.amount > 10'), nested = denyWhen('context.order.total > 10');
    expect([bare(withCtx({ amount: 11 })), bare(withCtx({ amount: 10 }))]).toEqual([true, false]);
    expect([full(withCtx({ amount: 11 })), full(withCtx({ amount: 10 }))]).toEqual([true, false]);
    expect([nested(withCtx({ order: { total: 11 } })), nested(withCtx({ order: { total: 3 } }))]).toEqual([true, false]);
  });
  it('subject: built-in facts and custom attributes by name', () => {
    const id = denyWhen('subject.id == "spiffe://h/agent/a"'), type = denyWhen('subject.type == "agent"'), mode = denyWhen('subject.mode == "delegated"');
    expect([id(req()), id(req({ subject: agent({ id: 'b' }) }))]).toEqual([true, false]);
    expect([type(req()), type(req({ subject: { ...agent(), type: 'user', id: 'u9', capabilities: undefined } }))]).toEqual([true, false]);
    expect([mode(req()), mode(req({ subject: agent({ mode: 'delegated' }), person: person() }))]).toEqual([false, true]);
    const max = denyWhen('subject.max_amount < 100');
    expect([max(req({ subject: agent({ attributes: { max_amount: 50 } }) })), max(req({ subject: agent({ attributes: { max_amount: 500 } }) }))]).toEqual([true, false]);
    const name = denyWhen('subject.name == "billing"');
    expect(name(req({ subject: agent({ name: 'billing' }) }))).toBe(true);
  });
  it('person: the person of a delegated agent, or a user acting directly; none for an agent alone', () => {
    const email = denyWhen('person.email like "*@example.com"');
    const delegated = req({ subject: agent({ mode: 'delegated' }), person: person() });
    expect(email(delegated)).toBe(true);
    expect(email(req({ subject: agent({ mode: 'delegated' }), person: person({ email: 'x@other.org' }) }))).toBe(false);
    const user: SubjectFacts = { type: 'user', id: 'u1', email: 'ada@example.com', roles: [], groups: [], permissions: ['read:docs'], attributes: { team: 'ops' } };
    expect(email(req({ subject: user }))).toBe(true);
    expect(denyWhen('person.team == "ops"')(req({ subject: user }))).toBe(true);
    // an agent alone has no person, even if the request carries one: the value is missing, the deny applies
    expect(email(req({ person: person({ email: 'x@other.org' }) }))).toBe(true);
  });
  it('resource: id and type from the object, attributes from the entity, nested', () => {
    expect(denyWhen('resource.id == "d1"')(req())).toBe(true);
    expect(denyWhen('resource.type == "doc"')(req())).toBe(true);
    const team = denyWhen('resource.owner.team != "ops"');
    expect([team(withRes({ owner: { team: 'ops' } })), team(withRes({ owner: { team: 'dev' } }))]).toEqual([false, true]);
  });
});

describe('operators', () => {
  it('comparisons: numbers ordered, == and != on numbers, strings and booleans; a path on either side', () => {
    const lt = denyWhen('10 < amount');
    expect([lt(withCtx({ amount: 11 })), lt(withCtx({ amount: 10 }))]).toEqual([true, false]);
    const ne = denyWhen('flag != true');
    expect([ne(withCtx({ flag: false })), ne(withCtx({ flag: true }))]).toEqual([true, false]);
  });
  it('two paths compared', () => {
    const own = denyWhen('resource.owner != person.email');
    const d = (owner: unknown, email: string | undefined) => own(req({ subject: agent({ mode: 'delegated' }), person: person({ email }), resourceAttributes: { owner } }));
    expect(d('ada@example.com', 'ada@example.com')).toBe(false);
    expect(d('bob@example.com', 'ada@example.com')).toBe(true);
    const over = denyWhen('context.amount > subject.max_amount');
    expect(over(req({ context: { amount: 5 }, subject: agent({ attributes: { max_amount: 10 } }) }))).toBe(false);
    expect(over(req({ context: { amount: 15 }, subject: agent({ attributes: { max_amount: 10 } }) }))).toBe(true);
  });
  it('contains, contains any, contains all, in a path, in and not in a list', () => {
    const has = denyWhen('resource.tags contains "vip"');
    expect([has(withRes({ tags: ['a', 'vip'] })), has(withRes({ tags: ['a'] })), has(withRes({ tags: [] }))]).toEqual([true, false, false]);
    const any = denyWhen('resource.tags contains any ["vip", "gold"]');
    expect([any(withRes({ tags: ['gold'] })), any(withRes({ tags: ['x'] }))]).toEqual([true, false]);
    const all = denyWhen('resource.tags contains all ["vip", "gold"]');
    expect([all(withRes({ tags: ['gold', 'vip', 'x'] })), all(withRes({ tags: ['gold'] }))]).toEqual([true, false]);
    const member = denyWhen('subject.id in resource.editors');
    expect([member(withRes({ editors: ['spiffe://h/agent/a'] })), member(withRes({ editors: ['b'] }))]).toEqual([true, false]);
    const notMember = denyWhen('subject.id not in resource.editors');
    expect([notMember(withRes({ editors: ['spiffe://h/agent/a'] })), notMember(withRes({ editors: [] }))]).toEqual([false, true]);
    const lits = denyWhen('"vip" in resource.tags');
    expect(lits(withRes({ tags: ['vip'] }))).toBe(true);
    const lists = denyWhen('subject.groups contains any resource.groups');
    expect([lists(req({ subject: agent({ groups: ['eng'] }), resourceAttributes: { groups: ['ops', 'eng'] } })), lists(req({ subject: agent({ groups: ['eng'] }), resourceAttributes: { groups: [] } }))]).toEqual([true, false]);
    const subset = denyWhen('subject.groups contains all resource.groups');
    expect(subset(req({ subject: agent({ groups: ['eng'] }), resourceAttributes: { groups: [] } }))).toBe(true);
    const inList = denyWhen('currency not in ["USD", "EUR"]');
    expect([inList(withCtx({ currency: 'GBP' })), inList(withCtx({ currency: 'EUR' }))]).toEqual([true, false]);
  });
  it('like and not like: * is any text, the rest literal, case-sensitive', () => {
    const like = denyWhen('context.to not like "*@example.com"');
    expect(like(withCtx({ to: 'a@example.com' }))).toBe(false);
    expect(like(withCtx({ to: 'a@EXAMPLE.com' }))).toBe(true);
    expect(like(withCtx({ to: 'a@example.com.evil.org' }))).toBe(true);
    expect(like(withCtx({ to: '@example.com' }))).toBe(false);
    const lit = denyWhen('context.q like "a.b?c*"');
    expect([lit(withCtx({ q: 'a.b?cde' })), lit(withCtx({ q: 'aXb?c' })), lit(withCtx({ q: 'a.bXc' }))]).toEqual([true, false, false]);
    const mid = denyWhen('context.q like "x*y*z"');
    expect([mid(withCtx({ q: 'xyz' })), mid(withCtx({ q: 'x--y--z' })), mid(withCtx({ q: 'xzy' })), mid(withCtx({ q: 'xy' }))]).toEqual([true, true, false, false]);
  });
});

describe('failing closed', () => {
  it('a deny rule whose condition reads a missing or mistyped value applies, whatever the rest says', () => {
    const d = denyWhen('amount > 10 or resource.owner == person.email');
    expect(d(withCtx({ amount: 50 }))).toBe(true);
    expect(d(withCtx({ amount: 5 }))).toBe(true); // resource.owner and person.email missing
    expect(d(req({ context: { amount: 5 }, subject: agent({ mode: 'delegated' }), person: person(), resourceAttributes: { owner: 'x' } }))).toBe(false);
    const types = denyWhen('resource.tags contains "vip"');
    expect(types(withRes({ tags: 'vip' }))).toBe(true); // a string, not a list
    expect(types(withRes({ tags: ['vip', 3] }))).toBe(true); // items of another type
    expect(types(withRes({ tags: null }))).toBe(true);
    expect(denyWhen('context.to like "*@x"')(withCtx({ to: 5 }))).toBe(true);
    expect(denyWhen('amount == person.age')(req({ context: { amount: 5 }, subject: agent({ mode: 'delegated' }), person: person({ attributes: { age: '5' } }) }))).toBe(true);
  });
  it('a permit rule that cannot be evaluated grants nothing', () => {
    const set = setOf('rule "own" {\n  effect permit\n  subjects "role:editor"\n  relation "update:todos"\n  object "todo:*"\n  when resource.owner == person.email\n}\n');
    const base = req({ action: 'update:todos', resource: 'todo:1', subject: agent({ roles: ['editor'], permissions: [], capabilities: [{ name: 'update:todos' }] }) });
    // an agent alone has no person: grants nothing
    expect(decide({ ...base, resourceAttributes: { owner: 'ada@example.com' } }, set).reason).toBe('not_granted: update:todos');
    const delegated = { ...base, subject: { ...base.subject, mode: 'delegated' as const }, person: person({ roles: ['editor'], permissions: [] }) };
    expect(decide({ ...delegated, resourceAttributes: { owner: 'ada@example.com' } }, set).reason).toBe('allowed');
    expect(decide({ ...delegated, resourceAttributes: {} }, set).reason).toBe('not_granted: update:todos');
    expect(decide({ ...delegated, resourceAttributes: { owner: 7 } }, set).reason).toBe('not_granted: update:todos');
  });
  it('explain names each value a rule read, and the one that made it fail closed', () => {
    const set = setOf('rule "y" {\n  effect deny\n  subjects "user:nobody"\n  relation "read:docs"\n  object "doc:*"\n}\n'
      + 'rule "x" {\n  effect deny\n  subjects "agent:*"\n  relation "read:docs"\n  object "doc:*"\n  when amount > 10 or resource.owner == person.email\n}\n');
    const d = explainDecision(req({ context: { amount: 5 } }), set);
    const x = d.trace.find((t) => t.rule === 'x')!;
    expect(x.outcome).toBe('fail');
    expect(x.reads).toEqual([
      { path: 'amount', value: 5, present: true },
      { path: 'resource.owner', value: undefined, present: false },
      { path: 'person.email', value: undefined, present: false },
    ]);
    expect(x.why).toBe('fails closed, applies: resource.owner == person.email: resource.owner is missing, person.email is missing');
    expect(d.trace.find((t) => t.rule === 'y')).toMatchObject({ outcome: 'skip', why: 'subjects do not match' });
    const ok = explainDecision(req({ context: { amount: 5 }, subject: agent({ mode: 'delegated' }), person: person(), resourceAttributes: { owner: 'x' } }), set);
    expect(ok.trace.find((t) => t.rule === 'x')).toMatchObject({ outcome: 'pass', why: 'condition does not hold' });
    // a plain decision carries the reads of the rule that decided only
    const plain = decide(req({ context: { amount: 50 } }), set);
    expect(plain.trace.find((t) => t.rule === 'x')!.reads).toHaveLength(3);
    expect(plain.cause).toEqual({ code: 'rule_denied', rule: 'x' });
  });
});

describe('the clock: time.* in the file\'s time zone, daylight saving included', () => {
  const at = (iso: string) => req({ now: Date.parse(iso) });
  const berlin = (cond: string) => denyWhen(cond, 'timezone "Europe/Berlin"\n\n');
  it('hour, minute, weekday, date and epoch in Europe/Berlin across 2026-03-29 (clocks forward at 02:00)', () => {
    const hour = (h: number) => berlin(`time.hour == ${h}`);
    expect(hour(1)(at('2026-03-29T00:59:00Z'))).toBe(true);  // 01:59 CET
    expect(hour(3)(at('2026-03-29T01:00:00Z'))).toBe(true);  // 03:00 CEST: 02:00 never happens
    expect(hour(2)(at('2026-03-29T01:00:00Z'))).toBe(false);
    expect(berlin('time.minute == 59')(at('2026-03-29T00:59:30Z'))).toBe(true);
    expect(berlin('time.weekday == "sun"')(at('2026-03-29T01:30:00Z'))).toBe(true);
    expect(berlin('time.date == "2026-03-29"')(at('2026-03-28T23:30:00Z'))).toBe(true); // 00:30 in Berlin, still the 28th in UTC
    expect(denyWhen('time.date == "2026-03-29"')(at('2026-03-28T23:30:00Z'))).toBe(false); // UTC when the file names no zone
    expect(berlin('time.epoch >= 1774746000')(at('2026-03-29T01:00:00Z'))).toBe(true);
    expect(berlin('time.epoch >= 1774746000')(at('2026-03-29T00:59:59Z'))).toBe(false);
  });
  it('across 2026-10-25 (clocks back at 03:00): 02:30 happens twice, both hour 2', () => {
    const two = berlin('time.hour == 2 and time.minute == 30');
    expect(two(at('2026-10-25T00:30:00Z'))).toBe(true); // 02:30 CEST
    expect(two(at('2026-10-25T01:30:00Z'))).toBe(true); // 02:30 CET
    expect(two(at('2026-10-25T02:30:00Z'))).toBe(false); // 03:30 CET
  });
  it('out of hours: weekends and outside 8–18 local time wait for a person', () => {
    const set = setOf('timezone "Europe/Berlin"\n\nrule "refunds-out-of-hours-wait" {\n  effect require_approval\n  subjects "agent:*"\n  relation "create:refunds"\n  object "refund:*"\n  when time.weekday in ["sat", "sun"] or time.hour < 8 or time.hour >= 18\n}\n');
    const r = (iso: string) => decide(req({ action: 'create:refunds', resource: 'refund:1', subject: agent({ permissions: ['create:refunds'], capabilities: [{ name: 'create:refunds' }] }), now: Date.parse(iso) }), set).decision;
    expect(r('2026-03-30T06:00:00Z')).toBe('allow'); // Monday 08:00 CEST
    expect(r('2026-03-30T05:59:00Z')).toBe('approval_required'); // 07:59
    expect(r('2026-03-30T16:00:00Z')).toBe('approval_required'); // 18:00
    expect(r('2026-01-05T16:59:00Z')).toBe('allow'); // Monday 17:59 CET
    expect(r('2026-03-28T12:00:00Z')).toBe('approval_required'); // Saturday
    expect(r('not a time')).toBe('approval_required'); // no usable clock: fails closed
  });
  it('the same instant reads differently in different zones, and the clock is the request\'s, not the machine\'s', () => {
    const ny = denyWhen('time.hour == 20', 'timezone "America/New_York"\n\n');
    expect(ny(at('2026-03-30T00:00:00Z'))).toBe(true); // 20:00 EDT the day before
    expect(ny(at('2026-01-10T01:00:00Z'))).toBe(true); // 20:00 EST
    const fixed = at('2020-02-29T12:00:00Z');
    expect(denyWhen('time.date == "2020-02-29"')(fixed)).toBe(true);
  });
});

describe('subjects and grants', () => {
  const permit = (subjects: string, when = '') => setOf(`rule "p" {\n  effect permit\n  subjects ${subjects}\n  relation "update:todos"\n  object "todo:*"\n${when ? `  when ${when}\n` : ''}}\n`);
  const todo = (subject: SubjectFacts, p?: PersonFacts) => req({ action: 'update:todos', resource: 'todo:1', subject, ...(p ? { person: p } : {}) });
  const noGrant = { permissions: [], capabilities: [{ name: 'update:todos' }] };
  it('role:<name> matches an agent or a person holding the role', () => {
    const set = permit('"role:editor"');
    expect(decide(todo(agent({ ...noGrant, roles: ['editor'] })), set).reason).toBe('allowed');
    expect(decide(todo(agent(noGrant)), set).reason).toBe('not_granted: update:todos');
    const user: SubjectFacts = { type: 'user', id: 'u1', roles: ['editor'], groups: [], permissions: [], attributes: {} };
    expect(decide(todo(user), set).reason).toBe('allowed');
  });
  it('for a delegated agent both the agent and the person must be granted, each by a role or a permit rule', () => {
    const set = permit('"role:editor"');
    const a = agent({ ...noGrant, mode: 'delegated' });
    expect(decide(todo({ ...a, roles: ['editor'] }, person({ roles: ['editor'], permissions: [] })), set).reason).toBe('allowed');
    expect(decide(todo(a, person({ roles: ['editor'], permissions: [] })), set).reason).toBe('not_granted: update:todos');
    expect(decide(todo({ ...a, roles: ['editor'] }, person({ permissions: [] })), set).reason).toBe('not_granted: update:todos (person)');
    expect(decide(todo({ ...a, permissions: ['update:todos'] }, person({ roles: ['editor'], permissions: [] })), set).reason).toBe('allowed');
  });
  it('group:<name> matches a person in the group, and a delegated agent acting for one', () => {
    const set = permit('"group:eng"');
    const a = agent({ ...noGrant, mode: 'delegated', groups: ['eng'] });
    expect(decide(todo(a, person({ groups: ['eng'], permissions: [] })), set).reason).toBe('allowed');
    expect(decide(todo({ ...a, groups: [] }, person({ groups: [], permissions: [] })), set).reason).toBe('not_granted: update:todos');
  });
  it('a user has no capabilities: no capability gating, no capability limits', () => {
    const set = setOf('limits "update:todos" for "*" {\n  amount max 1\n}\n');
    const user: SubjectFacts = { type: 'user', id: 'u1', roles: [], groups: [], permissions: ['update:todos'], attributes: {} };
    expect(decide(todo(user), set).reason).toBe('allowed');
    expect(decide(todo(agent({ permissions: ['update:todos'], capabilities: [{ name: 'update:todos' }] })), set).reason).toBe('constraint_violated: amount required');
  });
  it('a permit rule grants only what a permission could: objects of the action\'s kind', () => {
    const set = setOf('rule "p" {\n  effect permit\n  subjects "agent:*"\n  relation "update:*"\n  object "*:*"\n}\n');
    expect(decide(todo(agent(noGrant)), set).reason).toBe('allowed');
    expect(decide(req({ action: 'update:todos', resource: 'doc:1', subject: agent(noGrant) }), set).reason).toBe('not_granted: update:todos');
  });
  it('deny rules still win over permit rules and roles', () => {
    const r = loadPolicySet({ files: [{ path: 'p.policy', text: 'rule "p" {\n  effect permit\n  subjects "agent:*"\n  relation "update:todos"\n  object "todo:*"\n}\n' }], rules: [{ id: 'd1', name: 'no', effect: 'deny', subjects: ['role:intern'], relation: 'update:todos', object: 'todo:*' }] });
    const d = decide(todo(agent({ ...noGrant, roles: ['intern'] })), r.policySet!);
    expect(d.reason).toBe('rule_denied: no');
    expect(d.cause).toEqual({ code: 'rule_denied', rule: 'no', ruleId: 'd1' });
  });
});
