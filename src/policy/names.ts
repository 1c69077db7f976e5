// Names of the language: field and attribute names, the reserved words.

/** A field, attribute or path segment: a letter or _, then letters, digits, _ and -. */
export const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;
/** Words that cannot be a bare field name (they are operators or constants). */
export const RESERVED = new Set(['and', 'or', 'not', 'in', 'like', 'contains', 'true', 'false']);
export const KIND_NAME = /^[A-Za-z0-9_.\-]+$/;
/** Role names, as the management API takes them. */
export const ROLE_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

export function checkFieldName(field: string): string | null {
  if (!FIELD_NAME.test(field)) return `field name "${field}" must start with a letter or _ and hold only letters, digits, _ and -`;
  if (RESERVED.has(field)) return `field name "${field}" is a reserved word`;
  return null;
}
