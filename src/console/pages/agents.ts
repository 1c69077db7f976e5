import type { Request, Response, Router } from 'express';
import { agentJson, createAgent, deleteAgent, deleteCapability, putCapability, revokeAgent, updateAgent } from '../../admin/agents.js';
import { parseWith } from '../../admin/route.js';
import { agentUsage, resetCounter } from '../../admin/usage.js';
import type { CounterView } from '../../authz/budgets.js';
import { agentCreate, agentPatch, capabilityName, capabilityPut } from '../../admin/schemas.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { audited, type Change } from '../audit.js';
import { emptyForm, jsonField, list, ticked, type FormState } from '../forms.js';
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
  postForm,
  pre,
  section,
  seg,
  select,
  table,
  textarea,
  when,
  type Html,
} from '../html.js';
import { detailActions, type DetailPage, existing, formPost, pathParam, personOf, render, renderList, stateForm } from './common.js';

const MODES = [
  ['autonomous', 'autonomous (client credentials)'],
  ['delegated', 'delegated (acts for a person, CIBA)'],
] as const;
const LIMITS_HINT =
  'JSON, keyed by context field: {"amount": {"max": 500, "sum": {"max": 2000, "per": "24h"}}, "currency": {"in": ["USD", "EUR"]}, "count": [{"max": 20, "per": "1h"}]}. Empty: no limits.';
const JWK_HINT = 'The Ed25519 public key as an OKP JWK: {"kty": "OKP", "crv": "Ed25519", "x": "..."}.';

/** Where a management API issue belongs on the agent forms. */
function agentField(path: string): string {
  if (/^capabilities\.\d+\.limits/.test(path)) return 'limits';
  if (/^capabilities\.\d+\.name/.test(path) || path === 'capabilities') return 'capability';
  return path.split('.')[0]!;
}

const ATTRIBUTES_HINT = 'JSON object for rule conditions, such as {"department": "finance", "clearance": 3}. Empty: none.';
const pretty = (v: unknown) => JSON.stringify(v, null, 2);
const rowsFor = (text: string | undefined) => Math.min(Math.max((text ?? '').split('\n').length, 2), 14);
const limitsText = (l: Record<string, unknown>) => (Object.keys(l).length ? pretty(l) : '');

function createForm(res: Response, f: FormState): Html {
  return stateForm(
    '/console/agents',
    personOf(res),
    f,
    (at) => `<div class="grid">
${input({ ...at('name'), label: 'Name', hint: 'Letters, digits, . _ - (it becomes part of the SPIFFE ID).', required: true })}
${select({ ...at('mode'), label: 'Mode', value: f.values.mode ?? 'autonomous', options: MODES })}
</div>
${textarea({ ...at('public_jwk'), label: 'Public key (JWK)', hint: JWK_HINT, rows: 3, required: true, mono: true })}
${input({ ...at('roles'), label: 'Roles', hint: 'Comma-separated; the agent takes its permissions from them.' })}
<div class="grid">
${input({ ...at('capability'), label: 'Capability', hint: 'A permission key such as create:refunds (optional).' })}
${textarea({ ...at('limits'), label: 'Its limits', hint: LIMITS_HINT, rows: 3, mono: true })}
</div>
${textarea({ ...at('attributes'), label: 'Attributes', hint: ATTRIBUTES_HINT, rows: 2, mono: true })}
${input({ ...at('agent_id'), label: 'Agent ID (optional)', hint: 'A SPIFFE ID; by default spiffe://<issuer host>/agent/<name>.' })}
${button('Register agent')}`,
  );
}

async function listPage(ctx: AppContext, req: Request, res: Response, f: FormState = emptyForm()): Promise<void> {
  const agents = (await ctx.store.agents.list()).map(agentJson);
  renderList(ctx, req, res, f.status, {
    title: 'Agents',
    section: 'agents',
    lead: 'AI agents sign in with their own Ed25519 keys; their capabilities and limits decide what each action may do.',
    headers: ['Name', 'Agent ID', 'Mode', 'Roles', 'Capabilities', 'State'],
    rows: agents.map((a) => [
      link(`/console/agents/${seg(a.agent_id)}`, a.name),
      code(a.agent_id),
      e(a.mode),
      e(a.roles.join(', ')),
      e(a.capabilities.map((c) => c.name).join(', ')),
      a.revoked ? badge('revoked', 'bad') : badge('active', 'ok'),
    ]),
    empty: 'No agents yet.',
    create: { summary: 'Register an agent', form: createForm(res, f), open: !agents.length },
  });
}

