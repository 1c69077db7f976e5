import express, { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import type { AppContext } from '../context.js';
import { ProtocolError } from '../errors.js';
import { consolePage, link, notice, sendConsolePage } from './html.js';
import { parseMultipart, type Part } from './multipart.js';
import { agentPages } from './pages/agents.js';
import { applicationPages } from './pages/applications.js';
import { approvalPages } from './pages/approvals.js';
import { auditPages } from './pages/audit.js';
import { personOf } from './pages/common.js';
import { homePage } from './pages/home.js';
import { keyPages } from './pages/keys.js';
import { peoplePages } from './pages/people.js';
import { policyPages } from './pages/policy.js';
import { relationshipPages } from './pages/relationships.js';
import { rolePages } from './pages/roles.js';
import { rulePages } from './pages/rules.js';
import { streamPages } from './pages/streams.js';
import { trustedIssuerPages } from './pages/trusted-issuers.js';
import { csrfMatches, currentPerson, type Person } from './session.js';
import { isUnstorableText } from '../store/sql.js';
import { finishSignIn, refusedPage, signedOut, signOut, startSignIn } from './sign-in.js';
import { staticFiles } from './static-files.js';

/** Everything behind the sign-in: a console session of a person holding `admin`, else sign in (GET) or 403. */
function requirePerson(ctx: AppContext): RequestHandler {
  return async (req, res, next) => {
    const found = await currentPerson(ctx, req);
    if ('person' in found) {
      res.locals.person = found.person;
      return next();
    }
    if ('refused' in found) return sendConsolePage(res, 403, refusedPage(found.refused.email));
    if (req.method === 'GET' || req.method === 'HEAD') {
      res.setHeader('Cache-Control', 'no-store');
      return res.redirect(302, `/console/login?return_to=${encodeURIComponent(req.originalUrl)}`);
    }
    sendConsolePage(res, 403, consolePage({ title: 'Signed out', body: `${notice('Your console session has ended; nothing was changed.')}<p>${link('/console/login', 'Sign in again')}</p>` }));
  };
}

/** multipart/form-data (the policy draft upload) into fields and files, at most 2 MB. */
function multipartForm(): RequestHandler[] {
  return [
    express.raw({ type: 'multipart/form-data', limit: '2mb' }),
    (req, res, next) => {
      if (!Buffer.isBuffer(req.body)) return next();
      const parts = parseMultipart(req.body, req.get('content-type') ?? '');
      if (!parts) return sendConsolePage(res, 400, consolePage({ title: 'Upload refused', body: notice('The upload could not be read.') }));
      const fields: Record<string, string> = {};
      const files: Part[] = [];
      for (const p of parts) {
        if (p.filename !== undefined) {
          if (p.filename !== '' || p.data.length) files.push(p);
        } else fields[p.name] = p.data.toString('utf8');
      }
      req.body = fields;
      res.locals.files = files;
      next();
    },
  ];
}

/**
 * Every POST carries the session's CSRF token in a `csrf` field, and, when the browser says
 * where the form came from, comes from the issuer's own origin. A refused POST changes nothing.
 */
function requireCsrf(ctx: AppContext): RequestHandler {
  const origin = new URL(ctx.urls.issuer).origin;
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    const from = req.get('origin');
    const ok = (from === undefined || from === origin) && csrfMatches(personOf(res), (req.body as Record<string, unknown> | undefined)?.csrf);
    if (ok) return next();
    sendConsolePage(
      res,
      403,
      consolePage({
        title: 'Form refused',
        person: personOf(res),
        body: `${notice('This form did not come from your console session (its CSRF token is missing or wrong). Nothing was changed.')}
<p>${link('/console', 'Back to the console')}</p>`,
      }),
    );
  };
}

function notFound(): RequestHandler {
  return (_req, res) => {
    const person = res.locals.person as Person | undefined;
    sendConsolePage(res, 404, consolePage({ title: 'Not found', ...(person ? { person } : {}), body: `<p>There is nothing at this address.</p><p>${link('/console', 'Back to the console')}</p>` }));
  };
}

/** Errors that escape a page: a protocol error as a short page, anything else logged and shown without detail. */
function errorPage(ctx: AppContext): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next) => {
    if (res.headersSent) return void res.end();
    const person = res.locals.person as Person | undefined;
    let status = 500;
    let text = 'Something went wrong; nothing more is known here. The server log has the details.';
    // A refusal, or a 503 whose description says what was not done and why (worded for the page).
    if (err instanceof ProtocolError && (err.status < 500 || err.status === 503)) {
      status = err.status;
      text = err.description ?? err.error;
    } else if (isUnstorableText(err)) {
      status = 400;
      text = 'A value holds the NUL character, which cannot be stored.';
    } else if ((err as { type?: string })?.type === 'entity.too.large') {
      status = 413;
      text = 'The form is too large.';
    } else if (typeof (err as { status?: unknown })?.status === 'number' && (err as { status: number }).status >= 400 && (err as { status: number }).status < 500) {
      // The request's own fault (a path with broken percent-encoding, a body that cannot be read).
      status = 400;
      text = 'The request could not be read.';
    } else {
      (req.log ?? ctx.logger).error({ err }, 'console page failed');
    }
    const title = status === 404 ? 'Not found' : status < 500 ? 'Refused' : status === 503 ? 'Not changed' : 'Error';
    sendConsolePage(res, status, consolePage({ title, ...(person ? { person } : {}), body: `${notice(text)}<p>${link('/console', 'Back to the console')}</p>` }));
  };
}

/** /console: the administrators' pages over the management API's own functions. */
export function consoleRouter(ctx: AppContext): Router {
  const router = Router();
  router.get('/static/:file', staticFiles());
  router.get('/login', (req, res) => startSignIn(ctx, req, res));
  router.get('/callback', (req, res) => finishSignIn(ctx, req, res));
  router.get('/signed-out', (req, res) => signedOut(ctx, req, res));

  router.use(requirePerson(ctx));
  router.post('/policy/diff', ...multipartForm());
  router.use(requireCsrf(ctx));
  router.post('/logout', (req, res) => signOut(ctx, req, res));

  router.get('/', (req, res) => homePage(ctx, req, res));
  applicationPages(router, ctx);
  peoplePages(router, ctx);
  rolePages(router, ctx);
  agentPages(router, ctx);
  rulePages(router, ctx);
  policyPages(router, ctx);
  relationshipPages(router, ctx);
  approvalPages(router, ctx);
  auditPages(router, ctx);
  keyPages(router, ctx);
  streamPages(router, ctx);
  trustedIssuerPages(router, ctx);

  router.use(notFound());
  router.use(errorPage(ctx));
  return router;
}
