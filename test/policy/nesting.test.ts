// Nesting past the parser's bound is an error at the bracket or `not` that passes it, never a
// stack overflow: the grammar is matched by recursion, and a few hundred levels exhaust the stack.
import { describe, expect, it } from 'vitest';
import { MAX_NESTING, parseExpr, parsePolicy } from '../../src/policy/parser.js';

const rule = (when: string) => `policy "p" version 1

rule "r" {
  effect deny
  subjects "agent:*"
  relation "create:refunds"
  object "refund:*"
  when ${when}
}
`;

describe('deep nesting', () => {
  it('thousands of parentheses, brackets or nots are one error at the first too deep', () => {
    for (const [when, col, what] of [
      [`${'('.repeat(5000)}amount > 1${')'.repeat(5000)}`, 8 + MAX_NESTING - 1, 'brackets nested'],
      [`amount in ${'['.repeat(5000)}1${']'.repeat(5000)}`, 18 + MAX_NESTING - 1, 'brackets nested'],
      [`${'not '.repeat(5000)}amount > 1`, 8 + 4 * MAX_NESTING, '"not" in a row'],
    ] as const) {
      const r = parsePolicy('deep.policy', rule(when));
      expect(r.file).toBeNull();
      expect(r.diagnostics).toEqual([{ file: 'deep.policy', line: 8, col, severity: 'error', message: expect.stringContaining(what) }]);
    }
    expect(parseExpr('('.repeat(5000) + 'a > 1' + ')'.repeat(5000)).diagnostics).toHaveLength(1);
  });

  it('nesting within the bound parses, brackets in strings and comments do not count', () => {
    expect(parsePolicy('ok.policy', rule(`${'('.repeat(50)}amount > 1${')'.repeat(50)}`)).diagnostics).toEqual([]);
    expect(parsePolicy('ok.policy', rule(`${'not '.repeat(50)}amount > 1`)).diagnostics).toEqual([]);
    expect(parsePolicy('ok.policy', `# ${'('.repeat(500)}\n` + rule(`reason == "${'['.repeat(500)}"`)).diagnostics).toEqual([]);
  });
});
