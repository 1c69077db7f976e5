// `gatehouse policy import openfga`: an OpenFGA model or store file into the policy language.
// What a file is follows its name: `*.fga.yaml` / `*.fga.yml` (and any other `.yaml`/`.yml`) a
// store file; `fga.mod` a modular model; `*.json` the JSON form of a model; anything else a
// `.fga` model. Pure: the caller reads files (through `read`) and writes the result.

import { basename } from 'node:path';
import { emitPolicy, emitTests, relationshipJson } from './emit.js';
import { renderRefusal, type Imported, type Refusal } from './model.js';
import { readModelFile, type ReadText } from './source.js';
import { readStore } from './store.js';

export type { ReadText } from './source.js';
export { renderRefusal, type Refusal } from './model.js';

export interface OpenfgaImport {
  /** The stem the output files are named after: `store` for `store.fga.yaml`. */
  stem: string;
  /** The policy file: types, relations and conditions. */
  policy: string;
  /** A store file's relationships, as the project file's `relationships` takes them. */
  relationships?: { relationships: Record<string, unknown>[] };
  /** A store file's tests, as a `.tests` file. */
  tests?: string;
}

export function isStoreFile(path: string): boolean {
  return /\.(ya?ml)$/i.test(path) && !/(^|\/)fga\.mod$/.test(path);
}

/** The name without `.fga.yaml`, `.fga`, `.dsl`, `.json`, `.mod`. */
export function stemOf(path: string): string {
  const b = basename(path).replace(/(\.fga)?\.(ya?ml|json|fga|dsl|mod)$/i, '');
  return b || 'model';
}

export function importOpenfga(path: string, read: ReadText): Imported<OpenfgaImport> {
  const stem = stemOf(path);
  const source = basename(path);
  if (!isStoreFile(path)) {
    const model = readModelFile(path, read);
    if (!model.ok) return model;
    const policy = emitPolicy(model.value, { name: stem, source });
    return policy.ok ? { ok: true, value: { stem, policy: policy.value } } : policy;
  }
  const src = read(path);
  if ('error' in src) return { ok: false, refusals: [{ file: path, line: 1, message: src.error }] };
  const store = readStore(path, src.text, read);
  if (!store.ok) return store;
  const policy = emitPolicy(store.value.model, { name: store.value.name?.trim() || stem, source });
  if (!policy.ok) return policy;
  return {
    ok: true,
    value: {
      stem,
      policy: policy.value,
      relationships: { relationships: store.value.relationships.map(relationshipJson) },
      tests: emitTests(source, store.value.relationships, store.value.tests),
    },
  };
}

export function renderRefusals(rs: Refusal[]): string {
  return rs.map((r) => renderRefusal(r) + '\n').join('');
}
