import { randomBytes } from 'node:crypto';
import { SignedXml, type SignatureAlgorithm } from 'xml-crypto';
import type { AppContext } from '../context.js';
import type { KeyCertificate } from '../crypto/signing.js';
import type { Session } from '../store/sessions.js';
import type { User } from '../store/users.js';
import { samlCertificate } from './certificate.js';
import { samlUrls } from './urls.js';
import { escapeXml, NAME_ID_FORMATS, NS, samlInstant, STATUS } from './xml.js';
import { nowSeconds } from '../clock.js';

/** How long an assertion may be presented (SubjectConfirmationData and Conditions NotOnOrAfter). */
export const ASSERTION_TTL_SECONDS = 5 * 60;
/** Clock skew allowed for the SP: NotBefore lies this far in the past. */
const CLOCK_SKEW_SECONDS = 60;

const RSA_SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';
const SHA256 = 'http://www.w3.org/2001/04/xmlenc#sha256';
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';
const AUTHN_CONTEXT = {
  password: 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport',
  mfa: 'urn:oasis:names:tc:SAML:2.0:ac:classes:MobileTwoFactorUnregistered',
};
const ATTRIBUTE_NAME_FORMAT = 'urn:oasis:names:tc:SAML:2.0:attrname-format:basic';

/** An XML ID: an NCName, unpredictable (it is also what InResponseTo points back to). */
export const newSamlId = (): string => `_${randomBytes(20).toString('hex')}`;

/** Signs XML with the key behind `cert`: RSA-SHA256, exclusive c14n, the Signature placed after the element's Issuer. */
function signElement(xml: string, cert: KeyCertificate, elementLocalName: 'Response' | 'Assertion'): string {
  // The private key stays in SigningKeys: this algorithm asks `cert.sign` for the signature value.
  class KeyHeldRsaSha256 implements SignatureAlgorithm {
    getSignature = ((signedInfo: string | Buffer) => cert.sign(signedInfo).toString('base64')) as SignatureAlgorithm['getSignature'];
    verifySignature = (): boolean => false;
    getAlgorithmName = () => RSA_SHA256;
  }
  const sig = new SignedXml({
    privateKey: 'held-by-signing-keys', // never used: the algorithm above signs
    publicCert: cert.pem,
    signatureAlgorithm: RSA_SHA256,
    canonicalizationAlgorithm: EXC_C14N,
  });
  sig.SignatureAlgorithms[RSA_SHA256] = KeyHeldRsaSha256;
  const element = elementLocalName === 'Response'
    ? "/*[local-name(.)='Response']"
    : "/*[local-name(.)='Response']/*[local-name(.)='Assertion']";
  sig.addReference({ xpath: element, transforms: [ENVELOPED, EXC_C14N], digestAlgorithm: SHA256 });
  sig.computeSignature(xml, {
    prefix: 'ds',
    location: { reference: `${element}/*[local-name(.)='Issuer']`, action: 'after' },
  });
  return sig.getSignedXml();
}

function attribute(name: string, values: (string | boolean)[]): string {
  if (!values.length) return '';
  const vs = values.map((v) => `<saml:AttributeValue>${escapeXml(String(v))}</saml:AttributeValue>`).join('');
  return `<saml:Attribute Name="${escapeXml(name)}" NameFormat="${ATTRIBUTE_NAME_FORMAT}">${vs}</saml:Attribute>`;
}

interface Envelope {
  acsUrl: string;
  inResponseTo?: string;
  now?: number;
}

