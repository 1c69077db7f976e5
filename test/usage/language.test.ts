import { describe, expect, it } from 'vitest';
import {
  addAmounts,
  checkUsageLimit,
  checkUsageLimits,
  formatUsageNode,
  readUsageFacts,
  validateUsageNodes,
  type PlainFieldFacts,
  type UsageLimitNode,
  type UsageTraceStep,
  formatWindow,
  jsonUsageLimits,
  normalizeUsageKey,
  parseWindow,
  usageKey,
  type UsageLimit,
} from '../../src/policy/usage.js';

describe('windows', () => {
  it('reads <n>s, <n>m, <n>h and <n>d, up to 31 days', () => {
    expect(parseWindow('90s')).toEqual({ seconds: 90 });
    expect(parseWindow('10m')).toEqual({ seconds: 600 });
    expect(parseWindow('24h')).toEqual({ seconds: 86400 });
    expect(parseWindow('31d')).toEqual({ seconds: 31 * 86400 });
  });
  it('says what is wrong with anything else', () => {
    expect(parseWindow('24x')).toEqual({ error: 'unknown window unit "x" in "24x" (use s, m, h or d)' });
    expect(parseWindow('24')).toEqual({ error: 'window "24" needs a unit: s, m, h or d (as in 24h)' });
    expect(parseWindow('32d')).toEqual({ error: 'window "32d" is longer than 31 days' });
    expect(parseWindow('745h')).toEqual({ error: 'window "745h" is longer than 31 days' });
    expect(parseWindow('0m')).toEqual({ error: 'window "0m" is empty: it must be at least 1s' });
    expect(parseWindow('h')).toHaveProperty('error');
  });
  it('writes a window in its largest whole unit', () => {
    expect([formatWindow(86400), formatWindow(3600), formatWindow(5400), formatWindow(61)]).toEqual(['1d', '1h', '90m', '61s']);
  });
});

describe('usage keys', () => {
  it('name what is counted; the same thing written two ways is one counter', () => {
    const l = { kind: 'count', field: null, seconds: 3600, scope: 'agent' } as const;
    expect(usageKey(l)).toBe('count per 1h');
    expect(usageKey({ kind: 'sum', field: 'amount', seconds: 86400, scope: 'resource' })).toBe('amount sum per 1d per resource');
    expect(normalizeUsageKey('count per 60m')).toEqual({ key: 'count per 1h' });
    expect(normalizeUsageKey('amount  sum per 24h per person')).toEqual({ key: 'amount sum per 1d per person' });
    expect(normalizeUsageKey('amount per 24h')).toHaveProperty('error');
    expect(normalizeUsageKey('count per 1h per team')).toHaveProperty('error');
  });
});

describe('the check of one request', () => {
  const sum: UsageLimit = { kind: 'sum', field: 'amount', max: 2000, per: '24h', seconds: 86400, scope: 'agent', source: 't' };
  const count: UsageLimit = { kind: 'count', field: null, max: 20, per: '1h', seconds: 3600, scope: 'agent', source: 't' };
  it('passes up to the maximum and not beyond', () => {
    expect(checkUsageLimit(sum, 'k', { amount: 500 }, 1500).violated).toBeNull();
    expect(checkUsageLimit(sum, 'k', { amount: 501 }, 1500).violated).toBe('sum');
    expect(checkUsageLimit(count, 'k', {}, 19).violated).toBeNull();
    expect(checkUsageLimit(count, 'k', {}, 20).violated).toBe('count');
  });
  it('fails closed on a sum without a number: missing is required, a string or a negative amount violates the sum', () => {
    expect(checkUsageLimit(sum, 'k', {}, 0).violated).toBe('required');
    expect(checkUsageLimit(sum, 'k', { amount: '5' }, 0).violated).toBe('sum');
    expect(checkUsageLimit(sum, 'k', { amount: -5 }, 0).violated).toBe('sum');
  });
  it('adds decimal amounts as written', () => {
    expect(addAmounts(0.1, 0.2)).toBe(0.3);
    const tenth: UsageLimit = { ...sum, max: 0.3 };
    expect(checkUsageLimit(tenth, 'k', { amount: 0.2 }, 0.1).violated).toBeNull();
  });
});

describe('the JSON shape of the management API', () => {
  it('reads sums on fields and counts at the top', () => {
    const { limits, diagnostics } = jsonUsageLimits(
      { amount: { max: 500, sum: { max: 2000, per: '24h' } }, count: [{ max: 20, per: '1h' }, { max: 3, per: '10m', scope: 'resource' }] },
      'api:capability/create:refunds',
    );
    expect(diagnostics).toEqual([]);
    expect(limits.map(usageKey)).toEqual(['amount sum per 1d', 'count per 1h', 'count per 10m per resource']);
    expect(limits[0]).toMatchObject({ max: 2000, per: '24h', source: 'api:capability/create:refunds' });
  });
  it('names the member at fault', () => {
    const messages = (v: unknown) => jsonUsageLimits(v).diagnostics.map((d) => d.message);
    expect(messages({ count: [{ max: 20, per: '1w' }] })).toEqual(['count[0].per: unknown window unit "w" in "1w" (use s, m, h or d)']);
    expect(messages({ amount: { sum: { max: 1, per: '40d' } } })).toEqual(['amount.sum.per: window "40d" is longer than 31 days']);
    expect(messages({ currency: { in: ['USD'], sum: { max: 1, per: '1h' } } })).toEqual([
      'currency.sum: currency is compared with strings (in), and a sum needs a number',
    ]);
    expect(messages({ count: [{ max: 2.5, per: '1h', scope: 'team' }] })).toEqual([
      "count[0].max: a count's maximum must be a whole number",
      'count[0].scope: must be "agent", "resource" or "person"',
    ]);
    expect(messages({ count: [{ max: 2 }] })).toEqual(['count[0].per: the window is required, as a string such as "24h"']);
  });
  it('leaves a plain limit on a context field named count alone', () => {
    expect(jsonUsageLimits({ count: 5 })).toEqual({ limits: [], diagnostics: [] });
    expect(jsonUsageLimits({ count: { max: 5 } })).toEqual({ limits: [], diagnostics: [] });
  });
});

