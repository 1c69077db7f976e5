// A model from policy text (which must parse and validate cleanly) and an index of relationships:
// what the checker's tests build their cases from.
import { expect } from 'vitest';
import { parsePolicy } from '../../../src/policy/parser.js';
import { buildModel, validateModel, type RelationModel } from '../../../src/policy/relations/model.js';
import { MemoryIndex } from '../../../src/policy/relations/index.js';
import type { Relationship } from '../../../src/policy/relations/tuple.js';

export function modelOf(text: string): RelationModel {
  const r = parsePolicy('m.policy', text);
  expect(r.diagnostics).toEqual([]);
  const out: unknown[] = [];
  validateModel([r.file!], out as never[]);
  expect(out).toEqual([]);
  return buildModel([r.file!]);
}

export function indexOf(rels: Relationship[]): MemoryIndex {
  const ix = new MemoryIndex();
  for (const r of rels) ix.add(r);
  return ix;
}
