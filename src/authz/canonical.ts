import { createHash } from 'node:crypto';

type Frame =
  | { items: unknown[]; i: number }
  | { obj: Record<string, unknown>; keys: string[]; i: number; first: boolean };

const skipped = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol';

/** Writes a scalar, or opens a container on the stack; answers the text to append. */
function open(raw: unknown, stack: Frame[]): string {
  const v = raw !== null && typeof raw === 'object' && typeof (raw as { toJSON?: unknown }).toJSON === 'function' ? (raw as { toJSON(): unknown }).toJSON() : raw;
  if (Array.isArray(v)) {
    stack.push({ items: v, i: 0 });
    return '[';
  }
  if (v !== null && typeof v === 'object') {
    stack.push({ obj: v as Record<string, unknown>, keys: Object.keys(v).sort(), i: 0, first: true });
    return '{';
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * JSON with object keys sorted at every depth: two contexts are the same action iff these match.
 * Iterative (an explicit stack), so no input nests deep enough to exhaust the call stack.
 */
export function canonicalJson(value: unknown): string {
  const stack: Frame[] = [];
  let out = open(value, stack);
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    if ('items' in f) {
      if (f.i >= f.items.length) {
        out += ']';
        stack.pop();
      } else {
        out += (f.i > 0 ? ',' : '') + open(f.items[f.i++], stack);
      }
      continue;
    }
    while (f.i < f.keys.length && skipped(f.obj[f.keys[f.i]!])) f.i++;
    if (f.i >= f.keys.length) {
      out += '}';
      stack.pop();
      continue;
    }
    const k = f.keys[f.i++]!;
    out += `${f.first ? '' : ','}${JSON.stringify(k)}:`;
    f.first = false;
    out += open(f.obj[k], stack);
  }
  return out;
}

/** Whether two JSON values are the same once key order is ignored (a plain comparison first: the usual case). */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b) || canonicalJson(a) === canonicalJson(b);
}

/**
 * Identifies one action of one agent: the key an approval is granted for. A delegated agent's
 * action names the person it acts for (`personId`): one person's approval is not another's.
 */
export function actionKey(agentId: string, action: string, resource: string, context: Record<string, unknown>, personId?: string | null): string {
  const parts = [agentId, action, resource, canonicalJson(context)];
  if (personId) parts.push(personId);
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url');
}
