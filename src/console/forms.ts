import type { Request } from 'express';
import { ProtocolError } from '../errors.js';

/** A submitted form's fields as strings (a repeated field keeps its last value; see `all`). */
export type Values = Record<string, string>;
export type FieldErrors = Record<string, string[]>;

/** What a form shows again after a refused submission: what was typed, and why it was refused. */
export interface FormState {
  values: Values;
  errors: FieldErrors;
  general: string[];
  status: number;
}

export const emptyForm = (values: Values = {}): FormState => ({ values, errors: {}, general: [], status: 200 });

export function formValues(req: Request): Values {
  const out: Values = {};
  const body = (req.body ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === 'string') out[k] = v;
    else if (Array.isArray(v) && typeof v[v.length - 1] === 'string') out[k] = v[v.length - 1] as string;
  }
  return out;
}

/** Every value of a repeated field (checkbox groups). */
export function all(req: Request, name: string): string[] {
  const v = ((req.body ?? {}) as Record<string, unknown>)[name];
  if (typeof v === 'string') return [v];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

/** One item per line or comma: `a, b\nc` → [a, b, c]. */
export const list = (s: string | undefined): string[] =>
  (s ?? '')
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean);

/** One item per line (for values that may hold commas, such as URLs). */
export const lines = (s: string | undefined): string[] =>
  (s ?? '')
    .split(/\r?\n/)
    .map((x) => x.trim())
    .filter(Boolean);

export const ticked = (v: Values, name: string): boolean => v[name] === 'on' || v[name] === 'yes' || v[name] === 'true';

/** A problem the console finds in a field before the management API's code sees it (for example JSON that does not parse). */
export class FieldProblem extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** Parses a JSON field; an empty field is `fallback`. */
export function jsonField(v: Values, name: string, fallback: unknown): unknown {
  const text = (v[name] ?? '').trim();
  if (!text) return fallback;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new FieldProblem(name, `is not JSON: ${(err as Error).message}`);
  }
}

/**
 * A refused submission as a form state: a FieldProblem, or a management API error whose
 * `issues` name fields (mapped to the form's field names by `field`), or a 503 (a change that
 * could not be made now, typed input kept for another try). Other errors are not the person's
 * input and go on to the error page.
 */
export function refusal(err: unknown, values: Values, field: (path: string) => string = (p) => p.split('.')[0]!): FormState {
  if (err instanceof FieldProblem) return { values, errors: { [err.field]: [err.message] }, general: [], status: 400 };
  if (!(err instanceof ProtocolError) || (err.status >= 500 && err.status !== 503)) throw err;
  const errors: FieldErrors = {};
  const general: string[] = [];
  const issues = (err.extra.issues as { path: string; message: string }[] | undefined) ?? [];
  for (const i of issues) {
    const name = field(i.path);
    (errors[name] ??= []).push(i.message);
  }
  if (!issues.length) general.push(err.description ?? err.error);
  const more = err.extra.errors;
  if (Array.isArray(more)) for (const m of more) if (typeof m === 'string') general.push(m);
  return { values, errors, general, status: err.status };
}