function responseXml(ctx: AppContext, e: Envelope & { status: string; subStatus?: string; message?: string; assertion?: string }): string {
  const u = samlUrls(ctx);
  const t = e.now ?? nowSeconds(ctx.clock);
  const inner = e.subStatus ? `<samlp:StatusCode Value="${escapeXml(e.subStatus)}"/>` : '';
  const message = e.message ? `<samlp:StatusMessage>${escapeXml(e.message)}</samlp:StatusMessage>` : '';
  return (
    `<samlp:Response xmlns:samlp="${NS.samlp}" xmlns:saml="${NS.saml}" ID="${newSamlId()}" Version="2.0" IssueInstant="${samlInstant(t)}"` +
    ` Destination="${escapeXml(e.acsUrl)}"${e.inResponseTo ? ` InResponseTo="${escapeXml(e.inResponseTo)}"` : ''}>` +
    `<saml:Issuer>${escapeXml(u.idpEntityId)}</saml:Issuer>` +
    `<samlp:Status><samlp:StatusCode Value="${escapeXml(e.status)}">${inner}</samlp:StatusCode>${message}</samlp:Status>` +
    (e.assertion ?? '') +
    `</samlp:Response>`
  );
}

export interface SignInResponseInput extends Envelope {
  audience: string;
  nameIdFormat: string;
  user: User;
  session: Session;
}

/** A successful Response: one Assertion about the signed-in person, the Assertion and then the Response signed. */
export async function signInResponse(ctx: AppContext, i: SignInResponseInput): Promise<string> {
  const u = samlUrls(ctx);
  const t = i.now ?? nowSeconds(ctx.clock);
  const until = samlInstant(t + ASSERTION_TTL_SECONDS);
  const nameId = i.nameIdFormat === NAME_ID_FORMATS.persistent ? i.user.id : i.user.email;
  const inResponseTo = i.inResponseTo ? ` InResponseTo="${escapeXml(i.inResponseTo)}"` : '';
  const mfa = i.session.amr.includes('otp') || i.session.amr.includes('mfa');
  const assertion =
    `<saml:Assertion ID="${newSamlId()}" Version="2.0" IssueInstant="${samlInstant(t)}">` +
    `<saml:Issuer>${escapeXml(u.idpEntityId)}</saml:Issuer>` +
    `<saml:Subject>` +
    `<saml:NameID Format="${escapeXml(i.nameIdFormat)}">${escapeXml(nameId)}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">` +
    `<saml:SubjectConfirmationData${inResponseTo} NotOnOrAfter="${until}" Recipient="${escapeXml(i.acsUrl)}"/>` +
    `</saml:SubjectConfirmation>` +
    `</saml:Subject>` +
    `<saml:Conditions NotBefore="${samlInstant(t - CLOCK_SKEW_SECONDS)}" NotOnOrAfter="${until}">` +
    `<saml:AudienceRestriction><saml:Audience>${escapeXml(i.audience)}</saml:Audience></saml:AudienceRestriction>` +
    `</saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${samlInstant(i.session.auth_time)}" SessionIndex="${escapeXml(i.session.sid)}" SessionNotOnOrAfter="${samlInstant(i.session.expires_at)}">` +
    `<saml:AuthnContext><saml:AuthnContextClassRef>${mfa ? AUTHN_CONTEXT.mfa : AUTHN_CONTEXT.password}</saml:AuthnContextClassRef></saml:AuthnContext>` +
    `</saml:AuthnStatement>` +
    `<saml:AttributeStatement>` +
    attribute('sub', [i.user.id]) +
    attribute('email', [i.user.email]) +
    attribute('email_verified', [i.user.email_verified]) +
    attribute('name', [i.user.name]) +
    attribute('groups', i.user.groups) +
    attribute('roles', i.user.roles) +
    `</saml:AttributeStatement>` +
    `</saml:Assertion>`;
  const cert = await samlCertificate(ctx);
  const unsigned = responseXml(ctx, { ...i, now: t, status: STATUS.success, assertion });
  return signElement(signElement(unsigned, cert, 'Assertion'), cert, 'Response');
}

/** A signed Response without an assertion: the request was understood but cannot be answered with a sign-in. */
export async function statusResponse(
  ctx: AppContext,
  e: Envelope & { status: string; subStatus?: string; message?: string },
): Promise<string> {
  const cert = await samlCertificate(ctx);
  return signElement(responseXml(ctx, e), cert, 'Response');
}
