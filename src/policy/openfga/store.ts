// An OpenFGA store file (`.fga.yaml`, as the `fga store test` command reads it): the model
// (`model`, inline, or `model_file`), the relationships (`tuples`, `tuple_file`, `tuple_files`)
// and the tests (`name`, their own `tuples`/`tuple_file`, and `check`, `list_objects`,
// `list_users` assertions, each with an optional `context`). Read into the model, the
// relationships and the tests the emitter prints; files it names are read through the caller's
// `read`, relative to the store file.

import { dirname, join } from 'node:path';
import type { StoreTest, TestLine, Tuple } from './emit.js';
import { fromJson } from './json-model.js';
import { getIn, isRecord, kindOf, parseLocated, type Located, type Path } from './located.js';
import { refusal, type FgaModel, type Imported, type Refusal, type RelationDef, type Rewrite, type TypeRestriction, type Where } from './model.js';
import { combineModules, modelFromDsl, readModelFile, type ReadText } from './source.js';

export interface Store {
  name?: string;
  model: FgaModel;
  relationships: Tuple[];
  tests: StoreTest[];
}

const STORE_KEYS = new Set(['name', 'model', 'model_file', 'tuples', 'tuple_file', 'tuple_files', 'tests']);
const TEST_KEYS = new Set(['name', 'description', 'tuples', 'tuple_file', 'tuple_files', 'check', 'list_objects', 'list_users']);

export function readStore(path: string, text: string, read: ReadText): Imported<Store> {
  const parsed = parseLocated(path, text);
  if (!parsed.ok) return parsed;
  const doc = parsed.value;
  const root = doc.value;
  if (!isRecord(root)) return { ok: false, refusals: [refusal(doc.at([]), `expected a store (a map with "model" or "model_file"), found ${kindOf(root)}`)] };
  const refusals: Refusal[] = [];
  const fail = (p: Path, message: string) => { refusals.push(refusal(doc.at(p), message)); };
  for (const k of Object.keys(root)) if (!STORE_KEYS.has(k)) fail([k], `unknown key "${k}" in a store file (known: ${[...STORE_KEYS].join(', ')})`);

  // ---- the model ----
  let model: FgaModel | undefined;
  const take = (m: Imported<FgaModel>) => { if (m.ok) model = m.value; else refusals.push(...m.refusals); };
  if (root.model !== undefined && root.model_file !== undefined) fail(['model_file'], 'a store has "model" or "model_file", not both');
  else if (typeof root.model === 'string') take(modelFromDsl(path, root.model, doc.textStart(['model']).line));
  else if (isRecord(root.model)) {
    const m = fromJson(doc, ['model']);
    take(m.ok ? combineModules([{ types: m.value.types, extensions: [], conditions: m.value.conditions, at: doc.at(['model']) }]) : m);
  } else if (typeof root.model_file === 'string') take(readModelFile(join(dirname(path), root.model_file), read, doc.at(['model_file'])));
  else fail(root.model !== undefined ? ['model'] : root.model_file !== undefined ? ['model_file'] : [], 'expected "model" (the model\'s text) or "model_file" (a path)');

  // ---- the relationships ----
  const relationships = tuplesOf(doc, [], path, read, refusals);

  // ---- the tests ----
  const tests: StoreTest[] = [];
  const names = new Map<string, number>();
  const list = root.tests ?? [];
  if (!Array.isArray(list)) fail(['tests'], `expected "tests" to be a list, found ${kindOf(list)}`);
  else list.forEach((t, ti) => {
    const tp: Path = ['tests', ti];
    if (!isRecord(t)) { fail(tp, `expected a test (a map), found ${kindOf(t)}`); return; }
    for (const k of Object.keys(t)) if (!TEST_KEYS.has(k)) fail([...tp, k], `unknown key "${k}" in a test (known: ${[...TEST_KEYS].join(', ')})`);
    let name = typeof t.name === 'string' && t.name.trim() ? t.name.trim() : `test ${ti + 1}`;
    const seen = names.get(name) ?? 0;
    names.set(name, seen + 1);
    if (seen) name = `${name} (${seen + 1})`;
    const own = tuplesOf(doc, tp, path, read, refusals);
    const base: StoreTest = { name, relationships: own, lines: [], at: doc.at(tp) };
    // Assertions with contextual tuples go in a test of their own, which holds them as relationships.
    const extra = new Map<string, StoreTest>();
    const testFor = (contextual: Tuple[]): StoreTest => {
      if (!contextual.length) return base;
      const key = JSON.stringify(contextual.map((c) => [c.object, c.relation, c.subject, c.condition]));
      let x = extra.get(key);
      if (!x) {
        x = { name: `${name}, with contextual tuples ${extra.size + 1}`, relationships: [...own, ...contextual], lines: [], at: base.at };
        extra.set(key, x);
      }
      return x;
    };
    assertions(doc, tp, refusals, testFor);
    tests.push(base, ...extra.values());
  });
  if (refusals.length || !model) return { ok: false, refusals };
  const store: Store = { name: typeof root.name === 'string' ? root.name : undefined, model, relationships, tests };
  const invalid = checkAgainstModel(store);
  return invalid.length ? { ok: false, refusals: invalid } : { ok: true, value: store };
}

