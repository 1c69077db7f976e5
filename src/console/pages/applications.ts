import type { Request, Response, Router } from 'express';
import {
  applicationJson,
  assignUser,
  createApplication,
  deleteApplication,
  unassignUser,
  updateApplication,
} from '../../admin/applications.js';
import { parseWith } from '../../admin/route.js';
import { APPLICATION_TYPES, applicationCreate, applicationPatch } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { audited, type Change } from '../audit.js';
import { CONSOLE_CLIENT_ID } from '../built-in.js';
import { emptyForm, lines, ticked, type FormState, type Values } from '../forms.js';
import {
  badge,
  button,
  checkbox,
  code,
  dangerForm,
  details,
  errorList,
  escapeHtml as e,
  hidden,
  input,
  link,
  notice,
  postForm,
  section,
  seg,
  select,
  table,
  textarea,
  when,
  type Html,
} from '../html.js';
import { againOn, asOneList, formPost, pathParam, personOf, render } from './common.js';

type AppView = Awaited<ReturnType<typeof applicationJson>>;

const TRI = [
  ['', 'the default for the type'],
  ['yes', 'yes'],
  ['no', 'no'],
] as const;
const tri = (v: string | undefined) => (v === 'yes' ? true : v === 'no' ? false : undefined);

async function mustGet(ctx: AppContext, id: string): Promise<AppView> {
  const app = await ctx.store.applications.get(id);
  if (!app) throw errors.notFound(`no application ${id}`);
  return applicationJson(ctx, app);
}

function createForm(res: Response, f: FormState): Html {
  const v = f.values;
  const err = (k: string) => f.errors[k];
  return postForm(
    '/console/applications',
    personOf(res),
    `${errorList(f.general)}
<div class="grid">
${input({ name: 'name', label: 'Name', value: v.name, required: true, errors: err('name') })}
${select({ name: 'type', label: 'Type', value: v.type ?? 'web', options: APPLICATION_TYPES.map((t) => [t, t] as const), errors: err('type') })}
</div>
${textarea({ name: 'redirect_uris', label: 'Redirect URIs', hint: 'One per line: absolute URLs without a fragment.', value: v.redirect_uris, rows: 2, errors: err('redirect_uris'), mono: true })}
${textarea({ name: 'post_logout_redirect_uris', label: 'Post-logout redirect URIs', hint: 'One per line (optional).', value: v.post_logout_redirect_uris, rows: 2, errors: err('post_logout_redirect_uris'), mono: true })}
<div class="grid">
${select({ name: 'confidential', label: 'Confidential (has a secret)', value: v.confidential ?? '', options: TRI, errors: err('confidential') })}
${select({ name: 'refresh_tokens', label: 'Refresh tokens', value: v.refresh_tokens ?? '', options: TRI, errors: err('refresh_tokens') })}
</div>
${checkbox({ name: 'first_party', label: 'First party (no consent screen)', checked: v.first_party === undefined ? true : ticked(v, 'first_party'), errors: err('first_party') })}
${button('Create application')}`,
  );
}

async function listPage(ctx: AppContext, req: Request, res: Response, f: FormState = emptyForm()): Promise<void> {
  const apps = await Promise.all((await ctx.store.applications.list()).map((a) => applicationJson(ctx, a)));
  const rows = apps.map((a) => [
    `${link(`/console/applications/${seg(a.client_id)}`, a.name)}${a.client_id === CONSOLE_CLIENT_ID ? ` ${badge('built in')}` : ''}`,
    code(a.client_id),
    e(a.type),
    a.has_secret ? badge('secret', 'ok') : badge('public'),
    String(a.redirect_uris.length),
    String(a.assignments.length),
  ]);
  render(ctx, req, res, f.status, {
    title: 'Applications',
    section: 'applications',
    lead: 'The project’s applications: where people sign in, and the services that get tokens.',
    body: `${table(['Name', 'Client ID', 'Type', 'Secret', 'Redirect URIs', 'Assigned people'], rows, { empty: 'No applications yet.' })}
${details('Create an application', createForm(res, f), f.status !== 200 || apps.length <= 1, 'create')}`,
  });
}

function secretPage(ctx: AppContext, req: Request, res: Response, app: AppView, secret: string, what: string): void {
  render(ctx, req, res, 200, {
    title: app.name,
    section: 'applications',
    body: `${notice(`${what} Copy the client secret now: it is shown this once and stored only as a hash.`, 'ok')}
<dl class="facts"><dt>Client ID</dt><dd>${code(app.client_id)}</dd>
<dt>Client secret</dt><dd><code class="secret" id="client-secret">${e(secret)}</code> <button type="button" class="btn plain" data-copy="client-secret" hidden>Copy</button></dd></dl>
<p>${link(`/console/applications/${seg(app.client_id)}`, 'Continue to the application')}</p>`,
  });
}

