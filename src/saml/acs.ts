import type { Element } from '@xmldom/xmldom';
import type { RequestHandler, Response } from 'express';
import { SignedXml } from 'xml-crypto';
import type { AppContext } from '../context.js';
import { errorPage } from '../pages/error.js';
import { sendPage } from '../pages/layout.js';
import { currentSession, startSession } from '../oauth/session.js';
import type { SamlConnection } from '../store/saml.js';
import { BindingError, decodeBindingMessage, readBindingMessage } from './binding.js';
import { usableIdp } from './sp-login.js';
import { CONSOLE_ROLE } from '../oauth/built-in-applications.js';
import { samlUrls } from './urls.js';
import { childElements, descendants, firstChild, NAME_ID_FORMATS, NS, parseUntrustedXml, STATUS, textOf, XmlInputError } from './xml.js';

/** Clock skew tolerated on the IdP's NotBefore / NotOnOrAfter. */
const CLOCK_SKEW_MS = 2 * 60 * 1000;
const EMAIL_ATTRIBUTES = ['email', 'mail', 'emailaddress', 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress', 'urn:oid:0.9.2342.19200300.100.1.3'];
/** amr of a sign-in through an external IdP (RFC 8176 has no value for it; `saml` says what happened). */
const SAML_AMR = ['saml'];
const SAML_ACR = 'urn:service:acr:1fa';

class AcsError extends Error {}
const fail = (message: string): never => {
  throw new AcsError(message);
};

/**
 * Verifies the IdP's signature with the connection's certificate only (never one from KeyInfo) and
 * returns the Assertion as it was signed: read from xml-crypto's signed references, so a wrapped or
 * duplicated element outside the signature is never what we read.
 */
function signedAssertion(xml: string, response: Element, idp: SamlConnection): { assertion: Element; response?: Element } {
  const all = descendants(response, NS.saml, 'Assertion');
  if (descendants(response, NS.saml, 'EncryptedAssertion').length) fail('encrypted assertions are not supported');
  if (all.length !== 1) fail('the Response must carry exactly one Assertion');
  const assertionSig = firstChild(all[0]!, NS.ds, 'Signature');
  const responseSig = firstChild(response, NS.ds, 'Signature');
  const signature = assertionSig ?? responseSig ?? fail('neither the Assertion nor the Response is signed');
  const verifier = new SignedXml({ publicCert: idp.idp_certificate!, getCertFromKeyInfo: () => null });
  let signed: string[] = [];
  try {
    verifier.loadSignature(signature as unknown as Parameters<SignedXml['loadSignature']>[0]);
    if (verifier.checkSignature(xml)) signed = verifier.getSignedReferences();
  } catch {
    signed = [];
  }
  if (signed.length !== 1) fail('the signature does not verify with the identity provider\'s certificate');
  const root = parseUntrustedXml(signed[0]!).documentElement!;
  if (assertionSig) {
    if (root.namespaceURI !== NS.saml || root.localName !== 'Assertion') fail('the signature does not cover the Assertion');
    return { assertion: root };
  }
  if (root.namespaceURI !== NS.samlp || root.localName !== 'Response') fail('the signature does not cover the Response');
  const inner = childElements(root, NS.saml, 'Assertion');
  if (inner.length !== 1) fail('the signed Response must carry exactly one Assertion');
  return { assertion: inner[0]!, response: root };
}

const instant = (v: string | null | undefined): number | undefined => (v ? Date.parse(v) : undefined);

/** Issuer, time window, audience and bearer confirmation (SAML Profiles 4.1.4.3). Returns InResponseTo. */
function checkAssertion(ctx: AppContext, assertion: Element, idp: SamlConnection): string {
  const u = samlUrls(ctx);
  const now = ctx.clock.now();
  const issuer = textOf(firstChild(assertion, NS.saml, 'Issuer'));
  if (idp.entity_id && issuer !== idp.entity_id) fail('the Assertion is from another issuer');
  const conditions = firstChild(assertion, NS.saml, 'Conditions');
  const notBefore = instant(conditions?.getAttribute('NotBefore'));
  const notOnOrAfter = instant(conditions?.getAttribute('NotOnOrAfter'));
  if (notBefore !== undefined && !(now + CLOCK_SKEW_MS >= notBefore)) fail('the Assertion is not valid yet');
  if (notOnOrAfter !== undefined && !(now - CLOCK_SKEW_MS < notOnOrAfter)) fail('the Assertion has expired');
  const audiences = conditions ? descendants(conditions, NS.saml, 'Audience').map((a) => textOf(a)) : [];
  if (!audiences.includes(u.spEntityId(idp.name))) fail('the Assertion is not for this service provider (Audience)');
  const subject = firstChild(assertion, NS.saml, 'Subject') ?? fail('the Assertion has no Subject');
  const bearer = childElements(subject, NS.saml, 'SubjectConfirmation')
    .filter((c) => c.getAttribute('Method') === 'urn:oasis:names:tc:SAML:2.0:cm:bearer')
    .map((c) => firstChild(c, NS.saml, 'SubjectConfirmationData'))
    .find((d) => {
      const until = instant(d?.getAttribute('NotOnOrAfter'));
      return d && d.getAttribute('Recipient') === u.spAcs(idp.name) && until !== undefined && now - CLOCK_SKEW_MS < until;
    });
  if (!bearer) fail('no bearer SubjectConfirmation for this ACS that is still valid');
  return bearer!.getAttribute('InResponseTo') || fail('the Assertion answers no request of ours (IdP-initiated sign-in is not accepted)');
}

/** The person's email: the NameID when it is one, else a usual email attribute. */
function emailOf(assertion: Element): string | undefined {
  const nameId = firstChild(firstChild(assertion, NS.saml, 'Subject')!, NS.saml, 'NameID');
  const value = textOf(nameId);
  const format = nameId?.getAttribute('Format');
  const emailFormat = format === NAME_ID_FORMATS.emailAddress;
  const maybeEmail = (!format || format === NAME_ID_FORMATS.unspecified) && value?.includes('@');
  if (value && (emailFormat || maybeEmail)) return value;
  for (const a of descendants(assertion, NS.saml, 'Attribute')) {
    if (EMAIL_ATTRIBUTES.includes((a.getAttribute('Name') ?? '').toLowerCase())) {
      const v = textOf(descendants(a, NS.saml, 'AttributeValue')[0]);
      if (v) return v;
    }
  }
  return undefined;
}

/**
 * Whether this IdP may sign in the local account its Assertion names by email: the email's
 * domain must be one the connection allows (when it lists any), and an administrator (a holder
 * of the console role) only through a connection that admits administrators. An IdP is trusted
 * for the people it owns, not for every account that happens to share an address.
 */
export function linkRefusal(idp: SamlConnection, email: string, roles: string[]): string | undefined {
  const domain = email.slice(email.lastIndexOf('@') + 1).toLowerCase();
  if (idp.allowed_email_domains && !idp.allowed_email_domains.includes(domain)) {
    return `this identity provider may not sign in accounts of ${domain}`;
  }
  if (!idp.admit_administrators && roles.includes(CONSOLE_ROLE)) {
    return 'this identity provider may not sign in administrators; sign in with your password or passkey';
  }
  return undefined;
}

function showError(res: Response, description: string, status = 400): void {
  sendPage(res, status, errorPage('access_denied', description));
}

/**
 * POST /saml/sp/{name}/acs: the external IdP's Response (HTTP-POST binding). Only an answer to an
 * AuthnRequest we sent (/saml/sp/{name}/login), once; it signs in a person who already has an
 * account with that email (no accounts are created here).
 */
export function acsEndpoint(ctx: AppContext): RequestHandler {
  return async (req, res) => {
    try {
      // 1. The connection and the message
      const idp = await usableIdp(ctx, String(req.params.name));
      if (typeof idp === 'string') return sendPage(res, 404, errorPage('not_found', idp));
      const message = readBindingMessage(req, 'SAMLResponse');
      if (!message || message.binding !== 'post') fail('SAMLResponse is missing (HTTP-POST binding)');
      const xml = decodeBindingMessage(message!);
      const response = parseUntrustedXml(xml).documentElement!;
      if (response.namespaceURI !== NS.samlp || response.localName !== 'Response') fail('SAMLResponse is not a samlp:Response');

      // 2. Addressed to us and a success
      const u = samlUrls(ctx);
      const destination = response.getAttribute('Destination');
      if (destination && destination !== u.spAcs(idp.name)) fail('the Response is addressed to another ACS (Destination)');
      const status = firstChild(firstChild(response, NS.samlp, 'Status') ?? response, NS.samlp, 'StatusCode')?.getAttribute('Value');
      if (status !== STATUS.success) fail(`the identity provider did not sign the person in (${status ?? 'no status'})`);

      // 3. The signed Assertion and its conditions
      const { assertion, response: signedResponse } = signedAssertion(xml, response, idp);
      const inResponseTo = checkAssertion(ctx, assertion, idp);
      const responseInResponseTo = (signedResponse ?? response).getAttribute('InResponseTo');
      if (responseInResponseTo && responseInResponseTo !== inResponseTo) fail('the Response and its Assertion answer different requests');

      // 4. Our request, used up (a replayed Response finds nothing)
      const pending = await ctx.store.saml.takeSpRequest(inResponseTo, idp.name) ?? fail('the Response answers no pending request (expired or already used)');

      // 5. The person, by email, if this IdP may speak for them; then a session of our own
      const email = emailOf(assertion) ?? fail('the Assertion carries no email address');
      const user = await ctx.store.users.getByEmail(email) ?? fail(`there is no account for ${email}`);
      const refused = linkRefusal(idp, email, user!.roles);
      if (refused) {
        ctx.logger.warn({ connection: idp.name, sub: user!.id, why: refused }, 'saml sign-in refused by the connection');
        fail(refused);
      }
      await startSession(ctx, res, user.id, SAML_AMR, SAML_ACR, (await currentSession(ctx, req))?.session);
      ctx.logger.info({ connection: idp.name, sub: user.id }, 'saml sign-in through external idp');
      res.setHeader('Cache-Control', 'no-store');
      res.redirect(302, pending!.return_to ?? '/');
    } catch (err) {
      if (err instanceof AcsError || err instanceof BindingError || err instanceof XmlInputError) return showError(res, `SAML sign-in failed: ${err.message}`);
      throw err;
    }
  };
}
