// Bad input is refused, never a crash: any text given as a model, a store or a condition gives
// an import or refusals with a line inside the input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { importOpenfga } from '../../../src/policy/openfga/index.js';
import { translateCondition } from '../../../src/policy/openfga/translate.js';
import { readFrom } from './helpers.js';

const MODEL = 'model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [user, doc#viewer with c] or owner from parent but not x\n    define parent: [doc]\ncondition c(x: int, l: list<string>) {\n  x > 1 && l.exists(y, y.startsWith("a")) || size(l) == 0u\n}\n';
const STORE = 'name: s\nmodel_file: m.fga\ntuples:\n  - {user: "user:a", relation: viewer, object: "doc:1"}\ntests:\n  - name: t\n    check:\n      - {user: "user:a", object: "doc:1", assertions: {viewer: true}}\n';

/** The text with a few characters replaced, inserted or deleted at random places. */
const mutated = (text: string) => fc.array(fc.tuple(fc.nat(text.length), fc.constantFrom('', ' ', '\n', ':', '#', '[', ']', '(', ')', '{', '}', '"', "'", ',', '-', 'or', 'and', 'but not', 'x', '\t', '*', '!', '.', '?', '0u')), { minLength: 1, maxLength: 4 })
  .map((edits) => edits.reduce((s, [at, piece], i) => (i % 2 ? s.slice(0, at) + piece + s.slice(at + 1) : s.slice(0, at) + piece + s.slice(at)), text));

function lines(text: string): number { return text.split('\n').length; }

describe('bad input', () => {
  it('thousands of nested parentheses or negations are refused at their line, not a stack overflow', () => {
    const valid = MODEL.replace(' but not x', '').replace('owner from parent', 'viewer from parent');
    const deep = valid.replace('or viewer from parent', `or ${'('.repeat(5000)}viewer from parent${')'.repeat(5000)}`);
    const r = importOpenfga('m.fga', readFrom({ 'm.fga': deep }));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.refusals).toEqual([expect.objectContaining({ line: 6, message: expect.stringContaining('nested more than 100 deep') })]);
    for (const expr of [`${'('.repeat(5000)}x > 1${')'.repeat(5000)}`, `${'!'.repeat(5000)}(x > 1)`, `x in ${'['.repeat(5000)}1${']'.repeat(5000)}`]) {
      const c = importOpenfga('m.fga', readFrom({ 'm.fga': valid.replace(/x > 1 &&[^\n]*/, expr) }));
      expect(c.ok, expr.slice(0, 20)).toBe(false);
      if (!c.ok) expect(c.refusals.map((x) => x.message).join('\n')).toContain('nested more than 100 deep');
    }
    // Within the bound, nesting imports as before.
    expect(importOpenfga('m.fga', readFrom({ 'm.fga': valid.replace('or viewer from parent', `or ${'('.repeat(50)}viewer from parent${')'.repeat(50)}`) })).ok).toBe(true);
  });

  it('a mangled model is imported or refused within its lines', () => {
    fc.assert(fc.property(mutated(MODEL), (text) => {
      const r = importOpenfga('m.fga', readFrom({ 'm.fga': text }));
      if (!r.ok) for (const x of r.refusals) expect(x.line >= 1 && x.line <= lines(text) && x.message.length > 0).toBe(true);
    }), { numRuns: 400, seed: 11 });
  });

  it('a mangled store file is imported or refused within its lines', () => {
    fc.assert(fc.property(mutated(STORE), (text) => {
      const r = importOpenfga('s.fga.yaml', readFrom({ 's.fga.yaml': text, 'm.fga': MODEL.replace(' but not x', '') }));
      if (!r.ok) for (const x of r.refusals) expect(x.line >= 1 && x.line <= Math.max(lines(text), lines(MODEL)) && x.message.length > 0).toBe(true);
    }), { numRuns: 400, seed: 12 });
  });

  it('a mangled JSON model is imported or refused within its lines', () => {
    const json = JSON.stringify({
      schema_version: '1.1',
      type_definitions: [{ type: 'user' }, { type: 'doc', relations: { parent: { this: {} }, viewer: { union: { child: [{ this: {} }, { tupleToUserset: { tupleset: { relation: 'parent' }, computedUserset: { relation: 'viewer' } } }] } } }, metadata: { relations: { parent: { directly_related_user_types: [{ type: 'doc' }] }, viewer: { directly_related_user_types: [{ type: 'user', condition: 'c' }, { type: 'user', wildcard: {} }] } } } }],
      conditions: { c: { name: 'c', expression: 'x > 1', parameters: { x: { type_name: 'TYPE_NAME_INT' } } } },
    }, null, 2);
    fc.assert(fc.property(mutated(json), (text) => {
      const r = importOpenfga('m.json', readFrom({ 'm.json': text }));
      if (!r.ok) for (const x of r.refusals) expect(x.line >= 1 && x.line <= lines(text) && x.message.length > 0).toBe(true);
    }), { numRuns: 400, seed: 14 });
  });

  it('any text as a condition is translated or refused', () => {
    fc.assert(fc.property(fc.string({ maxLength: 40 }), (cel) => {
      const r = translateCondition({ name: 'c', params: [{ name: 'x', type: 'int' }], expression: cel, expressionAt: { file: 'm', line: 5 }, at: { file: 'm', line: 4 } });
      expect('text' in r || r.refusal.line >= 5).toBe(true);
    }), { numRuns: 1000, seed: 13 });
  });
});
