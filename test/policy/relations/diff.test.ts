// `policy diff` over relations, held to brute force on small graphs: for random models and a
// random change of one relation, every pair whose check differs on a small graph belongs to a
// relation the diff reports changed, every reported example really changes, and the concrete
// pairs of given relationships are exactly those whose check differs. Then the CLI.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadPolicySet } from '../../../src/policy/load.js';
import type { PolicySet } from '../../../src/policy/compile.js';
import { affectedRelations, candidateRelationships, definitionChanges, diffRelations, pairChanges } from '../../../src/policy/relations/diff.js';
import { referenceCheck } from '../../../src/policy/relations/reference.js';
import { parseRelationshipText, type Relationship } from '../../../src/policy/relations/tuple.js';
import { runPolicyCommand } from '../../../src/cli/policy.js';
import { DiffRefused, diffPolicySets } from '../../../src/policy/diff.js';

async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '', stderr = '';
  const code = await runPolicyCommand(args.slice(1), { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; }, cwd: process.cwd() });
  return { code, stdout, stderr };
}

const TYPES = ['a', 'b'];
const RELS = ['r0', 'r1'];

function arbDef(rel: string): fc.Arbitrary<string> {
  const other = RELS.find((r) => r !== rel)!;
  const direct = fc.uniqueArray(fc.constantFrom('user', 'user:*', 'a#r0', 'b#r1'), { minLength: 1, maxLength: 2 }).map((l) => `[${l.join(', ')}]`);
  const leaf = fc.oneof(direct, fc.constant(other), fc.constantFrom(...RELS).map((r) => `${r} from parent`));
  return fc.oneof(
    { weight: 2, arbitrary: leaf },
    { weight: 3, arbitrary: fc.tuple(direct, fc.constantFrom('or', 'and', 'but not'), fc.oneof(fc.constant(other), fc.constantFrom(...RELS).map((r) => `${r} from parent`))).map(([x, op, y]) => `${x} ${op} ${y}`) },
  );
}

type Defs = Record<string, string>;
const arbDefs: fc.Arbitrary<Defs> = fc.record(Object.fromEntries(TYPES.flatMap((t) => RELS.map((r) => [`${t}#${r}`, arbDef(r)]))) as Record<string, fc.Arbitrary<string>>);

