import type { RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { errorPage } from '../pages/error.js';
import { sendPage } from '../pages/layout.js';
import { safeReturnTo } from '../oauth/session.js';
import type { SamlConnection } from '../store/saml.js';
import { deflateForRedirect } from './binding.js';
import { samlCertificate } from './certificate.js';
import { newSamlId } from './response.js';
import { samlUrls } from './urls.js';
import { BINDINGS, escapeXml, NAME_ID_FORMATS, NS, samlInstant } from './xml.js';
import { nowSeconds } from '../clock.js';

/** How long the IdP has to answer an AuthnRequest we sent. */
export const SP_REQUEST_TTL_SECONDS = 10 * 60;
export const RSA_SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';

/** An `idp` connection that can sign people in: its SSO URL and certificate are known. */
export async function usableIdp(ctx: AppContext, name: string): Promise<SamlConnection | string> {
  const c = await ctx.store.saml.get(name);
  if (!c || c.kind !== 'idp') return `There is no SAML identity provider named ${name}.`;
  if (!c.idp_sso_url || !c.idp_certificate) return `The SAML identity provider ${name} is not configured yet (idp_sso_url and idp_certificate).`;
  return c;
}

/**
 * GET /saml/sp/{name}/login?return_to=/path: signs a person in through the external IdP of an
 * `idp` connection. Sends a signed AuthnRequest (HTTP-Redirect binding, signature in the query
 * string) and remembers it in SQLite, so the ACS accepts exactly one Response to it.
 */
export function spLoginEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    // 1. The connection
    const name = String(req.params.name);
    const idp = await usableIdp(ctx, name);
    if (typeof idp === 'string') return sendPage(res, 404, errorPage('not_found', idp));

    // 2. The AuthnRequest, remembered
    const u = samlUrls(ctx);
    const id = newSamlId();
    const returnTo = safeReturnTo((req.query as Record<string, unknown>).return_to) ?? null;
    await ctx.store.saml.addSpRequest(id, idp.name, returnTo, SP_REQUEST_TTL_SECONDS);
    const xml =
      `<samlp:AuthnRequest xmlns:samlp="${NS.samlp}" xmlns:saml="${NS.saml}" ID="${id}" Version="2.0" IssueInstant="${samlInstant(nowSeconds(ctx.clock))}"` +
      ` Destination="${escapeXml(idp.idp_sso_url)}" AssertionConsumerServiceURL="${escapeXml(u.spAcs(idp.name))}" ProtocolBinding="${BINDINGS.post}">` +
      `<saml:Issuer>${escapeXml(u.spEntityId(idp.name))}</saml:Issuer>` +
      `<samlp:NameIDPolicy Format="${NAME_ID_FORMATS.emailAddress}" AllowCreate="true"/>` +
      `</samlp:AuthnRequest>`;

    // 3. Signed in the query string (SAML Bindings 3.4.4.1) and sent
    let query = `SAMLRequest=${encodeURIComponent(deflateForRedirect(xml))}&SigAlg=${encodeURIComponent(RSA_SHA256)}`;
    const cert = await samlCertificate(ctx);
    query += `&Signature=${encodeURIComponent(cert.sign(query).toString('base64'))}`;
    res.setHeader('Cache-Control', 'no-store');
    res.redirect(302, `${idp.idp_sso_url!}${idp.idp_sso_url!.includes('?') ? '&' : '?'}${query}`);
  };
}
