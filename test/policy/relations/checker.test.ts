// The compiled checker against the reference interpreter, on random models and relationships
// (cycles, wildcards, usersets, conditions with missing parameters, relationships the model
// does not allow), and list-objects and list-subjects against check. fast-check prints the
// seed and the shrunk counterexample of any failure; runs are bounded.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { RelationModel } from '../../../src/policy/relations/model.js';
import { RelationChecker, type CheckResult } from '../../../src/policy/relations/checker.js';
import { referenceCheck, type Tri } from '../../../src/policy/relations/reference.js';
import type { Relationship } from '../../../src/policy/relations/tuple.js';
import { arbContext, arbModelText, arbRelationships, arbRequest, OBJECTS, RELATIONS, TYPES, USERS } from './arbitraries.js';
import { indexOf, modelOf } from './fixtures.js';


/** The relationships as the index keeps them: the last write of one (object, relation, subject) wins. */
function effective(rels: Relationship[]): Relationship[] {
  const m = new Map<string, Relationship>();
  for (const r of rels) m.set(`${r.object}#${r.relation}@${r.subject}`, r);
  return [...m.values()];
}

const tri = (r: CheckResult): Tri => ('error' in r ? 2 : r.allowed ? 1 : 0);
const RUNS = { numRuns: 150 };