interface DetailForms {
  edit?: FormState;
  assign?: FormState;
  danger?: FormState;
}

async function detailPage(ctx: AppContext, req: Request, res: Response, id: string, forms: DetailForms = {}, status = 200): Promise<void> {
  const app = await mustGet(ctx, id);
  const person = personOf(res);
  const builtIn = app.client_id === CONSOLE_CLIENT_ID;
  const base = `/console/applications/${seg(app.client_id)}`;
  const edit = forms.edit ?? emptyForm({
    name: app.name,
    redirect_uris: app.redirect_uris.join('\n'),
    post_logout_redirect_uris: app.post_logout_redirect_uris.join('\n'),
    ...(app.refresh_tokens ? { refresh_tokens: 'on' } : {}),
    ...(app.first_party ? { first_party: 'on' } : {}),
  });
  const ev = edit.values;
  const editForm = postForm(
    base,
    person,
    `${errorList(edit.general)}
${input({ name: 'name', label: 'Name', value: ev.name, required: true, errors: edit.errors.name })}
${builtIn ? '' : `${textarea({ name: 'redirect_uris', label: 'Redirect URIs', hint: 'One per line.', value: ev.redirect_uris, rows: 3, errors: edit.errors.redirect_uris, mono: true })}
${textarea({ name: 'post_logout_redirect_uris', label: 'Post-logout redirect URIs', hint: 'One per line.', value: ev.post_logout_redirect_uris, rows: 2, errors: edit.errors.post_logout_redirect_uris, mono: true })}
${checkbox({ name: 'refresh_tokens', label: 'Refresh tokens', checked: ticked(ev, 'refresh_tokens'), errors: edit.errors.refresh_tokens })}
${checkbox({ name: 'first_party', label: 'First party (no consent screen)', checked: ticked(ev, 'first_party'), errors: edit.errors.first_party })}`}
${button('Save changes')}`,
  );

  const users = await Promise.all(app.assignments.map(async (uid) => ({ id: uid, user: await ctx.store.users.get(uid) })));
  const assigned = table(
    ['Person', 'ID', ''],
    users.map(({ id: uid, user }) => [
      user ? link(`/console/people/${seg(uid)}`, user.email) : e(uid),
      code(uid),
      postForm(`${base}/unassign`, person, `${hidden('user_id', uid)}${button('Unassign', { kind: 'plain' })}`, { cls: 'inline' }),
    ]),
    { empty: builtIn ? 'No one is assigned; people holding the role admin are let in without an assignment.' : 'No one is assigned yet.' },
  );
  const assign = forms.assign ?? emptyForm();
  const assignForm = postForm(
    `${base}/assign`,
    person,
    `${errorList(assign.general)}${input({ name: 'person', id: 'assign-person', label: 'Person (email or id)', value: assign.values.person, required: true, errors: assign.errors.person })}
${button('Assign')}`,
    { cls: 'row' },
  );

  const facts = `<dl class="facts">
<dt>Client ID</dt><dd>${code(app.client_id)}</dd>
<dt>Type</dt><dd>${e(app.type)}</dd>
<dt>Secret</dt><dd>${app.has_secret ? 'yes (stored as a hash)' : 'none: a public application'}</dd>
<dt>Redirect URIs</dt><dd>${app.redirect_uris.map(code).join('<br>') || '—'}</dd>
<dt>Grants</dt><dd>${app.grants.map((g) => `${code(g.api_client_id)} ${e(g.scopes.join(' '))}`).join('<br>') || '—'}</dd>
<dt>Created</dt><dd>${when(app.created_at)}</dd><dt>Updated</dt><dd>${when(app.updated_at)}</dd>
</dl>`;
  const secretForm = app.has_secret
    ? section('Secret', postForm(`${base}/rotate-secret`, person, `<p>A new secret replaces the current one at once; it is shown once.</p>${button('Rotate the secret', { kind: 'plain' })}`, { confirm: 'Replace the secret now? The current one stops working.' }))
    : '';
  const danger = forms.danger ?? emptyForm();
  render(ctx, req, res, status, {
    title: app.name,
    section: 'applications',
    lead: builtIn ? 'Gatehouse’s own console. It is built in: only its name may change, and it cannot be deleted.' : `${e(app.type)} application`,
    body: `${facts}
${section('Settings', editForm)}
${secretForm}
${section('Assigned people', `${assigned}${assignForm}`)}
${builtIn ? '' : section('Delete', `${errorList(danger.general)}${dangerForm(`${base}/delete`, person, 'Delete application', 'Yes, delete this application, its grants, assignments and tokens', 'delete-app')}`, { cls: 'danger' })}`,
  });
}

