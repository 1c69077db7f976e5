// `verify`: prove the invariants a policy set states, exactly, or give a request that breaks one.
//
// An invariant `never <decision> <relations> on <object> [when <condition>]` holds when no
// request whose action one of the relations covers, whose object the pattern matches and on
// which the condition holds (true: a condition that cannot be evaluated does not hold) gets that
// decision from the set. The order:
//  1. refuse what the exact engine does not model (relationship questions about objects read
//     from paths, in the rules or the invariant; the action compared with another value);
//  2. walk the cells of the request space as `diff` does (diff.ts forEachCell: actions, objects,
//     who acts, and every value the rules, limits and the invariant's condition read), inside
//     the invariant's actions and objects only, also cells that only roles decide; on each cell
//     the set's decision and the condition are settled by the same three-valued deciders as diff's,
//     and a cell where the decision is the one ruled out while the condition holds yields a
//     request, built and checked with decide();
//  3. for `never deny`, an agent without the capability of its action is denied whatever the
//     rules say: where the condition can hold for an agent, that request is the counterexample.
// Relationship questions are walked as diff walks them (diff-questions.ts): each cell once per
// combination of their answers, and a counterexample carries a graph that gives them; a cell
// whose counterexample needs answers no graph within the search gives is an error.
// Like diff, requests are taken without a prior approval (an approval is a person's later
// answer, after approval_required) and, in step 2, by agents that hold their capability.
// A set too large to walk within the step budget is an error, never a guess.

import type { DecisionRequest, DecisionValue, Diagnostic } from './types.js';
import type { PolicySet } from './compile.js';
import { compileCondition, zoneOf } from './compile.js';
import { declaredTypesOf } from './declared.js';
import { atomsOf, relQuestionPaths, relQuestionsOf, type InvariantNode, type PolicyFileNode } from './ast.js';
import { actionGroupsOf, ruleRelations } from './action-groups.js';
import { invariantAsRule } from './validate.js';
import { decide } from './decide.js';
import { fmtExpr } from './format.js';
import { parseTypedPattern, type Pattern } from './patterns.js';
import { construct, SpaceTooLarge } from './space.js';
import { StringSearchTooLarge } from './strings.js';
import { conditionProbe, type Probe } from './symbolic.js';
import { envOf } from './values.js';
import {
  Budget, cellCombinations, compare, DIFF_STEPS, DiffRefused, DiffTooLarge, exampleOf, forEachCell, refuseUnmodelled, sideProbe, withReferences,
  type CellContext, type ExampleRequest,
} from './diff.js';
import { combinationText, realise, REALISE_MAX_SIZE, type Answer, type Realised } from './diff-questions.js';

export interface InvariantResult {
  name: string;
  file: string;
  line: number;
  holds: boolean;
  /** A request (as `policy explain` takes it) that gets the decision ruled out; null when the invariant holds. */
  counterexample: ExampleRequest | null;
  /** Why it could not be proven either way (too large, or something the engine does not model). */
  error?: string;
}

export interface VerifyOptions { steps?: number }

/** Every invariant the set's files state, with the time zone its file reads `time.*` in. */
export function invariantsOf(set: PolicySet): { inv: InvariantNode; file: PolicyFileNode; zone: string }[] {
  return set.compiled.files.flatMap((file) => file.items.filter((i): i is InvariantNode => i.kind === 'invariant').map((inv) => ({ inv, file, zone: zoneOf(file) })));
}

/** Prove every invariant of the set, in file order. */
export function verifyInvariants(set: PolicySet, options: VerifyOptions = {}): InvariantResult[] {
  return invariantsOf(set).map(({ inv, file, zone }) => verifyInvariant(set, inv, zone, file.path, options));
}

const DECISION: Record<string, DecisionValue> = { allow: 'allow', deny: 'deny', approval_required: 'approval_required' };

/** Thrown out of the walk at the first counterexample. */
class Found { constructor(readonly example: ExampleRequest) {} }

