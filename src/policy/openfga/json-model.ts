// The JSON form of an OpenFGA model (what `fga model get --format json` and the API return):
// `type_definitions` with usersets (`this`, `computedUserset`, `tupleToUserset`, `union`,
// `intersection`, `difference`) and the direct types in `metadata`, and `conditions` with their
// CEL expression and typed parameters. Read into the same model as the DSL.

import { getIn, isRecord, kindOf, parseLocated, type Located, type Path } from './located.js';
import { refusal, type ConditionParam, type FgaModel, type Imported, type Refusal, type Rewrite, type TypeDef, type TypeRestriction } from './model.js';

export function readJsonModel(file: string, text: string): Imported<FgaModel> {
  const doc = parseLocated(file, text);
  if (!doc.ok) return doc;
  return fromJson(doc.value, []);
}

/** A JSON-form model found at `base` in a located document (a store file may hold one as `model`). */
export function fromJson(doc: Located, base: Path): Imported<FgaModel> {
  const refusals: Refusal[] = [];
  const root = getIn(doc.value, base);
  const fail = (path: Path, message: string) => { refusals.push(refusal(doc.at([...base, ...path]), message)); };
  if (!isRecord(root)) return { ok: false, refusals: [refusal(doc.at(base), `expected a model (a map with "type_definitions"), found ${kindOf(root)}`)] };
  const schema = root.schema_version;
  if (schema !== '1.1' && schema !== '1.2') {
    fail(['schema_version'], `schema ${schema === undefined ? '(none)' : JSON.stringify(schema)} is not supported: the importer reads schema 1.1`);
    return { ok: false, refusals };
  }
  const model: FgaModel = { types: [], conditions: [] };
  const defs = root.type_definitions;
  if (!Array.isArray(defs)) {
    fail(['type_definitions'], `expected "type_definitions" to be a list, found ${kindOf(defs)}`);
    return { ok: false, refusals };
  }
  defs.forEach((def, ti) => {
    const p: Path = ['type_definitions', ti];
    if (!isRecord(def) || typeof def.type !== 'string') { fail(p, 'expected a type definition with a "type" name'); return; }
    const type: TypeDef = { name: def.type, relations: [], at: doc.at([...base, ...p, 'type']) };
    model.types.push(type);
    const rels = def.relations ?? {};
    if (!isRecord(rels)) { fail([...p, 'relations'], `expected "relations" to be a map, found ${kindOf(rels)}`); return; }
    const meta = isRecord(def.metadata) && isRecord(def.metadata.relations) ? def.metadata.relations : {};
    for (const [name, userset] of Object.entries(rels)) {
      const rp: Path = [...p, 'relations', name];
      const relMeta = meta[name];
      const directs = isRecord(relMeta) ? relMeta.directly_related_user_types : undefined;
      let thisCount = 0;
      const rewrite = (u: unknown, up: Path): Rewrite | undefined => {
        const at = doc.at([...base, ...up]);
        if (!isRecord(u)) { fail(up, `${type.name}#${name}: expected a userset, found ${kindOf(u)}`); return undefined; }
        const keys = Object.keys(u);
        if (keys.length !== 1) { fail(up, `${type.name}#${name}: a userset holds exactly one of this, computedUserset, tupleToUserset, union, intersection, difference (found ${keys.join(', ') || 'none'})`); return undefined; }
        const key = keys[0]!;
        const v = u[key];
        switch (key) {
          case 'this': {
            if (++thisCount > 1) { fail(up, `${type.name}#${name}: direct types used twice in one definition`); return undefined; }
            const types = directTypes(directs, [...p, 'metadata', 'relations', name, 'directly_related_user_types'], up, `${type.name}#${name}`);
            return types && { kind: 'direct', types, at };
          }
          case 'computedUserset': {
            const rel = isRecord(v) ? v.relation : undefined;
            if (typeof rel !== 'string') { fail(up, `${type.name}#${name}: computedUserset without a relation`); return undefined; }
            return { kind: 'computed', relation: rel, at };
          }
          case 'tupleToUserset': {
            const ts = isRecord(v) && isRecord(v.tupleset) ? v.tupleset.relation : undefined;
            const cu = isRecord(v) && isRecord(v.computedUserset) ? v.computedUserset.relation : undefined;
            if (typeof ts !== 'string' || typeof cu !== 'string') { fail(up, `${type.name}#${name}: tupleToUserset needs tupleset.relation and computedUserset.relation`); return undefined; }
            return { kind: 'from', relation: cu, tupleset: ts, at };
          }
          case 'union':
          case 'intersection': {
            const child = isRecord(v) ? v.child : undefined;
            if (!Array.isArray(child) || child.length === 0) { fail(up, `${type.name}#${name}: ${key} needs a non-empty "child" list`); return undefined; }
            const children = child.map((c, ci) => rewrite(c, [...up, key, 'child', ci]));
            if (children.some((c) => !c)) return undefined;
            return { kind: key, children: children as Rewrite[], at };
          }
          case 'difference': {
            const b = isRecord(v) ? rewrite(v.base, [...up, key, 'base']) : undefined;
            const s = isRecord(v) ? rewrite(v.subtract, [...up, key, 'subtract']) : undefined;
            if (!b || !s) { if (!isRecord(v)) fail(up, `${type.name}#${name}: difference needs "base" and "subtract"`); return undefined; }
            return { kind: 'difference', base: b, subtract: s, at };
          }
          default:
            fail(up, `${type.name}#${name}: unknown userset "${key}"`);
            return undefined;
        }
      };
      const r = rewrite(userset, rp);
      if (r) type.relations.push({ name, rewrite: r, at: doc.at([...base, ...rp]) });
    }
  });

  function directTypes(list: unknown, path: Path, thisPath: Path, what: string): TypeRestriction[] | undefined {
    if (!Array.isArray(list) || list.length === 0) {
      fail(thisPath, `${what} takes direct relationships ("this") but its metadata names no directly_related_user_types`);
      return undefined;
    }
    const out: TypeRestriction[] = [];
    list.forEach((d, i) => {
      if (!isRecord(d) || typeof d.type !== 'string') { fail([...path, i], 'expected {"type": ...}'); return; }
      const r: TypeRestriction = { type: d.type };
      if (typeof d.relation === 'string' && d.relation !== '') r.relation = d.relation;
      if (d.wildcard !== undefined) r.wildcard = true;
      if (typeof d.condition === 'string' && d.condition !== '') r.condition = d.condition;
      if (r.wildcard && r.relation) { fail([...path, i], `${d.type}: a wildcard with a relation`); return; }
      out.push(r);
    });
    return out;
  }

  const conds = root.conditions ?? {};
  if (!isRecord(conds)) fail(['conditions'], `expected "conditions" to be a map, found ${kindOf(conds)}`);
  else {
    for (const [name, c] of Object.entries(conds)) {
      const cp: Path = ['conditions', name];
      if (!isRecord(c) || typeof c.expression !== 'string') { fail(cp, `condition ${name}: expected {"name", "expression", "parameters"}`); continue; }
      const params: ConditionParam[] = [];
      const ps = c.parameters ?? {};
      if (!isRecord(ps)) { fail([...cp, 'parameters'], `condition ${name}: "parameters" must be a map`); continue; }
      for (const [pname, pt] of Object.entries(ps)) {
        const t = jsonParamType(pt);
        if (!t) { fail([...cp, 'parameters', pname], `condition ${name}: parameter ${pname} has an unknown type ${JSON.stringify(pt)}`); continue; }
        params.push({ name: pname, type: t });
      }
      const exprAt = doc.at([...base, ...cp, 'expression']);
      model.conditions.push({ name, params, expression: c.expression, expressionAt: exprAt, at: doc.at([...base, ...cp]), flatLines: true });
    }
  }
  return refusals.length ? { ok: false, refusals } : { ok: true, value: model };
}

const TYPE_NAMES: Record<string, string> = {
  TYPE_NAME_ANY: 'any', TYPE_NAME_BOOL: 'bool', TYPE_NAME_STRING: 'string', TYPE_NAME_INT: 'int', TYPE_NAME_UINT: 'uint',
  TYPE_NAME_DOUBLE: 'double', TYPE_NAME_DURATION: 'duration', TYPE_NAME_TIMESTAMP: 'timestamp', TYPE_NAME_IPADDRESS: 'ipaddress',
};

/** `{"type_name": "TYPE_NAME_LIST", "generic_types": [{"type_name": "TYPE_NAME_STRING"}]}` → `list<string>`. */
function jsonParamType(t: unknown): string | undefined {
  if (!isRecord(t) || typeof t.type_name !== 'string') return undefined;
  const scalar = TYPE_NAMES[t.type_name];
  if (scalar) return scalar;
  const generic = t.type_name === 'TYPE_NAME_LIST' ? 'list' : t.type_name === 'TYPE_NAME_MAP' ? 'map' : undefined;
  if (!generic || !Array.isArray(t.generic_types) || t.generic_types.length !== 1) return undefined;
  const inner = jsonParamType(t.generic_types[0]);
  return inner && `${generic}<${inner}>`;
}
