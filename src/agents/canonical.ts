import { createHash } from 'node:crypto';

type Frame =
  | { items: unknown[]; i: number }
  | { obj: Record<string, unknown>; keys: string[]; i: number; first: boolean };

const skipped = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol';

/**
 * JSON with object keys sorted at every depth: two contexts are the same action iff these match.
 * Iterative (an explicit stack), so no input nests deep enough to exhaust the call stack.
 */
export function canonicalJson(value: unknown): string {
  let out = '';
  const stack: Frame[] = [];
  const write = (raw: unknown): void => {
    const v = raw !== null && typeof raw === 'object' && typeof (raw as { toJSON?: unknown }).toJSON === 'function' ? (raw as { toJSON(): unknown }).toJSON() : raw;
    if (Array.isArray(v)) {
      out += '[';
      stack.push({ items: v, i: 0 });
    } else if (v !== null && typeof v === 'object') {
      out += '{';
      stack.push({ obj: v as Record<string, unknown>, keys: Object.keys(v).sort(), i: 0, first: true });
    } else {
      out += JSON.stringify(v) ?? 'null';
    }
  };
  write(value);
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    if ('items' in f) {
      if (f.i >= f.items.length) {
        out += ']';
        stack.pop();
        continue;
      }
      if (f.i > 0) out += ',';
      write(f.items[f.i++]);
    } else {
      while (f.i < f.keys.length && skipped(f.obj[f.keys[f.i]!])) f.i++;
      if (f.i >= f.keys.length) {
        out += '}';
        stack.pop();
        continue;
      }
      const k = f.keys[f.i++]!;
      out += `${f.first ? '' : ','}${JSON.stringify(k)}:`;
      f.first = false;
      write(f.obj[k]);
    }
  }
  return out;
}

/** Identifies one action of one agent: the key an approval is granted for. */
export function actionKey(agentId: string, action: string, resource: string, context: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify([agentId, action, resource, canonicalJson(context)])).digest('base64url');
}
