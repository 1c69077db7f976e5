import { createPublicKey } from 'node:crypto';
import type { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { iso } from '../clock.js';
import { outboundProblem } from '../outbound.js';
import { SUBJECT_MAPPINGS, type TrustedIssuer } from '../store/id-jag.js';
import type { Recorder } from './audit.js';
import { adminRoute, param, parseWith } from './route.js';
import { listOf } from './schemas.js';

/** Members only a private key has: a trusted issuer's key set holds public keys only. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

const httpUrl = (what: string) =>
  z
    .string()
    .max(2000)
    .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), `${what} must be an absolute http or https URL`)
    .refine((u) => !URL.canParse(u) || !new URL(u).hash, `${what} must have no fragment`);

const jwk = z
  .record(z.string(), z.unknown())
  .superRefine((k, c) => {
    if (k.kty !== 'RSA' && k.kty !== 'EC' && k.kty !== 'OKP') c.addIssue({ code: 'custom', message: 'kty must be RSA, EC or OKP' });
    else if (PRIVATE_MEMBERS.some((m) => m in k)) c.addIssue({ code: 'custom', message: 'must be a public key (it has private members)' });
    else {
      try {
        createPublicKey({ key: k as never, format: 'jwk' });
      } catch {
        c.addIssue({ code: 'custom', message: 'is not a valid public key' });
      }
    }
  });

const trustedIssuerFields = z
  .object({
    issuer: httpUrl('issuer')
      .refine((u) => !URL.canParse(u) || !new URL(u).search, 'issuer must have no query')
      .meta({ description: "the identity provider's issuer identifier (the ID-JAG's `iss`), exactly" }),
    jwks_uri: httpUrl('jwks_uri').optional().meta({ description: 'where its signing keys are published (fetched when needed, kept 5 minutes)' }),
    jwks: z
      .object({ keys: z.array(jwk).min(1).max(50) })
      .optional()
      .meta({ description: 'its public signing keys, kept here (instead of jwks_uri)' }),
    subject_mapping: z
      .enum(SUBJECT_MAPPINGS)
      .default('email')
      .meta({ description: "`email`: the ID-JAG's `email` claim is the person's email here; `id`: its `sub` is the person's ID here" }),
  });
const oneKeySource = (b: { jwks_uri?: unknown; jwks?: unknown }, c: z.RefinementCtx) => {
  if ((b.jwks_uri === undefined) === (b.jwks === undefined)) c.addIssue({ code: 'custom', path: ['jwks_uri'], message: 'give exactly one of jwks_uri and jwks' });
};
export const trustedIssuerBody = trustedIssuerFields.superRefine(oneKeySource);
const trustedIssuerPut = trustedIssuerFields.omit({ issuer: true }).superRefine(oneKeySource);

export const trustedIssuerView = z.object({
  issuer: z.string(),
  jwks_uri: z.string().nullable(),
  jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).nullable(),
  subject_mapping: z.enum(SUBJECT_MAPPINGS),
  created_at: z.string().meta({ description: 'ISO 8601 time' }),
  updated_at: z.string().meta({ description: 'ISO 8601 time' }),
});

export const trustedIssuerJson = (i: TrustedIssuer) => ({
  issuer: i.issuer,
  jwks_uri: i.jwks_uri,
  jwks: i.jwks,
  subject_mapping: i.subject_mapping,
  created_at: iso(i.created_at),
  updated_at: iso(i.updated_at),
});

const fieldError = (path: string, message: string) =>
  errors.invalidRequest(`${path}: ${message}`, { issues: [{ path, message, code: 'custom' }] });

/** Saves a trusted issuer (create or replace): the JWKS URI must be one the outbound rules let us fetch. */
export async function putTrustedIssuer(
  ctx: AppContext,
  input: { issuer: string; jwks_uri?: string | undefined; jwks?: { keys: Record<string, unknown>[] } | undefined; subject_mapping: TrustedIssuer['subject_mapping'] },
  mode: 'create' | 'replace',
  record?: Recorder<TrustedIssuer>,
): Promise<{ issuer: TrustedIssuer; created: boolean }> {
  if (input.issuer === ctx.urls.issuer) throw fieldError('issuer', 'is this server: its own ID-JAGs are for other servers');
  if (input.jwks_uri !== undefined) {
    const problem = await outboundProblem(input.jwks_uri, ctx.config.outboundAllowPrivate);
    if (problem) throw fieldError('jwks_uri', problem);
  }
  return ctx.store.transaction(async (tx) => {
    const exists = (await tx.idJag.getIssuer(input.issuer)) !== undefined;
    if (mode === 'create' && exists) throw errors.conflict(`the issuer ${input.issuer} is already trusted`);
    if (mode === 'replace' && !exists) throw errors.notFound(`no trusted issuer ${input.issuer}`);
    const saved = await tx.idJag.putIssuer({ issuer: input.issuer, jwks_uri: input.jwks_uri ?? null, jwks: input.jwks ?? null, subject_mapping: input.subject_mapping });
    await record?.(tx, saved.issuer);
    return saved;
  });
}

export async function deleteTrustedIssuer(ctx: AppContext, issuer: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.idJag.deleteIssuer(issuer))) throw errors.notFound(`no trusted issuer ${issuer}`);
    await record?.(tx);
  });
}

