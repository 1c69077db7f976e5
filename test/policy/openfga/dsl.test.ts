// The OpenFGA modeling language reader: every model the peers hold, the shapes it produces, and
// each refusal with its line.
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDsl, parseRewrite } from '../../../src/policy/openfga/dsl.js';
import { chain, printRewrite } from '../../../src/policy/openfga/emit.js';
import { formatFile } from '../../../src/policy/format.js';
import { parsePolicy } from '../../../src/policy/parser.js';
import { modelFromDsl, readModelFile } from '../../../src/policy/openfga/source.js';
import { readStore } from '../../../src/policy/openfga/store.js';
import { OOPSLA, PEERS_MISSING, SAMPLE_STORES } from '../../helpers/peers.js';
import { filesUnder, readDisk, readFrom, withoutPlaces } from './helpers.js';

const refused = (text: string) => {
  const r = modelFromDsl('m.fga', text);
  if (r.ok) throw new Error('expected a refusal');
  return r.refusals.map((x) => `${x.line}: ${x.message}`);
};

describe('the DSL reader', () => {
  it('reads types, every rewrite and direct types with wildcards, usersets and conditions', () => {
    const r = modelFromDsl('m.fga', `model
  schema 1.1   # a comment

type user
type group
  relations
    define member: [user, user:*, group#member with c]   # trailing comment
type doc
  relations
    define parent: [doc]
    define owner: [user]
    define blocked: [user]
    define viewer: ([user] or owner or viewer from parent) but not blocked
    define both: owner and (viewer or
      blocked)

condition c(x: int, tags: list<string>, m: map<list<int>>) {
  x > 1 &&
  "a" in tags
}
`);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(withoutPlaces(r.value)).toEqual({
      types: [
        { name: 'user', relations: [] },
        { name: 'group', relations: [{ name: 'member', rewrite: { kind: 'direct', types: [{ type: 'user' }, { type: 'user', wildcard: true }, { type: 'group', relation: 'member', condition: 'c' }] } }] },
        {
          name: 'doc',
          relations: [
            { name: 'parent', rewrite: { kind: 'direct', types: [{ type: 'doc' }] } },
            { name: 'owner', rewrite: { kind: 'direct', types: [{ type: 'user' }] } },
            { name: 'blocked', rewrite: { kind: 'direct', types: [{ type: 'user' }] } },
            {
              name: 'viewer',
              rewrite: {
                kind: 'difference',
                base: { kind: 'union', children: [{ kind: 'direct', types: [{ type: 'user' }] }, { kind: 'computed', relation: 'owner' }, { kind: 'from', relation: 'viewer', tupleset: 'parent' }] },
                subtract: { kind: 'computed', relation: 'blocked' },
              },
            },
            { name: 'both', rewrite: { kind: 'intersection', children: [{ kind: 'computed', relation: 'owner' }, { kind: 'union', children: [{ kind: 'computed', relation: 'viewer' }, { kind: 'computed', relation: 'blocked' }] }] } },
          ],
        },
      ],
      conditions: [{ name: 'c', params: [{ name: 'x', type: 'int' }, { name: 'tags', type: 'list<string>' }, { name: 'm', type: 'map<list<int>>' }], expression: '\n  x > 1 &&\n  "a" in tags\n' }],
    });
    expect(r.value.types[2]!.relations[3]!.at).toEqual({ file: 'm.fga', line: 13 });
    expect(r.value.conditions[0]!.expressionAt).toEqual({ file: 'm.fga', line: 17 });
  });

  it('refuses what OpenFGA refuses, naming the line', () => {
    expect(refused('types user')).toEqual(['1: expected "model" (or "module NAME") at the start, found "types user"']);
    expect(refused('model\n  schema 1.0\ntype user')).toEqual(['2: schema 1.0 is not supported: the importer reads schema 1.1 (and modular models through fga.mod)']);
    expect(refused('model\ntype user')).toEqual(['2: expected "schema 1.1" after "model"']);
    const head = 'model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define owner: [user]\n';
    expect(refused(head + '    define v: [user] or owner and owner\n')).toEqual(['7: doc#v: "or" and "and" mixed at one level: add parentheses']);
    expect(refused(head + '    define v: owner or owner but not owner\n')).toEqual(['7: doc#v: "or" and "but not" mixed at one level: add parentheses']);
    expect(refused(head + '    define v: owner but not owner but not owner\n')).toEqual(['7: doc#v: "but not" subtracts one operand: add parentheses before "but"']);
    expect(refused(head + '    define v: [user] or [user:*]\n')).toEqual(['7: doc#v: more than one [...] of direct types in one definition']);
    expect(refused(head + '    define v: [user\n')).toEqual(['7: doc#v: expected "]", found the end of the definition']);
    expect(refused(head + '    define v: ([user]\ntype team\n')).toEqual(['7: doc#v: expected ")", found the end of the definition']);
    expect(refused(head + '    define v: owner from\n')).toEqual(['7: doc#v: expected the relation after "from", found the end of the definition']);
    expect(refused(head + '    viewer: [user]\n')).toEqual(['7: expected "define NAME: ..." in type doc, found "viewer: [user]"']);
    expect(refused(head + 'condition c(x: float) {\n  x > 1\n}\n')).toEqual(['7: condition c: parameter "x: float" is not "name: type" with a type of bool, string, int, uint, double, duration, timestamp, ipaddress, any, list<T>, map<T>']);
    expect(refused(head + 'condition c(x: int) {\n  x > 1\n')).toEqual(['7: condition without a closing "}"']);
    expect(refused(head + 'extend type doc\n  relations\n    define x: owner\n')).toEqual(['7: "extend type" belongs in a module of a modular model (fga.mod)']);
    expect(refused(head + '    define owner: [user]\n')).toEqual(['7: relation doc#owner is also defined at m.fga:6']);
    expect(refused(head + 'type user\n')).toEqual(['7: type user is also declared at m.fga:3']);
    expect(refused(head + '    define a: nothing\n    define self: self\n    define b: [user, team, doc#nothing, user with nope]\n    define c: owner from owner\n    define d: viewer from parent\n    define parent: [doc#owner]\n    define e: nothing from f\n    define f: [user, user:*]\n')).toEqual([
      '7: doc#a: type doc has no relation nothing',
      '8: doc#self: a relation cannot be defined as itself',
      '9: doc#b: [team] names no declared type',
      '9: doc#b: [doc#nothing]: type doc has no relation nothing',
      '9: doc#b: [user with nope]: no condition nope is declared',
      '10: doc#c: "owner from owner": none of user has a relation owner',
      '11: doc#d: "viewer from parent": doc#parent must be direct types only, without usersets or wildcards',
      '13: doc#e: "nothing from f": doc#f must be direct types only, without usersets or wildcards',
    ]);
    expect(refused('module core\ntype user\n')).toEqual(['1: "module core" is one part of a modular model: import its fga.mod']);
  });

  it('reads the legacy form (no header, "define R as E", "[T] as self") as the same schema 1.1 model', () => {
    const legacy = modelFromDsl('old.fga', `type user
type team
  relations
    define member: [user, team#member] as self
type doc
  relations
    define owner: [user] as self
    define parent: [team]   as self
    define editor: [user, user:*] as self or owner
    define v as owner or (editor but not member from parent)
`);
    const current = modelFromDsl('new.fga', `model
  schema 1.1
type user
type team
  relations
    define member: [user, team#member]
type doc
  relations
    define owner: [user]
    define parent: [team]
    define editor: [user, user:*] or owner
    define v: owner or (editor but not member from parent)
`);
    if (!legacy.ok || !current.ok) throw new Error(JSON.stringify([legacy, current]));
    expect(withoutPlaces(legacy.value)).toEqual(withoutPlaces(current.value));
    // Schema 1.0 without type restrictions has nothing to carry over; the legacy spelling stays in legacy files.
    expect(refused('type user\ntype doc\n  relations\n    define v as self\n')).toEqual(['4: doc#v: "self" without type restrictions (schema 1.0) cannot be imported: write the types it takes, as in "[user] as self"']);
    expect(refused('model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define v as [user]\n')).toEqual(['6: expected "define NAME: ..." in type doc, found "define v as [user]"']);
    expect(refused('model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define v: [user] as self\n')).toEqual(['6: doc#v: expected "or", "and" or "but not", found "as"']);
  });

  it('reads a model inside a store file with the store file\'s line numbers', () => {
    const store = 'name: s\nmodel: |\n  model\n    schema 1.1\n  type user\n  type doc\n    relations\n      define v: [user] or x and y\n';
    const r = readStore('s.fga.yaml', store, readFrom({}));
    expect(r.ok ? [] : r.refusals).toEqual([{ file: 's.fga.yaml', line: 8, message: 'doc#v: "or" and "and" mixed at one level: add parentheses' }]);
  });

  it('joins the modules of fga.mod, extensions added to the type they extend', () => {
    const files = {
      'm/fga.mod': "schema: '1.2'\ncontents:\n  - core.fga\n  - sub/wiki.fga\n",
      'm/core.fga': 'module core\ntype user\ntype org\n  relations\n    define admin: [user]\n',
      'm/sub/wiki.fga': 'module wiki\nextend type org\n  relations\n    define can_create_space: admin\ntype space\n  relations\n    define org: [org]\n',
    };
    const r = readModelFile('m/fga.mod', readFrom(files));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.types.map((t) => `${t.name}: ${t.relations.map((x) => `${x.name}@${x.at.file}:${x.at.line}`).join(' ')}`)).toEqual([
      'user: ',
      'org: admin@m/core.fga:5 can_create_space@m/sub/wiki.fga:4',
      'space: org@m/sub/wiki.fga:7',
    ]);
    const bad = readModelFile('m/fga.mod', readFrom({ ...files, 'm/sub/wiki.fga': 'module wiki\nextend type team\n  relations\n    define x: [user]\n' }));
    expect(bad.ok ? [] : bad.refusals).toEqual([{ file: 'm/sub/wiki.fga', line: 2, message: 'extend type team: no module declares type team' }]);
    const missing = readModelFile('m/fga.mod', readFrom({ 'm/fga.mod': files['m/fga.mod'], 'm/core.fga': files['m/core.fga'] }));
    expect(missing.ok ? [] : missing.refusals).toEqual([{ file: 'm/fga.mod', line: 4, message: 'no such file: m/sub/wiki.fga' }]);
  });

  it('parses every module line by line without a refusal', () => {
    const r = parseDsl('x.fga', 'module a\n\n# comment\nextend type t\n  relations\n    define r: [u]\n');
    expect(r.ok && r.value.extensions[0]!.relations[0]!.at.line).toBe(6);
  });
});