describe('the compiled checker', () => {
  it('answers as the reference interpreter does', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, fc.array(arbRequest, { minLength: 1, maxLength: 12 }), (text, rels, reqs) => {
      const model = modelOf(text);
      const checker = new RelationChecker(model, indexOf(rels));
      const tuples = effective(rels);
      for (const q of reqs) {
        const got = checker.check(q.object, q.relation, q.subject, { context: q.context });
        expect(tri(got), JSON.stringify(q)).toBe(referenceCheck(model, tuples, q));
      }
    }), RUNS);
  });

  it('the path of an allowed check is made of stored relationships', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRequest, (text, rels, q) => {
      const checker = new RelationChecker(modelOf(text), indexOf(rels));
      const r = checker.check(q.object, q.relation, q.subject, { context: q.context, path: true });
      if (!('allowed' in r) || !r.allowed) return;
      const stored = new Set(effective(rels).map((x) => `${x.object}#${x.relation}@${x.subject}`));
      for (const p of r.path) expect(stored.has(`${p.object}#${p.relation}@${p.subject}`)).toBe(true);
      // Only a subject's own userset is allowed without any relationship.
      if (!r.path.length) expect(q.subject).toMatch(/#/);
    }), RUNS);
  });

  it('contextual relationships answer as if they were stored', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRelationships, arbRequest, (text, stored, extra, q) => {
      const model = modelOf(text);
      const withExtra = new RelationChecker(model, indexOf(stored)).check(q.object, q.relation, q.subject, { context: q.context, contextual: extra });
      // Both kept, as an overlay keeps them (a contextual one beside a stored one of the same key);
      // one the model does not allow makes the request an error.
      expect(tri(withExtra)).toBe(referenceCheck(model, [...effective(stored), ...effective(extra)], { ...q, contextual: extra }));
    }), RUNS);
  });

  it('list-objects gives exactly the objects check allows', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRequest, fc.constantFrom(...TYPES), (text, rels, q, type) => {
      const checker = new RelationChecker(modelOf(text), indexOf(rels));
      const listed = checker.listObjects(q.subject, q.relation, type, { context: q.context });
      const results = OBJECTS.filter((o) => o.startsWith(type + ':')).map((o) => [o, tri(checker.check(o, q.relation, q.subject, { context: q.context }))] as const);
      if (listed.error) {
        expect(listed.error.code).not.toBe('invalid_request');
        expect(results.some(([, t]) => t === 2)).toBe(true);
        return;
      }
      expect(listed.objects).toEqual(results.filter(([, t]) => t === 1).map(([o]) => o));
    }), RUNS);
  });

  it('list-subjects gives what check allows (a wildcard standing for the entities it grants)', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRequest, fc.constantFrom('user', ...TYPES.flatMap((t) => RELATIONS.map((r) => `${t}#${r}`))), (text, rels, q, filter) => {
      const checker = new RelationChecker(modelOf(text), indexOf(rels));
      const object = q.object === 't1:unknown' ? 't1:o1' : q.object;
      const listed = checker.listSubjects(object, q.relation, filter, { context: q.context });
      const universe = filter === 'user' ? [...USERS, 'user:*'] : OBJECTS.filter((o) => o.startsWith(filter.split('#')[0] + ':')).map((o) => `${o}#${filter.split('#')[1]}`);
      const results = universe.map((s) => [s, tri(checker.check(object, q.relation, s, { context: q.context }))] as const);
      if (listed.error) {
        expect(results.some(([, t]) => t === 2) || listed.error.code === 'condition_error' || listed.error.code === 'resolution_too_complex').toBe(true);
        return;
      }
      for (const s of listed.subjects) expect(tri(checker.check(object, q.relation, s, { context: q.context })), s).toBe(1);
      const wildcard = listed.subjects.includes('user:*');
      for (const [s, t] of results) if (t === 1 && !(wildcard && s.startsWith('user:'))) expect(listed.subjects, s).toContain(s);
    }), RUNS);
  });

  it('list-subjects leaving out what errs gives exactly what check allows (as a search does)', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRequest, fc.constantFrom('user', ...TYPES.flatMap((t) => RELATIONS.map((r) => `${t}#${r}`))), (text, rels, q, filter) => {
      const checker = new RelationChecker(modelOf(text), indexOf(rels));
      const object = q.object === 't1:unknown' ? 't1:o1' : q.object;
      const listed = checker.listSubjects(object, q.relation, filter, { context: q.context, omitErrors: true });
      if (listed.error) {
        expect(listed.error.code).toBe('invalid_request');
        return;
      }
      const universe = filter === 'user' ? [...USERS, 'user:*'] : OBJECTS.filter((o) => o.startsWith(filter.split('#')[0] + ':')).map((o) => `${o}#${filter.split('#')[1]}`);
      for (const s of listed.subjects) expect(tri(checker.check(object, q.relation, s, { context: q.context })), s).toBe(1);
      const wildcard = listed.subjects.includes('user:*');
      for (const s of universe) {
        if (wildcard && s.startsWith('user:')) continue;
        if (tri(checker.check(object, q.relation, s, { context: q.context })) === 1) expect(listed.subjects, s).toContain(s);
      }
    }), RUNS);
  });

  it('add then remove leaves the answers of the index without them', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRelationships, fc.array(arbRequest, { maxLength: 6 }), (text, keep, drop, reqs) => {
      const model = modelOf(text);
      const ix = indexOf(keep);
      const keys = new Set(keep.map((r) => `${r.object}#${r.relation}@${r.subject}`));
      const dropped = drop.filter((r) => !keys.has(`${r.object}#${r.relation}@${r.subject}`));
      for (const r of dropped) ix.add(r);
      for (const r of dropped) ix.remove(r);
      expect(ix.size).toBe(effective(keep).length);
      const checker = new RelationChecker(model, ix);
      for (const q of reqs) expect(tri(checker.check(q.object, q.relation, q.subject, { context: q.context }))).toBe(referenceCheck(model, effective(keep), q));
    }), RUNS);
  });
});

