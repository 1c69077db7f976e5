import type { Request, Response, Router } from 'express';
import type { Recorder } from '../../admin/audit.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { audited, type Change } from '../audit.js';
import type { Part } from '../multipart.js';
import { consolePage, details, errorList, postForm, sendConsolePage, seg, table, type Html, type PageInput } from '../html.js';
import { setFlash, takeFlash, type Person } from '../session.js';
import { formValues, refusal, type FormState, type Values } from '../forms.js';

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

/** The thing a page is about, or the 404 page naming what is missing. */
export async function existing<T>(thing: Promise<T | undefined>, missing: string): Promise<T> {
  const found = await thing;
  if (found === undefined) throw errors.notFound(missing);
  return found;
}

/** Destructive forms carry `confirm=yes` (their "I am sure" box). */
export function requireConfirmation(v: Values): void {
  if (v.confirm !== 'yes') {
    throw errors.invalidRequest('confirm: tick the box to confirm', { issues: [{ path: 'confirm', message: 'tick the box to confirm', code: 'custom' }] });
  }
}

/** Where a change leads: the message for the next page, and the page. */
export interface Next {
  message: string;
  to: string;
}

export interface FormPostOptions {
  /** where a management API issue's path belongs on the form (default: its first segment) */
  field?: (path: string) => string;
  /** what of the submitted fields the form shows again (a password is not) */
  shown?: (v: Values, req: Request) => Values;
  /** a destructive form: its "I am sure" box (`confirm=yes`) must be ticked */
  confirm?: boolean;
}

/**
 * The POST of a console form. `change` does the work through the management API's own function
 * and says where to go next (a 303 with a message, so reloading repeats nothing), or answers
 * itself (a secret shown once). A refused submission (a field the console or the management API
 * rejects, a 4xx) goes to `again`, which shows the form with what was typed and each error next
 * to its field; anything else is the error page's.
 */
export function formPost(
  router: Router,
  ctx: AppContext,
  path: string,
  change: (req: Request, res: Response, v: Values) => Promise<Next | void>,
  again: (req: Request, res: Response, refused: FormState) => Promise<void> | void,
  o: FormPostOptions = {},
): void {
  router.post(path, async (req, res) => {
    const v = formValues(req);
    let next: Next | void;
    try {
      if (o.confirm) requireConfirmation(v);
      next = await change(req, res, v);
    } catch (err) {
      return again(req, res, refusal(err, o.shown ? o.shown(v, req) : v, o.field));
    }
    if (next) done(ctx, res, next.message, next.to);
  });
}

/** A refusal shown as one list above a small form (a danger zone, a picker): field errors join the general ones. */
export const asOneList = (f: FormState): FormState => ({ ...f, errors: {}, general: [...f.general, ...Object.values(f.errors).flat()] });

/** A page about one thing (`/console/<area>/:id`), shown with some of its forms in a given state. */
export type DetailPage<F> = (ctx: AppContext, req: Request, res: Response, id: string, forms?: F, status?: number) => Promise<void>;

/**
 * The `again` of a form on a detail page: the page of the thing named in the path, with the
 * refused form (chosen by `place`, which may look at what was typed) in its place.
 */
export function againOn<F>(ctx: AppContext, detail: DetailPage<F>) {
  return (place: (refused: FormState, req: Request) => F | Promise<F>) =>
    async (req: Request, res: Response, refused: FormState): Promise<void> =>
      detail(ctx, req, res, pathParam(req, 'id'), await place(refused, req), refused.status);
}

/** A field of a form in a given state: its name, what was typed and its errors (spread into input, textarea or select). */
export type FieldOf = (name: string) => { name: string; value: string | undefined; errors: string[] | undefined };

/**
 * A console form in the state `f`: a POST carrying the session's CSRF token, the refusal's
 * summary first (what belongs to no one field), then `inner`, whose fields take what was
 * typed and their errors from `at`.
 */
export function stateForm(action: string, person: Person, f: FormState, inner: (at: FieldOf) => Html, o?: Parameters<typeof postForm>[3]): Html {
  const at: FieldOf = (name) => ({ name, value: f.values[name], errors: f.errors[name] });
  return postForm(action, person, `${errorList(f.general)}\n${inner(at)}`, o);
}

/** A page that lists one kind of thing, with the form that creates one folded beneath. */
export interface ListPage extends Omit<PageInput, 'person' | 'flash' | 'body'> {
  /** above the table (a search form) */
  above?: Html;
  headers: string[];
  rows: Html[][];
  empty: string;
  /** below the table (a pager) */
  below?: Html;
  /** open when it was refused, or when there is nothing to list yet */
  create: { summary: string; form: Html; open: boolean };
}

export function renderList(ctx: AppContext, req: Request, res: Response, status: number, p: ListPage): void {
  const { above, headers, rows, empty, below, create, ...page } = p;
  render(ctx, req, res, status, {
    ...page,
    body: `${above ?? ''}
${table(headers, rows, { empty })}
${below ?? ''}
${details(create.summary, create.form, create.open || status !== 200, 'create')}`,
  });
}

/** What an action on a detail page is given: the thing's id, the form, and its audit record's maker. */
export interface Action {
  id: string;
  v: Values;
  req: Request;
  res: Response;
  person: Person;
  /** the audit record of this change, written by the management function in the change's transaction */
  audit: <T = void>(describe: (result: T) => Change) => Recorder<T>;
}

/** The forms of `F` that hold a plain form state (the ones a refusal can be put in by name). */
export type StateKey<F> = { [K in keyof F]-?: NonNullable<F[K]> extends FormState ? K : never }[keyof F];

/**
 * The POSTs of a page about one thing (`/console/<area>/:id<path>`). An action answers with the
 * message for the thing's page (or a Next, or answers itself); a refusal is shown on the thing's
 * page in the form named by `refusedIn` (as one list with `oneList`), or where a function puts it.
 */
export type DetailAction<F> = (
  path: string,
  change: (a: Action) => Promise<string | Next | void>,
  refusedIn: StateKey<NonNullable<F>> | ((refused: FormState, req: Request) => F | Promise<F>),
  o?: FormPostOptions & { oneList?: boolean },
) => void;

export function detailActions<F>(router: Router, ctx: AppContext, area: string, detail: DetailPage<F>): DetailAction<F> {
  const place = againOn(ctx, detail);
  return (path, change, refusedIn, o = {}) =>
    formPost(
      router,
      ctx,
      `/${area}/:id${path}`,
      async (req, res, v) => {
        const id = pathParam(req, 'id');
        const person = personOf(res);
        const next = await change({ id, v, req, res, person, audit: (describe) => audited(ctx, person, describe) });
        return typeof next === 'string' ? { message: next, to: `/console/${area}/${seg(id)}` } : next;
      },
      place(typeof refusedIn === 'function' ? refusedIn : (refused) => ({ [refusedIn]: o.oneList ? asOneList(refused) : refused }) as F),
      o,
    );
}
