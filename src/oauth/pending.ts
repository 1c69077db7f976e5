import type { Response } from 'express';
import type { AppContext } from '../context.js';
import { errorPage } from '../pages/error.js';
import { sendPage } from '../pages/layout.js';
import type { PendingRequest } from '../store/oauth.js';

/** The pending authorization request named by a page's `request` value, or an error page sent. */
export async function loadPending(ctx: AppContext, res: Response, id: unknown): Promise<PendingRequest | undefined> {
  const pending = typeof id === 'string' && id.length <= 100 ? await ctx.store.oauth.getRequest(id) : undefined;
  if (!pending) {
    sendPage(res, 400, errorPage('invalid_request', 'This sign-in request has expired or is not known. Go back to the application and start again.'));
    return undefined;
  }
  return pending;
}
