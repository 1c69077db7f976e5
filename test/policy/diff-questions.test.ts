// `policy diff` over rules that ask relationship questions: chosen pairs, refusals where the
// answer could not be exact, and brute force over small random policies and small graphs: no
// decision change the diff leaves out, and no reported change the decision pipeline does not show.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide } from '../../src/policy/decide.js';
import { DiffRefused, DiffTooLarge, diffPolicySets, diffText, inRegion, type Change } from '../../src/policy/diff.js';
import { completeRequest } from '../../src/policy/explain.js';
import { loadPolicySet } from '../../src/policy/load.js';
import type { PolicySet } from '../../src/policy/compile.js';
import type { DecisionRequest, SubjectFacts } from '../../src/policy/types.js';
import { MemoryIndex } from '../../src/policy/relations/index.js';
import { parseRelationshipJson, parseRelationshipText, type Relationship } from '../../src/policy/relations/tuple.js';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { breaks, invariantsOf, verifyInvariants } from '../../src/policy/verify.js';

async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '', stderr = '';
  const code = await runPolicyCommand(args.slice(1), { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; }, cwd: process.cwd() });
  return { code, stdout, stderr };
}

/** Not recursive, no conditions: every question answers true or false (or errs on an id that names no object). */
const MODEL = `type user

type agent

type folder {
  relation owner: [user]
  relation viewer: [user, agent] or owner
}

type doc {
  relation parent: [folder]
  relation owner: [user]
  relation editor: [user, agent] or owner
  relation viewer: [user, agent] or editor or viewer from parent
}
`;

