import type { Router } from 'express';
import type { AppContext } from '../context.js';
import { errors } from '../errors.js';
import type { Role } from '../store/roles.js';
import type { Recorder } from './audit.js';
import { onDuplicate } from './conflict.js';
import { adminRoute, param, parseWith } from './route.js';
import { listOf, roleCreate, roleName, rolePut, roleView } from './schemas.js';
import { iso } from '../clock.js';

export const roleJson = (r: Role) => ({ name: r.name, permissions: r.permissions, created_at: iso(r.created_at), updated_at: iso(r.updated_at) });

const dedupe = (ps: string[]) => [...new Set(ps)];

/** Agents take their permissions from roles: every role change moves the `agents` counter. */
export function createRole(ctx: AppContext, name: string, permissions: string[], record?: Recorder<Role>): Promise<Role> {
  return onDuplicate(`a role named ${name} exists`, () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.roles.get(name)) throw errors.conflict(`a role named ${name} exists`);
      const role = await tx.roles.create(name, dedupe(permissions));
      await tx.settings.bump('agents');
      await record?.(tx, role);
      return role;
    }),
  );
}

export function putRole(ctx: AppContext, name: string, permissions: string[], record?: Recorder<Role>): Promise<{ role: Role; created: boolean }> {
  return ctx.store.transaction(async (tx) => {
    const created = !(await tx.roles.get(name));
    const role = await tx.roles.put(name, dedupe(permissions));
    await tx.settings.bump('agents');
    await record?.(tx, role);
    return { role, created };
  });
}

export async function deleteRole(ctx: AppContext, name: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    if (!(await tx.roles.delete(name))) throw errors.notFound(`no role ${name}`);
    await tx.settings.bump('agents');
    await record?.(tx);
  });
}

export function roleRoutes(router: Router, ctx: AppContext): void {
  const tags = ['roles'];

  adminRoute(
    router,
    {
      method: 'post', path: '/roles', tags, summary: 'Create a role',
      request: roleCreate,
      responses: { 201: { description: 'the role', schema: roleView }, 409: 'the name is taken' },
    },
    async (req, res) => {
      const body = parseWith(roleCreate, req.body);
      res.status(201).json(roleJson(await createRole(ctx, body.name, body.permissions)));
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/roles', tags, summary: 'List the roles', responses: { 200: { description: 'the roles', schema: listOf(roleView) } } },
    async (_req, res) => void res.json({ data: (await ctx.store.roles.list()).map(roleJson) }),
  );

  adminRoute(
    router,
    { method: 'get', path: '/roles/{name}', tags, summary: 'Read a role', responses: { 200: { description: 'the role', schema: roleView } } },
    async (req, res) => {
      const name = param(req, 'name');
      const role = await ctx.store.roles.get(name);
      if (!role) throw errors.notFound(`no role ${name}`);
      res.json(roleJson(role));
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/roles/{name}', tags, summary: "Set a role's permissions (creates it when absent)",
      request: rolePut,
      responses: { 200: { description: 'the role', schema: roleView } },
    },
    async (req, res) => {
      const name = parseWith(roleName, param(req, 'name'), 'name');
      const body = parseWith(rolePut, req.body);
      if (body.name !== undefined && body.name !== name) {
        throw errors.invalidRequest('name: differs from the name in the path (a role cannot be renamed)', {
          issues: [{ path: 'name', message: 'differs from the name in the path (a role cannot be renamed)', code: 'custom' }],
        });
      }
      res.json(roleJson((await putRole(ctx, name, body.permissions)).role));
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/roles/{name}', tags, summary: 'Delete a role', responses: { 204: 'deleted' } },
    async (req, res) => {
      await deleteRole(ctx, param(req, 'name'));
      res.status(204).end();
    },
  );
}
