import { X509Certificate } from 'node:crypto';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { onDuplicate } from '../admin/conflict.js';
import type { SamlConnection, SamlConnectionFields } from '../store/saml.js';
import { samlUrls } from './urls.js';
import { BINDINGS, childElements, descendants, firstChild, NAME_ID_FORMATS, NS, parseUntrustedXml, pemBody, textOf, XmlInputError } from './xml.js';
import { iso } from '../clock.js';

/**
 * SAML connections, the management API's shapes and operations. `kind: "sp"` is an application
 * that signs people in through us (we are its IdP: /saml/sso); `kind: "idp"` is an external
 * identity provider for which we are the service provider (/saml/sp/{name}/metadata).
 */

export const CONNECTION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export const connectionName = z
  .string()
  .regex(CONNECTION_NAME, 'must be 1 to 63 letters, digits, ".", "_" or "-", starting with a letter or digit')
  .meta({ description: 'URL-safe; the `{name}` of /saml/sp/{name}/metadata' });

const httpUrl = z
  .string()
  .max(2000)
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol) && !new URL(v).hash, 'must be an absolute http(s) URL without a fragment')
  .meta({ format: 'uri' });

const NAME_ID_ALIASES: Record<string, string> = {
  emailAddress: NAME_ID_FORMATS.emailAddress,
  email: NAME_ID_FORMATS.emailAddress,
  persistent: NAME_ID_FORMATS.persistent,
  [NAME_ID_FORMATS.emailAddress]: NAME_ID_FORMATS.emailAddress,
  [NAME_ID_FORMATS.persistent]: NAME_ID_FORMATS.persistent,
};
const nameIdFormat = z
  .string()
  .refine((v) => v in NAME_ID_ALIASES, `must be ${NAME_ID_FORMATS.emailAddress} (or "emailAddress") or ${NAME_ID_FORMATS.persistent} (or "persistent")`)
  .transform((v) => NAME_ID_ALIASES[v]!)
  .meta({ description: 'the NameID an SP gets unless its AuthnRequest asks otherwise; default emailAddress' });

/** A PEM certificate or its bare base64 body, stored as PEM. */
export function toCertificatePem(value: string): string | null {
  const body = pemBody(value);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) return null;
  try {
    const cert = new X509Certificate(Buffer.from(body, 'base64'));
    return cert.toString();
  } catch {
    return null;
  }
}

const certificate = z
  .string()
  .max(20000)
  .transform((v, c) => {
    const pem = toCertificatePem(v);
    if (!pem) {
      c.addIssue({ code: 'custom', message: 'must be an X.509 certificate (PEM, or its base64 body)' });
      return z.NEVER;
    }
    return pem;
  })
  .meta({ description: 'the IdP signing certificate, PEM or base64 DER' });

const fields = {
  kind: z.enum(['sp', 'idp']).meta({ description: '`sp`: an application signing in through us; `idp`: an external IdP we are the SP of' }),
  entity_id: z.string().trim().min(1, 'must not be empty').max(1024).meta({ description: 'the other party\'s entityID' }),
  acs_url: httpUrl.meta({ description: 'sp: the Assertion Consumer Service URL (HTTP-POST); an AuthnRequest naming another is refused' }),
  slo_url: httpUrl.meta({ description: 'sp: where a LogoutResponse goes after /saml/slo (optional)' }),
  name_id_format: nameIdFormat,
  idp_sso_url: httpUrl.meta({ description: 'idp: its SingleSignOnService URL' }),
  idp_certificate: certificate,
  idp_metadata_xml: z.string().max(500_000).meta({ description: 'idp: its metadata; fills entity_id, idp_sso_url and idp_certificate where not given' }),
  allowed_email_domains: z
    .array(
      z.string().trim().toLowerCase().max(253)
        .regex(/^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/, 'must be a domain name (example.com)'),
    )
    .min(1, 'must list at least one domain (leave the field out to allow any)')
    .max(500)
    .meta({ description: 'idp: it signs in only people whose email is in one of these domains (exactly; subdomains are not included); absent: any domain' }),
  admit_administrators: z.boolean().meta({ description: 'idp: true lets it sign in administrators (holders of the console role); default false' }),
};

