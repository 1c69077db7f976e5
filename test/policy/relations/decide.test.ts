// Relations in decisions: a relation is the permission `<relation>:<plural>` on its objects,
// granted in the grant step to the user or agent that holds it (both, for a delegated agent);
// a relation that cannot be resolved grants nothing; explain shows the path or why not.
import { describe, expect, it } from 'vitest';
import { loadPolicySet } from '../../../src/policy/load.js';
import { decide } from '../../../src/policy/decide.js';
import { explainDecision } from '../../../src/policy/explain.js';
import { explainText } from '../../../src/cli/explain-text.js';
import { MemoryIndex } from '../../../src/policy/relations/index.js';
import { parseRelationshipText, type Relationship } from '../../../src/policy/relations/tuple.js';
import type { DecisionRequest } from '../../../src/policy/types.js';

const POLICY = `policy "docs" version 1

type user

type agent

type doc {
  relation parent: [doc]
  relation blocked: [user, agent]
  relation viewer: ([user, agent, user:* with c] or viewer from parent) but not blocked
}

condition c(hour: int) {
  hour < 18
}

rule "no-viewing-drafts" {
  effect deny
  subjects "agent:*", "user:*"
  relation "viewer:docs"
  object "doc:draft"
}
`;

const loaded = loadPolicySet({ files: [{ path: 'docs.policy', text: POLICY }] });
if (!loaded.policySet) throw new Error(JSON.stringify(loaded.diagnostics));
const set = loaded.policySet;

function index(...texts: string[]): MemoryIndex {
  const ix = new MemoryIndex();
  for (const t of texts) ix.add(parseRelationshipText(t) as Relationship);
  return ix;
}

function req(subject: DecisionRequest['subject'], resource: string, relationships?: MemoryIndex, extra: Partial<DecisionRequest> = {}): DecisionRequest {
  return { subject, action: 'viewer:docs', resource, context: {}, now: 0, ...(relationships ? { relationships } : {}), ...extra };
}

const user = (id: string): DecisionRequest['subject'] => ({ type: 'user', id, roles: [], groups: [], permissions: [], attributes: {} });
const agent = (id: string, mode: 'delegated' | 'autonomous'): DecisionRequest['subject'] => ({ type: 'agent', id, mode, roles: [], groups: [], permissions: [], attributes: {}, capabilities: [{ name: 'viewer:docs' }] });
const person = (id: string) => ({ id, roles: [], groups: [], permissions: [], attributes: {} });

describe('relations grant in the decision order', () => {
  const ix = index('doc:a#viewer@user:anne', 'doc:b#parent@doc:a', 'doc:a#viewer@agent:bot', 'doc:draft#viewer@user:anne', 'doc:b#blocked@user:bert', 'doc:a#viewer@user:bert');

  it('a user holding the relation is granted; one without is not; no relationships grant nothing', () => {
    expect(decide(req(user('anne'), 'doc:b', ix), set)).toMatchObject({ decision: 'allow', reason: 'allowed' });
    expect(decide(req(user('bert'), 'doc:b', ix), set)).toMatchObject({ decision: 'deny', reason: 'not_granted: viewer:docs' });
    expect(decide(req(user('anne'), 'doc:b'), set)).toMatchObject({ decision: 'deny', reason: 'not_granted: viewer:docs' });
  });

  it('deny rules apply to a relation as to any action', () => {
    expect(decide(req(user('anne'), 'doc:draft', ix), set)).toMatchObject({ decision: 'deny', reason: 'rule_denied: no-viewing-drafts' });
  });

  it('a delegated agent and its person must both hold it; an autonomous agent alone', () => {
    expect(decide(req(agent('bot', 'delegated'), 'doc:b', ix, { person: person('anne') }), set)).toMatchObject({ decision: 'allow' });
    expect(decide(req(agent('bot', 'delegated'), 'doc:b', ix, { person: person('zoe') }), set)).toMatchObject({ decision: 'deny', reason: 'not_granted: viewer:docs (person)' });
    expect(decide(req(agent('bot', 'autonomous'), 'doc:b', ix), set)).toMatchObject({ decision: 'allow' });
    expect(decide(req(agent('other', 'autonomous'), 'doc:b', ix), set)).toMatchObject({ decision: 'deny', reason: 'not_granted: viewer:docs' });
  });

  it('a relation that cannot be resolved fails closed: more than 25 hops, a missing condition parameter', () => {
    const chain = Array.from({ length: 30 }, (_, i) => `doc:c${i}#parent@doc:c${i + 1}`);
    const deep = index(...chain, 'doc:c30#viewer@user:anne');
    const d = decide(req(user('anne'), 'doc:c0', deep), set);
    expect(d).toMatchObject({ decision: 'deny', reason: 'not_granted: viewer:docs' });
    expect(d.trace.find((t) => t.check.includes('holds relation'))?.why).toMatch(/fails closed, grants nothing: resolving the relation needs more than 25 hops/);
    const wild = index('doc:w#viewer@user:*');
    wild.add({ object: 'doc:w', relation: 'viewer', subject: 'user:*', condition: { name: 'c' } });
    expect(decide(req(user('zed'), 'doc:w', wild), set).trace.find((t) => t.check.includes('holds relation'))?.why).toBe('fails closed, grants nothing: condition c: parameter hour is missing from the context');
    expect(decide(req(user('zed'), 'doc:w', wild, { context: { hour: 9 } }), set)).toMatchObject({ decision: 'allow' });
  });

  it('explain shows the path that granted it, or why none exists', () => {
    const r = req(user('anne'), 'doc:b', ix);
    expect(explainText(r, explainDecision(r, set), [])).toContain('path: doc:b#parent@doc:a → doc:a#viewer@user:anne');
    const b = req(user('bert'), 'doc:b', ix);
    expect(explainText(b, explainDecision(b, set), [])).toContain('viewer would hold through doc:b#parent@doc:a → doc:a#viewer@user:bert, but "but not blocked" removes it: doc:b#blocked@user:bert');
  });
});
