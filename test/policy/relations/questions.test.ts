// Relationship questions in rule conditions: `person has viewer on resource`,
// `agent has editor on resource.folder`, `resource in "folder:legal" through parent`.
// Parsed with locations, printed back by fmt, checked against the model, decided in the
// decision order (an unanswerable question fails closed), and explained.
import { describe, expect, it } from 'vitest';
import { loadPolicySet } from '../../../src/policy/load.js';
import { parseExpr, parsePolicy } from '../../../src/policy/parser.js';
import { fmtExpr, formatFile } from '../../../src/policy/format.js';
import { decide } from '../../../src/policy/decide.js';
import { explainDecision } from '../../../src/policy/explain.js';
import { explainText } from '../../../src/cli/explain-text.js';
import { analyzePolicy } from '../../../src/policy/analyze.js';
import { MemoryIndex } from '../../../src/policy/relations/index.js';
import { parseRelationshipText, type Relationship } from '../../../src/policy/relations/tuple.js';
import type { DecisionRequest } from '../../../src/policy/types.js';
import type { PolicySet } from '../../../src/policy/compile.js';

const MODEL = `type user

type agent

type folder {
  relation parent: [folder]
  relation owner: [user]
  relation editor: [user, agent] or owner or editor from parent
  relation viewer: [user, agent] or editor or viewer from parent
}

type document {
  relation parent: [folder]
  relation viewer: [user, agent] or viewer from parent
}
`;

function load(rules: string): { set?: PolicySet; errors: string[] } {
  const r = loadPolicySet({ files: [{ path: 'q.policy', text: `policy "q" version 1\n\n${MODEL}\n${rules}` }] });
  return { ...(r.policySet ? { set: r.policySet } : {}), errors: r.diagnostics.filter((d) => d.severity === 'error').map((d) => `${d.line}:${d.col}: ${d.message}`) };
}

function setOf(rules: string): PolicySet {
  const r = load(rules);
  if (!r.set) throw new Error(r.errors.join('\n'));
  return r.set;
}

function index(...texts: string[]): MemoryIndex {
  const ix = new MemoryIndex();
  for (const t of texts) ix.add(parseRelationshipText(t) as Relationship);
  return ix;
}

const agent = (id: string, mode: 'delegated' | 'autonomous' = 'autonomous'): DecisionRequest['subject'] =>
  ({ type: 'agent', id, mode, roles: [], groups: [], permissions: ['read:documents'], attributes: {}, capabilities: [{ name: 'read:documents' }] });
const user = (id: string): DecisionRequest['subject'] => ({ type: 'user', id, roles: [], groups: [], permissions: ['read:documents'], attributes: {} });
const person = (id: string) => ({ id, roles: [], groups: [], permissions: ['read:documents'], attributes: {} });

function req(subject: DecisionRequest['subject'], resource: string, relationships: MemoryIndex | undefined, extra: Partial<DecisionRequest> = {}): DecisionRequest {
  return { subject, action: 'read:documents', resource, context: {}, now: 0, ...(relationships ? { relationships } : {}), ...extra };
}

describe('the language', () => {
  it('parses each form with locations, and fmt prints it back', () => {
    for (const text of [
      'person has viewer on resource',
      'agent has editor on resource.folder',
      'subject has owner on "folder:legal"',
      'resource in "folder:legal" through parent',
      'resource.folder in "folder:legal" through parent',
      'not (agent has viewer on resource) and context.amount > 3',
      'person has viewer on resource or resource in context.root through parent',
    ]) {
      const { expr, diagnostics } = parseExpr(text);
      expect(diagnostics).toEqual([]);
      expect(fmtExpr(expr!)).toBe(text);
    }
    const { expr } = parseExpr('amount > 1 and agent has editor on resource.folder');
    expect(expr).toMatchObject({ type: 'and', items: [{ type: 'cmp' }, {
      type: 'has', who: 'agent', relation: 'editor', object: { type: 'path', root: 'resource', segs: ['folder'], loc: { line: 1, col: 36 } },
      loc: { line: 1, col: 16 }, relationLoc: { line: 1, col: 26 },
    }] });
    const w = parseExpr('resource in "folder:legal" through parent').expr!;
    expect(w).toMatchObject({ type: 'within', object: { type: 'resource', loc: { col: 1 } }, ancestor: { type: 'lit', value: 'folder:legal', loc: { col: 13 } }, relation: 'parent', relationLoc: { col: 36 } });
  });

  it('keeps the old meaning of `in`, and of paths named like the new words', () => {
    expect(parseExpr('resource.kind in ["a", "b"]').expr).toMatchObject({ type: 'in' });
    expect(parseExpr('has == 1 and on == 2 and through == 3').expr).toMatchObject({ type: 'and' });
    expect(parseExpr('agent == "x"').expr).toMatchObject({ type: 'cmp' });
  });

  it('fmt round-trips a rule that asks relationship questions', () => {
    const text = `policy "q" version 1\n\nrule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "read:documents"\n  object "document:*"\n  when resource in "folder:legal" through parent and not (person has viewer on resource)\n}\n`;
    const parsed = parsePolicy('q.policy', text);
    expect(parsed.diagnostics).toEqual([]);
    expect(formatFile(parsed.file!)).toBe(text);
  });
});

