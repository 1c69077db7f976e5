import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import { ENTITIES_DOMAIN, type Attributes, type Entity } from '../store/entities.js';
import { adminRoute, param, parseWith } from './route.js';
import { entityKey, entityListQuery, entityPut, entityView, listOf } from './schemas.js';
import { iso } from '../clock.js';

/**
 * Entities: the resources a policy can describe. `<type>:<id>` is the object of a decision
 * request; the stored attributes are what `resource.<name>` reads. Every write moves the
 * `entities` change counter in the same transaction, so a process caching entity reads
 * sees the change on its next decision.
 */

export function entityJson(e: Entity) {
  return { type: e.type, id: e.id, attributes: e.attributes, created_at: iso(e.created_at), updated_at: iso(e.updated_at) };
}

const typeOnly = entityKey.pick({ type: true });

/** Stores an entity, replacing the attributes of one that exists. `created` says which. */
export async function putEntity(ctx: AppContext, type: string, id: string, attributes: Attributes): Promise<{ entity: Entity; created: boolean }> {
  return ctx.store.transaction(async (tx) => {
    const created = !(await tx.entities.get(type, id));
    const entity = await tx.entities.put(type, id, attributes);
    await tx.settings.bump(ENTITIES_DOMAIN);
    return { entity, created };
  });
}

export async function deleteEntity(ctx: AppContext, type: string, id: string): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.entities.delete(type, id))) throw errors.notFound(`no entity ${type}:${id}`);
    await tx.settings.bump(ENTITIES_DOMAIN);
  });
}

export function entityRoutes(router: Router, ctx: AppContext): void {
  const tags = ['entities'];
  // An id may hold `/` (a path, a URL): sent URL-encoded it is one segment; a wildcard also takes it unencoded.
  const keyPath = '/entities/:type/*id';
  const key = (req: Parameters<typeof param>[0]) => parseWith(entityKey, { type: param(req, 'type'), id: param(req, 'id') }, 'path');

  adminRoute(
    router,
    {
      method: 'get', path: '/entities/{type}', tags, summary: "List a type's entities, a page at a time, ordered by id",
      params: typeOnly, query: entityListQuery,
      responses: { 200: { description: 'a page; `next_offset` is null on the last', schema: listOf(entityView).extend({ next_offset: entityListQuery.shape.offset.nullable() }) } },
    },
    async (req, res) => {
      const { type } = parseWith(typeOnly, { type: param(req, 'type') }, 'path');
      const q = parseWith(entityListQuery, req.query, 'query');
      const page = await ctx.store.entities.list(type, q.limit + 1, q.offset);
      const more = page.length > q.limit;
      res.json({ data: page.slice(0, q.limit).map(entityJson), next_offset: more ? q.offset + q.limit : null });
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/entities/{type}/{id}', expressPath: keyPath, tags,
      summary: 'Store an entity: its attributes replace any stored before; the next decision reads them',
      params: entityKey, request: entityPut,
      responses: {
        201: { description: 'created', schema: entityView },
        200: { description: 'replaced', schema: entityView },
      },
    },
    async (req, res) => {
      const { type, id } = key(req);
      const { attributes } = parseWith(entityPut, req.body);
      const { entity, created } = await putEntity(ctx, type, id, attributes);
      res.status(created ? 201 : 200).json(entityJson(entity));
    },
  );

  adminRoute(
    router,
    {
      method: 'get', path: '/entities/{type}/{id}', expressPath: keyPath, tags, summary: 'Read an entity',
      params: entityKey,
      responses: { 200: { description: 'the entity', schema: entityView } },
    },
    async (req, res) => {
      const { type, id } = key(req);
      const entity = await ctx.store.entities.get(type, id);
      if (!entity) throw errors.notFound(`no entity ${type}:${id}`);
      res.json(entityJson(entity));
    },
  );

  adminRoute(
    router,
    {
      method: 'delete', path: '/entities/{type}/{id}', expressPath: keyPath, tags, summary: 'Delete an entity',
      params: entityKey,
      responses: { 204: 'deleted' },
    },
    async (req, res) => {
      const { type, id } = key(req);
      await deleteEntity(ctx, type, id);
      res.status(204).end();
    },
  );
}
