import type { Request, Response, Router } from 'express';
import { applicationJson } from '../../admin/applications.js';
import { parseWith } from '../../admin/route.js';
import { userCreate, userPatch } from '../../admin/schemas.js';
import { createUser, deleteUser, markCredentialCompromised, revokeSessions, updateUser, userJson } from '../../admin/users.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { audited, type Change } from '../audit.js';
import { CONSOLE_CLIENT_ID, CONSOLE_ROLE } from '../../oauth/built-in-applications.js';
import { emptyForm, jsonField, list, ticked, type FormState, type Values } from '../forms.js';
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
  postForm,
  section,
  seg,
  select,
  table,
  textarea,
  when,
  type Html,
} from '../html.js';
import { assignmentActions } from './applications.js';
import { detailActions, type DetailPage, existing, type FieldOf, formPost, pathParam, personOf, render, renderList, stateForm } from './common.js';
import { nowSeconds } from '../../clock.js';

const ATTRIBUTES_HINT = 'JSON object for rule conditions, such as {"department": "finance", "clearance": 3}. Empty: none.';
const PAGE = 50;
const attributesText = (a: Record<string, unknown>) => (Object.keys(a).length ? JSON.stringify(a, null, 2) : '');

async function roleNames(ctx: AppContext): Promise<string[]> {
  return [...new Set([CONSOLE_ROLE, ...(await ctx.store.roles.list()).map((r) => r.name)])].sort();
}

const roleList = (id: string, names: string[]): Html => `<datalist id="${e(id)}">${names.map((n) => `<option value="${e(n)}">`).join('')}</datalist>`;

/** The fields a person's create and edit forms share. */
const profileFields = (at: FieldOf, v: Values, rolesInput: Html, attributeRows: number): Html => `<div class="grid">
${input({ ...at('email'), label: 'Email', type: 'email', required: true, autocomplete: 'off' })}
${input({ ...at('name'), label: 'Name', required: true })}
</div>
${rolesInput}
${input({ ...at('groups'), label: 'Groups', hint: 'Comma-separated.' })}
${textarea({ ...at('attributes'), label: 'Attributes', hint: ATTRIBUTES_HINT, rows: attributeRows, mono: true })}
${checkbox({ name: 'email_verified', label: 'Email verified', checked: ticked(v, 'email_verified') })}`;

const rolesField = (at: FieldOf): Html => input({ ...at('roles'), label: 'Roles', hint: `Comma-separated; ${CONSOLE_ROLE} opens the console.`, extra: ' list="known-roles"' });

function createForm(res: Response, f: FormState, roles: string[]): Html {
  return stateForm(
    '/console/people',
    personOf(res),
    f,
    (at) => `${profileFields(
      at,
      f.values,
      `<div class="grid">
${input({ ...at('password'), value: '', label: 'Password', type: 'password', required: true, autocomplete: 'new-password' })}
${rolesField(at)}
</div>`,
      2,
    )}
${roleList('known-roles', roles)}
${button('Create person')}`,
  );
}

async function listPage(ctx: AppContext, req: Request, res: Response, f: FormState = emptyForm()): Promise<void> {
  const q = req.query as Record<string, unknown>;
  const email = typeof q.email === 'string' ? q.email.trim() : '';
  const offset = typeof q.offset === 'string' && /^\d{1,7}$/.test(q.offset) ? Number(q.offset) : 0;
  let people;
  let more = false;
  if (email) {
    const u = await ctx.store.users.getByEmail(email);
    people = u ? [u] : [];
  } else {
    const page = await ctx.store.users.list(PAGE + 1, offset);
    more = page.length > PAGE;
    people = page.slice(0, PAGE);
  }
  const rows = people.map(userJson).map((u) => [
    link(`/console/people/${seg(u.id)}`, u.email),
    e(u.name),
    u.roles.map((r) => badge(r, r === CONSOLE_ROLE ? 'admin' : '')).join(' '),
    e(u.groups.join(', ')),
    `${u.totp_enabled ? badge('TOTP', 'ok') : ''}${u.password_compromised ? ` ${badge('password compromised', 'bad')}` : ''}`,
  ]);
  const search = `<form method="get" action="/console/people" class="row filters">
${input({ name: 'email', id: 'search-email', label: 'Find by email', type: 'search', value: email })}
${button('Find', { kind: 'plain' })}${email ? ` ${link('/console/people', 'Show everyone')}` : ''}
</form>`;
  const pager = `<p class="pager">${offset > 0 ? link(`/console/people?offset=${Math.max(offset - PAGE, 0)}`, '← Previous') : ''} ${more ? link(`/console/people?offset=${offset + PAGE}`, 'Next →') : ''}</p>`;
  renderList(ctx, req, res, f.status, {
    title: 'People',
    section: 'people',
    lead: 'The people who sign in: their roles, groups, applications and sessions.',
    above: search,
    headers: ['Email', 'Name', 'Roles', 'Groups', 'Sign-in'],
    rows,
    empty: email ? 'No one has this email.' : 'No people yet.',
    below: pager,
    create: { summary: 'Create a person', form: createForm(res, f, await roleNames(ctx)), open: false },
  });
}

