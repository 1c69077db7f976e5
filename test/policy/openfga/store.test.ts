// Store files into relationships and tests, and the policy and tests text the import prints.
import { describe, expect, it } from 'vitest';
import { importOpenfga, policyName, stemOf, validateOutput } from '../../../src/policy/openfga/index.js';
import { modelFromDsl } from '../../../src/policy/openfga/source.js';
import { emitPolicy } from '../../../src/policy/openfga/emit.js';
import { readFrom } from './helpers.js';

const MODEL = `model
  schema 1.1
type user
type group
  relations
    define member: [user, user:*, group#member]
type doc
  relations
    define viewer: [user, group#member, user with c]
condition c(x: int, tags: list<string>) {
  x > 1
}
`;

const indent = (s: string, n: number) => s.split('\n').map((l) => (l ? ' '.repeat(n) + l : l)).join('\n');

const STORE = `name: Docs
model: |
${indent(MODEL, 2)}
tuples:
  - user: group:eng#member
    relation: viewer
    object: doc:1
  - user: user:bob
    relation: viewer
    object: doc:2
    condition:
      name: c
      context:
        x: 2
        tags: [a, b]
tuple_file: more.yaml
tests:
  - name: groups
    tuples:
      - user: user:anne
        relation: member
        object: group:eng
    check:
      - user: user:anne
        object: doc:1
        assertions:
          viewer: true
      - user: user:carl
        object: doc:1
        context: { x: 3, "odd key": null }
        assertions:
          viewer: false
      - user: user:carl
        object: doc:1
        contextual_tuples:
          - user: user:carl
            relation: member
            object: group:eng
        assertions:
          viewer: true
    list_objects:
      - user: user:anne
        type: doc
        assertions:
          viewer: [doc:1]
    list_users:
      - object: doc:1
        user_filter:
          - type: user
        assertions:
          viewer:
            users: [user:anne, user:*]
      - object: doc:1
        user_filter:
          - type: group
            relation: member
        assertions:
          viewer:
            users: [group:eng#member]
  - name: groups
    check:
      - user: user:anne
        object: doc:1
        assertions:
          viewer: false
`;

