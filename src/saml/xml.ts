import { DOMParser, onWarningStopParsing, type Document, type Element } from '@xmldom/xmldom';

/** The SAML 2.0 names this area speaks. */
export const NS = {
  md: 'urn:oasis:names:tc:SAML:2.0:metadata',
  ds: 'http://www.w3.org/2000/09/xmldsig#',
  samlp: 'urn:oasis:names:tc:SAML:2.0:protocol',
  saml: 'urn:oasis:names:tc:SAML:2.0:assertion',
} as const;

export const PROTOCOL = NS.samlp;

export const BINDINGS = {
  redirect: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect',
  post: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST',
} as const;

export const NAME_ID_FORMATS = {
  emailAddress: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
  persistent: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
  unspecified: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
} as const;
export const SUPPORTED_NAME_ID_FORMATS: string[] = [NAME_ID_FORMATS.emailAddress, NAME_ID_FORMATS.persistent];

export const STATUS = {
  success: 'urn:oasis:names:tc:SAML:2.0:status:Success',
  requester: 'urn:oasis:names:tc:SAML:2.0:status:Requester',
  responder: 'urn:oasis:names:tc:SAML:2.0:status:Responder',
  invalidNameIdPolicy: 'urn:oasis:names:tc:SAML:2.0:status:InvalidNameIDPolicy',
  requestDenied: 'urn:oasis:names:tc:SAML:2.0:status:RequestDenied',
} as const;

const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Escapes a value for XML text and double-quoted attributes; every value written into a document passes through it. */
export function escapeXml(value: unknown): string {
  // Characters XML 1.0 cannot carry at all are dropped rather than producing a document nobody can parse.
  return String(value ?? '')
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    .replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!);
}

/** The base64 body of a PEM certificate, no armour and no line breaks (the `ds:X509Certificate` text). */
export function pemBody(pem: string): string {
  return pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, '').replace(/\s+/g, '');
}

/** SAML time: UTC, second precision, `Z`. */
export const samlInstant = (unixSeconds: number): string => new Date(unixSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');

export class XmlInputError extends Error {}

/**
 * Parses untrusted XML. A document type declaration is refused outright (no entity tricks);
 * any warning or error of the parser stops it.
 */
export function parseUntrustedXml(text: string): Document {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw new XmlInputError('a document type declaration is not allowed');
  try {
    const doc = new DOMParser({ onError: onWarningStopParsing }).parseFromString(text, 'text/xml');
    if (!doc.documentElement) throw new XmlInputError('no root element');
    return doc;
  } catch (err) {
    if (err instanceof XmlInputError) throw err;
    throw new XmlInputError('not well-formed XML');
  }
}

/** The element children of `parent` with this namespace and local name. */
export function childElements(parent: Element, ns: string, localName: string): Element[] {
  const out: Element[] = [];
  for (let n = parent.firstChild; n; n = n.nextSibling) {
    if (n.nodeType === 1) {
      const el = n as Element;
      if (el.namespaceURI === ns && el.localName === localName) out.push(el);
    }
  }
  return out;
}

export const firstChild = (parent: Element, ns: string, localName: string): Element | undefined =>
  childElements(parent, ns, localName)[0];

export const textOf = (el: Element | undefined): string | undefined => el?.textContent?.trim() || undefined;

/** Descendants (any depth) with this namespace and local name. */
export function descendants(parent: Element | Document, ns: string, localName: string): Element[] {
  return Array.from(parent.getElementsByTagNameNS(ns, localName));
}
