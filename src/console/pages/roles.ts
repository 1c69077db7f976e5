import type { Request, Response, Router } from 'express';
import { createRole, deleteRole, putRole, roleJson } from '../../admin/roles.js';
import { parseWith } from '../../admin/route.js';
import { roleCreate, roleName, rolePut } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { audited } from '../audit.js';
import { CONSOLE_ROLE } from '../../oauth/built-in-applications.js';
import { emptyForm, list, type FormState } from '../forms.js';
import { badge, button, code, dangerForm, details, escapeHtml as e, hidden, input, section, textarea, type Html } from '../html.js';
import { asOneList, formPost, personOf, render, stateForm } from './common.js';

interface Forms {
  create?: FormState;
  /** the role whose form was refused, and its state */
  edit?: { name: string; state: FormState };
}

async function rolesPage(ctx: AppContext, req: Request, res: Response, forms: Forms = {}, status = 200): Promise<void> {
  const person = personOf(res);
  const roles = (await ctx.store.roles.list()).map(roleJson);
  const cards: Html[] = roles.map((r, i) => {
    const st = forms.edit?.name === r.name ? forms.edit.state : emptyForm({ permissions: r.permissions.join('\n') });
    return section(
      r.name,
      `${r.permissions.length ? `<p>${r.permissions.map((p) => badge(p)).join(' ')}</p>` : '<p class="empty">No permissions.</p>'}
${stateForm(
  '/console/roles/save',
  person,
  st,
  (at) => `${hidden('name', r.name)}
${textarea({ ...at('permissions'), id: `perm-${i}`, label: 'Permissions', hint: 'One per line: <action>:<resource_kind>; * may stand for either part.', rows: 3, mono: true })}
${button('Save permissions', { kind: 'plain' })}`,
)}
${dangerForm('/console/roles/delete', person, 'Delete role', `Yes, delete the role ${r.name}`, `delete-role-${i}`, hidden('name', r.name))}`,
      { id: `role-${r.name}`, cls: 'card' },
    );
  });
  const createForm = stateForm(
    '/console/roles',
    person,
    forms.create ?? emptyForm(),
    (at) => `${input({ ...at('name'), label: 'Name', required: true })}
${textarea({ ...at('permissions'), id: 'new-permissions', label: 'Permissions', hint: 'One per line, such as create:refunds.', rows: 3, mono: true })}
${button('Create role')}`,
  );
  render(ctx, req, res, status, {
    title: 'Roles',
    section: 'roles',
    lead: `Roles carry permissions for agents and people. A person holding ${code(CONSOLE_ROLE)} may use this console.`,
    body: `${details('Create a role', createForm, !roles.length || forms.create !== undefined, 'create')}
<div class="cards">${cards.join('\n') || `<p class="empty">${e('No roles yet.')}</p>`}</div>`,
  });
}

/** Issues of `permissions.N` belong to the permissions field. */
const field = (p: string) => p.split('.')[0]!;

export function rolePages(router: Router, ctx: AppContext): void {
  router.get('/roles', (req, res) => rolesPage(ctx, req, res));

  formPost(
    router, ctx, '/roles',
    async (_req, res, v) => {
      const body = parseWith(roleCreate, { name: (v.name ?? '').trim(), permissions: list(v.permissions) });
      const role = await createRole(ctx, body.name, body.permissions, audited(ctx, personOf(res), (r) => ({ action: 'roles.create', target: `role:${r.name}`, details: { permissions: r.permissions } })));
      return { message: `Role ${role.name} created.`, to: '/console/roles' };
    },
    (req, res, create) => rolesPage(ctx, req, res, { create }, create.status),
    { field },
  );

  formPost(
    router, ctx, '/roles/save',
    async (_req, res, v) => {
      const name = v.name ?? '';
      parseWith(roleName, name, 'name');
      const body = parseWith(rolePut, { permissions: list(v.permissions) });
      const { role } = await putRole(ctx, name, body.permissions, audited(ctx, personOf(res), (r) => ({ action: 'roles.update', target: `role:${r.name}`, details: { permissions: r.permissions } })));
      return { message: `Role ${role.name} saved.`, to: '/console/roles' };
    },
    (req, res, state) => rolesPage(ctx, req, res, { edit: { name: state.values.name ?? '', state } }, state.status),
    { field },
  );

  formPost(
    router, ctx, '/roles/delete',
    async (_req, res, v) => {
      const name = v.name ?? '';
      await deleteRole(ctx, name, audited(ctx, personOf(res), () => ({ action: 'roles.delete', target: `role:${name}` })));
      return { message: `Role ${name} deleted.`, to: '/console/roles' };
    },
    // The refusal shows on the role's own card, above its permissions as they are.
    async (req, res, refused) => {
      const name = refused.values.name ?? '';
      const role = await ctx.store.roles.get(name);
      const state = asOneList({ ...refused, values: { name, permissions: role?.permissions.join('\n') ?? '' } });
      await rolesPage(ctx, req, res, { edit: { name, state } }, refused.status);
    },
    { confirm: true },
  );
}
