import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, type DecisionRequest } from '../../src/policy/index.js';
import { diffPolicySets, inRegion } from '../../src/policy/diff.js';
import type { Item, PolicyFileNode } from '../../src/policy/ast.js';
import { arbPolicyFile, arbRequest, CONTRACT_EXAMPLE, setFromAst, setOf } from './helpers.js';
import { formatFile } from '../../src/policy/format.js';
import { parsePolicy } from '../../src/policy/parser.js';

describe('diff', () => {
  const old = setOf(CONTRACT_EXAMPLE, 'old.policy');

  it('a reformatted and reordered policy set reports no change', () => {
    const reordered = CONTRACT_EXAMPLE.replace(/\n\n/g, '\n').replace('amount max 500 min 1', 'amount min 1   max 500')
      .replace('when amount >= 1000 and currency == "USD"', 'when (currency == "USD") and amount >= 1000');
    const file = parsePolicy('new.policy', reordered).file!;
    const items = [file.items[2]!, file.items[0]!, file.items[1]!];
    const shuffled = setOf(formatFile({ ...file, items }).replace('version 3', 'version 4'), 'new.policy');
    expect(diffPolicySets(old, shuffled).changes).toEqual([]);
  });

  it('reports a changed threshold as a region with an example', () => {
    const next = setOf(CONTRACT_EXAMPLE.replace('amount > 10000', 'amount > 5000'), 'new.policy');
    const { changes } = diffPolicySets(old, next);
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) {
      expect(c.before).not.toBe(c.after);
      expect(c.after).toBe('deny');
      expect(c.region.amount).toBeDefined();
      const ex: DecisionRequest = {
        agent: { id: c.example.agent_id, mode: 'autonomous', permissions: ['*:*'], capabilities: [{ name: c.example.action }] },
        action: c.example.action, resource: c.example.resource, context: c.example.context,
      };
      expect(inRegion(c, ex)).toBe(true);
    }
    const main = changes.find((c) => c.subjects[0] === 'agent:*' && c.object === 'refund:*')!;
    expect(main).toMatchObject({ relation: 'create:refunds', before: 'approval_required', after: 'deny', region: { amount: { gt: 5000, lte: 10000 } } });
    expect(main.except).toEqual({ subjects: ['agent:spiffe://localhost/agent/billing'] });
  });

  it('is exact: a request changes decision exactly when it lies in a reported region', () => {
    fc.assert(fc.property(arbPolicyFile, arbPolicyFile, fc.array(arbRequest, { minLength: 20, maxLength: 20 }), (a, b, reqs) => {
      const sa = setFromAst(a), sb = setFromAst(b);
      const { changes } = diffPolicySets(sa, sb);
      for (const r0 of reqs) {
        // a fully granted agent and person: the diff is about policy, not roles
        const r: DecisionRequest = { ...r0, approved: false, agent: { ...r0.agent, permissions: ['*:*'], capabilities: [{ name: r0.action }] } };
        if (r.person) r.person = { ...r.person, permissions: ['*:*'] };
        const before = decide(r, sa).decision, after = decide(r, sb).decision;
        const hits = changes.filter((c) => inRegion(c, r));
        if (before === after) expect(hits).toEqual([]);
        else {
          expect(hits.length).toBe(1);
          expect([hits[0]!.before, hits[0]!.after]).toEqual([before, after]);
        }
      }
    }), { numRuns: 60 });
  });

  it('reports no change between a set and itself with items reordered (random)', () => {
    fc.assert(fc.property(arbPolicyFile, (a) => {
      const rules = a.items.filter((i) => i.kind === 'rule');
      const limits = a.items.filter((i) => i.kind === 'limits');
      // reordering limits blocks or rules of different effect never changes a decision
      const b: PolicyFileNode = { ...a, items: [...limits.reverse(), ...rules] as Item[] };
      expect(diffPolicySets(setFromAst(a), setFromAst(b)).changes).toEqual([]);
    }), { numRuns: 60 });
  });
});
