import { Router, type RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { param } from '../admin/route.js';
import { samlCertificate } from './certificate.js';
import { idpMetadataXml, METADATA_CONTENT_TYPE, spMetadataXml } from './metadata.js';
import { sloEndpoint } from './slo.js';
import { ssoEndpoint, ssoResumeEndpoint } from './sso.js';
import { CONNECTION_NAME } from './connections.js';
import { acsEndpoint } from './acs.js';
import { spLoginEndpoint } from './sp-login.js';

/** Metadata is public, like the discovery documents: open CORS, a short cache (a key rotation changes it). */
const metadataHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Cache-Control', 'public, max-age=300');
  res.setHeader('Content-Type', METADATA_CONTENT_TYPE);
  next();
};

/** The SAML 2.0 endpoints: metadata (as IdP and as SP per connection), SSO, SLO and the SP's ACS. */
export function samlRouter(ctx: AppContext): Router {
  const router = Router();

  router.get('/saml/metadata', async (_req, res) => {
    const xml = idpMetadataXml(ctx, await samlCertificate(ctx));
    metadataHeaders(_req, res, () => res.send(xml));
  });

  router.get('/saml/sp/:name/metadata', async (req, res) => {
    const name = param(req, 'name');
    const connection = CONNECTION_NAME.test(name) ? await ctx.store.saml.get(name) : undefined;
    if (!connection || connection.kind !== 'idp') throw errors.notFound(`no SAML identity-provider connection named ${name}`);
    const xml = spMetadataXml(ctx, connection, await samlCertificate(ctx));
    metadataHeaders(req, res, () => res.send(xml));
  });

  router.get('/saml/sp/:name/login', spLoginEndpoint(ctx));
  router.post('/saml/sp/:name/acs', acsEndpoint(ctx));

  const sso = ssoEndpoint(ctx);
  router.get('/saml/sso', sso);
  router.post('/saml/sso', sso);
  router.get('/saml/sso/resume', ssoResumeEndpoint(ctx));
  const slo = sloEndpoint(ctx);
  router.get('/saml/slo', slo);
  router.post('/saml/slo', slo);
  return router;
}