describe('store files', () => {
  it('import to a policy, the relationships as JSON and the tests as a .tests file', () => {
    const r = importOpenfga('s/docs.fga.yaml', readFrom({
      's/docs.fga.yaml': STORE,
      's/more.yaml': '- user: user:*\n  relation: member\n  object: group:all\n',
    }));
    if (!r.ok) throw new Error(JSON.stringify(r.refusals));
    expect(r.value.stem).toBe('docs');
    expect(r.value.policy).toBe(`# Imported from OpenFGA: docs.fga.yaml.
policy "docs" version 1

type user

type group {
  relation member: [user, user:*, group#member]
}

type doc {
  relation viewer: [user, group#member, user with c]
}

condition c(x: int, tags: list<string>) {
  x > 1
}
`);
    expect(r.value.relationships).toEqual({ relationships: [
      { object: 'doc:1', relation: 'viewer', subject: 'group:eng#member' },
      { object: 'doc:2', relation: 'viewer', subject: 'user:bob', condition: { name: 'c', context: { x: 2, tags: ['a', 'b'] } } },
      { object: 'group:all', relation: 'member', subject: 'user:*' },
    ] });
    expect(r.value.tests).toBe(`# The tests of the OpenFGA store docs.fga.yaml, imported.

relationships {
  "doc:1#viewer@group:eng#member"
  "doc:2#viewer@user:bob" with c { x: 2, tags: ["a", "b"] }
  "group:all#member@user:*"
}

test "groups" {
  relationship "group:eng#member@user:anne"
  check "user:anne" "viewer" "doc:1" expect true
  check "user:carl" "viewer" "doc:1" context { x: 3, "odd key": null } expect false
  list objects "user:anne" "viewer" "doc" expect ["doc:1"]
  list subjects "doc:1" "viewer" "user" expect ["user:anne", "user:*"]
  list subjects "doc:1" "viewer" "group#member" expect ["group:eng#member"]
}

test "groups, with contextual tuples 1" {
  relationship "group:eng#member@user:anne"
  relationship "group:eng#member@user:carl"
  check "user:carl" "viewer" "doc:1" expect true
}

test "groups (2)" {
  check "user:anne" "viewer" "doc:1" expect false
}
`);
  });

  it('reads a model in its JSON form inside a store file, and JSON lines tuple files', () => {
    const r = importOpenfga('s.fga.yaml', readFrom({
      's.fga.yaml': 'model:\n  schema_version: "1.1"\n  type_definitions:\n    - type: user\n    - type: doc\n      relations:\n        viewer: {this: {}}\n      metadata:\n        relations:\n          viewer: {directly_related_user_types: [{type: user}]}\ntuple_file: t.jsonl\n',
      't.jsonl': '{"user": "user:a", "relation": "viewer", "object": "doc:1"}\n\n{"user": "user:b", "relation": "viewer", "object": "doc:2"}\n',
    }));
    if (!r.ok) throw new Error(JSON.stringify(r.refusals));
    expect(r.value.policy).toContain('type doc {\n  relation viewer: [user]\n}\n');
    expect(r.value.relationships!.relationships.map((x) => x.subject)).toEqual(['user:a', 'user:b']);
    const bad = importOpenfga('s.fga.yaml', readFrom({ 's.fga.yaml': 'model_file: m.fga\ntuple_file: t.jsonl\n', 'm.fga': MODEL, 't.jsonl': '{"user": "user:a", "relation": "viewer", "object": "doc:1"}\n{"user": "a", "relation": "viewer", "object": "doc:1"}\n' }));
    expect(bad.ok ? [] : bad.refusals).toEqual([{ file: 't.jsonl', line: 2, message: 'tuple user "a" is not "type:id", "type:id#relation" or "type:*"' }]);
  });

  it('names the files after the input: store.fga.yaml is store, stores/modular/fga.mod is modular', () => {
    expect(['a/store.fga.yaml', 'm.fga', 'x/authorization-model.json', 'y/authorization-model.dsl', 'stores/modular/fga.mod', 'a/b.yml'].map(stemOf)).toEqual(['store', 'm', 'authorization-model', 'authorization-model', 'modular', 'b']);
  });

  it('names the policy after the store, lower case, runs of other characters as "-"', () => {
    expect(['Google Drive', 'Tests for Wiki Module', 'IoT', '  ', '!!!'].map(policyName)).toEqual(['google-drive', 'tests-for-wiki-module', 'iot', '', '']);
  });

  it('a modular store reads fga.mod and the tuple file it names', () => {
    const r = importOpenfga('m/store.fga.yaml', readFrom({
      'm/store.fga.yaml': 'model_file: ./fga.mod\ntuple_files: [t.json]\n',
      'm/fga.mod': 'schema: "1.2"\ncontents: [a.fga]\n',
      'm/a.fga': 'module a\ntype user\ntype x\n  relations\n    define r: [user]\n',
      'm/t.json': '[{"user": "user:a", "relation": "r", "object": "x:1"}]',
    }));
    expect(r.ok && r.value.relationships).toEqual({ relationships: [{ object: 'x:1', relation: 'r', subject: 'user:a' }] });
  });

  it('refuses what it cannot carry over, naming the file and line', () => {
    const refusals = (store: string, files: Record<string, string> = {}) => {
      const r = importOpenfga('s.fga.yaml', readFrom({ 's.fga.yaml': store, ...files }));
      return r.ok ? [] : r.refusals.map((x) => `${x.file}:${x.line}: ${x.message}`);
    };
    const model = `model: |\n${indent(MODEL, 2)}\n`;
    expect(refusals('tuples: []\n')).toEqual(['s.fga.yaml:1: expected "model" (the model\'s text) or "model_file" (a path)']);
    expect(refusals('model_file: nope.fga\n')).toEqual(['s.fga.yaml:1: no such file: nope.fga']);
    expect(refusals(model + 'tuples:\n  - user: anne\n    relation: viewer\n    object: doc:1\n')).toEqual(['s.fga.yaml:16: tuple user "anne" is not "type:id", "type:id#relation" or "type:*"']);
    expect(refusals(model + 'tuple_file: t.csv\n')).toEqual(['s.fga.yaml:15: t.csv: CSV tuple files are not supported (YAML, JSON or JSON lines are)']);
    expect(refusals(model + 'frob: 1\n')).toEqual(['s.fga.yaml:15: unknown key "frob" in a store file (known: name, model, model_file, tuples, tuple_file, tuple_files, tests)']);
    expect(refusals(model + 'tests:\n  - list_users:\n      - object: doc:1\n        user_filter: [{type: user}]\n        assertions:\n          viewer:\n            users: []\n            excluded_users: [user:bob]\n')).toEqual([
      's.fga.yaml:22: list_users viewer: "excluded_users" has no equivalent (list subjects answers who holds the relation, not who is excluded)',
    ]);
    expect(refusals(model + 'tests:\n  - list_users:\n      - object: doc:1\n        user_filter: [{type: user}]\n        assertions:\n          viewer:\n            users: [group:eng#member]\n')).toEqual([
      's.fga.yaml:21: list_users viewer: "group:eng#member" not of the user_filter\'s type',
    ]);
    expect(refusals(model + 'tests:\n  - check:\n      - user: user:a\n        object: doc:1\n        assertions:\n          viewer: maybe\n')).toEqual(['s.fga.yaml:20: check viewer: expected true or false, found a string']);
    expect(refusals(model + 'tuples:\n  - {user: user:a, relation: viewer, object: doc:1, condition: {name: nope}}\n  - {user: user:a, relation: member, object: group:x, condition: {name: c}}\n  - {user: user:*, relation: viewer, object: doc:1}\n  - {user: team:t#member, relation: viewer, object: doc:1}\n  - {user: user:a, relation: owner, object: doc:1}\n  - {user: user:a, relation: member, object: team:x}\ntests:\n  - list_objects:\n      - user: user:a\n        type: doc\n        assertions:\n          owner: []\n')).toEqual([
      's.fga.yaml:16: tuple doc:1#viewer@user:a with nope: not allowed by viewer\'s direct types [user, group#member, user with c]',
      's.fga.yaml:17: tuple group:x#member@user:a with c: not allowed by member\'s direct types [user, user:*, group#member]',
      's.fga.yaml:18: tuple doc:1#viewer@user:*: not allowed by viewer\'s direct types [user, group#member, user with c]',
      's.fga.yaml:19: tuple doc:1#viewer@team:t#member: not allowed by viewer\'s direct types [user, group#member, user with c]',
      's.fga.yaml:20: tuple doc:1#owner@user:a: type doc has no relation owner',
      's.fga.yaml:21: tuple team:x#member@user:a: the model has no type team',
      's.fga.yaml:27: list_objects owner of type doc: type doc has no relation owner',
    ]);
    expect(refusals(model.replace('x > 1', 'x > 1 ? true : false'))).toEqual(['s.fga.yaml:12: condition c: the conditional operator "? :" is not supported']);
  });
});

