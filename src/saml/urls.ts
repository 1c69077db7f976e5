import type { AppContext } from '../context.js';

/** Absolute URLs of the SAML endpoints; entity IDs are URLs on the issuer. */
export function samlUrls(ctx: AppContext) {
  const base = ctx.config.issuer;
  const sp = (name: string) => `${base}/saml/sp/${encodeURIComponent(name)}`;
  return {
    idpEntityId: ctx.urls.samlMetadata,
    idpMetadata: ctx.urls.samlMetadata,
    sso: `${base}/saml/sso`,
    slo: `${base}/saml/slo`,
    spEntityId: sp,
    spMetadata: (name: string) => `${sp(name)}/metadata`,
    spAcs: (name: string) => `${sp(name)}/acs`,
  };
}
