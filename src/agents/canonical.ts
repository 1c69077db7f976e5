import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth: two contexts are the same action iff these match. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    // No prototype: a key named `__proto__` stays a key instead of changing the object.
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

/** Identifies one action of one agent: the key an approval is granted for. */
export function actionKey(agentId: string, action: string, resource: string, context: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify([agentId, action, resource, canonicalJson(context)])).digest('base64url');
}
