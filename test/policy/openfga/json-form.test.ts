// The JSON form of a model reads to the same model as its DSL, and prints the same policy.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importOpenfga } from '../../../src/policy/openfga/index.js';
import { readJsonModel } from '../../../src/policy/openfga/json-model.js';
import { readModelFile } from '../../../src/policy/openfga/source.js';
import { OOPSLA, PEERS_MISSING } from '../../helpers/peers.js';
import type { FgaModel } from '../../../src/policy/openfga/model.js';
import { readDisk, withoutPlaces } from './helpers.js';

/** The model with relations sorted by name and each [...] of direct types sorted. */
function canonical(m: FgaModel): unknown {
  const sortKey = (x: unknown) => JSON.stringify(x);
  return JSON.parse(JSON.stringify(withoutPlaces(m), (k, v) => {
    if (k === 'relations' && Array.isArray(v)) return [...v].sort((a, b) => (a.name < b.name ? -1 : 1));
    if (k === 'types' && Array.isArray(v) && v.every((t) => 'type' in t)) return [...v].sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : 1));
    return v;
  }));
}

describe.skipIf(!OOPSLA)('the JSON form of the OOPSLA models', () => {
  for (const app of ['gdrive', 'github', 'tinytodo']) {
    it(OOPSLA ? `${app}: the JSON form equals the DSL form` : PEERS_MISSING, () => {
      const dsl = readModelFile(join(OOPSLA!, app, 'openfga', 'authorization-model.dsl'), readDisk);
      const json = readModelFile(join(OOPSLA!, app, 'openfga', 'authorization-model.json'), readDisk);
      expect(dsl.ok && json.ok).toBe(true);
      if (!dsl.ok || !json.ok) return;
      expect(json.value.types.length).toBeGreaterThan(2);
      // The JSON form may list relations and direct types in another order: both are sets.
      expect(canonical(json.value)).toEqual(canonical(dsl.value));
      const a = importOpenfga(join(OOPSLA!, app, 'openfga', 'authorization-model.dsl'), readDisk);
      const b = importOpenfga(join(OOPSLA!, app, 'openfga', 'authorization-model.json'), readDisk);
      // Past the comment naming the source, the same policy (where the JSON keeps the DSL's order).
      const body = (x: typeof a) => (x.ok ? x.value.policy.split('\n').slice(1).join('\n') : '');
      if (app !== 'tinytodo') expect(body(b)).toBe(body(a));
      else expect(b.ok).toBe(true);
    });
  }
});

describe('the JSON form reader', () => {
  const model = (typeDefs: unknown, conditions: unknown = {}) => JSON.stringify({ schema_version: '1.1', type_definitions: typeDefs, conditions }, null, 2);

  it('reads usersets, direct types from metadata, and typed conditions', () => {
    const r = readJsonModel('m.json', model([
      { type: 'user' },
      {
        type: 'doc',
        relations: {
          blocked: { this: {} },
          viewer: { difference: { base: { union: { child: [{ this: {} }, { tupleToUserset: { tupleset: { relation: 'parent' }, computedUserset: { relation: 'viewer' } } }] } }, subtract: { computedUserset: { relation: 'blocked' } } } },
          both: { intersection: { child: [{ computedUserset: { relation: 'blocked' } }, { computedUserset: { relation: 'viewer' } }] } },
        },
        metadata: { relations: {
          blocked: { directly_related_user_types: [{ type: 'user' }] },
          viewer: { directly_related_user_types: [{ type: 'user', condition: 'c' }, { type: 'user', wildcard: {} }, { type: 'group', relation: 'member' }] },
        } },
      },
    ], { c: { name: 'c', expression: 'x < 2', parameters: { x: { type_name: 'TYPE_NAME_INT' }, l: { type_name: 'TYPE_NAME_LIST', generic_types: [{ type_name: 'TYPE_NAME_STRING' }] } } } }));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(withoutPlaces(r.value)).toEqual({
      types: [
        { name: 'user', relations: [] },
        { name: 'doc', relations: [
          { name: 'blocked', rewrite: { kind: 'direct', types: [{ type: 'user' }] } },
          { name: 'viewer', rewrite: { kind: 'difference', base: { kind: 'union', children: [{ kind: 'direct', types: [{ type: 'user', condition: 'c' }, { type: 'user', wildcard: true }, { type: 'group', relation: 'member' }] }, { kind: 'from', relation: 'viewer', tupleset: 'parent' }] }, subtract: { kind: 'computed', relation: 'blocked' } } },
          { name: 'both', rewrite: { kind: 'intersection', children: [{ kind: 'computed', relation: 'blocked' }, { kind: 'computed', relation: 'viewer' }] } },
        ] },
      ],
      conditions: [{ name: 'c', params: [{ name: 'x', type: 'int' }, { name: 'l', type: 'list<string>' }], expression: 'x < 2' }],
    });
  });

  it('refuses what is not a model, naming the line', () => {
    const refusals = (text: string) => { const r = readJsonModel('m.json', text); return r.ok ? [] : r.refusals.map((x) => `${x.line}: ${x.message}`); };
    expect(refusals('{"schema_version": "1.0", "type_definitions": []}')).toEqual(['1: schema "1.0" is not supported: the importer reads schema 1.1']);
    expect(refusals(model([{ type: 'doc', relations: { v: { this: {} } } }]))).toEqual(['7: doc#v takes direct relationships ("this") but its metadata names no directly_related_user_types']);
    expect(refusals(model([{ type: 'doc', relations: { v: { frobnicate: {} } } }]))).toEqual(['7: doc#v: unknown userset "frobnicate"']);
    expect(refusals(model([], { c: { name: 'c', expression: 'x', parameters: { x: { type_name: 'TYPE_NAME_FLOAT' } } } }))).toEqual(['9: condition c: parameter x has an unknown type {"type_name":"TYPE_NAME_FLOAT"}']);
    expect(refusals('{"schema_version": "1.1",\n "type_definitions": [}')).toEqual(['1: not valid YAML or JSON: Flow sequence in block collection must be sufficiently indented and end with a ]']);
    expect(refusals('{"schema_version": "1.1",\n "schema_version": "1.1"}')).toEqual(["1: not valid YAML or JSON: Map keys must be unique"]);
  });
});