export function verifyInvariant(set: PolicySet, inv: InvariantNode, zone: string, path: string, options: VerifyOptions = {}): InvariantResult {
  const base = { name: inv.name, file: inv.loc?.file ?? path, line: inv.loc?.line ?? 1 };
  try {
    const example = counterexample(set, inv, zone, options);
    return { ...base, holds: example === null, counterexample: example };
  } catch (e) {
    if (e instanceof DiffTooLarge || e instanceof DiffRefused || e instanceof SpaceTooLarge || e instanceof StringSearchTooLarge) {
      const message = e.message.replace(/^too large to compare exactly/, 'too large to prove exactly').replace(/^cannot compare exactly/, 'cannot prove exactly').replace(/which diff does not model yet/, 'which the exact engine does not model yet');
      return { ...base, holds: false, counterexample: null, error: message };
    }
    throw e;
  }
}

/** Does the request break the invariant: its decision is the one ruled out and the condition holds (the cell fixes action and object). */
export function breaks(set: PolicySet, inv: InvariantNode, zone: string, req: DecisionRequest): boolean {
  if (decide(req, set).decision !== DECISION[inv.never]) return false;
  return inv.when ? conditionHolds(set, inv, zone, req) : true;
}

/** The invariant's condition on a request (its relationship questions on the request's relationships). */
function conditionHolds(set: PolicySet, inv: InvariantNode, zone: string, req: DecisionRequest): boolean {
  const env = envOf(req);
  env.model = set.compiled.relations;
  return compileCondition(inv.when!, zone, declaredTypesOf(set.compiled.files))(env) === 1;
}

