/**
 * Sets `key` on `obj` as its own data property, as JSON.parse would: a name a rule or a request
 * writes (`__proto__`, `constructor`) is a key like any other, never the object's prototype.
 */
export function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A JSON object (not null, not an array): what a request's `context`, attributes or limits must be. */
export function isJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