function kindRules(v: { kind: 'sp' | 'idp'; [k: string]: unknown }, c: z.RefinementCtx): void {
  const need = (field: string) => v[field] === undefined && c.addIssue({ code: 'custom', path: [field], message: `is required for kind ${v.kind}` });
  const forbid = (field: string) =>
    v[field] !== undefined && c.addIssue({ code: 'custom', path: [field], message: `applies only to kind ${v.kind === 'sp' ? 'idp' : 'sp'}` });
  if (v.kind === 'sp') {
    need('entity_id');
    need('acs_url');
    for (const f of ['idp_sso_url', 'idp_certificate', 'idp_metadata_xml', 'allowed_email_domains', 'admit_administrators']) forbid(f);
  } else {
    for (const f of ['acs_url', 'slo_url', 'name_id_format']) forbid(f);
  }
}

const body = z.object({
  kind: fields.kind.default('idp'),
  entity_id: fields.entity_id.optional(),
  acs_url: fields.acs_url.optional(),
  slo_url: fields.slo_url.optional(),
  name_id_format: fields.name_id_format.optional(),
  idp_sso_url: fields.idp_sso_url.optional(),
  idp_certificate: fields.idp_certificate.optional(),
  idp_metadata_xml: fields.idp_metadata_xml.optional(),
  allowed_email_domains: fields.allowed_email_domains.optional(),
  admit_administrators: fields.admit_administrators.optional(),
});

export const connectionCreate = body.extend({ name: connectionName }).superRefine(kindRules);
export type ConnectionCreate = z.output<typeof connectionCreate>;

/** PUT replaces every field; `name`, when sent, must be the path's. */
export const connectionPut = body.extend({ name: connectionName.optional() }).superRefine(kindRules);
export type ConnectionPut = z.output<typeof connectionPut>;

export const connectionView = z.object({
  name: z.string(),
  kind: z.enum(['sp', 'idp']),
  entity_id: z.string().nullable(),
  acs_url: z.string().nullable(),
  slo_url: z.string().nullable(),
  name_id_format: z.string().nullable(),
  idp_sso_url: z.string().nullable(),
  idp_certificate: z.string().nullable(),
  allowed_email_domains: z.array(z.string()).nullable().meta({ description: 'idp: the email domains it may sign in; null: any' }),
  admit_administrators: z.boolean().meta({ description: 'idp: whether it may sign in administrators' }),
  metadata_url: z.string().meta({ description: 'the metadata to give the other party: ours as IdP (sp) or as this SP (idp)' }),
  sp_entity_id: z.string().nullable().meta({ description: 'idp: our entityID as its SP' }),
  sp_acs_url: z.string().nullable().meta({ description: 'idp: our ACS URL as its SP' }),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
});

