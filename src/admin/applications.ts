import type { Router } from 'express';
import type { AppContext } from '../context.js';
import type { Store } from '../store/index.js';
import { randomToken, sha256 } from '../crypto/hash.js';
import { errors } from '../errors.js';
import type { Application, ApplicationType, AuthzenGrantTerms } from '../store/applications.js';
import { accessApiUrl } from '../authzen/metadata.js';
import { builtInApplicationProblem, CONSOLE_CLIENT_ID } from '../oauth/built-in-applications.js';
import type { Recorder } from './audit.js';
import { onDuplicate, onStillReferenced } from './conflict.js';
import { adminRoute, bodyOrEmpty, param, parseWith } from './route.js';
import {
  applicationCreate,
  applicationCreated,
  applicationPatch,
  applicationView,
  grantBody,
  listOf,
  type ApplicationCreate,
  type ApplicationPatch,
} from './schemas.js';
import { iso } from '../clock.js';

const CONFIDENTIAL_BY_DEFAULT: Record<ApplicationType, boolean> = { web: true, m2m: true, api: true, spa: false, native: false };
const REFRESH_BY_DEFAULT: Record<ApplicationType, boolean> = { web: true, spa: true, native: true, m2m: false, api: false };

export async function applicationJson(ctx: AppContext, app: Application) {
  return {
    client_id: app.client_id,
    name: app.name,
    type: app.type,
    redirect_uris: app.redirect_uris,
    post_logout_redirect_uris: app.post_logout_redirect_uris,
    confidential: app.confidential,
    refresh_tokens: app.refresh_tokens,
    first_party: app.first_party,
    dpop_bound_access_tokens: app.dpop_bound_access_tokens,
    has_secret: app.has_secret,
    require_pushed_authorization_requests: app.require_pushed_authorization_requests,
    grants: await ctx.store.applications.listGrants(app.client_id),
    assignments: await ctx.store.applications.listAssignments(app.client_id),
    id_jag_audiences: await ctx.store.idJag.audiences(app.client_id),
    created_at: iso(app.created_at),
    updated_at: iso(app.updated_at),
  };
}

async function mustGet(store: Store, clientId: string): Promise<Application> {
  const app = await store.applications.get(clientId);
  if (!app) throw errors.notFound(`no application ${clientId}`);
  return app;
}

/** A field-named 400 for rules that span fields (the shape alone cannot say). */
const fieldError = (path: string, message: string) =>
  errors.invalidRequest(`${path}: ${message}`, { issues: [{ path, message, code: 'custom' }] });

function checkConsistency(type: ApplicationType, confidential: boolean, secretGiven: boolean): void {
  if (type === 'm2m' && !confidential) throw fieldError('confidential', 'an m2m application authenticates with a secret: it must be confidential');
  if (!confidential && secretGiven) throw fieldError('client_secret', 'a public (not confidential) application has no secret');
}

/** Creates an application; the secret (generated when confidential and not given) is returned this once. */
export async function createApplication(ctx: AppContext, input: ApplicationCreate, record?: Recorder<Application>): Promise<{ app: Application; client_secret?: string }> {
  const confidential = input.confidential ?? CONFIDENTIAL_BY_DEFAULT[input.type];
  checkConsistency(input.type, confidential, input.client_secret !== undefined);
  const clientId = input.client_id ?? randomToken(16);
  const secret = confidential ? (input.client_secret ?? randomToken()) : undefined;
  const app = await onDuplicate(`an application with client_id ${clientId} exists`, () =>
    ctx.store.transaction(async (tx) => {
      if (await tx.applications.get(clientId)) throw errors.conflict(`an application with client_id ${clientId} exists`);
      const created = await tx.applications.create({
        client_id: clientId,
        name: input.name,
        type: input.type,
        redirect_uris: input.redirect_uris,
        post_logout_redirect_uris: input.post_logout_redirect_uris,
        confidential,
        secret_hash: secret ? sha256(secret) : null,
        refresh_tokens: input.refresh_tokens ?? REFRESH_BY_DEFAULT[input.type],
        first_party: input.first_party,
        require_pushed_authorization_requests: input.require_pushed_authorization_requests,
        dpop_bound_access_tokens: input.dpop_bound_access_tokens ?? false,
      });
      if (input.id_jag_audiences?.length) await tx.idJag.setAudiences(clientId, input.id_jag_audiences.map((a) => ({ audience: a.audience, client_id: a.client_id ?? null })));
      await tx.settings.bump('applications');
      await record?.(tx, created);
      return created;
    }),
  );
  return { app, ...(secret ? { client_secret: secret } : {}) };
}