describe('limit lines of a block', () => {
  const at = { file: 'p.policy', line: 1, col: 1 };
  const check = (nodes: UsageLimitNode[], plain: PlainFieldFacts[] = [], types?: Record<string, string>) => {
    const out: { message: string; line: number }[] = [];
    validateUsageNodes(nodes, plain, at, out as never, types ? (f) => types[f] : undefined);
    return out.map((d) => `${d.line}: ${d.message}`);
  };
  const loc = (line: number) => ({ file: 'p.policy', line, col: 3 });
  it('accepts the forms of the language', () => {
    expect(check([
      { kind: 'sum', field: 'amount', max: 2000, per: '24h', loc: loc(2) },
      { kind: 'count', field: null, max: 20, per: '1h', loc: loc(3) },
      { kind: 'count', field: null, max: 3, per: '10m', scope: 'resource', loc: loc(4) },
      { kind: 'count', field: null, max: 3, per: '10m', scope: 'person', loc: loc(5) },
    ], [{ field: 'amount', max: 500 }])).toEqual([]);
  });
  it('reports each problem at its line', () => {
    expect(check([
      { kind: 'sum', field: 'currency', max: 10, per: '1h', loc: loc(2) },
      { kind: 'count', field: null, max: 20, per: '1w', loc: loc(3) },
      { kind: 'count', field: null, max: 20, per: '32d', loc: loc(4) },
      { kind: 'count', field: null, max: 1.5, per: '1h', scope: 'team', loc: loc(5) },
      { kind: 'count', field: null, max: 5, per: '1h', loc: loc(6) },
      { kind: 'count', field: null, max: 5, per: '60m', loc: loc(7) },
      { kind: 'sum', field: 'note', max: 5, per: '1h', loc: loc(8) },
    ], [{ field: 'currency', in: ['USD', 'EUR'] }], { note: 'string' })).toEqual([
      '2: currency sum: currency is compared with strings (in) in this block, and a sum needs a number',
      '3: count: unknown window unit "w" in "1w" (use s, m, h or d)',
      '4: count: window "32d" is longer than 31 days',
      "5: count max: a count's maximum must be a whole number",
      '5: count: unknown scope "per team" (use per resource or per person)',
      '7: count per 1h is limited twice in one block',
      '8: note sum: note is declared string, and a sum needs a number',
    ]);
  });
  it('formats as written', () => {
    expect(formatUsageNode({ kind: 'sum', field: 'amount', max: 2000, per: '24h' })).toBe('amount sum max 2000 per 24h');
    expect(formatUsageNode({ kind: 'count', field: null, max: 3, per: '10m', scope: 'resource' })).toBe('count max 3 per 10m per resource');
  });
});

describe('the step of the decision', () => {
  const limits: UsageLimit[] = [
    { kind: 'sum', field: 'amount', max: 2000, per: '24h', seconds: 86400, scope: 'agent', source: 'p.policy:3' },
    { kind: 'count', field: null, max: 20, per: '1h', seconds: 3600, scope: 'agent', source: 'p.policy:4' },
  ];
  it('checks in order and stops at the first violated, saying what it read', () => {
    const trace: UsageTraceStep[] = [];
    const r = checkUsageLimits(limits, { amount: 600 }, { 'amount sum per 1d': 1500, 'count per 1h': 19 }, trace);
    expect(r.violated?.key).toBe('amount sum per 1d');
    expect(trace).toEqual([{
      step: 'limits', outcome: 'fail', source: 'p.policy:3',
      check: 'amount sum max 2000 per 24h (used 1500, this adds 600)',
      reads: [{ path: 'usage.amount sum per 1d', value: 1500, present: true }, { path: 'context.amount', value: 600, present: true }],
    }]);
    const ok = checkUsageLimits(limits, { amount: 500 }, { 'amount sum per 1d': 1500, 'count per 1h': 19 }, []);
    expect([ok.violated, ok.checks.map((c) => c.amount)]).toEqual([null, [500, 1]]);
  });
  it('reads usage as a person states it', () => {
    expect(readUsageFacts({ 'count per 60m': 19, 'amount sum per 24h': 1500 })).toEqual({ usage: { 'count per 1h': 19, 'amount sum per 1d': 1500 }, errors: [] });
    expect(readUsageFacts({ 'count per 1x': 1, 'count per 1h': -1 }).errors).toEqual([
      'usage: unknown window unit "x" in "1x" (use s, m, h or d)',
      'usage "count per 1h": must be a number, not negative',
    ]);
  });
});
