// list-objects by reverse expansion against check: on random models and graphs (with contextual
// relationships, every kind of subject, and every relation of every type asked), on chains
// around the hop limit, and on chosen cases for each branch of the expansion: cycles, wildcards,
// usersets, `and` and `but not` at the top and in the middle of a path, conditions.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RelationChecker, type CheckResult, type RelationOptions } from '../../../src/policy/relations/checker.js';
import type { Relationship } from '../../../src/policy/relations/tuple.js';
import { arbContext, arbModelText, arbRelationships, OBJECTS, RELATIONS, TYPES, USERS } from './arbitraries.js';
import { indexOf, modelOf } from './fixtures.js';


const tri = (r: CheckResult): 0 | 1 | 2 => ('error' in r ? 2 : r.allowed ? 1 : 0);

/**
 * list-objects agrees with check on every object of the type: exactly the objects check allows,
 * or an error only when check errs on one of them; with `omitErrors`, always exactly the objects
 * check allows.
 */
function agrees(checker: RelationChecker, subject: string, relation: string, type: string, objects: string[], opts?: RelationOptions): void {
  const listed = checker.listObjects(subject, relation, type, opts);
  const results = [...objects].sort().filter((o) => o.startsWith(type + ":")).map((o) => [o, tri(checker.check(o, relation, subject, opts))] as const);
  const what = `${subject} ${relation} ${type}: ${JSON.stringify(results)}`;
  // Leaving out what errs (as a search does), the listing is exactly the objects check allows.
  const omitting = checker.listObjects(subject, relation, type, { ...opts, omitErrors: true });
  if (omitting.error) expect(omitting.error.code, what).toBe('invalid_relationship');
  else expect(omitting.objects, `${what} (omitting errors)`).toEqual(results.filter(([, t]) => t === 1).map(([o]) => o));
  if (listed.error) {
    expect(listed.error.code, what).not.toBe('invalid_request');
    if (listed.error.code !== 'invalid_relationship') expect(results.some(([, t]) => t === 2), `${what}: ${JSON.stringify(listed.error)}`).toBe(true);
    return;
  }
  expect(listed.objects, what).toEqual(results.filter(([, t]) => t === 1).map(([o]) => o));
}

const SUBJECTS = [...USERS, 'user:*', 'user:stranger', ...OBJECTS, ...OBJECTS.flatMap((o) => RELATIONS.map((r) => `${o}#${r}`))];

describe('list-objects by reverse expansion', () => {
  it('gives exactly what check allows, for every relation, type and kind of subject, with contextual relationships', () => {
    fc.assert(fc.property(arbModelText, arbRelationships, fc.option(arbRelationships, { nil: undefined }), fc.array(fc.constantFrom(...SUBJECTS), { minLength: 1, maxLength: 4 }), arbContext, (text, rels, contextual, subjects, context) => {
      const checker = new RelationChecker(modelOf(text), indexOf(rels));
      const opts = { context, ...(contextual ? { contextual } : {}) };
      for (const subject of subjects) for (const type of TYPES) for (const relation of ['parent', ...RELATIONS]) agrees(checker, subject, relation, type, OBJECTS, opts);
    }), { numRuns: Number(process.env.FC_STRESS ?? 120) });
  });

  it('agrees with check on chains around the hop limit, through unions and through `but not`', () => {
    const model = modelOf(`type user
type group {
  relation member: [user, group#member]
}
type folder {
  relation parent: [folder]
  relation blocked: [user]
  relation viewer: [user, group#member] or viewer from parent
  relation reader: ([user] or reader from parent) but not blocked
}
type doc {
  relation parent: [folder]
  relation blocked: [user]
  relation viewer: ([user] or viewer from parent) but not blocked
  relation reader: reader from parent and viewer
}
`);
    fc.assert(fc.property(fc.integer({ min: 18, max: 30 }), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 30 }), fc.boolean(), (folders, groups, blockedAt, viaGroup) => {
      const rels: Relationship[] = [];
      for (let i = 1; i < folders; i++) rels.push({ object: `folder:f${i}`, relation: 'parent', subject: `folder:f${i - 1}` });
      // A chain of groups in front of the root's viewer, or anne at the root directly.
      for (let g = 0; g < groups; g++) rels.push({ object: `group:g${g}`, relation: 'member', subject: g === 0 ? 'user:anne' : `group:g${g - 1}#member` });
      rels.push({ object: 'folder:f0', relation: 'viewer', subject: viaGroup && groups ? `group:g${groups - 1}#member` : 'user:anne' });
      rels.push({ object: 'folder:f0', relation: 'reader', subject: 'user:anne' });
      rels.push({ object: `folder:f${blockedAt}`, relation: 'blocked', subject: 'user:anne' });
      // A document in each folder; one blocks anne.
      for (let i = 0; i < folders; i++) rels.push({ object: `doc:d${i}`, relation: 'parent', subject: `folder:f${i}` });
      rels.push({ object: `doc:d${blockedAt}`, relation: 'blocked', subject: 'user:anne' });
      const checker = new RelationChecker(model, indexOf(rels));
      const objects = Array.from({ length: folders }, (_, i) => [`folder:f${i}`, `doc:d${i}`]).flat();
      for (const relation of ['viewer', 'reader']) for (const type of ['folder', 'doc']) agrees(checker, 'user:anne', relation, type, objects);
      if (groups) agrees(checker, 'group:g0#member', 'viewer', 'doc', objects);
    }), { numRuns: Number(process.env.FC_STRESS ?? 60) });
  });
});