/** What a counter counts, in the words of the policy language: `amount sum per 24h`, `count per 10m per resource`. */
function counterLabel(c: CounterView): string {
  return `${c.kind === 'sum' ? `${c.field} sum` : 'count'} per ${c.per}${c.scope === 'agent' ? '' : ` per ${c.scope}`}`;
}

/** The agent's rates and budgets with what is used of each now, and a reset for each counter. */
function usageTable(base: string, person: ReturnType<typeof personOf>, counters: CounterView[]): Html {
  const rows = counters.map((c) => [
    code(c.capability),
    `${e(counterLabel(c))}${c.key ? `<br><small>${code(c.key)}</small>` : ''}`,
    `<meter min="0" max="${e(c.max)}" value="${e(Math.min(c.used, c.max))}" high="${e(c.max * 0.8)}" optimum="0"></meter> <span class="used">${e(c.used)} of ${e(c.max)}</span>`,
    c.remaining === 0 ? badge('used up', 'bad') : e(c.remaining),
    c.used === 0
      ? ''
      : postForm(`${base}/usage/reset`, person, `${hidden('counter', c.id)}${button('Reset', { kind: 'plain' })}`, {
          cls: 'inline',
          confirm: `Reset ${counterLabel(c)} of ${c.capability} to nothing used?`,
        }),
  ]);
  return table(['Capability', 'Limit over time', 'Used', 'Remaining', ''], rows, {
    empty: 'No limits over time: add "sum" to a number field, or "count", in a capability\'s limits.',
    cls: 'usage',
  });
}

interface DetailForms {
  settings?: FormState;
  key?: FormState;
  add?: FormState;
  cap?: { name: string; state: FormState };
  danger?: FormState;
  usage?: FormState;
}

