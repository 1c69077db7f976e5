import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide, loadPolicySet, usageLimitsFor, type DecisionRequest, type PersonFacts, type SubjectFacts } from '../../src/policy/index.js';
import { decideOverChain } from '../../src/policy/chain.js';
import { DiffTooLarge, diffPolicySets, inRegion } from '../../src/policy/diff.js';
import { completeRequest, explainDecision } from '../../src/policy/explain.js';
import { usageKey } from '../../src/policy/usage.js';
import { setOf } from './helpers.js';

// Decisions over a delegation chain, in the policy library: the chain is allowed only when
// every agent of it is, never more often than its most limited agent allows; the language
// reads `chain.*`; diff treats the chain's depth as part of the request space.

const ACTION = 'read:docs';
const EMPTY = loadPolicySet({ files: [] }).policySet!;

interface Member { holds: boolean; granted: boolean; max: number; used: number }

function agentOf(i: number, m: Member): SubjectFacts {
  return {
    type: 'agent', id: `agent-${i}`, mode: 'delegated', roles: [], groups: [],
    permissions: m.granted ? [ACTION] : [], attributes: { level: i },
    capabilities: m.holds ? [{ name: ACTION, limits: { count: { max: m.max, per: '1h' } } }] : [],
  };
}

const person = (granted: boolean): PersonFacts => ({ id: 'ada', roles: [], groups: [], permissions: granted ? [ACTION] : [], attributes: {} });

function requestOf(members: Member[], personGranted: boolean): DecisionRequest {
  const agents = members.map((m, i) => agentOf(i, m));
  return { subject: agents[agents.length - 1]!, person: person(personGranted), action: ACTION, resource: 'doc:1', context: {}, now: 0, chain: { agents } };
}

const KEY = usageKey(usageLimitsFor(requestOf([{ holds: true, granted: true, max: 1, used: 0 }, { holds: true, granted: true, max: 1, used: 0 }], true), EMPTY)[0]!);

const arbMember = fc.record({ holds: fc.boolean(), granted: fc.boolean(), max: fc.integer({ min: 0, max: 4 }), used: fc.integer({ min: 0, max: 4 }) });

describe('a decision over a chain', () => {
  it('is allowed only if every member is, and never more often than the least of them allows', () => {
    fc.assert(
      fc.property(fc.array(arbMember, { minLength: 2, maxLength: 5 }), fc.boolean(), (members, personGranted) => {
        const used = members.map((m) => m.used);
        const request = requestOf(members, personGranted);
        let allows = 0;
        for (let call = 0; call < 6; call++) {
          const usageOf = (id: string) => ({ [KEY]: used[Number(id.slice('agent-'.length))]! });
          const chained = decideOverChain(request, (r) => decide(r, EMPTY), usageOf);
          // Each member on its own, as a one-hop delegated agent with its own usage.
          const alone = request.chain!.agents.map((a) => decide({ ...request, subject: a, chain: undefined, usage: usageOf(a.id) }, EMPTY).decision);
          expect(chained.decision === 'allow').toBe(alone.every((d) => d === 'allow'));
          if (chained.decision !== 'allow') break;
          allows++;
          // An allow consumes on every member's counter.
          for (let i = 0; i < used.length; i++) used[i]!++;
        }
        const everyoneMay = personGranted && members.every((m) => m.holds && m.granted);
        const least = Math.min(...members.map((m) => Math.max(0, m.max - m.used)));
        expect(allows).toBe(everyoneMay ? Math.min(least, 6) : 0);
      }),
      { seed: 20261127, numRuns: 300 },
    );
  });

  it("names the agent above the actor whose deny it is, and keeps every agent's trace", () => {
    const members: Member[] = [
      { holds: true, granted: false, max: 5, used: 0 },
      { holds: true, granted: true, max: 5, used: 0 },
    ];
    const d = decideOverChain(requestOf(members, true), (r) => decide(r, EMPTY));
    expect(d.decision).toBe('deny');
    expect(d.reason).toBe('not_granted: read:docs (agent agent-0 in the chain)');
    expect(d.trace.some((t) => t.check.startsWith('agent-0 (chain): '))).toBe(true);
  });
});

const DEPTH_RULE = `policy "chains" version 1

rule "short chains only" {
  effect deny
  subjects "agent:*"
  relation "read:docs"
  object "doc:*"
  when chain.depth > 2
}
`;

function chainOfDepth(n: number, attributes: Record<string, unknown> = {}): DecisionRequest {
  const members = Array.from({ length: n }, () => ({ holds: true, granted: true, max: 100, used: 0 }));
  const r = requestOf(members, true);
  if (n === 1) delete r.chain;
  // As diff regions speak of agents: the capability held, with no limits of its own.
  for (const a of r.chain?.agents ?? [r.subject]) {
    a.attributes = { ...attributes };
    a.capabilities = [{ name: ACTION }];
  }
  return r;
}