describe('list-objects on chosen cases', () => {
  const model = modelOf(`type user
type group {
  relation member: [user, user:*, group#member]
  relation banned: [user]
  relation active: member but not banned
}
type folder {
  relation parent: [folder]
  relation owner: [user]
  relation viewer: [user, group#member, group#active] or owner or viewer from parent
  relation approved: [user]
  relation editor: viewer and approved
}
type doc {
  relation parent: [folder]
  relation blocked: [user, group#member]
  relation viewer: ([user, user:*, group#member with within] or editor from parent or viewer from parent) but not blocked
  relation commenter: viewer and editor from parent
}
condition within(n: int, limit: int) {
  n < limit
}
`);
  const base: Relationship[] = [
    { object: 'folder:root', relation: 'viewer', subject: 'group:eng#member' },
    { object: 'folder:a', relation: 'parent', subject: 'folder:root' },
    { object: 'folder:b', relation: 'parent', subject: 'folder:a' },
    { object: 'doc:1', relation: 'parent', subject: 'folder:b' },
    { object: 'doc:2', relation: 'parent', subject: 'folder:a' },
    { object: 'doc:3', relation: 'parent', subject: 'folder:x' },
    { object: 'group:eng', relation: 'member', subject: 'user:anne' },
    { object: 'group:eng', relation: 'member', subject: 'group:ops#member' },
    { object: 'group:ops', relation: 'member', subject: 'user:bob' },
    // A cycle of groups.
    { object: 'group:ops', relation: 'member', subject: 'group:eng#member' },
    { object: 'folder:x', relation: 'viewer', subject: 'user:carl' },
    { object: 'doc:2', relation: 'blocked', subject: 'user:bob' },
  ];
  const everything = ['folder:root', 'folder:a', 'folder:b', 'folder:x', 'doc:1', 'doc:2', 'doc:3', 'doc:4', 'group:eng', 'group:ops'];

  it('through usersets, a cycle of groups and tuple-to-usersets, minus what `but not` removes', () => {
    const c = new RelationChecker(model, indexOf(base));
    expect(c.listObjects('user:anne', 'viewer', 'doc')).toEqual({ objects: ['doc:1', 'doc:2'] });
    expect(c.listObjects('user:bob', 'viewer', 'doc')).toEqual({ objects: ['doc:1'] });
    expect(c.listObjects('user:bob', 'viewer', 'folder')).toEqual({ objects: ['folder:a', 'folder:b', 'folder:root'] });
    expect(c.listObjects('group:ops#member', 'viewer', 'doc')).toEqual({ objects: ['doc:1', 'doc:2'] });
    for (const s of ['user:anne', 'user:bob', 'user:carl', 'group:eng#member', 'group:ops#member', 'user:*']) {
      for (const [r, t] of [['viewer', 'doc'], ['viewer', 'folder'], ['member', 'group'], ['editor', 'folder'], ['commenter', 'doc'], ['active', 'group']] as const) agrees(c, s, r, t, everything);
    }
  });

  it('a wildcard grants every entity of its type, and the wildcard itself, but not a userset', () => {
    const c = new RelationChecker(model, indexOf([...base, { object: 'doc:4', relation: 'viewer', subject: 'user:*' }, { object: 'doc:4', relation: 'blocked', subject: 'user:anne' }]));
    expect(c.listObjects('user:zed', 'viewer', 'doc')).toEqual({ objects: ['doc:4'] });
    expect(c.listObjects('user:*', 'viewer', 'doc')).toEqual({ objects: ['doc:4'] });
    expect(c.listObjects('user:anne', 'viewer', 'doc')).toEqual({ objects: ['doc:1', 'doc:2'] });
    expect(c.listObjects('group:eng#member', 'viewer', 'doc')).toEqual({ objects: ['doc:1', 'doc:2'] });
  });

  it('`and` and `but not` in the middle of a path: a group whose member is not banned, an editor who is also approved', () => {
    const rels = [...base,
      { object: 'folder:root', relation: 'viewer', subject: 'group:ops#active' },
      { object: 'group:ops', relation: 'banned', subject: 'user:anne' },
      { object: 'folder:a', relation: 'approved', subject: 'user:anne' },
      { object: 'folder:b', relation: 'approved', subject: 'user:bob' },
    ];
    const c = new RelationChecker(model, indexOf(rels));
    expect(c.listObjects('user:anne', 'editor', 'folder')).toEqual({ objects: ['folder:a'] });
    expect(c.listObjects('user:bob', 'editor', 'folder')).toEqual({ objects: ['folder:b'] });
    expect(c.listObjects('user:anne', 'viewer', 'doc')).toEqual({ objects: ['doc:1', 'doc:2'] });
    expect(c.listObjects('user:anne', 'commenter', 'doc')).toEqual({ objects: ['doc:2'] });
    expect(c.listObjects('user:anne', 'active', 'group')).toEqual({ objects: ['group:eng'] });
    for (const s of ['user:anne', 'user:bob', 'group:ops#active', 'group:eng#member']) {
      for (const [r, t] of [['viewer', 'doc'], ['viewer', 'folder'], ['editor', 'folder'], ['commenter', 'doc'], ['active', 'group']] as const) agrees(c, s, r, t, everything);
    }
  });

  it('a condition on the way: holds, does not, or cannot be evaluated (an error naming the parameter)', () => {
    const rels = [...base, { object: 'doc:4', relation: 'viewer', subject: 'group:ops#member', condition: { name: 'within', context: { limit: 5 } } }];
    const c = new RelationChecker(model, indexOf(rels));
    expect(c.listObjects('user:carl', 'viewer', 'doc', { context: { n: 1 } })).toEqual({ objects: ['doc:3'] });
    expect(c.listObjects('user:bob', 'viewer', 'doc', { context: { n: 1 } })).toEqual({ objects: ['doc:1', 'doc:4'] });
    expect(c.listObjects('user:bob', 'viewer', 'doc', { context: { n: 9 } })).toEqual({ objects: ['doc:1'] });
    expect(c.listObjects('user:bob', 'viewer', 'doc')).toEqual({ error: { code: 'condition_error', message: expect.stringContaining('n'), missing: 'n' } });
    for (const context of [{}, { n: 1 }, { n: 9 }]) for (const s of ['user:anne', 'user:bob', 'user:carl']) agrees(c, s, 'viewer', 'doc', everything, { context });
  });

  it('contextual relationships count as stored ones, in any part of the path', () => {
    const c = new RelationChecker(model, indexOf(base));
    const contextual: Relationship[] = [{ object: 'group:eng', relation: 'member', subject: 'user:dan' }, { object: 'doc:4', relation: 'parent', subject: 'folder:a' }, { object: 'doc:1', relation: 'blocked', subject: 'user:dan' }];
    expect(c.listObjects('user:dan', 'viewer', 'doc', { contextual })).toEqual({ objects: ['doc:2', 'doc:4'] });
    expect(c.listObjects('user:dan', 'viewer', 'doc')).toEqual({ objects: [] });
    for (const s of ['user:anne', 'user:dan', 'group:eng#member']) agrees(c, s, 'viewer', 'doc', everything, { contextual });
  });
  it('a relationship stored with a condition and given again without one in the request: the one that holds counts, as check reads it', () => {
    const m = modelOf(`type user
type folder {
  relation viewer: [user]
}
type doc {
  relation parent: [folder, folder with office]
  relation viewer: [user, user with office] or viewer from parent
}

condition office(hour: int) {
  hour >= 9 and hour < 17
}
`);
    const stored: Relationship[] = [
      { object: 'folder:a', relation: 'viewer', subject: 'user:anne' },
      { object: 'doc:1', relation: 'parent', subject: 'folder:a', condition: { name: 'office' } },
      { object: 'doc:2', relation: 'viewer', subject: 'user:anne', condition: { name: 'office' } },
      // a condition the model does not declare for the relation: ignored by every decision
      { object: 'doc:3', relation: 'parent', subject: 'folder:a', condition: { name: 'nightly' } },
    ];
    const c = new RelationChecker(m, indexOf(stored));
    const night = { context: { hour: 23 } };
    expect(c.listObjects('user:anne', 'viewer', 'doc', night)).toEqual({ objects: [] });
    const contextual: Relationship[] = [
      { object: 'doc:1', relation: 'parent', subject: 'folder:a' },
      { object: 'doc:2', relation: 'viewer', subject: 'user:anne' },
      { object: 'doc:3', relation: 'parent', subject: 'folder:a' },
    ];
    for (const d of ['doc:1', 'doc:2', 'doc:3']) expect(tri(c.check(d, 'viewer', 'user:anne', { ...night, contextual }))).toBe(1);
    expect(c.listObjects('user:anne', 'viewer', 'doc', { ...night, contextual })).toEqual({ objects: ['doc:1', 'doc:2', 'doc:3'] });
    // Without the hour the stored conditions cannot be evaluated; the plain ones still hold.
    expect(c.listObjects('user:anne', 'viewer', 'doc', { contextual })).toEqual({ objects: ['doc:1', 'doc:2', 'doc:3'] });
    agrees(c, 'user:anne', 'viewer', 'doc', ['doc:1', 'doc:2', 'doc:3'], { ...night, contextual });
  });
  it('a candidate of `and` whose other part the walk never reached is checked: a chain past the hop limit makes the listing an error', () => {
    // `deep` is twenty-six computed relations long: check meets the limit on any object whatever is stored.
    const chain = Array.from({ length: 26 }, (_, i) => `  relation c${i}: ${i === 25 ? '[user]' : `c${i + 1}`}`).join('\n');
    const m = modelOf(`type user
type report {
${chain}
  relation shallow: [user]
  relation reader: [user] and c0
  relation light: [user] and shallow
}
`);
    const rels: Relationship[] = [{ object: 'report:q1', relation: 'reader', subject: 'user:ina' }, { object: 'report:q2', relation: 'light', subject: 'user:ina' }];
    const c = new RelationChecker(m, indexOf(rels));
    expect(tri(c.check('report:q1', 'reader', 'user:ina'))).toBe(2);
    expect(c.listObjects('user:ina', 'reader', 'report')).toEqual({ error: expect.objectContaining({ code: 'resolution_too_complex' }) });
    // The same shape within the limit: the unreached part is checked and found false.
    expect(c.listObjects('user:ina', 'light', 'report')).toEqual({ objects: [] });
    rels.push({ object: 'report:q2', relation: 'shallow', subject: 'user:ina' });
    expect(new RelationChecker(m, indexOf(rels)).listObjects('user:ina', 'light', 'report')).toEqual({ objects: ['report:q2'] });
  });
});

