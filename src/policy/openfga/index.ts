// `gatehouse policy import openfga`: an OpenFGA model or store file into the policy language.
// What a file is follows its name: `*.fga.yaml` / `*.fga.yml` (and any other `.yaml`/`.yml`) a
// store file; `fga.mod` a modular model; `*.json` the JSON form of a model; anything else a
// `.fga` model. Pure: the caller reads files (through `read`) and writes the result.

import { basename, dirname, resolve } from 'node:path';
import { hasErrors, parseAndValidate } from '../load.js';
import { emitPolicy, emitTests, relationshipJson, type Emitted } from './emit.js';
import { refusal, renderRefusal, type Imported, type Refusal, type Where } from './model.js';
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

/** The name without `.fga.yaml`, `.fga`, `.dsl`, `.json`, `.mod`; for `fga.mod`, its directory's name. */
export function stemOf(path: string): string {
  if (basename(path) === 'fga.mod') return basename(dirname(resolve(path))) || 'model';
  const b = basename(path).replace(/(\.fga)?\.(ya?ml|json|fga|dsl|mod)$/i, '');
  return b || 'model';
}

/** A store's name as a policy name: `Google Drive` → `google-drive` (a policy version names it). */
export function policyName(name: string | undefined): string {
  return (name ?? '').toLowerCase().replace(/[^a-z0-9_]+/g, '-').replace(/^-+|-+$/g, '');
}

export function importOpenfga(path: string, read: ReadText): Imported<OpenfgaImport> {
  const stem = stemOf(path);
  const source = basename(path);
  const start: Where = { file: path, line: 1 };
  if (!isStoreFile(path)) {
    const model = readModelFile(path, read);
    if (!model.ok) return model;
    const policy = emitPolicy(model.value, { name: stem, source });
    if (!policy.ok) return policy;
    const rejected = validateOutput(stem, policy.value, undefined, start);
    return rejected.length ? { ok: false, refusals: rejected } : { ok: true, value: { stem, policy: policy.value.text } };
  }
  const src = read(path);
  if ('error' in src) return { ok: false, refusals: [refusal(start, src.error)] };
  const store = readStore(path, src.text, read);
  if (!store.ok) return store;
  const policy = emitPolicy(store.value.model, { name: policyName(store.value.name) || stem, source });
  if (!policy.ok) return policy;
  const tests = emitTests(source, store.value.relationships, store.value.tests);
  const rejected = validateOutput(stem, policy.value, tests, start);
  if (rejected.length) return { ok: false, refusals: rejected };
  return {
    ok: true,
    value: {
      stem,
      policy: policy.value.text,
      relationships: { relationships: store.value.relationships.map(relationshipJson) },
      tests: tests.text,
    },
  };
}

/**
 * The emitted files as the policy language's own checks see them: an error there (a condition
 * whose types do not add up, a relationship the model does not allow) is a refusal at the place
 * of the input the offending line came from.
 */
export function validateOutput(stem: string, policy: Emitted, tests: Emitted | undefined, fallback: Where): Refusal[] {
  const files = [{ path: `${stem}.policy`, emitted: policy }, ...(tests ? [{ path: `${stem}.tests`, emitted: tests }] : [])];
  const { diagnostics } = parseAndValidate({ files: files.map((f) => ({ path: f.path, text: f.emitted.text })) });
  if (!hasErrors(diagnostics)) return [];
  return diagnostics.filter((d) => d.severity !== 'warning').map((d) => {
    const at = files.find((f) => f.path === d.file)?.emitted.sources[d.line - 1] ?? fallback;
    return refusal(at, `the policy language does not accept the import: ${d.message}`);
  });
}

export function renderRefusals(rs: Refusal[]): string {
  return rs.map((r) => renderRefusal(r) + '\n').join('');
}