const appInput = (v: Values) => ({
  name: v.name,
  type: v.type,
  redirect_uris: lines(v.redirect_uris),
  post_logout_redirect_uris: lines(v.post_logout_redirect_uris),
  ...(tri(v.confidential) !== undefined ? { confidential: tri(v.confidential) } : {}),
  ...(tri(v.refresh_tokens) !== undefined ? { refresh_tokens: tri(v.refresh_tokens) } : {}),
  first_party: ticked(v, 'first_party'),
});

/** The record of a person assigned to (or unassigned from) an application, from either page. */
export const assignment = (verb: 'assign' | 'unassign', clientId: string, userId: string): Change => ({
  action: `applications.${verb}`,
  target: `application:${clientId}`,
  details: { user_id: userId },
  about: { user_id: userId },
});

export function applicationPages(router: Router, ctx: AppContext): void {
  router.get('/applications', (req, res) => listPage(ctx, req, res));

  formPost(
    router, ctx, '/applications',
    async (req, res, v) => {
      const { app, client_secret } = await createApplication(
        ctx,
        parseWith(applicationCreate, appInput(v)),
        audited(ctx, personOf(res), (a) => ({ action: 'applications.create', target: `application:${a.client_id}`, details: { name: a.name, type: a.type, redirect_uris: a.redirect_uris } })),
      );
      const view = await applicationJson(ctx, app);
      if (client_secret) return secretPage(ctx, req, res, view, client_secret, `Application ${app.name} created.`);
      return { message: `Application ${app.name} created.`, to: `/console/applications/${seg(app.client_id)}` };
    },
    (req, res, refused) => listPage(ctx, req, res, refused),
  );

  router.get('/applications/:id', (req, res) => detailPage(ctx, req, res, pathParam(req, 'id')));

  const page = (req: Request) => `/console/applications/${seg(pathParam(req, 'id'))}`;
  const again = againOn(ctx, detailPage);

  formPost(
    router, ctx, '/applications/:id',
    async (req, res, v) => {
      const id = pathParam(req, 'id');
      const patch =
        id === CONSOLE_CLIENT_ID
          ? { name: v.name }
          : {
              name: v.name,
              redirect_uris: lines(v.redirect_uris),
              post_logout_redirect_uris: lines(v.post_logout_redirect_uris),
              refresh_tokens: ticked(v, 'refresh_tokens'),
              first_party: ticked(v, 'first_party'),
            };
      const { app } = await updateApplication(ctx, id, parseWith(applicationPatch, patch), audited(ctx, personOf(res), () => ({ action: 'applications.update', target: `application:${id}`, details: patch })));
      return { message: `Application ${app.name} saved.`, to: page(req) };
    },
    again((edit) => ({ edit })),
  );

  formPost(
    router, ctx, '/applications/:id/rotate-secret',
    async (req, res) => {
      const id = pathParam(req, 'id');
      const { app, client_secret } = await updateApplication(ctx, id, { rotate_secret: true }, audited(ctx, personOf(res), () => ({ action: 'applications.rotate_secret', target: `application:${id}` })));
      if (!client_secret) throw errors.conflict('no new secret was made');
      secretPage(ctx, req, res, await applicationJson(ctx, app), client_secret, 'The secret was replaced.');
    },
    again((edit) => ({ edit: asOneList(edit) })),
  );

  formPost(
    router, ctx, '/applications/:id/assign',
    async (req, res, v) => {
      const id = pathParam(req, 'id');
      const who = (v.person ?? '').trim();
      const user = (await ctx.store.users.getByEmail(who)) ?? (await ctx.store.users.get(who));
      if (!user) throw errors.invalidRequest('person: no one has this email or id', { issues: [{ path: 'person', message: 'no one has this email or id', code: 'custom' }] });
      await assignUser(ctx, id, user.id, audited(ctx, personOf(res), () => assignment('assign', id, user.id)));
      return { message: `${user.email} is assigned.`, to: page(req) };
    },
    again((assign) => ({ assign })),
  );

  formPost(
    router, ctx, '/applications/:id/unassign',
    async (req, res, v) => {
      const id = pathParam(req, 'id');
      const userId = v.user_id ?? '';
      await unassignUser(ctx, id, userId, audited(ctx, personOf(res), () => assignment('unassign', id, userId)));
      return { message: 'Unassigned.', to: page(req) };
    },
    again((assign) => ({ assign: asOneList(assign) })),
  );

  formPost(
    router, ctx, '/applications/:id/delete',
    async (req, res) => {
      const id = pathParam(req, 'id');
      await deleteApplication(ctx, id, audited(ctx, personOf(res), () => ({ action: 'applications.delete', target: `application:${id}` })));
      return { message: `Application ${id} deleted.`, to: '/console/applications' };
    },
    again((danger) => ({ danger: asOneList(danger) })),
    { confirm: true },
  );
}
