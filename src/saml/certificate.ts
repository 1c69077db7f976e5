import type { AppContext } from '../context.js';
import type { KeyCertificate } from '../crypto/signing.js';

/** The IdP's (and our SP's) signing certificate: the active RS256 key's, CN = the issuer host. */
export function samlCertificate(ctx: AppContext): Promise<KeyCertificate> {
  return ctx.keys.certificate('RS256', ctx.config.issuerHost);
}
