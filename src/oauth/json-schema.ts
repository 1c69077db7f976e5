/**
 * A small JSON Schema validator (the subset of draft 2020-12 that describing an authorization
 * details type needs). Pure: a schema and a value in, problems out.
 *
 * Supported keywords:
 *   type (one name or a list: object, array, string, number, integer, boolean, null),
 *   enum, const,
 *   properties, required, additionalProperties (false, true or a schema), minProperties, maxProperties,
 *   items (one schema for every element), minItems, maxItems, uniqueItems,
 *   minLength, maxLength, pattern (a JavaScript regular expression, unanchored, Unicode),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf.
 * Annotations are accepted and ignored: $schema, $id, $comment, title, description, examples,
 * default, deprecated, readOnly, writeOnly, format. Any other keyword ($ref, anyOf, if, ...) is
 * refused when the type is declared (`schemaProblems`), so a schema never means more than is checked.
 */

export type JsonSchema = Record<string, unknown>;

const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;
const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'title', 'description', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly', 'format']);
const KEYWORDS = new Set([
  'type', 'enum', 'const',
  'properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties',
  'items', 'minItems', 'maxItems', 'uniqueItems',
  'minLength', 'maxLength', 'pattern',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
]);
const COUNTS = ['minProperties', 'maxProperties', 'minItems', 'maxItems', 'minLength', 'maxLength'];
const NUMBERS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];
const MAX_DEPTH = 32;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What is wrong with a schema itself, each problem with its JSON pointer; empty when it can be used. */
export function schemaProblems(schema: unknown, at = '', depth = 0): string[] {
  if (depth > MAX_DEPTH) return [`${at || '/'}: nested too deeply`];
  if (typeof schema === 'boolean') return [];
  if (!isObject(schema)) return [`${at || '/'}: a schema is an object or a boolean`];
  const out: string[] = [];
  const here = (k: string) => `${at}/${k}`;
  for (const [k, v] of Object.entries(schema)) {
    if (ANNOTATIONS.has(k)) continue;
    if (!KEYWORDS.has(k)) {
      out.push(`${here(k)}: the keyword ${k} is not supported`);
      continue;
    }
    if (k === 'type') {
      const names = Array.isArray(v) ? v : [v];
      if (names.length === 0 || !names.every((n) => (TYPES as readonly unknown[]).includes(n))) out.push(`${here(k)}: must be one of ${TYPES.join(', ')} or a list of them`);
    } else if (k === 'enum') {
      if (!Array.isArray(v) || v.length === 0) out.push(`${here(k)}: must be a non-empty array`);
    } else if (k === 'properties') {
      if (!isObject(v)) out.push(`${here(k)}: must be an object of schemas`);
      else for (const [name, s] of Object.entries(v)) out.push(...schemaProblems(s, `${here(k)}/${name}`, depth + 1));
    } else if (k === 'required') {
      if (!Array.isArray(v) || !v.every((n) => typeof n === 'string')) out.push(`${here(k)}: must be an array of property names`);
    } else if (k === 'additionalProperties' || k === 'items') {
      out.push(...schemaProblems(v, here(k), depth + 1));
    } else if (k === 'uniqueItems') {
      if (typeof v !== 'boolean') out.push(`${here(k)}: must be true or false`);
    } else if (k === 'pattern') {
      if (typeof v !== 'string') out.push(`${here(k)}: must be a string`);
      else {
        try {
          new RegExp(v, 'u');
        } catch {
          out.push(`${here(k)}: not a valid regular expression`);
        }
      }
    } else if (COUNTS.includes(k)) {
      if (!Number.isInteger(v) || (v as number) < 0) out.push(`${here(k)}: must be a non-negative integer`);
    } else if (NUMBERS.includes(k)) {
      if (typeof v !== 'number' || !Number.isFinite(v)) out.push(`${here(k)}: must be a number`);
    } else if (k === 'multipleOf') {
      if (typeof v !== 'number' || !(v > 0)) out.push(`${here(k)}: must be a number above 0`);
    }
  }
  return out;
}

function typeOf(v: unknown): (typeof TYPES)[number] {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v as 'object' | 'string' | 'boolean';
}

