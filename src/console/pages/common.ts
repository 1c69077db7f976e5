import type { Request, Response } from 'express';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import type { Part } from '../multipart.js';
import { consolePage, sendConsolePage, type PageInput } from '../html.js';
import { setFlash, takeFlash, type Person } from '../session.js';
import type { Values } from '../forms.js';

/** The signed-in administrator of this request (the router sets it before any page runs). */
export const personOf = (res: Response): Person => res.locals.person as Person;
/** Files of a multipart form (the policy draft upload). */
export const filesOf = (res: Response): Part[] => (res.locals.files as Part[] | undefined) ?? [];

/** Sends a page of the console: the shell, the person, and the message left by the previous action. */
export function render(ctx: AppContext, req: Request, res: Response, status: number, p: Omit<PageInput, 'person' | 'flash'>): void {
  const flash = takeFlash(ctx, req, res);
  sendConsolePage(res, status, consolePage({ ...p, person: personOf(res), ...(flash ? { flash } : {}) }));
}

/** After a change: a message for the next page, and a 303 to it (reloading it repeats nothing). */
export function done(ctx: AppContext, res: Response, message: string, to: string): void {
  setFlash(ctx, res, message);
  res.redirect(303, to);
}

/** A path parameter as one string. */
export function pathParam(req: Request, name: string): string {
  const v = (req.params as Record<string, unknown>)[name];
  if (typeof v !== 'string' || !v) throw errors.notFound(`missing ${name}`);
  return v;
}

/** Destructive forms carry `confirm=yes` (their "I am sure" box). */
export function requireConfirmation(v: Values): void {
  if (v.confirm !== 'yes') {
    throw errors.invalidRequest('confirm: tick the box to confirm', { issues: [{ path: 'confirm', message: 'tick the box to confirm', code: 'custom' }] });
  }
}