describe('policy check', () => {
  const rule = (when: string, object = 'document:*') => `rule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "read:documents"\n  object "${object}"\n  when ${when}\n}\n`;

  it('accepts questions the model can answer', () => {
    expect(load(rule('person has viewer on resource')).errors).toEqual([]);
    expect(load(rule('agent has editor on resource.folder')).errors).toEqual([]);
    expect(load(rule('resource in "folder:legal" through parent')).errors).toEqual([]);
  });

  it('names unknown relations and types, impossible objects and non-direct `through` relations, at their place', () => {
    expect(load(rule('person has owner on resource')).errors).toEqual(['24:19: type document has no relation owner']);
    expect(load(rule('person has frobnicate on resource')).errors).toEqual(['24:19: unknown relation frobnicate: no type declares it']);
    expect(load(rule('person has viewer on "team:x"')).errors).toEqual(['24:29: the object: unknown type team']);
    expect(load(rule('person has viewer on "nocolon"')).errors[0]).toMatch(/^24:29: the object: object "nocolon" needs the form/);
    expect(load(rule('resource in "folder:legal" through viewer')).errors).toEqual([
      '24:43: "through viewer" follows relationships to objects: folder#viewer must be only direct objects ([type, ...], no usersets, wildcards or derived parts)',
      '24:43: "through viewer" follows relationships to objects: document#viewer must be only direct objects ([type, ...], no usersets, wildcards or derived parts)',
    ]);
    expect(load(rule('person has viewer on time.hour')).errors).toEqual(['24:29: time.hour cannot hold an object ("<type>:<id>" or {"type", "id"})']);
    const none = loadPolicySet({ files: [{ path: 'n.policy', text: `policy "n" version 1\n\n${rule('person has viewer on resource')}` }] });
    expect(none.diagnostics.map((d) => d.message)).toContain('rule "r" asks a relationship question, but no types and relations are declared');
  });

  it('does not call a relationship question unsatisfiable', () => {
    const r = load(rule('person has viewer on resource'));
    expect(analyzePolicy(r.set!.compiled.files, []).filter((d) => d.code === 'unsatisfiable')).toEqual([]);
  });
});