const detailPage: DetailPage<DetailForms> = async (ctx, req, res, id, forms = {}, status = 200) => {
  const a = agentJson(await existing(ctx.store.agents.get(id), `no agent ${id}`));
  const person = personOf(res);
  const base = `/console/agents/${seg(a.agent_id)}`;

  const caps = a.capabilities.map((c, i) => {
    const st = forms.cap?.name === c.name ? forms.cap.state : emptyForm({ limits: limitsText(c.limits) });
    return [
      code(c.name),
      stateForm(
        `${base}/capabilities`,
        person,
        st,
        (at) => `${hidden('capability', c.name)}
${textarea({ ...at('limits'), id: `limits-${i}`, label: `Limits of ${c.name}`, rows: rowsFor(st.values.limits), mono: true })}
<div class="actions">${button('Save limits', { kind: 'plain' })}</div>`,
      ),
      postForm(`${base}/capabilities/remove`, person, `${hidden('capability', c.name)}${button('Remove', { kind: 'plain' })}`, {
        cls: 'inline',
        confirm: `Remove the capability ${c.name}?`,
      }),
    ];
  });
  const addForm = stateForm(
    `${base}/capabilities`,
    person,
    forms.add ?? emptyForm(),
    (at) => `<div class="grid">
${input({ ...at('capability'), id: 'new-capability', label: 'Capability', hint: 'A permission key such as create:refunds.', required: true })}
${textarea({ ...at('limits'), id: 'new-limits', label: 'Limits', hint: LIMITS_HINT, rows: 3, mono: true })}
</div>
${button('Add capability')}`,
  );

  const s =
    forms.settings ??
    emptyForm({
      name: a.name,
      mode: a.mode,
      roles: a.roles.join(', '),
      attributes: limitsText(a.attributes),
      sub_agents: a.sub_agents.join(', '),
      ...(a.dpop_bound_access_tokens ? { dpop_bound_access_tokens: 'on' } : {}),
    });
  const settingsForm = stateForm(
    base,
    person,
    s,
    (at) => `<div class="grid">
${input({ ...at('name'), label: 'Name', required: true })}
${select({ ...at('mode'), label: 'Mode', options: MODES })}
</div>
${input({ ...at('roles'), label: 'Roles', hint: 'Comma-separated.' })}
${textarea({ ...at('attributes'), label: 'Attributes', hint: ATTRIBUTES_HINT, rows: rowsFor(s.values.attributes), mono: true })}
${input({ ...at('sub_agents'), label: 'Sub-agents', hint: 'Agent IDs, comma-separated: the agents it may hand work to by token exchange.' })}
${checkbox({ ...at('dpop_bound_access_tokens'), label: 'DPoP-bound tokens only (no token without a DPoP proof)', checked: ticked(s.values, 'dpop_bound_access_tokens') })}
${button('Save changes')}`,
  );
  const keyForm = stateForm(
    `${base}/key`,
    person,
    forms.key ?? emptyForm(),
    (at) => `${textarea({ ...at('public_jwk'), id: 'new-jwk', label: 'New public key (JWK)', hint: 'The old key stops working at once.', rows: 3, required: true, mono: true })}
${button('Replace the key', { kind: 'plain' })}`,
  );
  const danger = forms.danger ?? emptyForm();
  const usage = forms.usage ?? emptyForm();
  const counters = await agentUsage(ctx, a.agent_id);
  // Where the agent stands in delegation chains: who lets it act for them, who may hand it work.
  const consents = await ctx.store.delegations.listForAgent(a.agent_id);
  const parents = (await ctx.store.agents.list()).filter((p) => p.sub_agents.includes(a.agent_id));
  const agentLinks = (ids: string[]) => ids.map((id) => link(`/console/agents/${seg(id)}`, id)).join(', ') || '—';
  render(ctx, req, res, status, {
    title: a.name,
    section: 'agents',
    lead: `${code(a.agent_id)} · ${e(a.mode)} ${a.revoked ? badge('revoked', 'bad') : badge('active', 'ok')}`,
    body: `<dl class="facts">
<dt>Agent ID</dt><dd>${code(a.agent_id)}</dd>
<dt>Roles</dt><dd>${e(a.roles.join(', ') || '—')}</dd>
<dt>Attributes</dt><dd>${Object.keys(a.attributes).length ? pre(JSON.stringify(a.attributes), 'inline-json') : '—'}</dd>
<dt>Sub-agents</dt><dd>${agentLinks(a.sub_agents)}</dd>
<dt>Sub-agent of</dt><dd>${agentLinks(parents.map((p) => p.agent_id))}</dd>
<dt>Acts for</dt><dd>${consents.length ? consents.map((d) => `${link(`/console/people/${seg(d.user_id)}`, d.user_id)} (${e(d.capabilities.join(', ') || 'nothing')})`).join('; ') : '—'}</dd>
<dt>Public key</dt><dd>${pre(JSON.stringify(a.public_jwk), 'inline-json')}</dd>
<dt>Registered</dt><dd>${when(a.created_at)}</dd>
${a.revoked ? `<dt>Revoked</dt><dd>${when(a.revoked_at)}</dd>` : ''}
</dl>
${section('Capabilities and limits', `${table(['Capability', 'Limits', ''], caps, { empty: 'No capabilities: the agent may do nothing.' })}${details('Add a capability', addForm, forms.add !== undefined, 'add-capability')}`)}
${section('Rates and budgets', `${errorList(usage.general)}<p>What the agent has used of each limit over time, in the window that ends now; each object's or person's counter appears once it holds usage.</p>
${usageTable(base, person, counters)}`, { id: 'usage' })}
${section('Settings', settingsForm)}
${section('Key', keyForm)}
${section('Revoke or delete', `${errorList(danger.general)}
${a.revoked ? '<p>This agent is revoked.</p>' : dangerForm(`${base}/revoke`, person, 'Revoke agent', 'Yes, revoke this agent (final: its tokens stop working)', 'revoke-agent')}
${dangerForm(`${base}/delete`, person, 'Delete agent', 'Yes, delete this agent and its capabilities', 'delete-agent')}`, { cls: 'danger' })}`,
  });
};

/** A change to the agent `id`: the record's target and its `agent_id`. */
const about = (id: string, action: string, details: Record<string, unknown> = {}): Change => ({ action, target: `agent:${id}`, details, about: { agent_id: id } });

