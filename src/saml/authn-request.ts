import { BindingError, decodeBindingMessage, type BindingMessage } from './binding.js';
import { firstChild, NS, parseUntrustedXml, textOf, XmlInputError } from './xml.js';

/** The parts of an AuthnRequest (SAML Core 3.4.1) this IdP acts on. */
export interface AuthnRequest {
  id: string;
  issuer: string;
  destination?: string;
  acsUrl?: string;
  acsIndex?: string;
  protocolBinding?: string;
  nameIdFormat?: string;
  forceAuthn: boolean;
  isPassive: boolean;
}

export class AuthnRequestError extends Error {}

const NCNAME = /^[A-Za-z_][\w.-]{0,255}$/;
const xsBoolean = (v: string | null) => v === 'true' || v === '1';

/** Decodes and reads an AuthnRequest; anything malformed is an AuthnRequestError with a sentence. */
export function readAuthnRequest(message: BindingMessage): AuthnRequest {
  let doc;
  try {
    doc = parseUntrustedXml(decodeBindingMessage(message));
  } catch (err) {
    if (err instanceof BindingError || err instanceof XmlInputError) throw new AuthnRequestError(`SAMLRequest: ${err.message}`);
    throw err;
  }
  const root = doc.documentElement!;
  if (root.namespaceURI !== NS.samlp || root.localName !== 'AuthnRequest') throw new AuthnRequestError('SAMLRequest: not a samlp:AuthnRequest');
  if (root.getAttribute('Version') !== '2.0') throw new AuthnRequestError('SAMLRequest: Version must be 2.0');
  const id = root.getAttribute('ID') ?? '';
  if (!NCNAME.test(id)) throw new AuthnRequestError('SAMLRequest: ID is missing or not an XML ID');
  const issuer = textOf(firstChild(root, NS.saml, 'Issuer'));
  if (!issuer) throw new AuthnRequestError('SAMLRequest: saml:Issuer is missing');
  const policy = firstChild(root, NS.samlp, 'NameIDPolicy');
  const attr = (name: string) => root.getAttribute(name) || undefined;
  return {
    id,
    issuer,
    destination: attr('Destination'),
    acsUrl: attr('AssertionConsumerServiceURL'),
    acsIndex: attr('AssertionConsumerServiceIndex'),
    protocolBinding: attr('ProtocolBinding'),
    nameIdFormat: policy?.getAttribute('Format') || undefined,
    forceAuthn: xsBoolean(root.getAttribute('ForceAuthn')),
    isPassive: xsBoolean(root.getAttribute('IsPassive')),
  };
}