/** Deep equality of JSON values (object key order does not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

const show = (v: unknown) => {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
};

/**
 * Where `value` breaks `schema` (a schema `schemaProblems` accepted): each problem as a JSON
 * pointer into the value and what is wrong. Empty when the value is valid.
 */
export function validateJson(schema: unknown, value: unknown, at = '', depth = 0): string[] {
  const where = at || '/';
  if (schema === true) return [];
  if (schema === false) return [`${where}: no value is allowed here`];
  if (!isObject(schema)) return [`${where}: the schema is malformed`];
  if (depth > MAX_DEPTH) return [`${where}: nested too deeply`];
  const out: string[] = [];
  const s = schema;
  const actual = typeOf(value);

  if (s.type !== undefined) {
    const names = (Array.isArray(s.type) ? s.type : [s.type]) as string[];
    const ok = names.includes(actual) || (actual === 'integer' && names.includes('number'));
    if (!ok) return [`${where}: must be ${names.join(' or ')} (got ${actual === 'integer' ? 'number' : actual})`];
  }
  if (s.const !== undefined && !jsonEqual(s.const, value)) out.push(`${where}: must be ${show(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => jsonEqual(e, value))) out.push(`${where}: must be one of ${s.enum.map(show).join(', ')}`);

  if (actual === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    const props = isObject(s.properties) ? s.properties : {};
    for (const name of Array.isArray(s.required) ? (s.required as string[]) : []) {
      if (!Object.hasOwn(obj, name)) out.push(`${at}/${name}: is required`);
    }
    for (const k of keys) {
      const path = `${at}/${k}`;
      if (Object.hasOwn(props, k)) out.push(...validateJson(props[k], obj[k], path, depth + 1));
      else if (s.additionalProperties !== undefined) {
        if (s.additionalProperties === false) out.push(`${path}: is not allowed`);
        else out.push(...validateJson(s.additionalProperties, obj[k], path, depth + 1));
      }
    }
    if (typeof s.minProperties === 'number' && keys.length < s.minProperties) out.push(`${where}: needs at least ${s.minProperties} properties`);
    if (typeof s.maxProperties === 'number' && keys.length > s.maxProperties) out.push(`${where}: may have at most ${s.maxProperties} properties`);
  }

  if (actual === 'array') {
    const arr = value as unknown[];
    if (s.items !== undefined) arr.forEach((item, i) => out.push(...validateJson(s.items, item, `${at}/${i}`, depth + 1)));
    if (typeof s.minItems === 'number' && arr.length < s.minItems) out.push(`${where}: needs at least ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && arr.length > s.maxItems) out.push(`${where}: may have at most ${s.maxItems} items`);
    if (s.uniqueItems === true && arr.some((x, i) => arr.findIndex((y) => jsonEqual(x, y)) !== i)) out.push(`${where}: items must be unique`);
  }

  if (actual === 'string') {
    const str = value as string;
    // Length in code points, as JSON Schema counts it.
    const length = [...str].length;
    if (typeof s.minLength === 'number' && length < s.minLength) out.push(`${where}: must be at least ${s.minLength} characters`);
    if (typeof s.maxLength === 'number' && length > s.maxLength) out.push(`${where}: must be at most ${s.maxLength} characters`);
    if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(str)) out.push(`${where}: must match ${s.pattern}`);
  }

  if (actual === 'number' || actual === 'integer') {
    const n = value as number;
    if (typeof s.minimum === 'number' && n < s.minimum) out.push(`${where}: must be at least ${s.minimum}`);
    if (typeof s.maximum === 'number' && n > s.maximum) out.push(`${where}: must be at most ${s.maximum}`);
    if (typeof s.exclusiveMinimum === 'number' && n <= s.exclusiveMinimum) out.push(`${where}: must be above ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === 'number' && n >= s.exclusiveMaximum) out.push(`${where}: must be below ${s.exclusiveMaximum}`);
    if (typeof s.multipleOf === 'number' && Math.abs(n / s.multipleOf - Math.round(n / s.multipleOf)) > 1e-9) out.push(`${where}: must be a multiple of ${s.multipleOf}`);
  }
  return out;
}
