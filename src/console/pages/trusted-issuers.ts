import type { Request, Response, Router } from 'express';
import { deleteTrustedIssuer, putTrustedIssuer, trustedIssuerBody, trustedIssuerJson } from '../../admin/trusted-issuers.js';
import { parseWith } from '../../admin/route.js';
import type { AppContext } from '../../context.js';
import { SUBJECT_MAPPINGS } from '../../store/id-jag.js';
import { audited } from '../audit.js';
import { emptyForm, jsonField, type FormState } from '../forms.js';
import { button, code, dangerForm, errorList, hidden, input, select, textarea, when } from '../html.js';
import { asOneList, formPost, personOf, renderList, stateForm } from './common.js';

const MAPPING_LABELS: Record<(typeof SUBJECT_MAPPINGS)[number], string> = {
  email: 'by email (the ID-JAG’s email claim)',
  id: 'by ID (the ID-JAG’s sub is the person’s ID here)',
};

interface Forms {
  create?: FormState;
  /** a refused removal, shown as one list above the table */
  remove?: FormState;
}

async function trustedIssuersPage(ctx: AppContext, req: Request, res: Response, forms: Forms = {}, status = 200): Promise<void> {
  const person = personOf(res);
  const issuers = (await ctx.store.idJag.listIssuers()).map(trustedIssuerJson);
  const rows = issuers.map((t, i) => [
    code(t.issuer),
    t.jwks_uri ? code(t.jwks_uri) : `${t.jwks?.keys.length ?? 0} key(s) kept here`,
    MAPPING_LABELS[t.subject_mapping],
    when(t.created_at),
    dangerForm('/console/trusted-issuers/remove', person, 'Remove', `Yes, stop trusting ${t.issuer}`, `remove-issuer-${i}`, hidden('issuer', t.issuer)),
  ]);
  const createForm = stateForm(
    '/console/trusted-issuers',
    person,
    forms.create ?? emptyForm({ subject_mapping: 'email' }),
    (at) => `${input({ ...at('issuer'), label: 'Issuer', required: true, placeholder: 'https://idp.example.com', hint: 'The identity provider’s issuer identifier, exactly as its ID-JAGs carry it in iss.' })}
${input({ ...at('jwks_uri'), label: 'JWKS URI', placeholder: 'https://idp.example.com/.well-known/jwks.json', hint: 'Where its signing keys are published; or paste the keys below instead.' })}
${textarea({ ...at('jwks'), label: 'Keys (JWKS)', rows: 4, mono: true, placeholder: '{"keys": [...]}' })}
${select({ ...at('subject_mapping'), label: 'People here are found', options: SUBJECT_MAPPINGS.map((m) => [m, MAPPING_LABELS[m]] as const) })}
${button('Trust this issuer')}`,
  );
  renderList(ctx, req, res, status, {
    title: 'Trusted issuers',
    section: 'trusted-issuers',
    lead: 'Identity providers whose ID-JAGs (Identity Assertion JWT Authorization Grants) this server redeems at its token endpoints, with no consent screen: the provider vouches for the person.',
    ...(forms.remove ? { above: errorList(asOneList(forms.remove).general) } : {}),
    headers: ['Issuer', 'Keys', 'People', 'Added', ''],
    rows,
    empty: 'No issuer is trusted: every ID-JAG is refused.',
    create: { summary: 'Trust an issuer', form: createForm, open: !issuers.length || forms.create !== undefined },
  });
}

export function trustedIssuerPages(router: Router, ctx: AppContext): void {
  router.get('/trusted-issuers', (req, res) => trustedIssuersPage(ctx, req, res));

  formPost(
    router, ctx, '/trusted-issuers',
    async (_req, res, v) => {
      const body = parseWith(trustedIssuerBody, {
        issuer: (v.issuer ?? '').trim(),
        ...(v.jwks_uri?.trim() ? { jwks_uri: v.jwks_uri.trim() } : {}),
        ...(v.jwks?.trim() ? { jwks: jsonField(v, 'jwks', undefined) } : {}),
        subject_mapping: v.subject_mapping || 'email',
      });
      const { issuer } = await putTrustedIssuer(ctx, body, 'create', audited(ctx, personOf(res), (t) => ({
        action: 'trusted_issuers.create', target: `trusted_issuer:${t.issuer}`, details: { jwks_uri: t.jwks_uri, subject_mapping: t.subject_mapping },
      })));
      return { message: `${issuer.issuer} is trusted.`, to: '/console/trusted-issuers' };
    },
    (req, res, create) => trustedIssuersPage(ctx, req, res, { create }, create.status),
  );

  formPost(
    router, ctx, '/trusted-issuers/remove',
    async (_req, res, v) => {
      const issuer = v.issuer ?? '';
      await deleteTrustedIssuer(ctx, issuer, audited(ctx, personOf(res), () => ({ action: 'trusted_issuers.delete', target: `trusted_issuer:${issuer}` })));
      return { message: `${issuer} is no longer trusted.`, to: '/console/trusted-issuers' };
    },
    (req, res, remove) => trustedIssuersPage(ctx, req, res, { remove }, remove.status),
    { confirm: true },
  );
}
