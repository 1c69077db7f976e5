import { Router, type RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { authorizeEndpoint } from './authorization-endpoint.js';
import { consentForm, consentSubmit } from './consent.js';
import { introspectEndpoint } from './introspect.js';
import { loginForm, loginSubmit, passkeyOptions, passkeyStepForm, passkeySubmit } from './login.js';
import { staticRouter } from '../pages/static.js';
import { logoutEndpoint } from './logout.js';
import { parEndpoint } from './par.js';
import { revokeEndpoint } from './revoke.js';
import { secondStepForm, secondStepSubmit } from './second-step.js';
import { userinfoEndpoint } from './userinfo.js';

const methodNotAllowed: RequestHandler = (_req, _res, next) => next(errors.methodNotAllowed('method not allowed'));

/** Cross-origin calls from browser apps (SPAs) to the JSON endpoints; no cookies involved. */
export const OAUTH_CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Headers': 'Authorization, DPoP, Content-Type',
  'Access-Control-Expose-Headers': 'WWW-Authenticate, DPoP-Nonce',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
};

const cors: RequestHandler = (req, res, next) => {
  for (const [k, v] of Object.entries(OAUTH_CORS_HEADERS)) res.setHeader(k, v);
  if (req.method === 'OPTIONS') return void res.sendStatus(204);
  next();
};

/** People signing in: /oauth/* and the sign-in pages. */
export function oauthRouter(ctx: AppContext): Router {
  const router = Router();

  router.get('/oauth/authorize', authorizeEndpoint(ctx));
  router.post('/oauth/authorize', authorizeEndpoint(ctx));

  router.options(['/oauth/token', '/oauth/par', '/oauth/userinfo', '/oauth/token/introspect', '/oauth/token/revoke'], cors);
  router.post('/oauth/par', cors, parEndpoint(ctx));
  // POST /oauth/token is in the edge's route table (src/http/routes.ts), served by both transports.
  router.get('/oauth/userinfo', cors, userinfoEndpoint(ctx));
  router.post('/oauth/userinfo', cors, userinfoEndpoint(ctx));
  router.post('/oauth/token/introspect', cors, introspectEndpoint(ctx));
  router.post('/oauth/token/revoke', cors, revokeEndpoint(ctx));
  router.get('/oauth/logout', logoutEndpoint(ctx));
  router.post('/oauth/logout', logoutEndpoint(ctx));
  router.all(['/oauth/token', '/oauth/par', '/oauth/token/introspect', '/oauth/token/revoke'], methodNotAllowed);

  router.get('/login', loginForm(ctx));
  router.post('/login', loginSubmit(ctx));
  router.post('/login/passkey/options', passkeyOptions(ctx));
  router.get('/login/passkey', passkeyStepForm(ctx));
  router.post('/login/passkey', passkeySubmit(ctx));
  router.get('/login/otp', secondStepForm(ctx));
  router.post('/login/otp', secondStepSubmit(ctx));
  router.get('/consent', consentForm(ctx));
  router.post('/consent', consentSubmit(ctx));
  // The sign-in and account pages' scripts (WebAuthn)
  router.use(staticRouter());
  return router;
}
