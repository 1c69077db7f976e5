import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ReadText } from '../../../src/policy/openfga/index.js';
import type { FgaModel } from '../../../src/policy/openfga/model.js';

/** Files read from disk, as the CLI reads them. */
export const readDisk: ReadText = (path) => {
  try {
    return { text: readFileSync(path, 'utf8') };
  } catch (e) {
    return { error: `cannot read ${path}: ${(e as Error).message}` };
  }
};

/** In-memory files by path. */
export function readFrom(files: Record<string, string>): ReadText {
  return (path) => (path in files ? { text: files[path]! } : { error: `no such file: ${path}` });
}

/** Every file under dir whose name passes the test, sorted. */
export function filesUnder(dir: string, test: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p, test));
    else if (test(name)) out.push(p);
  }
  return out;
}

/** A model without the places its parts were read from: what two forms of one model share. */
export function withoutPlaces(m: FgaModel): unknown {
  return JSON.parse(JSON.stringify(m, (k, v) => (k === 'at' || k === 'expressionAt' || k === 'flatLines' ? undefined : v)));
}