describe.skipIf(!SAMPLE_STORES || !OOPSLA)('every model the peers hold', () => {
  it(SAMPLE_STORES ? 'reads every .fga, fga.mod and store file of the sample stores, and the OOPSLA models' : PEERS_MISSING, () => {
    const models = [
      ...filesUnder(SAMPLE_STORES!, (n) => n === 'fga.mod' || n.endsWith('.fga')),
      ...filesUnder(OOPSLA!, (n) => n === 'authorization-model.dsl'),
    ];
    const stores = filesUnder(SAMPLE_STORES!, (n) => n.endsWith('.fga.yaml'));
    expect(models.length).toBeGreaterThanOrEqual(15);
    expect(stores.length).toBeGreaterThanOrEqual(30);
    const outcome = (path: string, ok: boolean, detail: string) => `${path.slice(PEERS_ROOT.length)}: ${ok ? 'ok' : detail}`;
    const PEERS_ROOT = join(SAMPLE_STORES!, '..', '..', '..');
    const results = models.map((p) => {
      // A module is read through its fga.mod; alone it is refused as one part of a model.
      const r = /\/modular\/.*\.fga$/.test(p) ? parseDsl(p, (readDisk(p) as { text: string }).text) : readModelFile(p, readDisk);
      return outcome(p, r.ok, r.ok ? '' : JSON.stringify(r.refusals));
    });
    for (const p of stores) {
      const r = readStore(p, (readDisk(p) as { text: string }).text, readDisk);
      results.push(outcome(p, r.ok, r.ok ? '' : JSON.stringify(r.refusals)));
    }
    expect(results.filter((x) => !x.endsWith(': ok'))).toEqual([]);
  });
});