describe('the checker on chosen cases', () => {
  const model = modelOf(`type user

type group {
  relation member: [user, user:*, group#member]
}

type doc {
  relation parent: [doc]
  relation blocked: [user]
  relation owner: [user]
  relation viewer: ([user, user:*, group#member with c] or owner or viewer from parent) but not blocked
}

condition c(x: int, limit: int) {
  x < limit
}
`);

  it('a wildcard viewer but not a blocked user (OpenFGA semantics)', () => {
    const c = new RelationChecker(model, indexOf([{ object: 'doc:1', relation: 'viewer', subject: 'user:*' }, { object: 'doc:1', relation: 'blocked', subject: 'user:anne' }]));
    expect(c.check('doc:1', 'viewer', 'user:anne')).toEqual({ allowed: false, path: [] });
    expect(c.check('doc:1', 'viewer', 'user:bob', { path: true })).toEqual({ allowed: true, path: [{ object: 'doc:1', relation: 'viewer', subject: 'user:*' }] });
    expect(c.check('doc:1', 'viewer', 'user:*')).toMatchObject({ allowed: true });
    expect(c.listSubjects('doc:1', 'viewer', 'user')).toEqual({ subjects: ['user:*'] });
  });

  it('cycles are false; more than 25 hops is an error of its own', () => {
    const cycle = [{ object: 'group:a', relation: 'member', subject: 'group:b#member' }, { object: 'group:b', relation: 'member', subject: 'group:a#member' }];
    expect(new RelationChecker(model, indexOf(cycle)).check('group:a', 'member', 'user:x')).toEqual({ allowed: false, path: [] });
    const chain = Array.from({ length: 30 }, (_, i) => ({ object: `doc:${i}`, relation: 'parent', subject: `doc:${i + 1}` }));
    chain.push({ object: 'doc:30', relation: 'owner', subject: 'user:anne' });
    const deep = new RelationChecker(model, indexOf(chain));
    expect(deep.check('doc:0', 'viewer', 'user:anne')).toEqual({ error: { code: 'resolution_too_complex', message: expect.stringContaining('25') } });
    expect(deep.check('doc:20', 'viewer', 'user:anne')).toMatchObject({ allowed: true });
  });

  it('a condition: stored context wins, the request supplies the rest, a missing parameter is an error naming it', () => {
    const c = new RelationChecker(model, indexOf([
      { object: 'doc:1', relation: 'viewer', subject: 'group:g#member', condition: { name: 'c', context: { limit: 5 } } },
      { object: 'group:g', relation: 'member', subject: 'user:anne' },
    ]));
    expect(c.check('doc:1', 'viewer', 'user:anne', { context: { x: 3, limit: 1 } })).toMatchObject({ allowed: true });
    expect(c.check('doc:1', 'viewer', 'user:anne', { context: { x: 7 } })).toMatchObject({ allowed: false });
    expect(c.check('doc:1', 'viewer', 'user:anne')).toEqual({ error: { code: 'condition_error', message: 'condition c: parameter x is missing from the context', missing: 'x' } });
    expect(c.listObjects('user:anne', 'viewer', 'doc', { context: { x: 1 } })).toEqual({ objects: ['doc:1'] });
  });

  it('relationships the model does not allow are ignored', () => {
    const c = new RelationChecker(model, indexOf([
      { object: 'doc:1', relation: 'viewer', subject: 'group:g#member' },
      { object: 'doc:1', relation: 'owner', subject: 'group:g#member' },
      { object: 'doc:1', relation: 'viewer', subject: 'user:bob', condition: { name: 'undeclared' } },
      { object: 'doc:1', relation: 'gone', subject: 'user:carl' },
      { object: 'group:g', relation: 'member', subject: 'user:anne' },
    ]));
    for (const u of ['user:anne', 'user:bob', 'user:carl']) expect(c.check('doc:1', 'viewer', u)).toEqual({ allowed: false, path: [] });
    expect(c.check('doc:1', 'gone', 'user:carl')).toEqual({ error: { code: 'invalid_request', message: 'type doc has no relation gone' } });
  });

  it('list-subjects with a userset filter gives the object\'s own usersets where one relation derives from another', () => {
    const c = new RelationChecker(model, indexOf([{ object: 'doc:1', relation: 'owner', subject: 'user:anne' }]));
    expect(c.listSubjects('doc:1', 'viewer', 'doc#owner')).toEqual({ subjects: ['doc:1#owner'] });
    expect(c.listSubjects('group:g', 'member', 'group#member')).toEqual({ subjects: ['group:g#member'] });
  });
});