export function agentPages(router: Router, ctx: AppContext): void {
  router.get('/agents', (req, res) => listPage(ctx, req, res));
  formPost(
    router, ctx, '/agents',
    async (_req, res, v) => {
      const capability = (v.capability ?? '').trim();
      const limits = jsonField(v, 'limits', undefined);
      const body = parseWith(agentCreate, {
        name: (v.name ?? '').trim(),
        mode: v.mode,
        public_jwk: jsonField(v, 'public_jwk', undefined),
        roles: list(v.roles),
        attributes: jsonField(v, 'attributes', {}),
        capabilities: capability ? [{ name: capability, ...(limits !== undefined ? { limits } : {}) }] : [],
        ...(v.agent_id?.trim() ? { agent_id: v.agent_id.trim() } : {}),
      });
      const agent = await createAgent(
        ctx,
        body,
        audited(ctx, personOf(res), (a) => about(a.agent_id, 'agents.create', { name: a.name, mode: a.mode, roles: a.roles, capabilities: a.capabilities })),
      );
      return { message: `Agent ${agent.name} registered.`, to: `/console/agents/${seg(agent.agent_id)}` };
    },
    (req, res, refused) => listPage(ctx, req, res, refused),
    { field: agentField },
  );

  router.get('/agents/:id', (req, res) => detailPage(ctx, req, res, pathParam(req, 'id')));
  const action = detailActions(router, ctx, 'agents', detailPage);

  action(
    '',
    async ({ id, v, audit }) => {
      const patch = parseWith(agentPatch, {
        name: (v.name ?? '').trim(),
        mode: v.mode,
        roles: list(v.roles),
        attributes: jsonField(v, 'attributes', {}),
        sub_agents: list(v.sub_agents),
        dpop_bound_access_tokens: ticked(v, 'dpop_bound_access_tokens'),
      });
      const agent = await updateAgent(
        ctx,
        id,
        patch,
        audit((a) =>
          about(id, 'agents.update', {
            name: a.name,
            mode: a.mode,
            roles: a.roles,
            attributes: a.attributes,
            sub_agents: a.sub_agents,
            dpop_bound_access_tokens: a.dpop_bound_access_tokens,
          }),
        ),
      );
      return `Agent ${agent.name} saved.`;
    },
    'settings',
    { field: agentField },
  );

  action(
    '/key',
    async ({ id, v, audit }) => {
      const patch = parseWith(agentPatch, { public_jwk: jsonField(v, 'public_jwk', undefined) });
      await updateAgent(ctx, id, patch, audit(() => about(id, 'agents.rotate_key', { public_jwk: patch.public_jwk })));
      return 'The key was replaced.';
    },
    'key',
    { field: agentField },
  );

  /** Whether the agent holds the capability already (its own row's form), or it is new (the add form). */
  const holds = async (req: Request, name: string) => (await ctx.store.agents.get(pathParam(req, 'id')))?.capabilities.some((c) => c.name === name) ?? false;
  action(
    '/capabilities',
    async ({ id, v, audit }) => {
      const name = (v.capability ?? '').trim();
      parseWith(capabilityName, name, 'capability');
      const { limits } = parseWith(capabilityPut, { limits: jsonField(v, 'limits', {}) });
      const record = audit(({ added }: { added: boolean }) => about(id, added ? 'agents.add_capability' : 'agents.update_capability', { capability: name, limits: limits ?? {} }));
      await putCapability(ctx, id, name, limits ?? {}, record);
      return `Capability ${name} saved.`;
    },
    async (state, req) => {
      const name = (state.values.capability ?? '').trim();
      return (await holds(req, name)) ? { cap: { name, state } } : { add: state };
    },
    { field: agentField },
  );

  action(
    '/capabilities/remove',
    async ({ id, v, audit }) => {
      const name = v.capability ?? '';
      await deleteCapability(ctx, id, name, audit(() => about(id, 'agents.remove_capability', { capability: name })));
      return `Capability ${name} removed.`;
    },
    'danger',
    { oneList: true },
  );

  // The reset is the management API's own (its audit record, written with the reset, names the person).
  action(
    '/usage/reset',
    async ({ id, v, person }) => {
      if (!(await resetCounter(ctx, id, v.counter ?? '', person.user.id))) {
        throw errors.notFound('No such counter now: it may have been reset already, or its limit changed.');
      }
      return { message: 'The counter was reset.', to: `/console/agents/${seg(id)}#usage` };
    },
    'usage',
    { oneList: true },
  );

  action(
    '/revoke',
    async ({ id, audit }) => {
      await revokeAgent(ctx, id, audit(() => about(id, 'agents.revoke')));
      return 'The agent is revoked.';
    },
    'danger',
    { confirm: true, oneList: true },
  );

  action(
    '/delete',
    async ({ id, audit }) => {
      await deleteAgent(ctx, id, audit(() => about(id, 'agents.delete')));
      return { message: 'The agent was deleted.', to: '/console/agents' };
    },
    'danger',
    { confirm: true, oneList: true },
  );
}