/**
 * What OpenFGA refuses to write or to test: a tuple whose object type, relation, subject type or
 * condition the model does not allow (a subject `user:x` needs `[user]`, `user:*` needs
 * `[user:*]`, `group:x#member` needs `[group#member]`, each `with` the tuple's condition, or
 * without one when it has none); an assertion about a type or relation the model lacks.
 */
export function checkAgainstModel(store: Store): Refusal[] {
  const out: Refusal[] = [];
  const types = new Map(store.model.types.map((t) => [t.name, new Map(t.relations.map((r) => [r.name, r]))]));
  const relationOf = (type: string, relation: string, at: Where, what: string): RelationDef | undefined => {
    const t = types.get(type);
    if (!t) { out.push(refusal(at, `${what}: the model has no type ${type}`)); return undefined; }
    const r = t.get(relation);
    if (!r) out.push(refusal(at, `${what}: type ${type} has no relation ${relation}`));
    return r;
  };
  const checkTuple = (t: Tuple) => {
    const what = `tuple ${t.object}#${t.relation}@${t.subject}`;
    const r = relationOf(t.object.slice(0, t.object.indexOf(':')), t.relation, t.at, what);
    if (!r) return;
    const m = /^([^:]+):([^#]+)(?:#(.+))?$/.exec(t.subject)!;
    const [, type, id, rel] = m;
    const allowed: TypeRestriction[] = [];
    collectDirect(r.rewrite, allowed);
    const fits = allowed.some((d) => d.type === type && (id === '*' ? d.wildcard === true : !d.wildcard && d.relation === rel) && d.condition === t.condition?.name);
    if (!fits) {
      const shown = allowed.map((d) => (d.wildcard ? `${d.type}:*` : d.relation ? `${d.type}#${d.relation}` : d.type) + (d.condition ? ` with ${d.condition}` : ''));
      out.push(refusal(t.at, `${what}${t.condition ? ` with ${t.condition.name}` : ''}: not allowed by ${r.name}'s direct types [${shown.join(', ')}]`));
    }
  };
  store.relationships.forEach(checkTuple);
  for (const test of store.tests) {
    test.relationships.forEach(checkTuple);
    for (const l of test.lines) {
      if (l.k === 'check') relationOf(l.object.slice(0, l.object.indexOf(':')), l.relation, l.at, `check ${l.relation} on ${l.object}`);
      else if (l.k === 'objects') relationOf(l.type, l.relation, l.at, `list_objects ${l.relation} of type ${l.type}`);
      else {
        relationOf(l.object.slice(0, l.object.indexOf(':')), l.relation, l.at, `list_users ${l.relation} on ${l.object}`);
        const [ft, fr] = l.subjectType.split('#');
        if (fr !== undefined) relationOf(ft!, fr, l.at, `list_users filter ${l.subjectType}`);
        else if (!types.has(ft!)) out.push(refusal(l.at, `list_users filter ${l.subjectType}: the model has no type ${ft}`));
      }
    }
  }
  // One refusal per place and message: a tuple repeated in several tests is named once per line.
  const seen = new Set<string>();
  return out.filter((r) => { const k = `${r.file}:${r.line}:${r.message}`; if (seen.has(k)) return false; seen.add(k); return true; });
}

function collectDirect(r: Rewrite, into: TypeRestriction[]): void {
  switch (r.kind) {
    case 'direct': into.push(...r.types); break;
    case 'union': case 'intersection': r.children.forEach((c) => collectDirect(c, into)); break;
    case 'difference': collectDirect(r.base, into); collectDirect(r.subtract, into); break;
    default:
  }
}

/** The relationships of `tuples`, `tuple_file` and `tuple_files` under `at` (the store, or one test). */
function tuplesOf(doc: Located, at: Path, path: string, read: ReadText, refusals: Refusal[]): Tuple[] {
  const node = getIn(doc.value, at) as Record<string, unknown>;
  const out: Tuple[] = [];
  if (node.tuples !== undefined) out.push(...tupleList(doc, [...at, 'tuples'], refusals));
  const files: { file: unknown; p: Path }[] = [];
  if (node.tuple_file !== undefined) files.push({ file: node.tuple_file, p: [...at, 'tuple_file'] });
  if (node.tuple_files !== undefined) {
    if (Array.isArray(node.tuple_files)) node.tuple_files.forEach((f, i) => files.push({ file: f, p: [...at, 'tuple_files', i] }));
    else refusals.push(refusal(doc.at([...at, 'tuple_files']), `expected "tuple_files" to be a list of paths, found ${kindOf(node.tuple_files)}`));
  }
  for (const { file, p } of files) {
    if (typeof file !== 'string') { refusals.push(refusal(doc.at(p), `expected a path, found ${kindOf(file)}`)); continue; }
    const full = join(dirname(path), file);
    if (/\.csv$/i.test(full)) { refusals.push(refusal(doc.at(p), `${file}: CSV tuple files are not supported (YAML, JSON or JSON lines are)`)); continue; }
    const src = read(full);
    if ('error' in src) { refusals.push(refusal(doc.at(p), src.error)); continue; }
    if (/\.jsonl$/i.test(full)) {
      src.text.split(/\r?\n/).forEach((line, i) => {
        if (!line.trim()) return;
        const one = parseLocated(full, line);
        if (!one.ok) { refusals.push(...one.refusals.map((r) => ({ ...r, line: i + 1 }))); return; }
        const shifted: Located = { ...one.value, at: () => ({ file: full, line: i + 1 }), textStart: () => ({ file: full, line: i + 1 }) };
        const t = tuple(shifted, [], refusals);
        if (t) out.push(t);
      });
      continue;
    }
    const tf = parseLocated(full, src.text);
    if (!tf.ok) { refusals.push(...tf.refusals); continue; }
    // A list of tuples, or (as `fga tuple write` also takes) a map holding `tuples`.
    out.push(...tupleList(tf.value, isRecord(tf.value.value) ? ['tuples'] : [], refusals));
  }
  return out;
}

function tupleList(doc: Located, p: Path, refusals: Refusal[]): Tuple[] {
  const list = getIn(doc.value, p);
  if (!Array.isArray(list)) { refusals.push(refusal(doc.at(p), `expected a list of tuples, found ${kindOf(list)}`)); return []; }
  return list.flatMap((_, i) => tuple(doc, [...p, i], refusals) ?? []);
}

const OBJECT = /^[^\s:#@]+:[^\s#@]+$/;
const SUBJECT = /^[^\s:#@]+:[^\s#@]+(#[^\s:#@]+)?$/;
const NAME = /^[^\s:#@]+$/;

/** One `{user, relation, object, condition}`. */
function tuple(doc: Located, p: Path, refusals: Refusal[]): Tuple | undefined {
  const t = getIn(doc.value, p);
  const at = doc.at(p);
  if (!isRecord(t)) { refusals.push(refusal(at, `expected a tuple {user, relation, object}, found ${kindOf(t)}`)); return undefined; }
  const { user, relation, object, condition } = t;
  const bad = (m: string) => { refusals.push(refusal(at, m)); return undefined; };
  if (typeof object !== 'string' || !OBJECT.test(object)) return bad(`tuple object ${JSON.stringify(object)} is not "type:id"`);
  if (typeof relation !== 'string' || !NAME.test(relation)) return bad(`tuple relation ${JSON.stringify(relation)} is not a relation name`);
  if (typeof user !== 'string' || !SUBJECT.test(user)) return bad(`tuple user ${JSON.stringify(user)} is not "type:id", "type:id#relation" or "type:*"`);
  const out: Tuple = { object, relation, subject: user, at };
  if (condition !== undefined && condition !== null) {
    if (!isRecord(condition) || typeof condition.name !== 'string') return bad('a tuple\'s condition is {name, context}');
    if (condition.context !== undefined && condition.context !== null && !isRecord(condition.context)) return bad(`condition ${condition.name}: "context" must be a map`);
    out.condition = { name: condition.name };
    if (isRecord(condition.context)) out.condition.context = condition.context;
  }
  return out;
}

/** A test's `check`, `list_objects` and `list_users` items, each into the test its contextual tuples select. */
function assertions(doc: Located, tp: Path, refusals: Refusal[], testFor: (contextual: Tuple[]) => StoreTest): void {
  const test = getIn(doc.value, tp) as Record<string, unknown>;
  const fail = (p: Path, m: string) => { refusals.push(refusal(doc.at(p), m)); };
  const items = (key: string, each: (item: Record<string, unknown>, p: Path, context: Record<string, unknown> | undefined, into: TestLine[]) => void) => {
    const list = test[key];
    if (list === undefined) return;
    if (!Array.isArray(list)) { fail([...tp, key], `expected "${key}" to be a list, found ${kindOf(list)}`); return; }
    list.forEach((item, i) => {
      const p: Path = [...tp, key, i];
      if (!isRecord(item)) { fail(p, `expected a ${key} item (a map), found ${kindOf(item)}`); return; }
      const context = item.context;
      if (context !== undefined && context !== null && !isRecord(context)) { fail([...p, 'context'], '"context" must be a map'); return; }
      const contextual = item.contextual_tuples === undefined ? [] : tupleList(doc, [...p, 'contextual_tuples'], refusals);
      if (!isRecord(item.assertions)) { fail(p, `a ${key} item needs "assertions", a map from relation to its expected answer`); return; }
      each(item, p, isRecord(context) ? context : undefined, testFor(contextual).lines);
    });
  };
  const known = (item: Record<string, unknown>, p: Path, keys: string[]) => {
    for (const k of Object.keys(item)) if (![...keys, 'context', 'contextual_tuples', 'assertions'].includes(k)) fail([...p, k], `unknown key "${k}"`);
  };
  items('check', (item, p, context, into) => {
    known(item, p, ['user', 'object']);
    if (typeof item.user !== 'string' || !SUBJECT.test(item.user)) return fail(p, `check: user ${JSON.stringify(item.user)} is not "type:id", "type:id#relation" or "type:*"`);
    if (typeof item.object !== 'string' || !OBJECT.test(item.object)) return fail(p, `check: object ${JSON.stringify(item.object)} is not "type:id"`);
    for (const [relation, expect] of Object.entries(item.assertions as Record<string, unknown>)) {
      if (typeof expect !== 'boolean') { fail([...p, 'assertions', relation], `check ${relation}: expected true or false, found ${kindOf(expect)}`); continue; }
      into.push({ k: 'check', subject: item.user, relation, object: item.object, context, expect, at: doc.at([...p, 'assertions', relation]) });
    }
  });
  items('list_objects', (item, p, context, into) => {
    known(item, p, ['user', 'type']);
    if (typeof item.user !== 'string' || !SUBJECT.test(item.user)) return fail(p, `list_objects: user ${JSON.stringify(item.user)} is not "type:id", "type:id#relation" or "type:*"`);
    if (typeof item.type !== 'string' || !NAME.test(item.type)) return fail(p, `list_objects: type ${JSON.stringify(item.type)} is not a type name`);
    for (const [relation, expect] of Object.entries(item.assertions as Record<string, unknown>)) {
      const ap: Path = [...p, 'assertions', relation];
      if (!Array.isArray(expect) || !expect.every((o) => typeof o === 'string')) { fail(ap, `list_objects ${relation}: expected a list of objects`); continue; }
      into.push({ k: 'objects', subject: item.user, relation, type: item.type, context, expect: expect as string[], at: doc.at(ap) });
    }
  });
  items('list_users', (item, p, context, into) => {
    known(item, p, ['object', 'user_filter']);
    if (typeof item.object !== 'string' || !OBJECT.test(item.object)) return fail(p, `list_users: object ${JSON.stringify(item.object)} is not "type:id"`);
    const filters = item.user_filter;
    if (!Array.isArray(filters) || filters.length === 0) return fail(p, 'list_users needs "user_filter": [{type}] or [{type, relation}]');
    const types: { type: string; relation?: string }[] = [];
    for (const [i, f] of filters.entries()) {
      if (!isRecord(f) || typeof f.type !== 'string' || !NAME.test(f.type) || (f.relation !== undefined && (typeof f.relation !== 'string' || !NAME.test(f.relation)))) {
        return fail([...p, 'user_filter', i], 'a user_filter entry is {type} or {type, relation}');
      }
      types.push({ type: f.type, relation: f.relation as string | undefined });
    }
    for (const [relation, expect] of Object.entries(item.assertions as Record<string, unknown>)) {
      const ap: Path = [...p, 'assertions', relation];
      const users = isRecord(expect) ? expect.users : undefined;
      if (!Array.isArray(users) || !users.every((u) => typeof u === 'string')) { fail(ap, `list_users ${relation}: expected {users: [...]}`); continue; }
      if (isRecord(expect) && Array.isArray(expect.excluded_users) && expect.excluded_users.length) {
        fail([...ap, 'excluded_users'], `list_users ${relation}: "excluded_users" has no equivalent (list subjects answers who holds the relation, not who is excluded)`);
        continue;
      }
      // One line per filter: the expected users of that filter's type (entities and wildcards
      // for `{type}`, usersets of the relation for `{type, relation}`).
      const unmatched = (users as string[]).filter((u) => !types.some((f) => matchesFilter(u, f)));
      if (unmatched.length) { fail(ap, `list_users ${relation}: ${unmatched.map((u) => JSON.stringify(u)).join(', ')} not of the user_filter's type`); continue; }
      for (const f of types) {
        const mine = (users as string[]).filter((u) => matchesFilter(u, f));
        into.push({ k: 'subjects', object: item.object, relation, subjectType: f.relation ? `${f.type}#${f.relation}` : f.type, context, expect: mine, at: doc.at(ap) });
      }
    }
  });
}

/** `user:anne` and `user:*` match `{type: user}`; `group:eng#member` matches `{type: group, relation: member}`. */
function matchesFilter(u: string, f: { type: string; relation?: string }): boolean {
  const m = /^([^:]+):([^#]+)(?:#(.+))?$/.exec(u);
  return m !== null && m[1] === f.type && m[3] === f.relation;
}
