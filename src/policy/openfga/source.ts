// A model from its file, whatever its form: `fga.mod` (a modular model: its `.fga` modules, each
// `module NAME`, types extended with `extend type`), the JSON form (`.json`), or a `.fga` file.
// Files are read through the caller's `read` (this module does no I/O), by paths joined to the
// directory of the file that names them.

import { dirname, join } from 'node:path';
import { parseDsl, type DslModule } from './dsl.js';
import { readJsonModel } from './json-model.js';
import { isRecord, kindOf, parseLocated } from './located.js';
import { refusal, type FgaModel, type Imported, type Refusal, type Rewrite, type Where } from './model.js';

/** The text of a file, or an error message when it cannot be read. */
export type ReadText = (path: string) => { text: string } | { error: string };

export function readModelFile(path: string, read: ReadText, from?: Where): Imported<FgaModel> {
  const src = read(path);
  if ('error' in src) return { ok: false, refusals: [refusal(from ?? { file: path, line: 1 }, src.error)] };
  if (/(^|\/)fga\.mod$|\.mod$/.test(path)) return readModFile(path, src.text, read);
  if (/\.json$/i.test(path)) {
    const m = readJsonModel(path, src.text);
    return m.ok ? combineModules([{ ...m.value, extensions: [], at: { file: path, line: 1 } }]) : m;
  }
  return modelFromDsl(path, src.text);
}

/** A whole model in the DSL (`model` / `schema 1.1`), starting on `firstLine` of `file`. */
export function modelFromDsl(file: string, text: string, firstLine = 1): Imported<FgaModel> {
  const m = parseDsl(file, text, firstLine);
  if (!m.ok) return m;
  if (m.value.module !== undefined) {
    return { ok: false, refusals: [refusal(m.value.at, `"module ${m.value.module}" is one part of a modular model: import its fga.mod`)] };
  }
  return combineModules([m.value]);
}

/** `fga.mod`: `schema: '1.2'` and `contents:` the module files, relative to it. */
export function readModFile(path: string, text: string, read: ReadText): Imported<FgaModel> {
  const doc = parseLocated(path, text);
  if (!doc.ok) return doc;
  const v = doc.value.value;
  if (!isRecord(v)) return { ok: false, refusals: [refusal(doc.value.at([]), `expected "schema" and "contents", found ${kindOf(v)}`)] };
  if (String(v.schema) !== '1.2') return { ok: false, refusals: [refusal(doc.value.at(['schema']), `fga.mod schema ${v.schema === undefined ? '(none)' : JSON.stringify(v.schema)} is not supported: expected '1.2'`)] };
  if (!Array.isArray(v.contents) || v.contents.length === 0) return { ok: false, refusals: [refusal(doc.value.at(['contents']), '"contents" must list the module files')] };
  const modules: DslModule[] = [];
  const refusals: Refusal[] = [];
  v.contents.forEach((c, i) => {
    const at = doc.value.at(['contents', i]);
    if (typeof c !== 'string' || !c.endsWith('.fga')) { refusals.push(refusal(at, `a module file is a path ending in .fga, found ${JSON.stringify(c)}`)); return; }
    const file = join(dirname(path), c);
    const src = read(file);
    if ('error' in src) { refusals.push(refusal(at, src.error)); return; }
    const m = parseDsl(file, src.text);
    if (!m.ok) { refusals.push(...m.refusals); return; }
    if (m.value.module === undefined) { refusals.push(refusal(m.value.at, 'a file of a modular model starts with "module NAME"')); return; }
    modules.push(m.value);
  });
  if (refusals.length) return { ok: false, refusals };
  return combineModules(modules);
}

/**
 * One model from its modules, in the order given: every type once, the relations of `extend type`
 * blocks added to the type they extend, every relation and condition name once.
 */