function modelText(defs: Defs): string {
  const out = ['policy "m" version 1', '', 'type user', ''];
  for (const t of TYPES) {
    out.push(`type ${t} {`, `  relation parent: [${t === 'a' ? 'b' : 'a'}]`);
    for (const r of RELS) out.push(`  relation ${r}: ${defs[`${t}#${r}`]}`);
    out.push('}', '');
  }
  return out.join('\n');
}

function load(text: string): PolicySet | null {
  return loadPolicySet({ files: [{ path: 'm.policy', text }] }).policySet ?? null;
}

const SUBJECTS = ['user:1', 'user:2', 'a:1', 'a:2', 'b:1', 'b:2'];
const OBJECTS = TYPES.flatMap((t) => ['1', '2'].map((id) => `${t}:${id}`));

/** Two sets, the second with one relation redefined. */
const arbPair = fc.tuple(arbDefs, fc.constantFrom(...TYPES.flatMap((t) => RELS.map((r) => `${t}#${r}`))), fc.constantFrom(...RELS))
  .chain(([defs, which, rel]) => arbDef(rel === which.split('#')[1] ? rel : which.split('#')[1]!).map((d) => [defs, { ...defs, [which]: d }] as const));

describe('diff over relations, against brute force on small graphs', () => {
  it('every pair that changes on a small graph is in a reported relation; every example changes', () => {
    fc.assert(fc.property(arbPair, fc.array(fc.nat(), { maxLength: 3 }), ([d0, d1], picks) => {
      const before = load(modelText(d0)), after = load(modelText(d1));
      fc.pre(before !== null && after !== null);
      const a = before!.compiled.relations, b = after!.compiled.relations;
      const r = diffRelations(before!, after!);
      // Every reported example really changes, as reported.
      for (const c of r.changes) {
        const graph = c.graph.map((t) => parseRelationshipText(t) as Relationship);
        const x = referenceCheck(a, graph, { object: c.object, relation: c.relation, subject: c.subject });
        const y = referenceCheck(b, graph, { object: c.object, relation: c.relation, subject: c.subject });
        expect([x, y]).toEqual(c.change === 'lost' ? [1, 0] : [0, 1]);
        if (c.example) expect(c.example.before).not.toBe(c.example.after);
      }
      // A random graph the search covered: any pair that differs is in a reported relation.
      const cands = candidateRelationships(a, b, new Set(TYPES.flatMap((t) => ['parent', ...RELS].map((x) => `${t}#${x}`))));
      const graph = [...new Set(picks.map((p) => p % Math.max(cands.length, 1)))].map((i) => cands[i]!).filter(Boolean);
      fc.pre(graph.length <= r.searched.complete);
      const reported = new Set(r.changes.map((c) => `${c.type}#${c.relation}`));
      for (const object of OBJECTS) for (const rel of RELS) for (const subject of SUBJECTS) {
        const x = referenceCheck(a, graph, { object, relation: rel, subject }), y = referenceCheck(b, graph, { object, relation: rel, subject });
        if (x === 2 || y === 2 || x === y) continue;
        expect(reported.has(`${object.split(':')[0]}#${rel}`), `${subject} ${rel} ${object} differs on ${JSON.stringify(graph)}`).toBe(true);
      }
    }), { numRuns: 25 });
    // a few seconds on a quiet machine; on a loaded one the default bound is too tight
  }, 180_000);

  it('the concrete pairs of given relationships are those whose check differs', () => {
    const arbRel: fc.Arbitrary<Relationship> = fc.tuple(fc.constantFrom(...TYPES), fc.constantFrom('1', '2', '3'), fc.constantFrom('parent', ...RELS), fc.constantFrom('user:1', 'user:2', 'user:*', 'a:1#r0', 'b:2#r1', 'a:3', 'b:1'))
      .map(([t, id, relation, subject]) => ({ object: `${t}:${id}`, relation, subject }));
    fc.assert(fc.property(arbPair, fc.array(arbRel, { maxLength: 10 }), ([d0, d1], rels) => {
      const before = load(modelText(d0)), after = load(modelText(d1));
      fc.pre(before !== null && after !== null);
      const a = before!.compiled.relations, b = after!.compiled.relations;
      const affected = affectedRelations(a, b, definitionChanges(a, b));
      const { pairs, pairErrors } = pairChanges(a, b, affected, rels);
      fc.pre(pairErrors.length === 0);
      const has = (subject: string, rel: string, object: string, change: string) => pairs.some((p) => p.subject === subject && p.relation === rel && p.object === object && p.change === change);
      const objects = [...new Set(rels.map((r) => r.object))];
      const subjects = ['user:1', 'user:2', 'user:9', 'a:1', 'a:3', 'b:1', 'b:9'];
      for (const object of objects) for (const rel of RELS) for (const subject of subjects) {
        const x = referenceCheck(a, rels, { object, relation: rel, subject }), y = referenceCheck(b, rels, { object, relation: rel, subject });
        if (x === 2 || y === 2 || x === y) continue;
        const change = x === 1 ? 'lost' : 'gained';
        // An entity gained or lost through a wildcard may be listed as the wildcard.
        expect(has(subject, rel, object, change) || has(`${subject.split(':')[0]}:*`, rel, object, change), `${subject} ${rel} ${object} ${change}`).toBe(true);
      }
      for (const p of pairs) {
        const x = referenceCheck(a, rels, { object: p.object, relation: p.relation, subject: p.subject });
        const y = referenceCheck(b, rels, { object: p.object, relation: p.relation, subject: p.subject });
        expect([x, y], JSON.stringify(p)).toEqual(p.change === 'lost' ? [1, 0] : [0, 1]);
      }
    }), { numRuns: 60 });
  });
});

describe('policy diff over relations (CLI)', () => {
  const BASE = `policy "docs" version 1

type user

type folder {
  relation parent: [folder]
  relation viewer: [user] or viewer from parent
}

type document {
  relation parent: [folder]
  relation viewer: [user] or viewer from parent
}
`;
  const dir = mkdtempSync(join(tmpdir(), 'reldiff-'));
  const write = (name: string, text: string) => { mkdirSync(join(dir, name), { recursive: true }); writeFileSync(join(dir, name, 'p.policy'), text); return join(dir, name); };
  const oldDir = write('old', BASE);
  const newDir = write('new', BASE.replace('relation viewer: [user] or viewer from parent\n}\n$', '').replace(/type document \{[\s\S]*$/, 'type document {\n  relation parent: [folder]\n  relation viewer: [user]\n}\n'));
  const rels = join(dir, 'rels.json');
  writeFileSync(rels, JSON.stringify({ relationships: [
    { object: 'folder:eng', relation: 'viewer', subject: 'user:anne' },
    { object: 'document:spec', relation: 'parent', subject: 'folder:eng' },
    { object: 'document:own', relation: 'viewer', subject: 'user:bob' },
  ] }));

  it('text: the changed definition, the relation that answers differently with an example, and the pairs', async () => {
    const r = await runCli(['policy', 'diff', oldDir, newDir, '--relationships', rels]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('1 relation definition changed:\n  document#viewer: [user] or viewer from parent -> [user]');
    expect(r.stdout).toContain('viewer on document: held before, not after, when the subject reaches the document only through `viewer from parent`');
    expect(r.stdout).toContain('e.g. user:1 on document:1 with folder:1#viewer@user:1, document:1#parent@folder:1');
    expect(r.stdout).toContain('viewer:documents on document:1 by user 1: allow -> deny');
    expect(r.stdout).toContain('1 pair of the given relationships change');
    expect(r.stdout).toContain('  - user:anne viewer document:spec');
    expect(r.stdout).not.toContain('user:bob');
  });

  it('JSON, and the example explains to the reported before and after', async () => {
    const r = await runCli(['policy', 'diff', oldDir, newDir, '--relationships', rels, '--json']);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.changes).toEqual([]);
    expect(out.relations.definitions).toEqual([{ type: 'document', relation: 'viewer', before: '[user] or viewer from parent', after: '[user]' }]);
    expect(out.relations.pairs).toEqual([{ type: 'document', relation: 'viewer', object: 'document:spec', subject: 'user:anne', change: 'lost' }]);
    const c = out.relations.changes[0];
    expect(c).toMatchObject({ type: 'document', relation: 'viewer', action: 'viewer:documents', change: 'lost', through: ['viewer from parent'] });
    const request = JSON.stringify(c.example.request);
    const before = await runCli(['policy', 'explain', oldDir, '--request', request]);
    const after = await runCli(['policy', 'explain', newDir, '--request', request]);
    expect([before.code, after.code]).toEqual([0, 3]);
    expect(c.example).toMatchObject({ before: 'allow', after: 'deny' });
  });

  it('a changed relationship condition is refused with exit 2; a question on a recursive relation is answered, its error region too', async () => {
    const cond = (n: number) => write(`c${n}`, BASE.replace('relation viewer: [user] or viewer from parent\n}\n\ntype document', 'relation viewer: [user with c] or viewer from parent\n}\n\ntype document') + `\ncondition c(x: int) {\n  x < ${n}\n}\n`);
    const r = await runCli(['policy', 'diff', cond(1), cond(2)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('gatehouse policy diff: cannot compare exactly: the relationship condition c changed, which diff does not model yet\n');
    const plain = load(BASE)!, asking = load(BASE + '\nrule "r" {\n  effect deny\n  subjects "user:*"\n  relation "viewer:documents"\n  object "document:*"\n  when person has viewer on resource\n}\n')!;
    const answered = diffPolicySets(plain, asking).changes;
    expect(answered.some((c) => c.region['question: person has viewer on resource']?.answer === 'error')).toBe(true);
    expect(answered.some((c) => c.region['question: person has viewer on resource']?.answer === true)).toBe(true);
    // with a changed condition, a rule asking a question is refused by the library too
    const condBase = (n: number) => load(BASE.replace('relation viewer: [user] or viewer from parent\n}\n\ntype document', 'relation viewer: [user with c] or viewer from parent\n}\n\ntype document') + `\ncondition c(x: int) {\n  x < ${n}\n}\n` + '\nrule "r" {\n  effect deny\n  subjects "user:*"\n  relation "viewer:documents"\n  object "document:*"\n  when person has viewer on resource\n}\n')!;
    expect(() => diffPolicySets(condBase(1), condBase(2))).toThrow(DiffRefused);
    expect(() => diffPolicySets(condBase(1), condBase(2))).toThrow(/the relationship condition c changed/);
  });

  it('nothing changes: exit 0; a rule asking whether the resource is within a folder is compared: exit 1, with the chain past the hop limit as a region', async () => {
    expect((await runCli(['policy', 'diff', oldDir, oldDir])).code).toBe(0);
    const q = write('q', BASE + '\nrule "r" {\n  effect deny\n  subjects "user:*"\n  relation "viewer:documents"\n  object "document:*"\n  when resource in "folder:legal" through parent\n}\n');
    const r = await runCli(['policy', 'diff', oldDir, q]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('resource in "folder:legal" through parent cannot be answered');
  });
});