interface DetailForms {
  edit?: FormState;
  password?: FormState;
  assign?: FormState;
  danger?: FormState;
}

const detailPage: DetailPage<DetailForms> = async (ctx, req, res, id, forms = {}, status = 200) => {
  const u = userJson(await existing(ctx.store.users.get(id), `no person ${id}`));
  const person = personOf(res);
  const base = `/console/people/${seg(u.id)}`;
  const edit = forms.edit ?? emptyForm({
    email: u.email,
    name: u.name,
    roles: u.roles.join(', '),
    groups: u.groups.join(', '),
    attributes: attributesText(u.attributes),
    ...(u.email_verified ? { email_verified: 'on' } : {}),
  });
  const ev = edit.values;
  const known = await roleNames(ctx);
  const editForm = stateForm(
    base,
    person,
    edit,
    (at) => `${profileFields(at, ev, rolesField(at), Math.min(Math.max((ev.attributes ?? '').split('\n').length, 2), 14))}
${roleList('known-roles', known)}
${button('Save changes')}`,
  );

  const passwordForm = stateForm(
    `${base}/password`,
    person,
    forms.password ?? emptyForm(),
    (at) => `${input({ ...at('password'), value: '', id: 'new-password', label: 'New password', type: 'password', required: true, autocomplete: 'new-password' })}
${button('Set password', { kind: 'plain' })}`,
    { cls: 'row' },
  );

  const apps = await Promise.all((await ctx.store.applications.list()).map((a) => applicationJson(ctx, a)));
  const mine = apps.filter((a) => a.assignments.includes(u.id));
  // The console needs no assignment (its door is the role admin); m2m and API applications have no people.
  const assignable = apps.filter((a) => !a.assignments.includes(u.id) && a.type !== 'm2m' && a.type !== 'api' && a.client_id !== CONSOLE_CLIENT_ID);
  const assign = forms.assign ?? emptyForm();
  const appsTable = table(
    ['Application', 'Client ID', ''],
    mine.map((a) => [
      link(`/console/applications/${seg(a.client_id)}`, a.name),
      code(a.client_id),
      postForm(`${base}/unassign`, person, `${hidden('client_id', a.client_id)}${button('Unassign', { kind: 'plain' })}`, { cls: 'inline' }),
    ]),
    { empty: 'Not assigned to any application.' },
  );
  const assignForm = assignable.length
    ? postForm(
        `${base}/assign`,
        person,
        `${select({ name: 'client_id', id: 'assign-app', label: 'Assign to', options: assignable.map((a) => [a.client_id, a.name] as const), errors: assign.errors.client_id })}
${button('Assign')}`,
        { cls: 'row' },
      )
    : '';
  const consoleNote = u.roles.includes(CONSOLE_ROLE) ? `<p class="hint">Holds ${code(CONSOLE_ROLE)}: may use the console (${code(CONSOLE_CLIENT_ID)}) without an assignment.</p>` : '';

  const sessions = (await ctx.store.sessions.activeForUser(u.id)).filter((s) => s.expires_at > nowSeconds(ctx.clock));
  const sessionsPart = `<p>${sessions.length} live session${sessions.length === 1 ? '' : 's'}.</p>
${sessions.length ? table(['Signed in', 'Methods', 'Expires'], sessions.map((s) => [when(new Date(s.auth_time * 1000).toISOString()), e(s.amr.join(', ')), when(new Date(s.expires_at * 1000).toISOString())])) : ''}
${postForm(`${base}/revoke-sessions`, person, button('Revoke every session', { kind: 'plain' }), { confirm: 'End every session of this person now?' })}`;

  const danger = forms.danger ?? emptyForm();
  render(ctx, req, res, status, {
    title: u.name || u.email,
    section: 'people',
    lead: `${e(u.email)} · ${code(u.id)}`,
    body: `<dl class="facts">
<dt>ID (sub)</dt><dd>${code(u.id)}</dd>
<dt>Second factor</dt><dd>${u.totp_enabled ? 'TOTP' : 'none'}</dd>
<dt>Password</dt><dd>${u.password_compromised ? badge('marked compromised', 'bad') : 'in use'}</dd>
<dt>Created</dt><dd>${when(u.created_at)}</dd><dt>Updated</dt><dd>${when(u.updated_at)}</dd>
</dl>
${section('Profile, roles, groups and attributes', editForm)}
${section('Applications', `${consoleNote}${errorList(assign.general)}${appsTable}${assignForm}`)}
${section('Sessions', sessionsPart)}
${section('Password', `${passwordForm}
${postForm(`${base}/compromised`, person, `<p>Marking the password compromised stops it at once, until a new one is set.</p>${button('Mark password compromised', { kind: 'plain' })}`, { confirm: 'Stop this password now?' })}`)}
${section('Delete', `${errorList(danger.general)}${dangerForm(`${base}/delete`, person, 'Delete person', 'Yes, delete this person and end everything of theirs', 'delete-person')}`, { cls: 'danger' })}`,
  });
};