/** Changes the fields given; `rotate_secret` (or a public → confidential change) makes a new secret, returned once. */
export function updateApplication(ctx: AppContext, clientId: string, patch: ApplicationPatch, record?: Recorder<Application>): Promise<{ app: Application; client_secret?: string }> {
  return ctx.store.transaction(async (tx) => {
    const cur = await mustGet(tx, clientId);
    if (patch.type !== undefined && patch.type !== cur.type) throw fieldError('type', 'the type of an application cannot change; create a new one');
    const confidential = patch.confidential ?? cur.confidential;
    checkConsistency(cur.type, confidential, patch.client_secret !== undefined);
    if (patch.rotate_secret && !confidential) throw fieldError('rotate_secret', 'a public application has no secret');
    const next = {
      client_id: clientId,
      name: patch.name ?? cur.name,
      type: cur.type,
      redirect_uris: patch.redirect_uris ?? cur.redirect_uris,
      post_logout_redirect_uris: patch.post_logout_redirect_uris ?? cur.post_logout_redirect_uris,
      confidential,
      refresh_tokens: patch.refresh_tokens ?? cur.refresh_tokens,
      first_party: patch.first_party ?? cur.first_party,
      require_pushed_authorization_requests: patch.require_pushed_authorization_requests ?? cur.require_pushed_authorization_requests,
      dpop_bound_access_tokens: patch.dpop_bound_access_tokens ?? cur.dpop_bound_access_tokens,
    };
    const builtIn = builtInApplicationProblem(ctx, clientId, next);
    if (builtIn) throw fieldError(builtIn.path, builtIn.message);
    const app = (await tx.applications.update(next))!;
    if (patch.id_jag_audiences !== undefined) {
      await tx.idJag.setAudiences(clientId, patch.id_jag_audiences.map((a) => ({ audience: a.audience, client_id: a.client_id ?? null })));
    }
    let secret: string | undefined;
    if (!confidential) {
      if (cur.has_secret) await tx.applications.setSecretHash(clientId, null);
    } else if (patch.client_secret !== undefined || patch.rotate_secret || !cur.has_secret) {
      secret = patch.client_secret ?? randomToken();
      await tx.applications.setSecretHash(clientId, sha256(secret));
    }
    await tx.settings.bump('applications');
    const saved = (await tx.applications.get(app.client_id))!;
    await record?.(tx, saved);
    return { app: saved, ...(secret && patch.client_secret === undefined ? { client_secret: secret } : {}) };
  });
}

/** The AuthZEN terms of a grant body, when it gives any (a grant on another API may not). */
export function authzenTermsOf(body: AuthzenGrantTerms): AuthzenGrantTerms | undefined {
  const terms: AuthzenGrantTerms = {};
  if (body.enforcement_point_for !== undefined) terms.enforcement_point_for = body.enforcement_point_for;
  if (body.search_subject_types !== undefined) terms.search_subject_types = body.search_subject_types;
  if (body.search_resource_types !== undefined) terms.search_resource_types = body.search_resource_types;
  return Object.keys(terms).length ? terms : undefined;
}

export async function putGrant(ctx: AppContext, clientId: string, apiClientId: string, scopes: string[], authzen?: AuthzenGrantTerms): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const app = await mustGet(tx, clientId);
    if (app.type !== 'm2m') throw fieldError('client_id', `only an m2m application holds grants; ${clientId} is ${app.type}`);
    const api = await tx.applications.get(apiClientId);
    if (!api) throw fieldError('api_client_id', `no application ${apiClientId}`);
    if (api.type !== 'api') throw fieldError('api_client_id', `a grant is on an application of type api; ${apiClientId} is ${api.type}`);
    if (authzen && apiClientId !== accessApiUrl(ctx)) {
      throw fieldError(Object.keys(authzen)[0]!, `AuthZEN terms belong on a grant on the AuthZEN API (${accessApiUrl(ctx)})`);
    }
    await tx.applications.putGrant(clientId, apiClientId, scopes, authzen);
    await tx.settings.bump('applications');
  });
}

/** Deletes an application with its grants, assignments and tokens. The console's own application stays. */
export async function deleteApplication(ctx: AppContext, clientId: string, record?: Recorder): Promise<void> {
  if (clientId === CONSOLE_CLIENT_ID) throw errors.conflict('the console application is built in and cannot be deleted');
  await onStillReferenced(`application ${clientId} still has records that refer to it`, () =>
    ctx.store.transaction(async (tx) => {
      if (!(await tx.applications.delete(clientId))) throw errors.notFound(`no application ${clientId}`);
      await tx.settings.bump('applications');
      await record?.(tx);
    }),
  );
}

