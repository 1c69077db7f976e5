// YAML (and JSON, which YAML reads too) with the line of every value: the store file, fga.mod,
// tuple files and the JSON form of a model are all read through here so that a refusal names
// the line of the value it refuses.

import { LineCounter, parseDocument, isScalar, type Document } from 'yaml';
import { refusal, type Imported, type Where } from './model.js';

export type Path = readonly (string | number)[];

export interface Located {
  file: string;
  value: unknown;
  /** The line of the value at a path (the nearest enclosing value that exists). */
  at(path: Path): Where;
  /** The line the content of a multi-line string at `path` starts on (a `|` block starts below its key). */
  textStart(path: Path): Where;
}

export function parseLocated(file: string, text: string): Imported<Located> {
  const lineCounter = new LineCounter();
  let doc: Document.Parsed;
  try {
    doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  } catch (e) {
    return { ok: false, refusals: [refusal({ file, line: 1 }, `cannot read: ${(e as Error).message}`)] };
  }
  if (doc.errors.length) {
    return {
      ok: false,
      // The first error only: the ones after it follow from it.
      refusals: doc.errors.slice(0, 1).map((e) => refusal({ file, line: e.linePos?.[0].line ?? 1 }, `not valid YAML or JSON: ${e.message.split('\n')[0]}`)),
    };
  }
  const nodeAt = (path: Path) => {
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number]; type?: string } | undefined;
      if (node && typeof node === 'object' && node.range) return node;
    }
    return undefined;
  };
  const lineOf = (offset: number) => lineCounter.linePos(offset).line;
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    // An alias to no anchor, or aliases expanding past the bound.
    return { ok: false, refusals: [refusal({ file, line: 1 }, `not valid YAML: ${(e as Error).message}`)] };
  }
  return {
    ok: true,
    value: {
      file,
      value,
      at: (path) => ({ file, line: (() => { const n = nodeAt(path); return n?.range ? lineOf(n.range[0]) : 1; })() }),
      textStart: (path) => {
        const n = nodeAt(path);
        if (!n?.range) return { file, line: 1 };
        const block = isScalar(n) && (n.type === 'BLOCK_LITERAL' || n.type === 'BLOCK_FOLDED');
        return { file, line: lineOf(n.range[0]) + (block ? 1 : 0) };
      },
    },
  };
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The value's kind in a refusal: "a list", "a number". */
export function kindOf(v: unknown): string {
  if (v === null || v === undefined) return 'nothing';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a map';
  return `a ${typeof v}`;
}

/** The value at a path of a plain value (undefined where the path leaves it). */
export function getIn(v: unknown, path: Path): unknown {
  let cur = v;
  for (const k of path) cur = isRecord(cur) || Array.isArray(cur) ? (cur as Record<string | number, unknown>)[k] : undefined;
  return cur;
}