describe('the language reads the chain', () => {
  it('chain.depth counts the agents acting for the person (1 for a delegated agent alone)', () => {
    const set = setOf(DEPTH_RULE);
    expect([1, 2, 3, 5].map((n) => decide(chainOfDepth(n), set).decision)).toEqual(['allow', 'allow', 'deny', 'deny']);
  });

  it('chain.agents lists their IDs; chain.<attribute> lists the agents’ values', () => {
    const set = setOf(`policy "chains" version 1

rule "no agent-1 in a chain" {
  effect deny
  subjects "agent:*"
  relation "read:docs"
  object "doc:*"
  when chain.agents contains "agent-1" or chain.vendor contains "untrusted"
}
`);
    expect(decide(chainOfDepth(2), set).decision).toBe('deny');
    const clean: DecisionRequest = { ...chainOfDepth(2), chain: { agents: [agentOf(7, { holds: true, granted: true, max: 9, used: 0 }), agentOf(8, { holds: true, granted: true, max: 9, used: 0 })] } };
    clean.subject = clean.chain!.agents[1]!;
    // A condition on a value no agent has fails closed: a deny rule applies.
    expect(decide(clean, set).decision).toBe('deny');
    clean.chain!.agents[0]!.attributes = { vendor: 'acme' };
    expect(decide(clean, set).decision).toBe('allow');
    clean.chain!.agents[0]!.attributes = { vendor: 'untrusted' };
    expect(decide(clean, set).decision).toBe('deny');
  });

  it('explain decides every agent of a chain', () => {
    const d = explainDecision({ ...chainOfDepth(3), chain: { agents: [agentOf(0, { holds: true, granted: false, max: 1, used: 0 }), ...chainOfDepth(3).chain!.agents.slice(1)] } }, EMPTY);
    expect(d.decision).toBe('deny');
    expect(d.reason).toContain('(agent agent-0 in the chain)');
  });
});

describe('policy diff and the chain', () => {
  it('diffs a rule reading chain.depth exactly: the region holds depths 3 to 5, and only those', () => {
    const before = EMPTY;
    const after = setOf(DEPTH_RULE);
    const { changes } = diffPolicySets(before, after);
    expect(changes.length).toBeGreaterThan(0);
    for (let n = 1; n <= 5; n++) {
      const r = chainOfDepth(n);
      const changed = decide(r, before).decision !== decide(r, after).decision;
      expect(changed).toBe(n > 2);
      expect(changes.filter((c) => inRegion(c, r)).length).toBe(changed ? 1 : 0);
    }
    for (const c of changes) {
      expect(c.example.chain?.length ?? 1).toBeGreaterThan(2);
      // The example, read back as `policy explain` reads a request, lies in its region and changes.
      const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => 0);
      expect(inRegion(c, request)).toBe(true);
      expect([decide(request, before).decision, decide(request, after).decision]).toEqual([c.before, c.after]);
    }
  });

  it('diffs a rule reading the chain’s agents exactly: the region is the chains that hold the agent named', () => {
    const after = setOf(DEPTH_RULE.replace('chain.depth > 2', 'chain.agents contains "agent-1"'));
    const { changes } = diffPolicySets(EMPTY, after);
    expect(changes.length).toBeGreaterThan(0);
    const requests: DecisionRequest[] = [];
    for (let n = 1; n <= 5; n++) {
      requests.push(chainOfDepth(n));
      // the same depth without agent-1 in it
      const r = chainOfDepth(n);
      if (r.chain) r.chain = { agents: r.chain.agents.map((a) => (a.id === 'agent-1' ? { ...a, id: 'agent-9' } : a)) };
      requests.push(r);
    }
    for (const r of requests) {
      const changed = decide(r, EMPTY).decision !== decide(r, after).decision;
      expect(changed).toBe((r.chain?.agents ?? [r.subject]).some((a) => a.id === 'agent-1'));
      expect(changes.filter((c) => inRegion(c, r)).length, JSON.stringify(r.chain?.agents.map((a) => a.id))).toBe(changed ? 1 : 0);
    }
    for (const c of changes) {
      const { request } = completeRequest(JSON.parse(JSON.stringify(c.example)), () => 0);
      expect(inRegion(c, request)).toBe(true);
      expect([decide(request, EMPTY).decision, decide(request, after).decision]).toEqual([c.before, c.after]);
    }
  });

  it('with depth and agents together, exact on every chain of the small domain', () => {
    const after = setOf(DEPTH_RULE.replace('chain.depth > 2', 'chain.depth < 3 and chain.agents contains "agent-0"'));
    const { changes } = diffPolicySets(EMPTY, after);
    for (let n = 1; n <= 5; n++) for (const swap of [false, true]) {
      const r = chainOfDepth(n);
      if (swap && r.chain) r.chain = { agents: r.chain.agents.map((a) => (a.id === 'agent-0' ? { ...a, id: 'agent-9' } : a)) };
      const changed = decide(r, EMPTY).decision !== decide(r, after).decision;
      expect(changes.filter((c) => inRegion(c, r)).length).toBe(changed ? 1 : 0);
    }
  });

  it('refuses, rather than guesses, when a rule reads the chain’s agents’ attributes', () => {
    const after = setOf(DEPTH_RULE.replace('chain.depth > 2', 'chain.vendor contains "x"'));
    expect(() => diffPolicySets(EMPTY, after)).toThrow(DiffTooLarge);
  });
});