/** The identity providers whose ID-JAGs this server redeems (the jwt-bearer grant). */
export function trustedIssuerRoutes(router: Router, ctx: AppContext): void {
  const tags = ['trusted issuers'];
  const params = z.object({ issuer: z.string().meta({ description: 'the issuer identifier, URL-encoded' }) });

  adminRoute(
    router,
    { method: 'get', path: '/trusted-issuers', tags, summary: 'List the trusted ID-JAG issuers', responses: { 200: { description: 'the issuers', schema: listOf(trustedIssuerView) } } },
    async (_req, res) => void res.json({ data: (await ctx.store.idJag.listIssuers()).map(trustedIssuerJson) }),
  );

  adminRoute(
    router,
    {
      method: 'post', path: '/trusted-issuers', tags, summary: 'Trust an identity provider to vouch for people here (ID-JAG)',
      request: trustedIssuerBody,
      responses: { 201: { description: 'the trusted issuer', schema: trustedIssuerView }, 409: 'the issuer is already trusted' },
    },
    async (req, res) => {
      const { issuer } = await putTrustedIssuer(ctx, parseWith(trustedIssuerBody, req.body), 'create');
      res.status(201).json(trustedIssuerJson(issuer));
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/trusted-issuers/{issuer}', tags, params, summary: 'Read a trusted issuer', responses: { 200: { description: 'the trusted issuer', schema: trustedIssuerView } } },
    async (req, res) => {
      const found = await ctx.store.idJag.getIssuer(param(req, 'issuer'));
      if (!found) throw errors.notFound(`no trusted issuer ${param(req, 'issuer')}`);
      res.json(trustedIssuerJson(found));
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/trusted-issuers/{issuer}', tags, params, summary: "Replace a trusted issuer's keys and mapping",
      request: trustedIssuerPut,
      responses: { 200: { description: 'the trusted issuer', schema: trustedIssuerView } },
    },
    async (req, res) => {
      const body = parseWith(trustedIssuerPut, req.body);
      const { issuer } = await putTrustedIssuer(ctx, { ...body, issuer: param(req, 'issuer') }, 'replace');
      res.json(trustedIssuerJson(issuer));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/trusted-issuers/{issuer}', tags, params, summary: 'Stop trusting an issuer (its ID-JAGs are refused from now on)', responses: { 204: 'removed' } },
    async (req, res) => {
      await deleteTrustedIssuer(ctx, param(req, 'issuer'));
      res.status(204).end();
    },
  );
}
