import type { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { schemaProblems } from '../oauth/json-schema.js';
import type { AuthorizationDetailsType } from '../store/client-requests.js';
import { adminRoute, param, parseWith } from './route.js';
import { listOf } from './schemas.js';
import { iso } from '../clock.js';

/**
 * Authorization details types (RFC 9396): each a name, a description and the JSON Schema a
 * detail of that type must meet (the subset src/oauth/json-schema.ts checks; any other keyword
 * is refused here, so a schema never promises more than is enforced).
 */
export const detailsTypeName = z
  .string()
  .regex(/^[A-Za-z0-9._~:/@+-]{1,200}$/, 'must be 1 to 200 characters of letters, digits and . _ ~ : / @ + -');

export const detailsTypePut = z.object({
  description: z.string().max(500).default(''),
  schema: z
    .record(z.string(), z.unknown())
    .superRefine((schema, c) => {
      for (const problem of schemaProblems(schema)) c.addIssue({ code: 'custom', message: problem });
      if (JSON.stringify(schema).length > 32_768) c.addIssue({ code: 'custom', message: 'at most 32768 characters of JSON' });
    })
    .meta({ description: 'a JSON Schema (the supported subset; see docs/sign-in.md) for the detail without its `type`' }),
});

/** The project file's item: the type's name with the PUT body. */
export const projectDetailsType = detailsTypePut.extend({ type: detailsTypeName });

export const detailsTypeView = z.object({
  type: z.string(),
  description: z.string(),
  schema: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});

export const detailsTypeJson = (t: AuthorizationDetailsType) => ({
  type: t.type,
  description: t.description,
  schema: t.schema,
  created_at: iso(t.created_at),
  updated_at: iso(t.updated_at),
});

/** Declares (or changes) a type; `created` tells the two apart. */
export function putDetailsType(ctx: AppContext, type: string, body: z.output<typeof detailsTypePut>) {
  return ctx.store.clientRequests.putType(type, body.description, body.schema);
}

/** The project file's `authorization_details_types`: each type declared as the file has it (left alone when it already is). */
export const authorizationDetailsTypesSection = {
  key: 'authorization_details_types',
  item: projectDetailsType,
  async apply(ctx: AppContext, items: z.output<typeof projectDetailsType>[]): Promise<void> {
    for (const t of items) {
      const cur = await ctx.store.clientRequests.getType(t.type);
      if (cur && cur.description === t.description && JSON.stringify(cur.schema) === JSON.stringify(t.schema)) continue;
      await putDetailsType(ctx, t.type, t);
    }
  },
};

export function authorizationDetailsTypeRoutes(router: Router, ctx: AppContext): void {
  const tags = ['authorization details types'];
  const typeParam = (req: Parameters<typeof param>[0]) => parseWith(detailsTypeName, param(req, 'type'), 'type');

  adminRoute(
    router,
    { method: 'get', path: '/authorization-details-types', tags, summary: 'List the authorization details types', responses: { 200: { description: 'the types', schema: listOf(detailsTypeView) } } },
    async (_req, res) => void res.json({ data: (await ctx.store.clientRequests.listTypes()).map(detailsTypeJson) }),
  );

  adminRoute(
    router,
    { method: 'get', path: '/authorization-details-types/{type}', tags, summary: 'Read an authorization details type', responses: { 200: { description: 'the type', schema: detailsTypeView } } },
    async (req, res) => {
      const t = await ctx.store.clientRequests.getType(typeParam(req));
      if (!t) throw errors.notFound(`no authorization details type ${param(req, 'type')}`);
      res.json(detailsTypeJson(t));
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/authorization-details-types/{type}', tags, summary: 'Declare or change an authorization details type (RFC 9396)',
      request: detailsTypePut,
      responses: { 200: { description: 'changed', schema: detailsTypeView }, 201: { description: 'declared', schema: detailsTypeView } },
    },
    async (req, res) => {
      const type = typeParam(req);
      const { created, value } = await putDetailsType(ctx, type, parseWith(detailsTypePut, req.body));
      res.status(created ? 201 : 200).json(detailsTypeJson(value));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/authorization-details-types/{type}', tags, summary: 'Remove an authorization details type (requests naming it are refused from then on)', responses: { 204: 'removed' } },
    async (req, res) => {
      if (!(await ctx.store.clientRequests.deleteType(typeParam(req)))) throw errors.notFound(`no authorization details type ${param(req, 'type')}`);
      res.status(204).end();
    },
  );
}