describe('names the policy language cannot carry', () => {
  it('are refused by name with their line', () => {
    const m = modelFromDsl('m.fga', 'model\n  schema 1.1\ntype 9lives\ntype doc\n  relations\n    define with: [9lives]\ncondition contains(x: int) {\n  x > 1\n}\n');
    if (!m.ok) throw new Error(JSON.stringify(m.refusals));
    const r = emitPolicy(m.value, { name: 'm', source: 'm.fga' });
    expect(r.ok ? [] : r.refusals.map((x) => `${x.line}: ${x.message}`)).toEqual([
      '3: type name "9lives" cannot be carried over: the policy language\'s names are a letter or "_" followed by letters, digits, "_" or "-"',
      '6: relation name (of type doc) "with" cannot be carried over: it is a keyword of the policy language',
      '6: type name "9lives" cannot be carried over: the policy language\'s names are a letter or "_" followed by letters, digits, "_" or "-"',
      '7: condition name "contains" cannot be carried over: it is a keyword of the policy language',
    ]);
  });
});

describe('what the policy language itself rejects in an import', () => {
  it('is refused at the place of the input the rejected line came from', () => {
    const at = (line: number) => ({ file: 'in.fga', line });
    const policy = { text: 'policy "p" version 1\n\nrule "r" {\n  effect allow\n}\n', sources: [at(1), undefined, at(7), at(8), at(7)] };
    // A rule block stands in for what the import could emit wrongly: each error lands on its source line.
    expect(validateOutput('p', policy, undefined, at(1)).map((r) => `${r.file}:${r.line}: ${r.message}`)).toEqual([
      'in.fga:7: the policy language does not accept the import: rule "r" has no subjects',
      'in.fga:7: the policy language does not accept the import: rule "r" has no relation',
      'in.fga:7: the policy language does not accept the import: rule "r" has no object',
      'in.fga:8: the policy language does not accept the import: unknown effect "allow" (use deny, require_approval or permit)',
    ]);
    expect(validateOutput('p', { text: 'type user\n', sources: [at(3)] }, undefined, at(1))).toEqual([]);
  });

  it('a test that asserts nothing is left out, said in a comment', () => {
    const r = importOpenfga('s.fga.yaml', readFrom({ 's.fga.yaml': `model: |\n${indent(MODEL, 2)}\ntests:\n  - name: nothing\n    tuples:\n      - {user: user:a, relation: viewer, object: doc:1}\n` }));
    expect(r.ok && r.value.tests).toBe('# The tests of the OpenFGA store s.fga.yaml, imported.\n\n# test "nothing" asserts nothing: left out.\n');
  });
});