describe('a definition printed and read back', () => {
  it('is the same definition, for any nesting of or, and, but not, from and direct types, as fmt prints it', () => {
    const at = { file: 'p', line: 1 };
    const name = fc.constantFrom('owner', 'viewer', 'parent', 'can_read', 'x-y');
    const restriction = fc.record({ type: fc.constantFrom('user', 'group'), form: fc.constantFrom('plain', 'wildcard', 'userset'), condition: fc.option(fc.constantFrom('c1', 'c2'), { nil: undefined }) })
      .map(({ type, form, condition }) => ({ type, ...(form === 'wildcard' ? { wildcard: true } : form === 'userset' ? { relation: 'member' } : {}), ...(condition ? { condition } : {}) }));
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof({ depthSize: 'small', withCrossShrink: true },
        name.map((relation) => ({ kind: 'computed', relation, at })),
        fc.tuple(name, name).map(([relation, tupleset]) => ({ kind: 'from', relation, tupleset, at })),
        fc.array(restriction, { minLength: 1, maxLength: 3 }).map((types) => ({ kind: 'direct', types, at })),
        fc.tuple(fc.constantFrom('union', 'intersection'), fc.array(tie('tree'), { minLength: 2, maxLength: 3 })).map(([kind, children]) => ({ kind, children, at })),
        fc.tuple(tie('tree'), tie('tree')).map(([base, subtract]) => ({ kind: 'difference', base, subtract, at })),
      ),
    }));
    const directs = (t: any): number => t.kind === 'direct' ? 1 : t.children ? t.children.reduce((n: number, c: any) => n + directs(c), 0) : t.kind === 'difference' ? directs(t.base) + directs(t.subtract) : 0;
    fc.assert(fc.property(tree.filter((t: any) => directs(t) <= 1), (t: any) => {
      const text = printRewrite(t, 0);
      const back = parseRewrite([{ text, no: 1 }], 'p', 'doc#r');
      // Read back as one chain where a union held a union (or an intersection an intersection).
      const flat = (x: any): any => x.children ? { ...x, children: chain(x).map(flat) } : x.kind === 'difference' ? { ...x, base: flat(x.base), subtract: flat(x.subtract) } : x;
      expect('rewrite' in back ? withoutAt(back.rewrite) : back.refusal.message).toEqual(withoutAt(flat(t)));
      // And in the layout `fmt` prints.
      const file = `type doc {\n  relation r: ${text}\n}\n`;
      const parsed = parsePolicy('d.policy', file);
      expect(parsed.diagnostics).toEqual([]);
      expect(formatFile(parsed.file!, { withComments: true })).toBe(file);
    }), { numRuns: 300, seed: 20261127 });
  });
});

function withoutAt(x: unknown): unknown {
  return JSON.parse(JSON.stringify(x, (k, v) => (k === 'at' ? undefined : v)));
}
