import type { AppContext } from '../context.js';
import type { KeyCertificate } from '../crypto/signing.js';
import type { SamlConnection } from '../store/saml.js';
import { samlUrls } from './urls.js';
import { BINDINGS, escapeXml, NS, pemBody, PROTOCOL, SUPPORTED_NAME_ID_FORMATS } from './xml.js';

export const METADATA_CONTENT_TYPE = 'application/samlmetadata+xml; charset=utf-8';

function keyDescriptor(cert: KeyCertificate): string {
  return `    <md:KeyDescriptor use="signing">
      <ds:KeyInfo>
        <ds:X509Data>
          <ds:X509Certificate>${escapeXml(pemBody(cert.pem))}</ds:X509Certificate>
        </ds:X509Data>
      </ds:KeyInfo>
    </md:KeyDescriptor>
`;
}

const nameIdFormats = (): string =>
  SUPPORTED_NAME_ID_FORMATS.map((f) => `    <md:NameIDFormat>${escapeXml(f)}</md:NameIDFormat>\n`).join('');

const endpoint = (element: string, binding: string, location: string, extra = ''): string =>
  `    <md:${element} Binding="${escapeXml(binding)}" Location="${escapeXml(location)}"${extra}/>\n`;

/**
 * The project as an identity provider. Element order follows the metadata schema
 * (KeyDescriptor, SingleLogoutService, NameIDFormat, SingleSignOnService).
 */
export function idpMetadataXml(ctx: AppContext, cert: KeyCertificate): string {
  const u = samlUrls(ctx);
  return `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="${NS.md}" xmlns:ds="${NS.ds}" entityID="${escapeXml(u.idpEntityId)}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="${PROTOCOL}">
${keyDescriptor(cert)}${endpoint('SingleLogoutService', BINDINGS.redirect, u.slo)}${nameIdFormats()}${endpoint('SingleSignOnService', BINDINGS.redirect, u.sso)}${endpoint('SingleSignOnService', BINDINGS.post, u.sso)}  </md:IDPSSODescriptor>
</md:EntityDescriptor>
`;
}

/** The project as a service provider of one `idp` connection. */
export function spMetadataXml(ctx: AppContext, connection: SamlConnection, cert: KeyCertificate): string {
  const u = samlUrls(ctx);
  return `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="${NS.md}" xmlns:ds="${NS.ds}" entityID="${escapeXml(u.spEntityId(connection.name))}">
  <md:SPSSODescriptor AuthnRequestsSigned="true" WantAssertionsSigned="true" protocolSupportEnumeration="${PROTOCOL}">
${keyDescriptor(cert)}${nameIdFormats()}${endpoint('AssertionConsumerService', BINDINGS.post, u.spAcs(connection.name), ' index="0" isDefault="true"')}  </md:SPSSODescriptor>
</md:EntityDescriptor>
`;
}
