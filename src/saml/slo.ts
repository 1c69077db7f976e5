import type { Request, RequestHandler, Response } from 'express';
import type { AppContext } from '../context.js';
import { errorPage } from '../pages/error.js';
import { sendPage } from '../pages/layout.js';
import { signedOutPage } from '../pages/signed-out.js';
import { endSession } from '../oauth/session.js';
import { BindingError, decodeBindingMessage, deflateForRedirect, readBindingMessage } from './binding.js';
import { samlCertificate } from './certificate.js';
import { newSamlId } from './response.js';
import { samlUrls } from './urls.js';
import { escapeXml, firstChild, NS, parseUntrustedXml, samlInstant, STATUS, textOf, XmlInputError } from './xml.js';
import { nowSeconds } from '../clock.js';

const RSA_SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';

const showError = (res: Response, description: string) => sendPage(res, 400, errorPage('invalid_request', description));

/** A LogoutRequest's ID and Issuer, or a sentence saying what is wrong. */
function readLogoutRequest(req: Request): { id: string; issuer: string; relayState?: string } | string {
  const message = readBindingMessage(req, 'SAMLRequest');
  if (!message) return 'SAMLRequest is missing.';
  try {
    const root = parseUntrustedXml(decodeBindingMessage(message)).documentElement!;
    if (root.namespaceURI !== NS.samlp || root.localName !== 'LogoutRequest') return 'SAMLRequest: not a samlp:LogoutRequest';
    const id = root.getAttribute('ID') ?? '';
    const issuer = textOf(firstChild(root, NS.saml, 'Issuer'));
    if (!/^[A-Za-z_][\w.-]{0,255}$/.test(id) || !issuer) return 'SAMLRequest: ID or saml:Issuer is missing';
    return { id, issuer, relayState: message.relayState?.slice(0, 1024) };
  } catch (err) {
    if (err instanceof BindingError || err instanceof XmlInputError) return `SAMLRequest: ${err.message}`;
    throw err;
  }
}

/**
 * GET/POST /saml/slo: SP-initiated single logout. Ends this browser's session, then answers the SP
 * with a LogoutResponse (HTTP-Redirect, signed in the query string) at its `slo_url`, or shows the
 * signed-out page when it registered none.
 */
export function sloEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    // 1. The LogoutRequest of a registered SP
    const request = readLogoutRequest(req);
    if (typeof request === 'string') return showError(res, request);
    const sp = await ctx.store.saml.spByEntityId(request.issuer);
    if (!sp) return showError(res, `The service provider ${request.issuer} is not registered.`);

    // 2. Sign out
    await endSession(ctx, req, res);
    res.setHeader('Cache-Control', 'no-store');
    if (!sp.slo_url) return sendPage(res, 200, signedOutPage());

    // 3. The LogoutResponse, redirect binding: the signature covers the query string (SAML Bindings 3.4.4.1)
    const xml =
      `<samlp:LogoutResponse xmlns:samlp="${NS.samlp}" xmlns:saml="${NS.saml}" ID="${newSamlId()}" Version="2.0"` +
      ` IssueInstant="${samlInstant(nowSeconds(ctx.clock))}" Destination="${escapeXml(sp.slo_url)}" InResponseTo="${escapeXml(request.id)}">` +
      `<saml:Issuer>${escapeXml(samlUrls(ctx).idpEntityId)}</saml:Issuer>` +
      `<samlp:Status><samlp:StatusCode Value="${STATUS.success}"/></samlp:Status>` +
      `</samlp:LogoutResponse>`;
    let query = `SAMLResponse=${encodeURIComponent(deflateForRedirect(xml))}`;
    if (request.relayState) query += `&RelayState=${encodeURIComponent(request.relayState)}`;
    query += `&SigAlg=${encodeURIComponent(RSA_SHA256)}`;
    const cert = await samlCertificate(ctx);
    query += `&Signature=${encodeURIComponent(cert.sign(query).toString('base64'))}`;
    res.redirect(302, `${sp.slo_url}${sp.slo_url.includes('?') ? '&' : '?'}${query}`);
  };
}