function load(body: string, model = MODEL): PolicySet {
  const r = loadPolicySet({ files: [{ path: 'p.policy', text: `policy "p" version 1\n\n${model}\n${body}` }] });
  if (!r.policySet) throw new Error(r.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`).join('\n') + '\n' + body);
  return r.policySet;
}

const rule = (name: string, effect: string, when: string | null, subjects = '"user:*", "agent:*"') =>
  `rule "${name}" {\n  effect ${effect}\n  subjects ${subjects}\n  relation "read:docs"\n  object "doc:*"\n${when ? `  when ${when}\n` : ''}}\n`;

const PERMIT = rule('all', 'permit', null);

function indexOf(rels: (string | object)[]): MemoryIndex {
  const ix = new MemoryIndex();
  for (const t of rels) ix.add((typeof t === 'string' ? parseRelationshipText(t) : parseRelationshipJson(t)) as Relationship);
  return ix;
}

/** The example of a change as `explain --request` reads it, with its graph. */
function exampleRequest(c: Change): DecisionRequest {
  const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => NaN);
  return { ...request, relationships: indexOf(c.example.relationships ?? []) };
}

/** Each example lies in its region and decides as reported. */
function expectExamples(changes: Change[], a: PolicySet, b: PolicySet): void {
  for (const c of changes) {
    const req = exampleRequest(c);
    expect(inRegion(c, req, {}, a.compiled.relations), JSON.stringify(c)).toBe(true);
    expect([decide(req, a).decision, decide(req, b).decision], JSON.stringify(c)).toEqual([c.before, c.after]);
  }
}

describe('diff with relationship questions: chosen pairs', () => {
  it('a `has` question added to a deny rule: the requests where it holds change, with a graph that makes it hold', () => {
    const a = load(PERMIT), b = load(PERMIT + rule('owners-only-edit', 'deny', 'subject has owner on resource'));
    const r = diffPolicySets(a, b);
    expect(r.changes.length).toBeGreaterThan(0);
    for (const c of r.changes) expect([c.before, c.after]).toEqual(['allow', 'deny']);
    // Holds, or cannot be answered (an id that names no object: the deny rule fails closed).
    expect(new Set(r.changes.map((c) => JSON.stringify(c.region['question: subject has owner on resource'])))).toEqual(new Set(['{"answer":true}', '{"answer":"error"}']));
    const holds = r.changes.find((c) => c.region['question: subject has owner on resource']!.answer === true && c.subjects[0]!.startsWith('user:'))!;
    expect(holds.example.relationships).toEqual(['doc:example#owner@user:example-person']);
    expect(diffText(r)).toContain('when subject has owner on resource: allow -> deny');
    expectExamples(r.changes, a, b);
  });

  it('a permit gated by `has`: only where the person views the document does the decision stay allow', () => {
    const a = load(PERMIT), b = load(rule('viewers', 'permit', 'person has viewer on resource'));
    const r = diffPolicySets(a, b);
    expectExamples(r.changes, a, b);
    for (const c of r.changes) {
      expect(c.after).toBe('deny');
      expect(c.region['question: person has viewer on resource']?.answer).not.toBe(true);
    }
    // an agent acting alone has no person: the question cannot be answered, and the permit grants nothing
    expect(r.changes.some((c) => c.no_person || c.region['question: person has viewer on resource']?.answer === 'error')).toBe(true);
  });

  it('two dependent questions: editor implies viewer, so "editor and not viewer" is no region; each other one is realised', () => {
    const a = load(PERMIT);
    const b = load(PERMIT + rule('d', 'deny', 'subject has editor on resource and not (subject has viewer on resource)'));
    // the deny applies only where editor holds and viewer does not (none), or where they cannot be answered
    const r = diffPolicySets(a, b);
    for (const c of r.changes) {
      expect(c.region['question: subject has editor on resource']).toEqual({ answer: 'error' });
      expect(c.region['question: subject has viewer on resource']).toEqual({ answer: 'error' });
    }
    expectExamples(r.changes, a, b);
    const c = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource and not (subject has editor on resource)'));
    const r2 = diffPolicySets(a, c);
    const both = r2.changes.filter((x) => x.region['question: subject has viewer on resource']?.answer === true);
    expect(both.length).toBeGreaterThan(0);
    for (const x of both) expect(x.region['question: subject has editor on resource']).toEqual({ answer: false });
    expectExamples(r2.changes, a, c);
  });

  it('a `within` rule: documents inside the folder change, realised by a parent relationship', () => {
    const a = load(PERMIT), b = load(PERMIT + rule('legal', 'require_approval', 'resource in "folder:legal" through parent'));
    const r = diffPolicySets(a, b);
    const inside = r.changes.filter((c) => c.region['question: resource in "folder:legal" through parent']?.answer === true);
    expect(inside.length).toBeGreaterThan(0);
    for (const c of inside) {
      expect([c.before, c.after]).toEqual(['allow', 'approval_required']);
      expect(c.example.relationships).toEqual(['doc:example#parent@folder:legal']);
    }
    expect(r.changes.every((c) => c.region['question: resource in "folder:legal" through parent']?.answer !== false)).toBe(true);
    expectExamples(r.changes, a, b);
  });

  it('the same question in both versions and nothing else changed: no decision changes', () => {
    const a = load(rule('d', 'deny', 'subject has viewer on resource') + PERMIT);
    const b = load(PERMIT + rule('d2', 'deny', 'subject has viewer on resource'));
    expect(diffPolicySets(a, b).changes).toEqual([]);
  });

  it('a question on a relation whose definition changed is refused, naming the rule and the relation', () => {
    const a = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource'));
    const b = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource'), MODEL.replace('relation viewer: [user, agent] or editor or viewer from parent', 'relation viewer: [user, agent] or editor'));
    expect(() => diffPolicySets(a, b)).toThrow(DiffRefused);
    expect(() => diffPolicySets(a, b)).toThrow(/rule "d" \(p\.policy:\d+\) asks subject has viewer on resource, and relation doc#viewer \(or a relation it reads\) is defined differently in the two versions/);
  });

  it('a recursive relation: its error region (a chain of folders past the hop limit) is reported, with the chain as its graph', () => {
    const recursive = MODEL.replace('relation owner: [user]\n  relation viewer: [user, agent] or owner\n}', 'relation parent: [folder]\n  relation owner: [user]\n  relation viewer: [user, agent] or owner or viewer from parent\n}');
    const a = load(PERMIT, recursive), b = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource'), recursive);
    const r = diffPolicySets(a, b);
    const errs = r.changes.filter((c) => c.region['question: subject has viewer on resource']?.answer === 'error');
    expect(errs.length).toBeGreaterThan(0);
    // some error region is realised by a chain, not by an id that names no object
    expect(errs.some((c) => (c.example.relationships ?? []).length > 25)).toBe(true);
    expectExamples(r.changes, a, b);
    const c = load(PERMIT + rule('w', 'require_approval', 'resource in "folder:legal" through parent'), recursive);
    const w = diffPolicySets(a, c);
    const deep = w.changes.filter((x) => x.region['question: resource in "folder:legal" through parent']?.answer === 'error');
    expect(deep.length).toBeGreaterThan(0);
    for (const x of deep) expect(x.example.relationships!.length).toBeGreaterThan(25);
    expectExamples(w.changes, a, c);
  });

  it('a conditioned relationship: its error region (the condition\'s parameter missing) is reported', () => {
    const conditioned = MODEL.replace('relation viewer: [user, agent] or editor or viewer from parent', 'relation viewer: [user with office_hours, agent] or editor or viewer from parent') + '\ncondition office_hours(hour: int) {\n  hour >= 9\n}\n';
    const a = load(PERMIT, conditioned), b = load(PERMIT + rule('d', 'deny', 'not (subject has viewer on resource)'), conditioned);
    const r = diffPolicySets(a, b);
    const errs = r.changes.filter((c) => c.region['question: subject has viewer on resource']?.answer === 'error' && c.subjects[0]!.startsWith('user:'));
    expect(errs.some((c) => (c.example.relationships ?? []).some((t) => typeof t === 'object' && t.condition.name === 'office_hours'))).toBe(true);
    expectExamples(r.changes, a, b);
  });

  it('a model without agents: an agent\'s question cannot be answered, and a deny rule asking it applies to every agent', () => {
    const model = MODEL.replace('type agent\n\n', '').replaceAll('[user, agent]', '[user]');
    const a = load(PERMIT, model), b = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource'), model);
    const r = diffPolicySets(a, b);
    const alone = r.changes.filter((c) => c.no_person || c.subjects.length === 1 && c.subjects[0]!.startsWith('agent:'));
    expect(alone.length).toBeGreaterThan(0);
    for (const c of alone) expect(c.region['question: subject has viewer on resource']).toEqual({ answer: 'error' });
    expectExamples(r.changes, a, b);
  });

  it('a question about an object read from a path is refused', () => {
    const a = load(PERMIT), b = load(PERMIT + rule('d', 'deny', 'subject has viewer on resource.folder'));
    expect(() => diffPolicySets(a, b)).toThrow(/asks subject has viewer on resource\.folder about an object read from a path/);
  });
});

// ---- brute force ----------------------------------------------------------------------------

const QUESTIONS = [
  'subject has viewer on resource', 'subject has editor on resource', 'person has viewer on resource', 'agent has editor on resource',
  'subject has owner on "folder:f1"', 'resource in "folder:f1" through parent', 'person has viewer on "doc:d1"',
];

const arbCond: fc.Arbitrary<string | null> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 4, arbitrary: fc.constantFrom(...QUESTIONS) },
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...QUESTIONS), fc.constantFrom(' and ', ' or ', ' and not '), fc.constantFrom(...QUESTIONS, 'context.amount > 5'))
    .map(([x, op, y]) => (op === ' and not ' ? `${x} and not (${y})` : `${x}${op}${y}`)) },
);

const arbRule = fc.tuple(fc.constantFrom('deny', 'permit', 'permit', 'require_approval'), arbCond, fc.constantFrom('"user:*", "agent:*"', '"agent:*"', '"user:u1"'));
const arbSet = fc.array(arbRule, { minLength: 1, maxLength: 3 }).map((rs) => rs.map(([e, w, s], i) => rule(`r${i}`, e, w, s)).join('\n'));

const GRAPH = [
  'doc:d1#viewer@user:u1', 'doc:d1#editor@agent:a1', 'doc:d1#owner@user:u2', 'doc:d1#parent@folder:f1', 'doc:d2#parent@folder:f1',
  'folder:f1#viewer@user:u1', 'folder:f1#owner@user:u2', 'folder:f1#viewer@agent:a1', 'doc:d2#editor@user:u2', 'doc:d2#viewer@agent:a1',
];

const subject = (type: 'user' | 'agent', id: string, mode?: 'delegated' | 'autonomous'): SubjectFacts => ({
  type, id, roles: [], groups: [], permissions: ['read:docs'], attributes: {}, ...(type === 'agent' ? { mode, capabilities: [{ name: 'read:docs' }] } : {}),
});

/** Every request of a small world: users, agents alone and for a person, documents (one id no object can have), amounts, graphs. */
function requests(): DecisionRequest[] {
  const out: DecisionRequest[] = [];
  const whos: Pick<DecisionRequest, 'subject' | 'person'>[] = [
    { subject: subject('user', 'u1') }, { subject: subject('user', 'u2') }, { subject: subject('user', 'u b') },
    { subject: subject('agent', 'a1', 'autonomous') }, { subject: subject('agent', 'a2', 'autonomous') },
    ...['u1', 'u2', 'u b'].map((p) => ({ subject: subject('agent', 'a1', 'delegated'), person: { id: p, roles: [], groups: [], permissions: ['read:docs'], attributes: {} } })),
  ];
  // a chain of 30 folders above f1 (past the hop limit where folders have parents), and a conditioned owner
  const chain = Array.from({ length: 30 }, (_, i) => `folder:${i ? `c${i}` : 'f1'}#parent@folder:c${i + 1}`);
  const owner = { object: 'folder:f1', relation: 'owner', subject: 'user:u1', condition: { name: 'office_hours' } };
  const graphs = [[], GRAPH.slice(0, 4), GRAPH.slice(4), GRAPH, [GRAPH[0]!, GRAPH[5]!, GRAPH[8]!], [GRAPH[1]!, GRAPH[3]!, GRAPH[6]!, GRAPH[9]!], [GRAPH[3]!, ...chain], [GRAPH[3]!, owner]];
  for (const w of whos) for (const resource of ['doc:d1', 'doc:d2', 'doc:d x']) for (const context of [{ amount: 1 }, { amount: 10, hour: 10 }]) for (const g of graphs) {
    out.push({ ...w, action: 'read:docs', resource, context, now: 0, relationships: indexOf(g) });
  }
  return out;
}

/** Folders of folders: `viewer` and `through parent` can pass the hop limit; `owner` of a folder is conditioned. */
const MODEL_RECURSIVE = MODEL.replace('relation owner: [user]\n  relation viewer: [user, agent] or owner\n}', 'relation parent: [folder]\n  relation owner: [user with office_hours]\n  relation viewer: [user, agent] or owner or viewer from parent\n}')
  + '\ncondition office_hours(hour: int) {\n  hour >= 9\n}\n';

/** Agents are no type: a question about an agent cannot be answered. */
const MODEL_NO_AGENTS = MODEL.replace('type agent\n\n', '').replaceAll('[user, agent]', '[user]');

function tryLoad(body: string, model: string): PolicySet | null {
  const r = loadPolicySet({ files: [{ path: 'p.policy', text: `policy "p" version 1\n\n${model}\n${body}` }] });
  return r.policySet ?? null;
}

describe('diff with relationship questions: brute force', () => {
  const world = requests();
  it('every decision change of the small world lies in exactly one region with its decisions; every region\'s example decides as reported', () => {
    let compared = 0;
    fc.assert(fc.property(fc.constantFrom(MODEL, MODEL_NO_AGENTS, MODEL_RECURSIVE), arbSet, arbSet, (model, x, y) => {
      const a = tryLoad(x, model), b = tryLoad(y, model);
      fc.pre(a !== null && b !== null);
      if (!a || !b) return;
      let changes: Change[];
      try {
        changes = diffPolicySets(a, b).changes;
      } catch (e) {
        // a refusal (a region with no graph found) or a diff too large answers nothing: no claim to check
        if (e instanceof DiffRefused || e instanceof DiffTooLarge) return;
        throw e;
      }
      compared++;
      expectExamples(changes, a, b);
      for (const r of world) {
        const before = decide(r, a).decision, after = decide(r, b).decision;
        const hits = changes.filter((c) => inRegion(c, r, {}, a.compiled.relations));
        if (before === after) expect(hits, `unchanged request in a region: ${JSON.stringify({ ...r, relationships: undefined })}`).toEqual([]);
        else {
          expect(hits.length, `changed request (${before} -> ${after}) in ${hits.length} regions: ${JSON.stringify({ ...r, relationships: undefined })}\n${x}\n---\n${y}`).toBe(1);
          expect([hits[0]!.before, hits[0]!.after]).toEqual([before, after]);
        }
      }
    }), { numRuns: 60, interruptAfterTimeLimit: 60_000 });
    // a refusal is only where no graph within the bound gives a region; most pairs are answered
    expect(compared).toBeGreaterThan(0);
  }, 120_000);
});

describe('verify with relationship questions: brute force', () => {
  const world = requests();
  it('an invariant that holds is broken by no request of the small world; a counterexample breaks it with its graph', () => {
    let proven = 0;
    const arbInvariant = fc.tuple(fc.constantFrom('allow', 'deny'), arbCond).map(([never, when]) => `invariant "i" {\n  never ${never} "read:docs" on "doc:*"${when ? ` when ${when}` : ''}\n}\n`);
    fc.assert(fc.property(fc.constantFrom(MODEL, MODEL_NO_AGENTS, MODEL_RECURSIVE), arbSet, arbInvariant, (model, rules, invText) => {
      const set = tryLoad(rules + '\n' + invText, model);
      fc.pre(set !== null);
      if (!set) return;
      const [r] = verifyInvariants(set);
      if (r!.error) return;
      proven++;
      const { inv, zone } = invariantsOf(set)[0]!;
      if (r!.holds) {
        for (const req of world) expect(breaks(set, inv, zone, req), `${rules}\n${invText}\n${JSON.stringify({ ...req, relationships: undefined })}`).toBe(false);
      } else {
        const ex = r!.counterexample!;
        const { request } = completeRequest(JSON.parse(JSON.stringify(ex)), () => NaN);
        expect(breaks(set, inv, zone, { ...request, relationships: indexOf(ex.relationships ?? []) }), JSON.stringify(ex)).toBe(true);
      }
    }), { numRuns: 60, interruptAfterTimeLimit: 45_000 });
    expect(proven).toBeGreaterThan(0);
  }, 120_000);
});

// ---- the command line -------------------------------------------------------------------------

describe('policy diff with relationship questions on the command line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'diff-questions-'));
  const write = (name: string, text: string) => { mkdirSync(join(dir, name), { recursive: true }); writeFileSync(join(dir, name, 'p.policy'), text); return join(dir, name); };
  const DRIVE = `policy "drive" version 1

type user

type agent

type folder {
  relation owner: [user]
  relation viewer: [user, agent] or owner
}

type document {
  relation parent: [folder]
  relation viewer: [user, agent] or viewer from parent
}

rule "read-documents" {
  effect permit
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
}
`;
  const SEES = `
rule "only-what-the-person-sees" {
  effect deny
  subjects "agent:*"
  relation "read:documents"
  object "document:*"
  when not (person has viewer on resource)
}
`;

  it('a deny rule asking a question: exit 1, each region names the answer, and explain gives its example the reported decisions', async () => {
    const oldDir = write('old', DRIVE), newDir = write('new', DRIVE + SEES);
    const r = await runCli(['policy', 'diff', oldDir, newDir, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const changes = JSON.parse(r.stdout).changes as Change[];
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) {
      expect(c.region['question: person has viewer on resource']?.answer).not.toBe(true);
      const before = await runCli(['policy', 'explain', oldDir, '--request', JSON.stringify(c.example), '--json']);
      const after = await runCli(['policy', 'explain', newDir, '--request', JSON.stringify(c.example), '--json']);
      expect([JSON.parse(before.stdout).decision, JSON.parse(after.stdout).decision]).toEqual([c.before, c.after]);
    }
    const text = await runCli(['policy', 'diff', oldDir, newDir]);
    expect(text.stdout).toContain('when person.permissions cover the action and not person has viewer on resource: allow -> deny');
    expect(text.stdout).toContain('when person has viewer on resource cannot be answered: allow -> deny');
  });

  it('folders of folders with a conditioned viewer: every example (a chain past the hop limit among them) explains as reported', async () => {
    const model = DRIVE.replace('type folder {\n  relation owner: [user]\n  relation viewer: [user, agent] or owner\n}', 'type folder {\n  relation parent: [folder]\n  relation owner: [user]\n  relation viewer: [user with office_hours, agent] or owner or viewer from parent\n}')
      + '\ncondition office_hours(hour: int) {\n  hour >= 9\n}\n';
    const oldDir = write('old3', model), newDir = write('new3', model + SEES);
    const r = await runCli(['policy', 'diff', oldDir, newDir, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const changes = JSON.parse(r.stdout).changes as Change[];
    expect(changes.some((c) => (c.example.relationships ?? []).length > 25)).toBe(true);
    for (const c of changes) {
      const before = await runCli(['policy', 'explain', oldDir, '--request', JSON.stringify(c.example), '--json']);
      const after = await runCli(['policy', 'explain', newDir, '--request', JSON.stringify(c.example), '--json']);
      expect([JSON.parse(before.stdout).decision, JSON.parse(after.stdout).decision], JSON.stringify(c)).toEqual([c.before, c.after]);
    }
  });

  it('a question on a relation whose definition changed: exit 2, one line naming the rule and the relation', async () => {
    const oldDir = write('old2', DRIVE + SEES), newDir = write('new2', (DRIVE + SEES).replace('relation viewer: [user, agent] or viewer from parent', 'relation viewer: [user, agent]'));
    const r = await runCli(['policy', 'diff', oldDir, newDir]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^gatehouse policy diff: cannot compare exactly: rule "only-what-the-person-sees" \(.*p\.policy:\d+\) asks person has viewer on resource, and relation document#viewer \(or a relation it reads\) is defined differently in the two versions\n$/);
  });
});