function counterexample(set: PolicySet, inv: InvariantNode, zone: string, options: VerifyOptions): ExampleRequest | null {
  const ruledOut = DECISION[inv.never];
  if (!ruledOut) throw new DiffRefused(`invariant "${inv.name}" rules out an unknown decision "${inv.never}"`);
  refuseUnmodelled([set, set], true);
  const q = inv.when ? relQuestionsOf(inv.when).find((x) => relQuestionPaths(x).length) : undefined;
  if (q) throw new DiffRefused(`invariant "${inv.name}" asks ${fmtExpr(q)} about an object read from a path, which diff does not model yet`);
  const model = set.compiled.relations;
  const invRule = { name: inv.name, ast: { ...(inv.when ? { when: inv.when } : {}) } };
  const groups = actionGroupsOf(set.compiled.files);
  const onlyActions = ruleRelations(invariantAsRule(inv), groups).map((r) => parseTypedPattern(r)).filter((p): p is Pattern => p !== null);
  const onlyObject = parseTypedPattern(inv.object);
  if (!onlyActions.length || !onlyObject) throw new DiffRefused(`invariant "${inv.name}" names no relation or object it could be proven for`);
  const atoms = inv.when ? atomsOf(inv.when).map((atom) => ({ atom, zone })) : [];
  const walk = { onlyActions, onlyObject, atoms, everyCell: true };

  /** Walk the cells with a probe that says 'deny' where the invariant is broken, 'allow' where it is not, null where not known yet. */
  const search = (budget: Budget, check: (req: DecisionRequest) => boolean, broken: (c: CellContext, answers?: ReadonlyMap<string, Answer>) => Probe, accept: (c: CellContext, req: DecisionRequest) => DecisionRequest | null): ExampleRequest | null => {
    const clear = new Set<string>();
    try {
      forEachCell([set], budget, walk, (c) => {
        if (clear.has(c.sig)) return;
        // Relationship questions (the invariant's too): once per combination of their answers.
        const { qs, combos } = cellCombinations(c, [...c.rules, invRule], model);
        for (const combo of combos) {
          if (combo) budget.spend(1);
          /** The request with a graph that gives the combination's answers and breaks the invariant or not as the cells say. */
          const realised = (req: DecisionRequest, broke: boolean): Realised => {
            if (!combo) return { request: req, graph: [] };
            const r = realise(req, qs, combo, [set, set], c.space.principal.check, (x) => check(x) === broke, (n) => budget.spend(n));
            if (!r) throw new DiffRefused(`no graph of up to ${REALISE_MAX_SIZE} relationships found where ${combinationText(combo)} (${c.who}), so whether the invariant holds there is not known`);
            return r;
          };
          const computed = compare(c.space, [broken(c, combo?.answers), () => 'allow'], c.rules, budget, (req, expected) => [check(realised(req, expected[0] === 'deny').request) ? 'deny' : 'allow', 'allow']);
          for (const b of computed.boxes) {
            const built = construct(c.space, b.point);
            const r = built && realised(built.request, true);
            const req = r && accept(c, r.request);
            if (req) {
              const example = withReferences(exampleOf(req, c.space), set.compiled.referenceTypes);
              // an agent without the capability of its action says so (explain would assume it held)
              if (req.subject.capabilities && !req.subject.capabilities.some((k) => k.name === req.action)) example.subject.capabilities = req.subject.capabilities;
              if (combo) example.relationships = r.graph;
              throw new Found(example);
            }
          }
        }
        clear.add(c.sig);
      });
    } catch (e) {
      if (e instanceof Found) return e.example;
      throw e;
    }
    return null;
  };

  const declared = declaredTypesOf(set.compiled.files);
  const budget = new Budget(options.steps ?? DIFF_STEPS);
  const found = search(budget, (req) => breaks(set, inv, zone, req), (c, answers) => {
    const policy = sideProbe(set, c, answers), cond = conditionProbe(c.space, inv.when, zone, declared, answers);
    return (point, chosen) => {
      const v = cond(point, chosen);
      if (v === 0 || v === 2) return 'allow';
      const d = policy(point, chosen);
      if (d !== null && d !== ruledOut) return 'allow';
      return v === 1 && d === ruledOut ? 'deny' : null;
    };
  }, (_c, req) => req);
  if (found || ruledOut !== 'deny') return found;

  // Step 3: an agent without its capability, on a request where the condition holds.
  const withoutCapability = (req: DecisionRequest): DecisionRequest => ({ ...req, subject: { ...req.subject, capabilities: [] } });
  const holds = (req: DecisionRequest) => !inv.when || conditionHolds(set, inv, zone, req);
  return search(budget, holds, (c, answers) => {
    const cond = conditionProbe(c.space, inv.when, zone, declared, answers);
    if (c.pc.kind === 'user') return () => 'allow';
    return (point, chosen) => { const v = cond(point, chosen); return v === 1 ? 'deny' : v === 3 ? null : 'allow'; };
  }, (c, req) => {
    if (c.pc.kind === 'user') return null;
    const stripped = withoutCapability(req);
    return breaks(set, inv, zone, stripped) ? stripped : null;
  });
}

/** One line saying what a counterexample is: who asks what, with which facts. */
export function counterexampleText(ex: ExampleRequest): string {
  const s = ex.subject as { type?: string; id?: string };
  const who = `${s.type ?? 'agent'} ${s.id ?? '?'}${ex.person ? ` for person ${String(ex.person.id)}` : ''}`;
  return `${who} asking ${ex.action} on ${ex.resource}: ${JSON.stringify(ex)}`;
}

/** The invariants of a set as diagnostics: one error per invariant that does not hold or cannot be proven. */
export function invariantDiagnostics(set: PolicySet, options: VerifyOptions = {}): Diagnostic[] {
  const out: Diagnostic[] = [];
  for (const { inv, file, zone } of invariantsOf(set)) {
    const r = verifyInvariant(set, inv, zone, file.path, options);
    if (r.holds) continue;
    const loc = inv.loc ?? { file: file.path, line: 1, col: 1 };
    const message = r.error
      ? `invariant "${inv.name}" cannot be proven: ${r.error}`
      : `invariant "${inv.name}" does not hold: ${counterexampleText(r.counterexample!)} gets ${inv.never}`;
    out.push({ file: loc.file, line: loc.line, col: loc.col, message, severity: 'error' });
  }
  return out;
}