const profile = (v: Values) => ({
  email: (v.email ?? '').trim(),
  name: v.name,
  roles: list(v.roles),
  groups: list(v.groups),
  attributes: jsonField(v, 'attributes', {}),
  email_verified: ticked(v, 'email_verified'),
});

/** A change to the person `id`: the record's target and its `user_id`. */
const about = (id: string, action: string, details: Record<string, unknown> = {}): Change => ({ action, target: `user:${id}`, details, about: { user_id: id } });

export function peoplePages(router: Router, ctx: AppContext): void {
  const noPassword = (v: Values): Values => ({ ...v, password: '' });

  router.get('/people', (req, res) => listPage(ctx, req, res));
  formPost(
    router, ctx, '/people',
    async (_req, res, v) => {
      const user = await createUser(
        ctx,
        parseWith(userCreate, { ...profile(v), password: v.password ?? '' }),
        audited(ctx, personOf(res), (u) => about(u.id, 'people.create', { email: u.email, roles: u.roles, groups: u.groups })),
      );
      return { message: `${user.email} created.`, to: `/console/people/${seg(user.id)}` };
    },
    (req, res, refused) => listPage(ctx, req, res, refused),
    { shown: noPassword },
  );

  router.get('/people/:id', (req, res) => detailPage(ctx, req, res, pathParam(req, 'id')));
  const action = detailActions(router, ctx, 'people', detailPage);

  action(
    '',
    async ({ id, v, audit }) => {
      const patch = parseWith(userPatch, profile(v));
      const user = await updateUser(ctx, id, patch, audit((u) => about(id, 'people.update', { email: u.email, roles: u.roles, groups: u.groups, attributes: u.attributes, email_verified: u.email_verified })));
      return `${user.email} saved.`;
    },
    'edit',
  );

  action(
    '/password',
    async ({ id, v, audit }) => {
      await updateUser(ctx, id, parseWith(userPatch, { password: v.password ?? '' }), audit(() => about(id, 'people.set_password')));
      return 'A new password is set.';
    },
    'password',
    { shown: noPassword },
  );

  action(
    '/compromised',
    async ({ id, audit }) => {
      await markCredentialCompromised(ctx, id, 'password', 'marked in the console', audit(() => about(id, 'people.credential_compromise', { credential_type: 'password' })));
      return 'The password is marked compromised.';
    },
    'password',
    { oneList: true },
  );

  action(
    '/revoke-sessions',
    async ({ id, person, audit }) => {
      const ended = await revokeSessions(ctx, id, audit((n: number) => about(id, 'people.revoke_sessions', { ended: n })));
      const message = `${ended} session${ended === 1 ? '' : 's'} ended.`;
      return id === person.user.id ? { message, to: '/console' } : message;
    },
    'danger',
    { oneList: true },
  );

  assignmentActions(ctx, action, 'assign', async (id, v) => ({ clientId: v.client_id ?? '', userId: id }), true);

  action(
    '/delete',
    async ({ id, person, audit }) => {
      if (id === person.user.id) throw errors.conflict('you cannot delete yourself while signed in to the console');
      await deleteUser(ctx, id, audit(() => about(id, 'people.delete')));
      return { message: 'The person was deleted.', to: '/console/people' };
    },
    'danger',
    { confirm: true, oneList: true },
  );
}