export function combineModules(modules: DslModule[]): Imported<FgaModel> {
  const refusals: Refusal[] = [];
  const model: FgaModel = { types: [], conditions: [] };
  const where = (w: Where) => `${w.file}:${w.line}`;
  const types = new Map<string, FgaModel['types'][number]>();
  for (const m of modules) {
    for (const t of m.types) {
      const prev = types.get(t.name);
      if (prev) { refusals.push(refusal(t.at, `type ${t.name} is also declared at ${where(prev.at)}`)); continue; }
      const copy = { ...t, relations: [...t.relations] };
      types.set(t.name, copy);
      model.types.push(copy);
    }
  }
  for (const m of modules) {
    for (const ext of m.extensions) {
      const t = types.get(ext.name);
      if (!t) { refusals.push(refusal(ext.at, `extend type ${ext.name}: no module declares type ${ext.name}`)); continue; }
      t.relations.push(...ext.relations);
    }
  }
  for (const t of model.types) {
    const seen = new Map<string, Where>();
    for (const r of t.relations) {
      const prev = seen.get(r.name);
      if (prev) refusals.push(refusal(r.at, `relation ${t.name}#${r.name} is also defined at ${where(prev)}`));
      else seen.set(r.name, r.at);
    }
  }
  const conds = new Map<string, Where>();
  for (const m of modules) {
    for (const c of m.conditions) {
      const prev = conds.get(c.name);
      if (prev) { refusals.push(refusal(c.at, `condition ${c.name} is also declared at ${where(prev)}`)); continue; }
      conds.set(c.name, c.at);
      model.conditions.push(c);
    }
  }
  if (!refusals.length) refusals.push(...checkReferences(model));
  return refusals.length ? { ok: false, refusals } : { ok: true, value: model };
}

/**
 * What OpenFGA checks when a model is written, so that a model it would reject is refused with its
 * line here rather than imported: every relation, type and condition a definition names exists;
 * `r from t`: `t` is a relation of the same type with direct types only (no usersets), and `r` a
 * relation of at least one of them.
 */
export function checkReferences(model: FgaModel): Refusal[] {
  const out: Refusal[] = [];
  const types = new Map(model.types.map((t) => [t.name, new Map(t.relations.map((r) => [r.name, r]))]));
  const conditions = new Set(model.conditions.map((c) => c.name));
  for (const t of model.types) {
    const rels = types.get(t.name)!;
    for (const r of t.relations) {
      const what = `${t.name}#${r.name}`;
      const visit = (x: Rewrite): void => {
        switch (x.kind) {
          case 'direct':
            for (const d of x.types) {
              const target = types.get(d.type);
              const shown = d.wildcard ? `${d.type}:*` : d.relation ? `${d.type}#${d.relation}` : d.type;
              if (!target) out.push(refusal(x.at, `${what}: [${shown}] names no declared type`));
              else if (d.relation && !target.has(d.relation)) out.push(refusal(x.at, `${what}: [${shown}]: type ${d.type} has no relation ${d.relation}`));
              if (d.condition && !conditions.has(d.condition)) out.push(refusal(x.at, `${what}: [${shown} with ${d.condition}]: no condition ${d.condition} is declared`));
            }
            break;
          case 'computed':
            if (!rels.has(x.relation)) out.push(refusal(x.at, `${what}: type ${t.name} has no relation ${x.relation}`));
            else if (x.relation === r.name) out.push(refusal(x.at, `${what}: a relation cannot be defined as itself`));
            break;
          case 'from': {
            const ts = rels.get(x.tupleset);
            if (!ts) { out.push(refusal(x.at, `${what}: "${x.relation} from ${x.tupleset}": type ${t.name} has no relation ${x.tupleset}`)); break; }
            if (ts.rewrite.kind !== 'direct' || ts.rewrite.types.some((d) => d.relation || d.wildcard)) {
              out.push(refusal(x.at, `${what}: "${x.relation} from ${x.tupleset}": ${t.name}#${x.tupleset} must be direct types only, without usersets or wildcards`));
              break;
            }
            const targets = ts.rewrite.types.filter((d) => !d.wildcard).map((d) => d.type);
            if (!targets.some((ty) => types.get(ty)?.has(x.relation))) {
              out.push(refusal(x.at, `${what}: "${x.relation} from ${x.tupleset}": none of ${[...new Set(targets)].join(', ') || 'its types'} has a relation ${x.relation}`));
            }
            break;
          }
          case 'union': case 'intersection': x.children.forEach(visit); break;
          case 'difference': visit(x.base); visit(x.subtract); break;
        }
      };
      visit(r.rewrite);
    }
  }
  return out;
}