export async function unassignUser(ctx: AppContext, clientId: string, userId: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await mustGet(tx, clientId);
    if (!(await tx.applications.unassign(clientId, userId))) throw errors.notFound(`${userId} is not assigned to ${clientId}`);
    await record?.(tx);
  });
}

export async function assignUser(ctx: AppContext, clientId: string, userId: string, record?: Recorder): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await mustGet(tx, clientId);
    if (!(await tx.users.get(userId))) throw errors.notFound(`no user ${userId}`);
    await tx.applications.assign(clientId, userId);
    await record?.(tx);
  });
}

export function applicationRoutes(router: Router, ctx: AppContext): void {
  const tags = ['applications'];

  adminRoute(
    router,
    {
      method: 'post', path: '/applications', tags, summary: 'Create an application',
      request: applicationCreate,
      responses: { 201: { description: 'the application, with its secret this once', schema: applicationCreated }, 409: 'the client_id is taken' },
    },
    async (req, res) => {
      const { app, client_secret } = await createApplication(ctx, parseWith(applicationCreate, req.body));
      res.status(201).json({ ...(await applicationJson(ctx, app)), ...(client_secret ? { client_secret } : {}) });
    },
  );

  adminRoute(
    router,
    { method: 'get', path: '/applications', tags, summary: 'List the applications', responses: { 200: { description: 'the applications', schema: listOf(applicationView) } } },
    async (_req, res) => void res.json({ data: await Promise.all((await ctx.store.applications.list()).map((a) => applicationJson(ctx, a))) }),
  );

  adminRoute(
    router,
    { method: 'get', path: '/applications/{client_id}', tags, summary: 'Read an application', responses: { 200: { description: 'the application (never its secret)', schema: applicationView } } },
    async (req, res) => void res.json(await applicationJson(ctx, await mustGet(ctx.store, param(req, 'client_id')))),
  );

  adminRoute(
    router,
    {
      method: 'patch', path: '/applications/{client_id}', tags, summary: 'Change an application',
      request: applicationPatch,
      responses: { 200: { description: 'the application; `client_secret` only when a new one was generated', schema: applicationCreated } },
    },
    async (req, res) => {
      const patch = parseWith(applicationPatch, req.body);
      const { app, client_secret } = await updateApplication(ctx, param(req, 'client_id'), patch);
      res.json({ ...(await applicationJson(ctx, app)), ...(client_secret ? { client_secret } : {}) });
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/applications/{client_id}', tags, summary: 'Delete an application (its grants, assignments and tokens go with it)', responses: { 204: 'deleted' } },
    async (req, res) => {
      await deleteApplication(ctx, param(req, 'client_id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    {
      method: 'put', path: '/applications/{client_id}/grants/{api_client_id}', tags, summary: "Grant an m2m application access to an API",
      request: grantBody,
      responses: { 204: 'granted', 400: 'not an m2m application, or the target is not an API' },
    },
    async (req, res) => {
      const body = parseWith(grantBody, bodyOrEmpty(req));
      await putGrant(ctx, param(req, 'client_id'), param(req, 'api_client_id'), body.scopes, authzenTermsOf(body));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/applications/{client_id}/grants/{api_client_id}', tags, summary: 'Remove a grant', responses: { 204: 'removed' } },
    async (req, res) => {
      const clientId = param(req, 'client_id');
      const apiClientId = param(req, 'api_client_id');
      await ctx.store.transaction(async (tx) => {
        await mustGet(tx, clientId);
        if (!(await tx.applications.deleteGrant(clientId, apiClientId))) throw errors.notFound(`${clientId} holds no grant on ${apiClientId}`);
        await tx.settings.bump('applications');
      });
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'put', path: '/applications/{client_id}/assignments/{user_id}', tags, summary: 'Assign a person to an application', responses: { 204: 'assigned' } },
    async (req, res) => {
      await assignUser(ctx, param(req, 'client_id'), param(req, 'user_id'));
      res.status(204).end();
    },
  );

  adminRoute(
    router,
    { method: 'delete', path: '/applications/{client_id}/assignments/{user_id}', tags, summary: 'Unassign a person', responses: { 204: 'unassigned' } },
    async (req, res) => {
      await unassignUser(ctx, param(req, 'client_id'), param(req, 'user_id'));
      res.status(204).end();
    },
  );
}