describe('decisions', () => {
  const set = setOf(`rule "agents-stay-out-of-legal" {
  effect deny
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
  when resource in "folder:legal" through parent
}

rule "only-what-the-person-sees" {
  effect deny
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
  when not (person has viewer on resource)
}

rule "editors-of-the-folder" {
  effect permit
  subjects "user:*"
  relation "write:documents"
  object "document:*"
  when subject has editor on resource.folder
}
`);
  const ix = index(
    'folder:legal#parent@folder:root',
    'folder:contracts#parent@folder:legal',
    'folder:deep#parent@folder:contracts',
    'document:nda#parent@folder:deep',
    'document:memo#parent@folder:root',
    'folder:root#viewer@user:anne',
    'folder:contracts#editor@user:erin',
  );

  it('a deny rule on the subtree of a folder, transitively', () => {
    const d = decide(req(agent('bot', 'delegated'), 'document:nda', ix, { person: person('anne') }), set);
    expect(d).toMatchObject({ decision: 'deny', reason: 'rule_denied: agents-stay-out-of-legal' });
    expect(decide(req(agent('bot', 'delegated'), 'document:memo', ix, { person: person('anne') }), set)).toMatchObject({ decision: 'allow' });
    // The folder itself is inside itself.
    expect(decide(req(agent('bot', 'delegated'), 'folder:legal', ix, { person: person('anne'), action: 'read:folders' }), set).decision).toBe('deny');
  });

  it('asks whether the person holds a relation on the resource', () => {
    expect(decide(req(agent('bot', 'delegated'), 'document:memo', ix, { person: person('zed') }), set)).toMatchObject({ decision: 'deny', reason: 'rule_denied: only-what-the-person-sees' });
    // An autonomous agent has no person: the question cannot be answered, the deny rule applies (fail closed).
    const d = explainDecision(req(agent('bot'), 'document:memo', ix), set);
    expect(d).toMatchObject({ decision: 'deny', reason: 'rule_denied: only-what-the-person-sees' });
    const step = d.trace.find((t) => t.rule === 'only-what-the-person-sees')!;
    expect(step.why).toBe('fails closed, applies: person has viewer on resource: the agent acts for no person');
    expect(step.reads).toEqual([{ path: 'person has viewer on resource', value: undefined, present: false }]);
  });

  it('asks about an object a path names, as "type:id" or {"type", "id"}; a permit grants nothing when it cannot be answered', () => {
    const write = (attrs: Record<string, unknown>, who = 'erin') => req(user(who), 'document:x', ix, { action: 'write:documents', resourceAttributes: attrs, subject: { ...user(who), permissions: [] } });
    expect(decide(write({ folder: 'folder:deep' }), set).decision).toBe('allow');
    expect(decide(write({ folder: { type: 'folder', id: 'deep' } }), set).decision).toBe('allow');
    expect(decide(write({ folder: 'folder:legal' }), set).decision).toBe('deny');
    expect(decide(write({ folder: 'folder:deep' }, 'anne'), set).decision).toBe('deny');
    const missing = explainDecision(write({}), set);
    expect(missing.decision).toBe('deny');
    expect(missing.trace.find((t) => t.rule === 'editors-of-the-folder')!.why).toBe('cannot be evaluated, grants nothing: subject has editor on resource.folder: resource.folder is missing');
    const bad = explainDecision(write({ folder: 42 }), set);
    expect(bad.trace.find((t) => t.rule === 'editors-of-the-folder')!.why).toContain('resource.folder is not an object');
    const unknownRel = explainDecision(write({ folder: 'document:nda' }), set);
    expect(unknownRel.decision).toBe('deny');
    expect(unknownRel.trace.find((t) => t.rule === 'editors-of-the-folder')!.why).toBe('cannot be evaluated, grants nothing: subject has editor on resource.folder: type document has no relation editor');
  });

  it('explains the path that answered the question', () => {
    const d = explainDecision(req(agent('bot', 'delegated'), 'document:nda', ix, { person: person('anne') }), set);
    const step = d.trace.find((t) => t.rule === 'agents-stay-out-of-legal')!;
    expect(step.reads).toEqual([{ path: 'resource in "folder:legal" through parent', value: true, present: true }]);
    expect(step.path).toEqual(['document:nda#parent@folder:deep', 'folder:deep#parent@folder:contracts', 'folder:contracts#parent@folder:legal']);
    const text = explainText(req(agent('bot', 'delegated'), 'document:nda', ix, { person: person('anne') }), d, []);
    expect(text).toContain('resource in "folder:legal" through parent');
  });

  it('without relationships a question cannot be answered: it fails closed', () => {
    const d = explainDecision(req(agent('bot', 'delegated'), 'document:memo', undefined, { person: person('anne') }), set);
    expect(d).toMatchObject({ decision: 'deny', reason: 'rule_denied: agents-stay-out-of-legal' });
    expect(d.trace.find((t) => t.rule === 'agents-stay-out-of-legal')!.why).toBe('fails closed, applies: resource in "folder:legal" through parent: no relationships were given to the decision');
  });

  it('cycles end; more than 25 hops fails closed', () => {
    const cyc = index('folder:a#parent@folder:b', 'folder:b#parent@folder:a', 'document:d#parent@folder:a', 'folder:root#viewer@user:anne', 'document:d#viewer@user:anne');
    expect(decide(req(agent('bot', 'delegated'), 'document:d', cyc, { person: person('anne') }), set).decision).toBe('allow');
    const chain: string[] = ['document:far#parent@folder:f0', 'document:far#viewer@user:anne', 'document:near#parent@folder:f3', 'document:near#viewer@user:anne'];
    for (let i = 0; i < 30; i++) chain.push(`folder:f${i}#parent@folder:f${i + 1}`);
    const long = index(...chain);
    // The chain never reaches folder:legal, but saying so needs more than 25 hops: fail closed.
    const d = explainDecision(req(agent('bot', 'delegated'), 'document:far', long, { person: person('anne') }), set);
    expect(d).toMatchObject({ decision: 'deny', reason: 'rule_denied: agents-stay-out-of-legal' });
    expect(d.trace.find((t) => t.rule === 'agents-stay-out-of-legal')!.why).toContain('resolution_too_complex');
    // 25 hops is within the limit.
    const exact = index('document:e#parent@folder:g1', 'document:e#viewer@user:anne', ...Array.from({ length: 24 }, (_, i) => `folder:g${i + 1}#parent@folder:g${i + 2}`));
    expect(decide(req(agent('bot', 'delegated'), 'document:e', exact, { person: person('anne') }), set).decision).toBe('allow');
    const reach = setOf(`rule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "read:documents"\n  object "document:*"\n  when resource in "folder:g25" through parent\n}\n`);
    expect(decide(req(agent('bot'), 'document:e', exact), reach).decision).toBe('deny');
    expect(decide(req(agent('bot'), 'document:e', exact), reach).reason).toBe('rule_denied: r');
  });

  it('a relationship the model does not allow is not followed', () => {
    const ix2 = index('document:z#parent@folder:legal');
    const other = loadPolicySet({ files: [{ path: 'q.policy', text: `policy "q" version 1\n\ntype user\ntype agent\ntype folder {\n  relation parent: [folder]\n}\ntype document {\n  relation parent: [user]\n}\n\nrule "r" {\n  effect deny\n  subjects "agent:*"\n  relation "read:documents"\n  object "document:*"\n  when resource in "folder:legal" through parent\n}\n` }] });
    expect(other.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    expect(decide(req(agent('bot'), 'document:z', ix2), other.policySet!).decision).toBe('allow');
    expect(decide(req(agent('bot'), 'document:z', ix2), set).decision).toBe('deny');
  });
});
