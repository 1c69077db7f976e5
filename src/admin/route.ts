import type { Request, Response, Router } from 'express';
import type { z } from 'zod';
import { errors, validationError } from '../errors.js';
import { registerOperation, type OperationDef } from './openapi.js';

/** Parses a request part with its zod schema; a failure is the 400 naming each bad field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where = 'body'): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, where);
  return result.data;
}

export type AdminHandler = (req: Request, res: Response) => void | Promise<void>;

/**
 * One admin operation: documented in the OpenAPI registry and mounted on the router.
 * `expressPath` overrides the path derived from the OpenAPI one (`{id}` → `:id`).
 */
export function adminRoute(router: Router, op: OperationDef & { expressPath?: string }, handler: AdminHandler): void {
  const { expressPath, ...def } = op;
  registerOperation(def);
  const path = expressPath ?? def.path.replace(/\{([^}]+)\}/g, ':$1');
  router[def.method](path, handler);
}

/** A path parameter as one string (wildcard parameters come as segment arrays). */
export function param(req: Request, name: string): string {
  const v = (req.params as Record<string, string | string[] | undefined>)[name];
  if (Array.isArray(v)) return v.join('/');
  if (typeof v !== 'string' || v === '') throw errors.notFound(`missing ${name}`);
  return v;
}

/** The request body, `{}` when none was sent (for operations whose body is optional). */
export const bodyOrEmpty = (req: Request): unknown => (req.body === undefined ? {} : req.body);