export function connectionJson(ctx: AppContext, c: SamlConnection): z.output<typeof connectionView> {
  const u = samlUrls(ctx);
  const idp = c.kind === 'idp';
  return {
    name: c.name,
    kind: c.kind,
    entity_id: c.entity_id || null,
    acs_url: c.acs_url,
    slo_url: c.slo_url,
    name_id_format: c.name_id_format,
    idp_sso_url: c.idp_sso_url,
    idp_certificate: c.idp_certificate,
    allowed_email_domains: c.allowed_email_domains,
    admit_administrators: c.admit_administrators,
    metadata_url: idp ? u.spMetadata(c.name) : u.idpMetadata,
    sp_entity_id: idp ? u.spEntityId(c.name) : null,
    sp_acs_url: idp ? u.spAcs(c.name) : null,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}

/** entityID, SSO URL and signing certificate from an IdP's metadata document. */
export function readIdpMetadata(xml: string): { entity_id?: string; idp_sso_url?: string; idp_certificate?: string } {
  const bad = (message: string) =>
    errors.invalidRequest(`idp_metadata_xml: ${message}`, { issues: [{ path: 'idp_metadata_xml', message, code: 'custom' }] });
  let doc;
  try {
    doc = parseUntrustedXml(xml);
  } catch (err) {
    throw bad(err instanceof XmlInputError ? err.message : 'not well-formed XML');
  }
  const entity = descendants(doc, NS.md, 'EntityDescriptor').find((e) => firstChild(e, NS.md, 'IDPSSODescriptor'));
  if (!entity) throw bad('no md:EntityDescriptor with an md:IDPSSODescriptor');
  const idp = firstChild(entity, NS.md, 'IDPSSODescriptor')!;
  const sso = childElements(idp, NS.md, 'SingleSignOnService');
  const location = (sso.find((s) => s.getAttribute('Binding') === BINDINGS.redirect) ?? sso.find((s) => s.getAttribute('Binding') === BINDINGS.post))?.getAttribute('Location');
  const signingKey = childElements(idp, NS.md, 'KeyDescriptor').find((k) => !k.getAttribute('use') || k.getAttribute('use') === 'signing');
  const certText = signingKey ? textOf(descendants(signingKey, NS.ds, 'X509Certificate')[0]) : undefined;
  const cert = certText ? toCertificatePem(certText) : undefined;
  if (certText && !cert) throw bad('the signing certificate is not a valid X.509 certificate');
  if (location && !httpUrl.safeParse(location).success) throw bad('the SingleSignOnService Location is not an http(s) URL');
  return {
    entity_id: entity.getAttribute('entityID') || undefined,
    idp_sso_url: location || undefined,
    idp_certificate: cert ?? undefined,
  };
}

/** The stored fields of a create or put body: IdP metadata fills what the body leaves out. */
function toFields(name: string, b: ConnectionPut): SamlConnectionFields {
  const fromMetadata = b.kind === 'idp' && b.idp_metadata_xml ? readIdpMetadata(b.idp_metadata_xml) : {};
  return {
    name,
    kind: b.kind,
    entity_id: b.entity_id ?? fromMetadata.entity_id ?? '',
    acs_url: b.acs_url ?? null,
    slo_url: b.slo_url ?? null,
    name_id_format: b.kind === 'sp' ? (b.name_id_format ?? NAME_ID_FORMATS.emailAddress) : null,
    idp_sso_url: b.idp_sso_url ?? fromMetadata.idp_sso_url ?? null,
    idp_certificate: b.idp_certificate ?? fromMetadata.idp_certificate ?? null,
    allowed_email_domains: b.allowed_email_domains ? [...new Set(b.allowed_email_domains)] : null,
    admit_administrators: b.admit_administrators ?? false,
  };
}

const entityTaken = (entityId: string) => `an sp connection with entity_id ${entityId} exists`;

export function createConnection(ctx: AppContext, b: ConnectionCreate): Promise<SamlConnection> {
  const f = toFields(b.name, b);
  return onDuplicate(`a SAML connection named ${b.name} exists`, () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.saml.get(b.name)) throw errors.conflict(`a SAML connection named ${b.name} exists`);
      if (f.kind === 'sp' && await tx.saml.spByEntityId(f.entity_id)) throw errors.conflict(entityTaken(f.entity_id));
      return await tx.saml.create(f);
    }),
  );
}

export function replaceConnection(ctx: AppContext, name: string, b: ConnectionPut): Promise<SamlConnection> {
  if (b.name !== undefined && b.name !== name) {
    const message = 'differs from the name in the path (a connection cannot be renamed)';
    throw errors.invalidRequest(`name: ${message}`, { issues: [{ path: 'name', message, code: 'custom' }] });
  }
  const f = toFields(name, b);
  return onDuplicate(entityTaken(f.entity_id), () =>
    ctx.store.transaction(async (tx) => {
      const other = f.kind === 'sp' ? await tx.saml.spByEntityId(f.entity_id) : undefined;
      if (other && other.name !== name) throw errors.conflict(entityTaken(f.entity_id));
      const updated = await tx.saml.update(f);
      if (!updated) throw errors.notFound(`no SAML connection named ${name}`);
      return updated;
    }),
  );
}

export async function deleteConnection(ctx: AppContext, name: string): Promise<void> {
  if (!(await ctx.store.saml.delete(name))) throw errors.notFound(`no SAML connection named ${name}`);
}
