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
import { audited } from '../audit.js';
import { CONSOLE_CLIENT_ID } from '../../oauth/built-in-applications.js';
import { emptyForm, lines, ticked, type FormState, type Values } from '../forms.js';
import {
  badge,
  button,
  checkbox,
  code,
  dangerForm,
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
import { type DetailAction, detailActions, type DetailPage, existing, formPost, pathParam, personOf, render, renderList, stateForm, type StateKey } from './common.js';

type AppView = Awaited<ReturnType<typeof applicationJson>>;

const TRI = [
  ['', 'the default for the type'],
  ['yes', 'yes'],
  ['no', 'no'],
] as const;
const tri = (v: string | undefined) => (v === 'yes' ? true : v === 'no' ? false : undefined);

function createForm(res: Response, f: FormState): Html {
  const v = f.values;
  return stateForm(
    '/console/applications',
    personOf(res),
    f,
    (at) => `<div class="grid">
${input({ ...at('name'), label: 'Name', required: true })}
${select({ ...at('type'), label: 'Type', value: v.type ?? 'web', options: APPLICATION_TYPES.map((t) => [t, t] as const) })}
</div>
${textarea({ ...at('redirect_uris'), label: 'Redirect URIs', hint: 'One per line: absolute URLs without a fragment.', rows: 2, mono: true })}
${textarea({ ...at('post_logout_redirect_uris'), label: 'Post-logout redirect URIs', hint: 'One per line (optional).', rows: 2, mono: true })}
<div class="grid">
${select({ ...at('confidential'), label: 'Confidential (has a secret)', value: v.confidential ?? '', options: TRI })}
${select({ ...at('refresh_tokens'), label: 'Refresh tokens', value: v.refresh_tokens ?? '', options: TRI })}
</div>
${checkbox({ ...at('first_party'), label: 'First party (no consent screen)', checked: v.first_party === undefined ? true : ticked(v, 'first_party') })}
${checkbox({ ...at('require_pushed_authorization_requests'), label: 'Pushed authorization requests only (PAR)', checked: ticked(v, 'require_pushed_authorization_requests') })}
${checkbox({ ...at('dpop_bound_access_tokens'), label: 'DPoP-bound tokens only (no token without a DPoP proof)', checked: ticked(v, 'dpop_bound_access_tokens') })}
${button('Create application')}`,
  );
}

async function listPage(ctx: AppContext, req: Request, res: Response, f: FormState = emptyForm()): Promise<void> {
  const apps = await Promise.all((await ctx.store.applications.list()).map((a) => applicationJson(ctx, a)));
  renderList(ctx, req, res, f.status, {
    title: 'Applications',
    section: 'applications',
    lead: 'The project’s applications: where people sign in, and the services that get tokens.',
    headers: ['Name', 'Client ID', 'Type', 'Secret', 'Redirect URIs', 'Assigned people'],
    rows: apps.map((a) => [
      `${link(`/console/applications/${seg(a.client_id)}`, a.name)}${a.client_id === CONSOLE_CLIENT_ID ? ` ${badge('built in')}` : ''}`,
      code(a.client_id),
      e(a.type),
      a.has_secret ? badge('secret', 'ok') : badge('public'),
      String(a.redirect_uris.length),
      String(a.assignments.length),
    ]),
    empty: 'No applications yet.',
    create: { summary: 'Create an application', form: createForm(res, f), open: apps.length <= 1 },
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

const detailPage: DetailPage<DetailForms> = async (ctx, req, res, id, forms = {}, status = 200) => {
  const app = await applicationJson(ctx, await existing(ctx.store.applications.get(id), `no application ${id}`));
  const person = personOf(res);
  const builtIn = app.client_id === CONSOLE_CLIENT_ID;
  const base = `/console/applications/${seg(app.client_id)}`;
  const edit = forms.edit ?? emptyForm({
    name: app.name,
    redirect_uris: app.redirect_uris.join('\n'),
    post_logout_redirect_uris: app.post_logout_redirect_uris.join('\n'),
    id_jag_audiences: app.id_jag_audiences.map((a) => (a.client_id ? `${a.audience} ${a.client_id}` : a.audience)).join('\n'),
    ...(app.refresh_tokens ? { refresh_tokens: 'on' } : {}),
    ...(app.first_party ? { first_party: 'on' } : {}),
    ...(app.require_pushed_authorization_requests ? { require_pushed_authorization_requests: 'on' } : {}),
    ...(app.dpop_bound_access_tokens ? { dpop_bound_access_tokens: 'on' } : {}),
  });
  const ev = edit.values;
  const editForm = stateForm(
    base,
    person,
    edit,
    (at) => `${input({ ...at('name'), label: 'Name', required: true })}
${builtIn ? '' : `${textarea({ ...at('redirect_uris'), label: 'Redirect URIs', hint: 'One per line.', rows: 3, mono: true })}
${textarea({ ...at('post_logout_redirect_uris'), label: 'Post-logout redirect URIs', hint: 'One per line.', rows: 2, mono: true })}
${textarea({ ...at('id_jag_audiences'), label: 'ID-JAG audiences', hint: 'Authorization servers this application may ask an ID-JAG for, one issuer per line; after a space, its client ID there when not the same.', rows: 2, mono: true })}
${checkbox({ ...at('refresh_tokens'), label: 'Refresh tokens', checked: ticked(ev, 'refresh_tokens') })}
${checkbox({ ...at('first_party'), label: 'First party (no consent screen)', checked: ticked(ev, 'first_party') })}
${checkbox({ ...at('require_pushed_authorization_requests'), label: 'Pushed authorization requests only (PAR)', checked: ticked(ev, 'require_pushed_authorization_requests') })}
${checkbox({ ...at('dpop_bound_access_tokens'), label: 'DPoP-bound tokens only (no token without a DPoP proof)', checked: ticked(ev, 'dpop_bound_access_tokens') })}`}
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
  const assignForm = stateForm(
    `${base}/assign`,
    person,
    assign,
    (at) => `${input({ ...at('person'), id: 'assign-person', label: 'Person (email or id)', required: true })}
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
};

/** `issuer [client_id]` per line: the ID-JAG audiences of an application. */
const idJagAudienceLines = (text: string | undefined) =>
  lines(text).map((l) => {
    const [audience, clientId] = l.split(/\s+/);
    return { audience: audience!, ...(clientId ? { client_id: clientId } : {}) };
  });

const appInput = (v: Values) => ({
  name: v.name,
  type: v.type,
  redirect_uris: lines(v.redirect_uris),
  post_logout_redirect_uris: lines(v.post_logout_redirect_uris),
  ...(tri(v.confidential) !== undefined ? { confidential: tri(v.confidential) } : {}),
  ...(tri(v.refresh_tokens) !== undefined ? { refresh_tokens: tri(v.refresh_tokens) } : {}),
  first_party: ticked(v, 'first_party'),
  require_pushed_authorization_requests: ticked(v, 'require_pushed_authorization_requests'),
  dpop_bound_access_tokens: ticked(v, 'dpop_bound_access_tokens'),
});

/** The application and the person of an assignment, read from a form of one's page (`id` is that one). */
type Pair = (id: string, v: Values, verb: 'assign' | 'unassign') => Promise<{ clientId: string; userId: string }>;

/** Assigning a person to an application and unassigning them, from either one's page. */
export function assignmentActions<F>(ctx: AppContext, action: DetailAction<F>, refusedIn: StateKey<NonNullable<F>>, pair: Pair, oneList: boolean): void {
  for (const verb of ['assign', 'unassign'] as const) {
    action(
      `/${verb}`,
      async ({ id, v, audit }) => {
        const { clientId, userId } = await pair(id, v, verb);
        const record = audit(() => ({ action: `applications.${verb}`, target: `application:${clientId}`, details: { user_id: userId }, about: { user_id: userId } }));
        await (verb === 'assign' ? assignUser : unassignUser)(ctx, clientId, userId, record);
        return verb === 'assign' ? 'Assigned.' : 'Unassigned.';
      },
      refusedIn,
      { oneList: oneList || verb === 'unassign' },
    );
  }
}

/** The person named in the assign form, by email or id (else a refusal naming the field). */
async function personNamed(ctx: AppContext, who: string): Promise<string> {
  const user = (await ctx.store.users.getByEmail(who)) ?? (await ctx.store.users.get(who));
  if (!user) throw errors.invalidRequest('person: no one has this email or id', { issues: [{ path: 'person', message: 'no one has this email or id', code: 'custom' }] });
  return user.id;
}

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
  const action = detailActions(router, ctx, 'applications', detailPage);

  action(
    '',
    async ({ id, v, audit }) => {
      const patch =
        id === CONSOLE_CLIENT_ID
          ? { name: v.name }
          : {
              name: v.name,
              redirect_uris: lines(v.redirect_uris),
              post_logout_redirect_uris: lines(v.post_logout_redirect_uris),
              id_jag_audiences: idJagAudienceLines(v.id_jag_audiences),
              refresh_tokens: ticked(v, 'refresh_tokens'),
              first_party: ticked(v, 'first_party'),
              require_pushed_authorization_requests: ticked(v, 'require_pushed_authorization_requests'),
              dpop_bound_access_tokens: ticked(v, 'dpop_bound_access_tokens'),
            };
      const { app } = await updateApplication(ctx, id, parseWith(applicationPatch, patch), audit(() => ({ action: 'applications.update', target: `application:${id}`, details: patch })));
      return `Application ${app.name} saved.`;
    },
    'edit',
  );

  action(
    '/rotate-secret',
    async ({ id, req, res, audit }) => {
      const { app, client_secret } = await updateApplication(ctx, id, { rotate_secret: true }, audit(() => ({ action: 'applications.rotate_secret', target: `application:${id}` })));
      if (!client_secret) throw errors.conflict('no new secret was made');
      secretPage(ctx, req, res, await applicationJson(ctx, app), client_secret, 'The secret was replaced.');
    },
    'edit',
    { oneList: true },
  );

  assignmentActions(ctx, action, 'assign', async (id, v, verb) => ({ clientId: id, userId: verb === 'assign' ? await personNamed(ctx, (v.person ?? '').trim()) : (v.user_id ?? '') }), false);

  action(
    '/delete',
    async ({ id, audit }) => {
      await deleteApplication(ctx, id, audit(() => ({ action: 'applications.delete', target: `application:${id}` })));
      return { message: `Application ${id} deleted.`, to: '/console/applications' };
    },
    'danger',
    { confirm: true, oneList: true },
  );
}