describe('random contexts are harmless', () => {
  it('a context of any shape gives an answer or a named error, never a throw', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, arbRequest, fc.oneof(arbContext, fc.dictionary(fc.constantFrom('x', 'limit'), fc.jsonValue())), (text, rels, q, ctx) => {
      const r = new RelationChecker(modelOf(text), indexOf(rels)).check(q.object, q.relation, q.subject, { context: ctx as Record<string, unknown> });
      expect('allowed' in r || ('error' in r && typeof r.error.message === 'string')).toBe(true);
    }), { numRuns: 60 });
  });
});

describe('OpenFGA\'s rules for what a request may name, hop limits and cycles', () => {
  /** The compiled answer and the reference interpreter's, which must agree. */
  const both = (model: RelationModel, rels: Relationship[], q: { object: string; relation: string; subject: string; context?: Record<string, unknown>; contextual?: Relationship[] }) => {
    const got = new RelationChecker(model, indexOf(rels)).check(q.object, q.relation, q.subject, { context: q.context, contextual: q.contextual });
    expect(tri(got), JSON.stringify(q)).toBe(referenceCheck(model, [...effective(rels), ...(q.contextual ?? [])], q));
    return got;
  };
  const docs = modelOf(`type user
type team {
  relation member: [user]
}
type doc {
  relation parent: [team]
  relation viewer: [user]
  relation member_view: member from parent
}
`);

  it('a contextual relationship the model does not allow makes check, list-objects and list-subjects an error naming it', () => {
    const bad: Relationship[][] = [
      [{ object: 'doc:1', relation: 'viewer', subject: 'user:*' }],
      [{ object: 'folder:x', relation: 'viewer', subject: 'user:a' }],
      [{ object: 'doc:1', relation: 'editor', subject: 'user:a' }],
      [{ object: 'doc:1', relation: 'viewer', subject: 'team:t#nothing' }],
      [{ object: 'doc:1', relation: 'parent', subject: 'team:*' }],
      [{ object: 'doc:1', relation: 'member_view', subject: 'user:a' }],
      // Unrelated to the question, and after a good one: still the whole request.
      [{ object: 'doc:2', relation: 'viewer', subject: 'user:a' }, { object: 'team:t', relation: 'member', subject: 'doc:9' }],
    ];
    const c = new RelationChecker(docs, indexOf([{ object: 'doc:1', relation: 'viewer', subject: 'user:a' }]));
    for (const contextual of bad) {
      const wrong = contextual[contextual.length - 1]!;
      const error = { code: 'invalid_relationship', message: expect.stringContaining(`contextual relationship ${wrong.object}#${wrong.relation}@${wrong.subject}: `) };
      expect(both(docs, [{ object: 'doc:1', relation: 'viewer', subject: 'user:a' }], { object: 'doc:1', relation: 'viewer', subject: 'user:a', contextual })).toEqual({ error });
      expect(c.listObjects('user:a', 'viewer', 'doc', { contextual })).toEqual({ error });
      expect(c.listSubjects('doc:1', 'viewer', 'user', { contextual })).toEqual({ error });
    }
    const good = [{ object: 'doc:2', relation: 'viewer', subject: 'user:a' }];
    expect(c.check('doc:2', 'viewer', 'user:a', { contextual: good })).toMatchObject({ allowed: true });
    expect(c.listObjects('user:a', 'viewer', 'doc', { contextual: good })).toEqual({ objects: ['doc:1', 'doc:2'] });
  });

  it('the subject must be of a type of the model, a userset of a relation of its type; a known type the relation never takes is plainly false', () => {
    // A stored relationship the model does not allow gives folder:x a symbol: the fast path must not answer for it.
    const rels = [{ object: 'doc:1', relation: 'viewer', subject: 'folder:x' }, { object: 'doc:1', relation: 'viewer', subject: 'user:a' }];
    const c = new RelationChecker(docs, indexOf(rels));
    const cases: [string, string][] = [
      ['folder:x', 'subject folder:x: unknown type folder'],
      ['folder:x#writer', 'subject folder:x#writer: unknown type folder'],
      ['doc:x#writer', 'subject doc:x#writer: type doc has no relation writer'],
      ['a:b:c', 'subject a:b:c: unknown type a'],
    ];
    for (const [subject, message] of cases) {
      expect(both(docs, rels, { object: 'doc:1', relation: 'viewer', subject })).toEqual({ error: { code: 'invalid_request', message } });
      expect(c.listObjects(subject, 'viewer', 'doc')).toEqual({ error: { code: 'invalid_request', message } });
    }
    expect(both(docs, rels, { object: 'doc:1', relation: 'viewer', subject: 'team:t' })).toEqual({ allowed: false, path: [] });
    expect(both(docs, rels, { object: 'doc:1', relation: 'viewer', subject: 'team:t#member' })).toEqual({ allowed: false, path: [] });
    expect(c.listObjects('team:t', 'viewer', 'doc')).toEqual({ objects: [] });
  });

  /** A chain a1: a2, ..., a(n-1): a(n), a(n): [user]: n - 1 computed hops. */
  const chain = (n: number) => modelOf(`type user\ntype resource {\n${Array.from({ length: n }, (_, i) => i + 1 === n ? `  relation a${n}: [user]` : `  relation a${i + 1}: a${i + 2}`).join('\n')}\n}\n`);

  it('a chain of 26 relations is too complex, one of 25 resolves; also on an object nothing is stored on, and in list-objects', () => {
    const deep = chain(26), ok = chain(25);
    const tooComplex = { error: { code: 'resolution_too_complex', message: expect.stringContaining('25') } };
    const jon = (n: number) => [{ object: 'resource:1', relation: `a${n}`, subject: 'user:jon' }];
    expect(both(deep, jon(26), { object: 'resource:1', relation: 'a1', subject: 'user:jon' })).toEqual(tooComplex);
    expect(both(deep, jon(26), { object: 'resource:none', relation: 'a1', subject: 'user:jon' })).toEqual(tooComplex);
    expect(both(deep, [], { object: 'resource:none', relation: 'a1', subject: 'user:jon' })).toEqual(tooComplex);
    expect(both(deep, jon(26), { object: 'resource:1', relation: 'a2', subject: 'user:jon' })).toMatchObject({ allowed: true });
    expect(new RelationChecker(deep, indexOf(jon(26))).listObjects('user:jon', 'a1', 'resource')).toEqual(tooComplex);
    // list-subjects walks every path, whether or not it finds anyone.
    expect(new RelationChecker(deep, indexOf(jon(26))).listSubjects('resource:1', 'a1', 'user')).toEqual(tooComplex);
    expect(new RelationChecker(deep, indexOf(jon(26))).listSubjects('resource:none', 'a1', 'user')).toEqual(tooComplex);
    expect(new RelationChecker(ok, indexOf(jon(25))).listSubjects('resource:none', 'a1', 'user')).toEqual({ subjects: [] });
    expect(new RelationChecker(ok, indexOf(jon(25))).listSubjects('resource:1', 'a1', 'user')).toEqual({ subjects: ['user:jon'] });
    expect(both(ok, jon(25), { object: 'resource:1', relation: 'a1', subject: 'user:jon' })).toMatchObject({ allowed: true });
    expect(both(ok, jon(25), { object: 'resource:none', relation: 'a1', subject: 'user:jon' })).toEqual({ allowed: false, path: [] });
    expect(new RelationChecker(ok, indexOf(jon(25))).listObjects('user:jon', 'a1', 'resource')).toEqual({ objects: ['resource:1'] });
  });

  it('a userset subject with contextual relationships, asked about an object nothing stores, on a loop of computed relations: false', () => {
    // The object gets a symbol of the request's own; it must not be the subject's.
    const m = modelOf(`type user
type t0 {
  relation parent: [t0]
  relation r0: r1
  relation r1: r0 or r0 from parent
}
type t1 {
  relation parent: [t0]
  relation r1: [user]
}
`);
    const contextual = [{ object: 't1:o1', relation: 'parent', subject: 't0:o0' }];
    for (const object of ['t0:o0', 't0:o1']) expect(both(m, [], { object, relation: 'r0', subject: 't1:o1#r1', contextual })).toEqual({ allowed: false, path: [] });
    expect(new RelationChecker(m, indexOf([])).listObjects('t1:o1#r1', 'r0', 't0', { contextual })).toEqual({ objects: [] });
  });

  it('list-subjects is an error when a condition on any relationship it reads cannot be evaluated, even if another path grants', () => {
    const m = modelOf(`type user
type folder {
  relation viewer: [user]
}
type doc {
  relation parent: [folder with s_cond, folder with x_cond]
  relation viewer: [user] or viewer from parent
}
condition s_cond(s: string) {
  s == "hello"
}
condition x_cond(x: int) {
  x < 10
}
`);
    const c = new RelationChecker(m, indexOf([
      { object: 'doc:1', relation: 'parent', subject: 'folder:a', condition: { name: 's_cond' } },
      { object: 'doc:1', relation: 'parent', subject: 'folder:b', condition: { name: 'x_cond' } },
      { object: 'folder:a', relation: 'viewer', subject: 'user:jon' },
      { object: 'folder:b', relation: 'viewer', subject: 'user:jon' },
    ]));
    expect(c.check('doc:1', 'viewer', 'user:jon', { context: { s: 'hello' } })).toMatchObject({ allowed: true });
    expect(c.listSubjects('doc:1', 'viewer', 'user', { context: { s: 'hello' } })).toEqual({ error: { code: 'condition_error', message: expect.stringContaining('x'), missing: 'x' } });
    expect(c.listSubjects('doc:1', 'viewer', 'user', { context: { s: 'hello', x: 20 } })).toEqual({ subjects: ['user:jon'] });
    // A false condition is not followed.
    expect(c.listSubjects('doc:1', 'viewer', 'user', { context: { s: 'bye', x: 20 } })).toEqual({ subjects: [] });
  });

  it('a cycle under either side of "but not" makes it false; or and and treat a cycle as false', () => {
    const m = modelOf(`type user
type doc {
  relation restricted: [user, doc#open]
  relation open: [user] but not restricted
  relation loop: [doc#loop]
  relation either: [user] or loop
  relation base_loops: loop but not restricted
}
`);
    const rels = [
      { object: 'doc:1', relation: 'open', subject: 'user:jon' },
      { object: 'doc:1', relation: 'restricted', subject: 'doc:1#open' },
      { object: 'doc:2', relation: 'open', subject: 'user:jon' },
      { object: 'doc:1', relation: 'loop', subject: 'doc:1#loop' },
      { object: 'doc:1', relation: 'either', subject: 'user:jon' },
    ];
    expect(both(m, rels, { object: 'doc:1', relation: 'open', subject: 'user:jon' })).toEqual({ allowed: false, path: [] });
    expect(both(m, rels, { object: 'doc:2', relation: 'open', subject: 'user:jon' })).toMatchObject({ allowed: true });
    expect(both(m, rels, { object: 'doc:1', relation: 'either', subject: 'user:jon' })).toMatchObject({ allowed: true });
    expect(both(m, rels, { object: 'doc:1', relation: 'base_loops', subject: 'user:jon' })).toEqual({ allowed: false, path: [] });
    const c = new RelationChecker(m, indexOf(rels));
    expect(c.listObjects('user:jon', 'open', 'doc')).toEqual({ objects: ['doc:2'] });
    expect(c.listSubjects('doc:1', 'open', 'user')).toEqual({ subjects: [] });
  });
});
