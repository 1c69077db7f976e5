import type { Request } from 'express';
import { errors } from '../errors.js';

export type Params = Record<string, unknown>;

/** The form body (urlencoded), or an empty object when there is none. */
export function formBody(req: Request): Params {
  const b = req.body as unknown;
  return b && typeof b === 'object' && !Array.isArray(b) ? (b as Params) : {};
}

/**
 * One optional parameter: a string, or undefined when absent or empty. A parameter sent
 * twice is invalid_request (RFC 6749 3.1, 3.2).
 */
export function single(params: Params, name: string): string | undefined {
  const v = params[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw errors.invalidRequest(`${name} must be given once`);
  return v === '' ? undefined : v;
}

export function required(params: Params, name: string): string {
  const v = single(params, name);
  if (v === undefined) throw errors.invalidRequest(`${name} is required`);
  return v;
}

/** scope-token = 1*( %x21 / %x23-5B / %x5D-7E ) (RFC 6749 3.3), space-separated, de-duplicated. */
export function parseScope(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const parts = value.split(' ').filter(Boolean);
  for (const p of parts) if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(p)) throw errors.invalidScope(`malformed scope: ${p.slice(0, 40)}`);
  return [...new Set(parts)];
}
